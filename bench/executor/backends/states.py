"""A case's starting state on bench's reference backends, and the rules label SQL runs under.

A case may declare ``state.overrides`` (:class:`bench.models.CaseState`): SQL statements that
give the seeded shop database the state its query assumes (an unshipped order, a parcel with
the tracking number the user quotes). The label's calls and the model's calls of that case
then run on a private in-memory copy of the seeded database with the overrides run
(:class:`~bench.executor.backends.base.MemoryShopDB`), under the same rules as an episode's
overrides (:func:`run_overrides`); every write a call makes there is rolled back, as on the
shared file, so every call of the case, the label's and each row's, starts from the same
state. Nothing is written to disk and the cached seeded file is only read.

The label SQL rules (:func:`label_sql`, :func:`run_label_sql`, :func:`run_overrides`: a time
budget per statement, the longest value, how much the copy may grow, no ATTACH, PRAGMA,
trigger or transaction statements) and the seeded database's image (:func:`seeded_image`)
live here, below both users: this module's :func:`state_database` and an episode's database
(:mod:`bench.episodes.state`), which imports them.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.executor.backends.base import MemoryShopDB, _read_only_authorizer
from bench.executor.backends.shopcache import shop_db_path
from bench.executor.backends.shopdb import DEFAULT_SEED

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
    path, image = seeded_image(seed)
    db = MemoryShopDB(image, path, persist_writes=False)
    try:
        with db.lock:
            run_overrides(db.connection, overrides)
    except BaseException:
        db.close()
        raise
    return db


_IMAGES: dict[int, tuple[Path, bytes]] = {}
_IMAGES_LOCK = threading.Lock()


def seeded_image(seed: int = DEFAULT_SEED) -> tuple[Path, bytes]:
    """The seeded shop database's file and its bytes, read once per process and seed (about
    3.6 MB held; the file is generated on first use, :func:`shop_db_path`)."""
    with _IMAGES_LOCK:
        if seed not in _IMAGES:
            path = shop_db_path(seed)
            _IMAGES[seed] = (path, path.read_bytes())
        return _IMAGES[seed]


LABEL_SQL_BUDGET_S = 10.0
"""Wall time one label statement (an override or a state check) may run: a recursive CTE
without an end would otherwise hang the load-time check and every episode."""

LABEL_VALUE_BYTES = 1_000_000
"""Longest string or blob label SQL may build, bytes (SQLite's ``SQLITE_LIMIT_LENGTH`` on its
connections): one SQL function call (``randomblob``, ``printf('%.*c', ...)``) is never
stopped by the time budget, and ``SELECT randomblob(400000000)`` took 3.1 GB. The seeded
database's longest value is 54 bytes and the shipped labels' longest SQL 91 characters;
1 MB still plants a note that overflows the 2,000-token result budget 100 times over."""

LABEL_GROWTH_BYTES = 64 * 2**20
"""How much label SQL may grow an episode's database (its main and its temp schema each),
bytes (SQLite's ``max_page_count``): the time budget alone let a recursive CTE insert
3,000,000 rows of 200 bytes in 4 s, 749 MB held by the load-time check, each statement of a
label 10 s of it. The seeded database is 3.6 MB and the shipped labels add a few rows."""

# Rows fetched at once from label SQL, never all of an unbounded result: at most 100 MB held
# (values of LABEL_VALUE_BYTES), and a 200,000-row result reads about as fast as with 1,000.
_FETCH_ROWS = 100

# Label SQL runs on a copy, so it may write that copy's tables; it may not reach beyond it:
# ATTACH (and VACUUM, which attaches its target) creates files anywhere, a transaction
# statement would end the load-time check's transaction, a PRAGMA can change how the file is
# kept (journal_mode, writable_schema), a trigger would run inside the model's writes, where
# no label budget applies; a virtual table's module runs its own SQL (fts5 reads PRAGMA
# data_version and then fails as "vtable constructor failed"), and no tool reads one.
# Codes: sqlite.org/c3ref/c_alter_table.html
_LABEL_DENIED = {sqlite3.SQLITE_ATTACH: "ATTACH", sqlite3.SQLITE_DETACH: "DETACH",
                 sqlite3.SQLITE_TRANSACTION: "a transaction statement",
                 sqlite3.SQLITE_PRAGMA: "PRAGMA",
                 getattr(sqlite3, "SQLITE_SAVEPOINT", 32): "SAVEPOINT",
                 sqlite3.SQLITE_CREATE_TRIGGER: "CREATE TRIGGER",
                 sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "CREATE TRIGGER",
                 sqlite3.SQLITE_CREATE_VTABLE: "CREATE VIRTUAL TABLE",
                 sqlite3.SQLITE_DROP_VTABLE: "DROP TABLE of a virtual table"}
_DENIED_HERE = threading.local()  # what _label_authorizer last refused, in this thread


def _label_authorizer(action: int, *_: Any) -> int:
    if action in _LABEL_DENIED:
        _DENIED_HERE.action = action
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


@contextmanager
def label_sql(conn: sqlite3.Connection,
               authorizer: Callable[..., int] = _label_authorizer) -> Iterator[list[float]]:
    """Run label SQL on ``conn`` under ``authorizer``, :data:`LABEL_SQL_BUDGET_S` (each
    statement's own budget, SQLite's progress handler), :data:`LABEL_VALUE_BYTES` and
    :data:`LABEL_GROWTH_BYTES`; yields the one-item deadline list that :func:`run_label_sql`
    sets. Under the read-only authorizer nothing can add pages, so the growth limit (two
    schemas' worth of PRAGMAs, the larger part of a state check's cost) is left out."""
    deadline = [0.0]
    # bench's own PRAGMAs, before the authorizer that refuses the label's
    most = {} if authorizer is _read_only_authorizer else {
        schema: _pragma(conn, schema, "max_page_count") for schema in ("main", "temp")}
    for schema in most:
        growth = LABEL_GROWTH_BYTES // _pragma(conn, schema, "page_size")
        _pragma(conn, schema, "max_page_count",
                _pragma(conn, schema, "page_count") + growth)
    conn.set_authorizer(authorizer)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline[0]), 10_000)
    length = conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, LABEL_VALUE_BYTES)
    try:
        yield deadline
    finally:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, length)
        conn.set_progress_handler(None, 0)
        conn.set_authorizer(None)
        for schema, pages in most.items():
            _pragma(conn, schema, "max_page_count", pages)


def _pragma(conn: sqlite3.Connection, schema: str, name: str, value: int | None = None) -> int:
    """``PRAGMA schema.name`` (set to ``value`` when given), its integer answer."""
    assigned = "" if value is None else f" = {int(value)}"
    return int(conn.execute(f"PRAGMA {schema}.{name}{assigned}").fetchone()[0])


def run_label_sql(conn: sqlite3.Connection, sql: str,
                   deadline: list[float]) -> Iterator[list[tuple[Any, ...]]]:
    """``sql``'s rows in batches of at most :data:`_FETCH_ROWS` (a result of millions of
    rows is never held whole), its budget starting at the first; SQLite's errors made
    readable."""
    deadline[0] = time.monotonic() + LABEL_SQL_BUDGET_S
    _DENIED_HERE.action = None
    try:
        cursor = conn.execute(sql)
        while rows := cursor.fetchmany(_FETCH_ROWS):
            yield rows
    except sqlite3.DataError as exc:
        if "too big" in str(exc):
            raise sqlite3.DataError(
                f"builds a value over {LABEL_VALUE_BYTES:,} bytes, the label limit "
                f"({exc})") from None
        raise
    except sqlite3.DatabaseError as exc:
        if "database or disk is full" in str(exc):
            raise sqlite3.OperationalError(
                f"grows the database by more than {LABEL_GROWTH_BYTES // 2**20} MB, the label "
                f"limit, or the disk is full ({exc})") from None
        if "interrupted" in str(exc):
            raise sqlite3.OperationalError(
                f"ran longer than {LABEL_SQL_BUDGET_S:g} s and was stopped (a recursive "
                "query without an end?)") from None
        denied = _LABEL_DENIED.get(_DENIED_HERE.action)
        if denied or "not authorized" in str(exc) or "authorization denied" in str(exc):
            # a virtual table's module reports a refusal as its own failure: name the rule
            said = f"{denied} is refused" if denied else str(exc)
            raise sqlite3.OperationalError(
                f"{said} (label SQL may change the episode's copy only: no ATTACH, VACUUM, "
                "PRAGMA, trigger, virtual table or transaction statements; a state check only "
                "reads)") from None
        raise


def run_overrides(conn: sqlite3.Connection, overrides: Sequence[str]) -> None:
    """Each override on ``conn`` under the label rules (:func:`label_sql`: no
    ATTACH, VACUUM, PRAGMA, trigger or transaction statements, at most
    :data:`LABEL_SQL_BUDGET_S` seconds each).

    Raises:
        StateError: the first that fails (field ``state.overrides.<i>``).
    """
    with label_sql(conn) as deadline:
        for i, sql in enumerate(overrides):
            try:
                deque(run_label_sql(conn, sql, deadline), maxlen=0)  # run to its end
            except (sqlite3.Error, sqlite3.Warning) as exc:
                raise StateError(f"state.overrides.{i}",
                                 f"override does not run: {exc}") from None
