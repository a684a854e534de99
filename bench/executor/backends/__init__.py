"""Reference backends: one handler per tool of every shipped toolset, on local data."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping

from bench.executor.backends.base import Backend, Handler, Owner, ShopDB
from bench.executor.backends.shopcache import shop_db_path
from bench.executor.backends.shopdb import DEFAULT_SEED

SORT_ORDER_ENV = "BENCH_ANALYTICS_SORT_ORDER"
#: The toolsets with a reference backend (:class:`ReferenceBackends`).
REFERENCE_TOOLSETS = ("ecommerce", "analytics", "logistics")


def _sort_order_default() -> tuple[str, ...]:
    value = os.environ.get(SORT_ORDER_ENV)
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ("ASC", "DESC")


@dataclass
class ReferenceBackends:
    """Builds the handlers of a toolset on demand (the database is generated once, cached).

    Attributes:
        seed: the shop database's generator seed.
        sort_order_values: the values analytics tools accept for ``sort_order``, exactly
            (default ``ASC``, ``DESC``; ``$BENCH_ANALYTICS_SORT_ORDER=asc,desc`` or this field
            switches them, e.g. to demonstrate a description/backend enum drift).
        database: serve this database instead of the seed's (an episode's private copy).
    """

    seed: int = DEFAULT_SEED
    sort_order_values: tuple[str, ...] = field(default_factory=_sort_order_default)
    database: ShopDB | None = None

    @cached_property
    def db(self) -> ShopDB:
        """The shop database (generated into the cache on first use)."""
        return self.database or ShopDB(shop_db_path(self.seed))

    def __call__(self, toolset: str) -> Backend:
        """The handlers of ``toolset`` (none for a toolset without a reference backend), on
        a database bench owns (:attr:`Owner.BENCH`: its writes are rolled back, or land in
        an episode's private copy), so a label's expected calls may run on it. On the seeded
        database, :attr:`Backend.with_state` makes the same handlers on a copy with a
        single-answer case's state (:mod:`bench.executor.backends.states`)."""
        handlers: Mapping[str, Handler] = {}
        if toolset == "ecommerce":
            from bench.executor.backends.ecommerce import EcommerceBackend
            handlers = EcommerceBackend(self.db).handlers()
        elif toolset == "analytics":
            from bench.executor.backends.analytics import AnalyticsBackend
            handlers = AnalyticsBackend(self.db, self.sort_order_values).handlers()
        elif toolset == "logistics":
            from bench.executor.backends.logistics import LogisticsBackend
            handlers = LogisticsBackend(self.db).handlers()
        with_state = None
        if self.database is None and handlers:
            def with_state(overrides: tuple[str, ...]) -> Backend:
                from bench.executor.backends.states import state_database
                return ReferenceBackends(self.seed, self.sort_order_values,
                                         state_database(overrides, self.seed))(toolset)
        return Backend(handlers, Owner.BENCH, describe="bench's reference backend",
                       with_state=with_state)


__all__ = ["Backend", "Handler", "Owner", "REFERENCE_TOOLSETS", "ReferenceBackends", "ShopDB",
           "SORT_ORDER_ENV"]
