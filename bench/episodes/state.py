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
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Sequence

from bench.episodes.stored import CappedText, stored, stored_json
from bench.executor.backends import ReferenceBackends
from bench.executor.backends.base import MemoryShopDB, _read_only_authorizer
from bench.executor.backends.shopdb import DEFAULT_SEED
# the label SQL rules live below both users (a single-answer case's state and an episode's
# database); their names are kept here for callers of this module
from bench.executor.backends.states import LABEL_GROWTH_BYTES as LABEL_GROWTH_BYTES
from bench.executor.backends.states import LABEL_SQL_BUDGET_S as LABEL_SQL_BUDGET_S
from bench.executor.backends.states import LABEL_VALUE_BYTES as LABEL_VALUE_BYTES
from bench.executor.backends.states import StateError as StateError  # raised here too
from bench.executor.backends.states import (label_sql, run_label_sql, run_overrides,
                                            seeded_image)
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
                    run_overrides(db.connection, self.overrides)
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
        run_overrides(conn, overrides)
    finally:
        conn.close()


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
    with label_sql(conn, _read_only_authorizer) as deadline:
        for check in checks:
            expect = [[_canonical(v) for v in row]
                      for row in json.loads(json.dumps(check.expect))]
            try:
                got, ok = _checked_rows(run_label_sql(conn, check.sql, deadline), expect)
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
            run_overrides(conn, overrides)
            if user_id is not None and conn.execute(
                    "SELECT 1 FROM customers WHERE customer_id = ?", (user_id,)).fetchone() is None:
                raise StateError("state.user_id", f"unknown customer {user_id!r}: no row of "
                                 "the shop database's customers has this customer_id")
            with label_sql(conn, _read_only_authorizer) as deadline:
                for i, check in enumerate(checks):
                    try:
                        deque(run_label_sql(conn, check.sql, deadline), maxlen=0)
                    except (sqlite3.Error, sqlite3.Warning) as exc:
                        raise StateError(f"success.state_checks.{i}.sql",
                                         f"state check does not run: {exc}") from None
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
