"""Shards: one run's plan split over several machines (``bench run --shard i/n``).

The rule (one pure function, :func:`shard_plan`): the plan's items are sorted by
``(provider, variant, trial, case id)`` (the parts of each item's key, so the order does not
depend on how the plan was built, on ``--concurrency`` or on the order of ``--variants``) and
dealt round-robin: the item at 0-based position ``r`` of that order belongs to shard
``r mod n + 1``. Hence:

- the ``n`` slices are disjoint and together are the whole plan;
- their sizes differ by at most one, and so does each provider's and variant's share of
  every slice (a slow variant such as ``l50`` is spread over every machine, not left to one);
- a slice depends only on the plan's keys, so every machine given the same config, dataset
  and descriptions computes the same slices.

A contiguous cut of the sorted plan would balance the counts too, but would give one machine
all of the slowest variant; a hash of each key alone would need no sort, but balances the
counts only on average (a shard of a small plan may get twice its share, or nothing).

``bench merge`` (:mod:`bench.merge`) joins the shards' runs into one.
"""

from __future__ import annotations

import re
from typing import Protocol, Sequence, TypeVar



class _Named(Protocol):
    @property
    def name(self) -> str: ...


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


class Shardable(Protocol):
    """What the shard order reads of a plan item (:class:`bench.runner.plan.PlanItem`)."""

    @property
    def provider_id(self) -> str: ...

    @property
    def variant(self) -> _Named: ...

    @property
    def trial(self) -> int: ...

    @property
    def case(self) -> _Identified: ...


ItemT = TypeVar("ItemT", bound=Shardable)

# ASCII digits only: \d alone also matched full-width and other scripts' digits
SHARD_PATTERN = re.compile(r"([0-9]+)/([0-9]+)")
MAX_SHARDS = 10_000
"""The most shards of one plan: far past a CI matrix (GitHub Actions runs at most 256 jobs of
one matrix), and bounds what ``bench merge`` does per shard of the split (it lists each
missing one and rebuilds each one's slice)."""
SHARD_FORM = f"i/n with 1 <= i <= n <= {MAX_SHARDS}, e.g. 1/4"


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` as ``(i, n)``: shard ``i`` (1-based) of ``n``.

    Raises:
        ValueError: ``text`` is not two whole numbers ``i/n`` (ASCII digits) with
            ``1 <= i <= n <=`` :data:`MAX_SHARDS` (the message says the expected form and
            repeats ``text``).
    """
    match = SHARD_PATTERN.fullmatch(text)
    index, total = (int(match[1]), int(match[2])) if match else (0, 0)
    if not 1 <= index <= total <= MAX_SHARDS:
        raise ValueError(f"must be {SHARD_FORM}, not '{text}'")
    return index, total


def format_shard(index: int, total: int) -> str:
    """``(i, n)`` as the canonical ``"i/n"`` (``parse_shard("01/4")`` comes back as ``1/4``)."""
    return f"{index}/{total}"


def shard_order(item: Shardable) -> tuple[str, str, int, str]:
    """The sort key that deals items to shards: ``(provider, variant, trial, case id)``."""
    return item.provider_id, item.variant.name, item.trial, item.case.id


def shard_plan(plan: Sequence[ItemT], index: int, total: int) -> list[ItemT]:
    """Shard ``index`` (1-based) of ``total`` of ``plan``, in the plan's own order.

    Args:
        plan: every planned item of the run (unique keys, as :func:`bench.runner.make_plan`
            builds them).
        index: which shard, ``1 <= index <= total``.
        total: how many shards.

    Returns:
        The items at positions ``index - 1``, ``index - 1 + total``, ... of the plan sorted by
        :func:`shard_order` (see the module docstring), in their order in ``plan`` (a shard
        keeps the plan's grouping by variant).

    Raises:
        ValueError: ``index`` is not within ``1..total``, or ``total`` is above
            :data:`MAX_SHARDS`.
    """
    if not 1 <= index <= total <= MAX_SHARDS:
        raise ValueError(f"shard must be {SHARD_FORM}, not {index}/{total}")
    ranked = sorted(range(len(plan)), key=lambda position: shard_order(plan[position]))
    chosen = set(ranked[index - 1::total])
    return [item for position, item in enumerate(plan) if position in chosen]
