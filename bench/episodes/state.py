"""An episode's private copy of the shop database: starting state, writes, success checks.

Every episode gets its own in-memory database loaded from an image of the seeded file
(:class:`bench.executor.backends.base.MemoryShopDB`; the image is read once per process and
the cached file is never written), runs its label's ``state.overrides`` on it, and its write
tools commit there: a write is seen by the episode's later calls and never by another episode.
Nothing is written to disk, so a killed run leaves no copy behind.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bench.episodes.stored import CappedText, stored, stored_json
from bench.executor.backends import ReferenceBackends
from bench.executor.backends.base import MemoryShopDB, _read_only_authorizer
from bench.executor.backends.shopcache import shop_db_path
from bench.executor.backends.shopdb import DEFAULT_SEED
from bench.executor.backends.states import StateError as StateError  # raised here too
from bench.jsonl import dumps
from bench.models import StateCheck


def _canonical(value: Any) -> Any:
    """JSON-comparable form of a row value (SQLite gives int/float/str/bytes/None)."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class EpisodeDatabase:
    """One episode's database; use as a context manager. On exit the database is freed, or
    kept for a later episode when :attr:`finished` was set and nothing changed it
    (:data:`UNCHANGED_KEPT`).

    Args:
        overrides: SQL statements run on the copy before the episode (the label's
            ``state.overrides``).
        seed: the shop database's generator seed.

    Raises:
        StateError: an override fails (field ``state.overrides.<i>``), on entering.
    """

    def __init__(self, overrides: Sequence[str] = (), seed: int = DEFAULT_SEED) -> None:
        self.overrides = list(overrides)
        self.seed = seed
        self.db: MemoryShopDB | None = None
        self.finished = False  # set when every call has returned: only then may it be kept

    def take_kept(self) -> bool:
        """Enter with a kept database equal to the seeded one, if there is one and no override
        is to run (nothing is loaded: an event loop may call this). True: entered (leave with
        ``__exit__``); False: enter with ``__enter__``."""
        with _UNCHANGED_LOCK:
            kept = _UNCHANGED.get(self.seed) if not self.overrides else None
            self.db = kept.pop() if kept else None
        return self.db is not None

    def __enter__(self) -> "EpisodeDatabase":
        if not self.take_kept():
            path, image = seeded_image(self.seed)
            self.db = MemoryShopDB(image, path)
        db = self.db
        assert db is not None
        try:
            if self.overrides:
                with db.lock:
                    _run_overrides(db.connection, self.overrides)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.db is not None:
            _release(self.db, self.seed, clean=self.finished and not self.overrides)
            self.db = None

    def backends(self) -> ReferenceBackends:
        """Reference backends serving this copy."""
        assert self.db is not None, "use EpisodeDatabase as a context manager"
        return ReferenceBackends(seed=self.seed, database=self.db)

    def check(self, checks: Sequence[StateCheck]) -> list[dict[str, Any]]:
        """Run the state checks on the copy as it is now (:func:`run_checks`' rules): one
        ``{"sql", "expect", "got", "ok"}`` per check, in order (``got``: the rows as JSON
        values, or ``{"error": message}`` when the query fails)."""
        assert self.db is not None, "use EpisodeDatabase as a context manager"
        with self.db.lock:
            return _checks_on(self.db.connection, checks)


UNCHANGED_KEPT = 32
"""Unchanged databases kept per seed (3.6 MB each; the default concurrency is 32): loading an
image and parsing its schema again cost 0.4-0.7 ms CPU per step (``benchmarks/RESULTS.md``)."""

_UNCHANGED: dict[int, list[MemoryShopDB]] = {}
_UNCHANGED_LOCK = threading.Lock()


