"""A single-answer case's starting state on bench's reference backends.

A case may declare ``state.overrides`` (:class:`bench.models.CaseState`): SQL statements that
give the seeded shop database the state its query assumes (an unshipped order, a parcel with
the tracking number the user quotes). The label's calls and the model's calls of that case
then run on a private in-memory copy of the seeded database with the overrides run
(:class:`~bench.executor.backends.base.MemoryShopDB`), under the same rules as an episode's
overrides (:func:`bench.episodes.state.apply_overrides`); every write a call makes there is
rolled back, as on the shared file, so every call of the case, the label's and each row's,
starts from the same state. Nothing is written to disk and the cached seeded file is only
read.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.executor.backends.base import MemoryShopDB

class StateError(Exception):
    """A label's override or state check does not run (``field`` names which, 0-based:
    ``state.overrides.1``, ``success.state_checks.0.sql``, ``state.user_id``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


STATE_COPIES_KEPT = 16
"""Copies with a state an :class:`~bench.executor.pipeline.Executor` keeps (least recently
used dropped first): about 4 MB each (the seeded database is 3.6 MB); a dropped copy is made
again on demand (deserialising the image and running the overrides, a few milliseconds)."""


def state_database(overrides: Sequence[str], seed: int) -> MemoryShopDB:
    """A private copy of the seed's shop database with ``overrides`` run and committed, whose
    later writes roll back.

    Raises:
        StateError: an override does not run (field
            ``state.overrides.<i>``, SQLite's message).
    """
    from bench.episodes.state import _run_overrides, seeded_image

    path, image = seeded_image(seed)
    db = MemoryShopDB(image, path, persist_writes=False)
    try:
        with db.lock:
            _run_overrides(db.connection, overrides)
    except BaseException:
        db.close()
        raise
    return db