def _release(db: MemoryShopDB, seed: int, clean: bool) -> None:
    """Keep ``db`` for the next episode when it still equals the seeded database, else close
    it. Equal: the episode finished and ran no override (``clean``), no transaction is open,
    and SQLite's ``total_changes`` is 0 (a rolled-back change still counts: this errs towards
    closing). Nothing else changes it: model SQL runs under the read-only authorizer and the
    tools' writes are INSERT, UPDATE and DELETE."""
    conn = db.connection
    if clean and not conn.in_transaction and conn.total_changes == 0:
        with _UNCHANGED_LOCK:
            kept = _UNCHANGED.setdefault(seed, [])
            if len(kept) < UNCHANGED_KEPT:
                kept.append(db)
                return
    db.close()


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
def _label_sql(conn: sqlite3.Connection,
               authorizer: Callable[..., int] = _label_authorizer) -> Iterator[list[float]]:
    """Run label SQL on ``conn`` under ``authorizer``, :data:`LABEL_SQL_BUDGET_S` (each
    statement's own budget, SQLite's progress handler), :data:`LABEL_VALUE_BYTES` and
    :data:`LABEL_GROWTH_BYTES`; yields the one-item deadline list that :func:`_run_label_sql`
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


def _run_label_sql(conn: sqlite3.Connection, sql: str,
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


def apply_overrides(path: Path, overrides: Sequence[str]) -> None:
    """Run each SQL statement of ``overrides`` on the database file ``path``, committed
    (under the label rules: no ATTACH, VACUUM, PRAGMA, trigger or transaction statements,
    at most :data:`LABEL_SQL_BUDGET_S` seconds each).

    Raises:
        StateError: a statement fails (field ``state.overrides.<i>``, SQLite's message).
    """
    if not overrides:
        return
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        _run_overrides(conn, overrides)
    finally:
        conn.close()


def _run_overrides(conn: sqlite3.Connection, overrides: Sequence[str]) -> None:
    """Each override on ``conn`` under the label rules (:func:`apply_overrides`).

    Raises:
        StateError: the first that fails (field ``state.overrides.<i>``).
    """
    with _label_sql(conn) as deadline:
        for i, sql in enumerate(overrides):
            try:
                deque(_run_label_sql(conn, sql, deadline), maxlen=0)  # run to its end
            except (sqlite3.Error, sqlite3.Warning) as exc:
                raise StateError(f"state.overrides.{i}",
                                 f"override does not run: {exc}") from None


def run_checks(path: Path, checks: Sequence[StateCheck]) -> list[dict[str, Any]]:
    """Each check's query run read-only on ``path``: ``{"sql", "expect", "got", "ok"}``.

    ``ok`` compares every row the query returns with ``expect``, in order. ``got`` is the
    rows (``{"error": message}`` when the query fails); when their compact JSON text is over
    :data:`bench.episodes.stored.STORED_CHARS` characters, that text's head and tail
    (:class:`bench.episodes.stored.CappedText`) with ``got_chars`` (its full length) and
    ``got_rows`` (the rows returned): rows are compared and written as they are fetched, so
    a check returning millions of rows holds about 64 KB of them. The label's ``sql`` and
    ``expect`` are capped the same way (:func:`bench.episodes.stored.stored_json`).
    """
    conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
    try:
        return _checks_on(conn, checks)
    finally:
        conn.close()


def _checks_on(conn: sqlite3.Connection, checks: Sequence[StateCheck]) -> list[dict[str, Any]]:
    """Each check's query on ``conn`` under the read-only label rules (:func:`run_checks`)."""
    out = []
    with _label_sql(conn, _read_only_authorizer) as deadline:
        for check in checks:
            expect = [[_canonical(v) for v in row]
                      for row in json.loads(json.dumps(check.expect))]
            try:
                got, ok = _checked_rows(_run_label_sql(conn, check.sql, deadline), expect)
            except (sqlite3.Error, sqlite3.Warning) as exc:
                got, ok = {"got": {"error": str(exc)}}, False
            out.append({**stored(check.sql, "sql"), **stored_json(check.expect, "expect"),
                        **got, "ok": ok})
    return out


def _checked_rows(batches: Iterator[list[tuple[Any, ...]]],
                  expect: list[list[Any]]) -> tuple[dict[str, Any], bool]:
    """The rows of ``batches`` compared with ``expect`` (canonical rows, in order) and stored
    as they come: (``{"got": rows}`` or the cut JSON text with ``got_chars`` and
    ``got_rows``, equal?)."""
    text, kept, ok, count = CappedText(), [], True, 0
    text.write("[")
    for batch in batches:
        kinds = {type(v) for row in batch for v in row}  # 10x cheaper than copying them all
        rows: Sequence[Sequence[Any]] = (
            [[_canonical(v) for v in row] for row in batch] if kinds & {bytes, float}
            else batch)
        if ok:  # equal so far: this batch's rows against the expected ones, one past them
            mine = [list(row) for row in rows[:len(expect) - count + 1]]
            ok = mine == expect[count:count + len(mine)]
        text.write(("," if count else "") + dumps(rows)[1:-1])
        if not text.cut:
            kept += [list(row) for row in rows]
        count += len(rows)
    text.write("]")
    ok = ok and count == len(expect)
    return ({"got": kept} if not text.cut else {**text.record("got"), "got_rows": count}), ok


_PRISTINE: dict[int, sqlite3.Connection] = {}
_PRISTINE_LOCK = threading.Lock()


def check_label_state(overrides: Sequence[str], checks: Sequence[StateCheck],
                      seed: int = DEFAULT_SEED, user_id: str | None = None) -> None:
    """Load-time check of an episode label: the overrides run, then every state check's query
    runs read-only (its expected rows are not compared: the episode has not happened yet),
    inside a transaction that is rolled back, on this process's in-memory copy of the seeded
    database (made once: the shared cached file is only read, so no label can change what
    other episodes and runs start from; label SQL cannot end the transaction, see
    :func:`apply_overrides`). The same rules as in an episode apply (:func:`apply_overrides`,
    :func:`run_checks`). ``user_id``, the signed-in customer, must be a ``customer_id`` of
    the ``customers`` table once the overrides ran (else every order lookup answers "not
    found" and the label could never be met).

    Raises:
        StateError: the first override or query that fails (field
            ``state.overrides.<i>`` or ``success.state_checks.<i>.sql``), or an unknown
            customer (field ``state.user_id``).
    """
    with _PRISTINE_LOCK:
        conn = _PRISTINE.get(seed)
        if conn is None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.deserialize(seeded_image(seed)[1])
            _PRISTINE[seed] = conn
        conn.execute("BEGIN")
        try:
            _run_overrides(conn, overrides)
            if user_id is not None and conn.execute(
                    "SELECT 1 FROM customers WHERE customer_id = ?", (user_id,)).fetchone() is None:
                raise StateError("state.user_id", f"unknown customer {user_id!r}: no row of "
                                 "the shop database's customers has this customer_id")
            with _label_sql(conn, _read_only_authorizer) as deadline:
                for i, check in enumerate(checks):
                    try:
                        deque(_run_label_sql(conn, check.sql, deadline), maxlen=0)
                    except (sqlite3.Error, sqlite3.Warning) as exc:
                        raise StateError(f"success.state_checks.{i}.sql",
                                         f"state check does not run: {exc}") from None
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
