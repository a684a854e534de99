"""What a backend gives the executor: one :class:`Handler` per tool, and the SQLite access
every reference backend shares (read-only connections, a read-only SQL runner, sandboxed
writes)."""

from __future__ import annotations

import enum
import hashlib
import sqlite3
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from bench.executor.outcome import CallContext, ToolError, permanent_error, validation_error
from bench.models import Permission
from bench.plural import count
from bench.toolset_config import Comparison

RunFn = Callable[[dict[str, Any], CallContext], Any]


# Largest string or blob one model-written SQL query may build (bytes).
MAX_SQL_VALUE_BYTES = 100_000


@dataclass(frozen=True)
class Handler:
    """One tool's implementation.

    Attributes:
        run: ``(arguments, context) -> JSON-compatible data``; raises
            :class:`~bench.executor.outcome.ToolError` for failures a caller can act on.
        permission: the backend's own tag (the stricter of it and the tool's tag applies, so a
            hand-written variant cannot turn a write tool into a read tool).
        check: business rules that need no data (``arguments -> None``, raises a validation
            ToolError), run before the permission check.
        fallback: ``(arguments, context, error) -> data`` used when the tool keeps failing or its
            circuit is open; its data is marked ``fallback_used``.
        cooperative: the handler stops by itself at ``context.deadline`` (e.g. SQLite's
            progress handler), so it runs in the caller's thread; others run on a worker
            thread that the executor abandons at the timeout.
        timeout_s: this tool's per-attempt timeout in seconds (None: the executor's
            ``timeout_s``), e.g. a project's ``timeout_s`` for its own MCP server.
        ready: ``() -> None``, called before each attempt outside its timeout: makes the
            system behind the tool able to take the call (a stdio MCP server that exited is
            started again, :meth:`~bench.executor.backends.mcp.McpBackend.ready`); raises
            ``BenchError`` when it cannot, which stops whatever runs the call (a run).
    """

    run: RunFn
    permission: Permission = "read"
    check: Callable[[dict[str, Any]], None] | None = None
    fallback: Callable[[dict[str, Any], CallContext, ToolError], Any] | None = None
    cooperative: bool = False
    timeout_s: float | None = None
    ready: Callable[[], None] | None = None


class Owner(enum.Enum):
    """Who owns the system a toolset's calls act on; it decides whether bench may execute a
    call no model made (a label's expected call).

    - ``BENCH``: a copy bench made and throws away (the reference backends' SQLite file, whose
      writes are rolled back, or an episode's private in-memory copy): labels may run.
    - ``USER``: the user's own system (a project's MCP server or Python module,
      ``--execute-mcp``, or handlers of unknown origin): bench runs only the calls a model
      made there, and a label's calls only with a declared reset hook
      (:attr:`Backend.reset`) or through ``bench labels record`` with the user's consent.
    """

    BENCH = "bench"
    USER = "user"


class Backend(Mapping[str, Handler]):
    """The handlers of one toolset (``tool name -> Handler``) and what bench may do on the
    system behind them.

    Args:
        handlers: one handler per tool.
        owner: who owns the system (:class:`Owner`).
        reset: a callable that puts the user's system back into its starting state (a
            project's declared ``reset = [...]`` command); with it, labels may run there,
            each case starting from a reset (raises ``BenchError`` when the reset fails).
        compare: tool name -> how its results are compared
            (:data:`bench.toolset_config.Comparison`; absent: ``exact``).
        describe: what messages call the system (``"MCP server python notes.py"``).
        with_state: ``overrides -> Backend``: the same tools on a private copy of the system
            with a case's ``state.overrides`` run (bench's reference backends only,
            :mod:`bench.executor.backends.states`; raises ``StateError`` for an override
            that does not run); None: the system cannot take a case's state.
    """

    def __init__(self, handlers: Mapping[str, Handler], owner: Owner, *,
                 reset: Callable[[], None] | None = None,
                 compare: Mapping[str, Comparison] | None = None,
                 describe: str = "",
                 with_state: Callable[[tuple[str, ...]], "Backend"] | None = None) -> None:
        self._handlers = dict(handlers)
        self.owner = owner
        self.reset = reset
        self.compare: dict[str, Comparison] = dict(compare or {})
        self.describe = describe
        self.with_state = with_state
        # held from a reset to the end of the calls that follow it: one case at a time
        self.lock = threading.RLock()

    def __getitem__(self, name: str) -> Handler:
        return self._handlers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)

    @property
    def runs_labels(self) -> bool:
        """A label's expected calls may run here: bench owns the system, or the user
        declared a reset that undoes them."""
        return self.owner is Owner.BENCH or self.reset is not None

    def with_handlers(self, handlers: Mapping[str, Handler]) -> "Backend":
        """The same system with other handlers (e.g. wrapped with a timeout or faults)."""
        made = Backend(handlers, self.owner, reset=self.reset, compare=self.compare,
                       describe=self.describe, with_state=self.with_state)
        made.lock = self.lock
        return made


def backend_of(handlers: Mapping[str, Handler]) -> Backend:
    """``handlers`` as a :class:`Backend`; a plain mapping is of unknown origin and so
    treated as the user's system (:attr:`Owner.USER`): only bench's own backends say
    otherwise."""
    return handlers if isinstance(handlers, Backend) else Backend(handlers, Owner.USER)


def cooperative(handlers: dict[str, Handler]) -> dict[str, Handler]:
    """The same handlers marked ``cooperative`` (they honour ``context.deadline`` themselves)."""
    return {name: replace(handler, cooperative=True) for name, handler in handlers.items()}


def stable_id(prefix: str, *parts: Any, length: int = 8) -> str:
    """A deterministic id such as ``RF3fa85f64`` from the parts (same call -> same id)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).hexdigest()
    return prefix + digest[:length]


def check_date_range(arguments: dict[str, Any], low: str = "date_from",
                     high: str = "date_to") -> None:
    """Business rule: ``low`` must not be after ``high`` (ISO dates compare as text)."""
    start, end = arguments.get(low), arguments.get(high)
    if isinstance(start, str) and isinstance(end, str) and start > end:
        raise validation_error("invalid_date_range",
                               f"{low} {start} is after {high} {end}; swap them or fix one")


# SQLite authorizer action codes a read-only query may use (sqlite.org/c3ref/c_alter_table.html)
_READ_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                           getattr(sqlite3, "SQLITE_RECURSIVE", 33)})
SQL_TIMEOUT_S = 5.0


def _read_only_authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


class ShopDB:
    """Access to one generated SQLite file.

    Reads use per-thread connections opened with ``file:...?mode=ro``; untrusted SQL also gets
    an authorizer that denies everything but reading. Writes run in a transaction on a fresh
    connection that is always rolled back (the reference data never changes, so every call,
    predicted or expected, sees the same state).

    Args:
        path: the SQLite file.
        persist_writes: commit sandboxed writes instead of rolling them back (an episode's
            private copy, :mod:`bench.episodes.state`, where a write must be seen by the
            episode's later calls).
    """

    def __init__(self, path: Path, persist_writes: bool = False) -> None:
        self.path = Path(path)
        self.persist_writes = persist_writes
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []

    def _connect(self, guarded: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        if guarded:
            conn.set_authorizer(_read_only_authorizer)
            # One SQL function call (randomblob, printf('%.*c', ...)) is never interrupted by the
            # progress handler; SQLite's length limit makes an oversized value an error instead
            # of gigabytes of memory (found by a break-it review: 15 GB for one model query).
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_SQL_VALUE_BYTES)
        return conn

    def reader(self, guarded: bool = False) -> sqlite3.Connection:
        """This thread's read-only connection (``guarded``: with the read-only authorizer)."""
        key = "guarded" if guarded else "plain"
        conn = getattr(self._local, key, None)
        if conn is None:
            conn = self._connect(guarded)
            setattr(self._local, key, conn)
            self._opened.append(conn)
        return conn

    def close(self) -> None:
        """Close every thread's read connection (before the file is deleted)."""
        while self._opened:
            self._opened.pop().close()

    @contextmanager
    def reading(self, ctx: CallContext | None, guarded: bool = False,
                budget_s: float | None = None) -> Iterator[sqlite3.Connection]:
        """A read-only connection whose statements stop when ``ctx`` is cancelled or past
        its deadline, or after ``budget_s`` seconds (SQLite's progress handler)."""
        conn = self.reader(guarded)
        stop_at = time.monotonic() + budget_s if budget_s else None

        def interrupt() -> int:
            if ctx is not None and (ctx.cancelled.is_set() or time.monotonic() > ctx.deadline):
                return 1
            return 1 if stop_at is not None and time.monotonic() > stop_at else 0

        conn.set_progress_handler(interrupt, 2000)
        try:
            yield conn
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise ToolError("timeout", "timeout",
                                "the query ran too long and was stopped; add filters or "
                                "aggregate, then retry once") from None
            raise
        finally:
            conn.set_progress_handler(None, 0)

    @contextmanager
    def sandbox(self) -> Iterator[sqlite3.Connection]:
        """A writable connection inside a transaction that is rolled back at the end (committed
        when ``persist_writes`` and the block raised nothing)."""
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=SQL_TIMEOUT_S)
        conn.row_factory = sqlite3.Row
        conn.execute("BEGIN")
        commit = False
        try:
            yield conn
            commit = self.persist_writes
        finally:
            conn.execute("COMMIT" if commit else "ROLLBACK")
            conn.close()

    def select(self, sql: str, limit: int, ctx: CallContext | None) -> dict[str, Any]:
        """Run untrusted SQL read-only: one SELECT (or WITH ... SELECT), at most ``limit`` rows.

        Returns:
            ``{"columns": [...], "rows": [[...]], "row_count": n, "truncated": bool}``; when
            truncated, ``note`` says how to get the rest.

        Raises:
            ToolError: ``read_only_violation`` (validation) for anything but one read statement,
                ``sql_error`` (validation) with SQLite's message, ``timeout`` after
                :data:`SQL_TIMEOUT_S` seconds.
        """
        if not 1 <= limit <= 1000:
            raise validation_error("invalid_argument", f"limit must be 1-1000, got {limit}")
        with self.reading(ctx, guarded=True, budget_s=SQL_TIMEOUT_S) as conn:
            try:
                cursor = conn.execute(sql)
            except sqlite3.ProgrammingError as exc:
                if "one statement" in str(exc):
                    raise validation_error(
                        "read_only_violation", "send exactly one SELECT statement; batches "
                        "separated by semicolons are rejected") from None
                raise validation_error("sql_error", f"SQLite: {exc}; fix the SQL") from None
            except sqlite3.DatabaseError as exc:
                text = str(exc)
                if "not authorized" in text or "readonly" in text:
                    raise validation_error(
                        "read_only_violation", "only a read-only SELECT (or WITH ... SELECT) "
                        "is allowed; INSERT, UPDATE, DELETE, schema changes, ATTACH and PRAGMA "
                        "are rejected") from None
                if "interrupted" in text:
                    raise
                raise validation_error("sql_error", f"SQLite: {text}; fix the SQL, do not "
                                       "resend it unchanged") from None
            if cursor.description is None:
                raise validation_error("read_only_violation",
                                       "the statement returns no rows; send one SELECT")
            columns = [d[0] for d in cursor.description]
            try:
                fetched = cursor.fetchmany(limit + 1)
            except sqlite3.DataError as exc:  # a value over MAX_SQL_VALUE_BYTES
                raise validation_error("sql_error", f"SQLite: {exc}; a query may build values "
                                       f"of at most {MAX_SQL_VALUE_BYTES} bytes") from None
        truncated = len(fetched) > limit
        rows = [list(r) for r in fetched[:limit]]
        result: dict[str, Any] = {"columns": columns, "rows": rows, "row_count": len(rows),
                                  "truncated": truncated}
        if truncated:
            shown = "only the first is" if limit == 1 else f"only the first {limit} are"
            result["note"] = (f"more than {count(limit, 'row')} matched; {shown} shown. "
                              "Aggregate or filter, or raise limit (max 1000)")
        return result


class MemoryShopDB(ShopDB):
    """A private, writable in-memory database made from an image of a seeded file: one
    connection (``sqlite3.Connection.deserialize``) serves every read, write and label query,
    one thread at a time, and writes commit (an episode's database, :mod:`bench.episodes.state`).

    Nothing is written to disk, so a killed run leaves nothing behind; a byte copy of the
    3.6 MB file, its deletion and its connections were about a quarter of an episode's CPU
    (``benchmarks/RESULTS.md``, episodes). Reads and writes of one episode are serialized (a
    lock): a read never waits on a second connection's write lock, and a step's calls run in
    the order they take the lock.

    Args:
        image: the database file's bytes.
        path: the file the image was read from (named in messages; never opened).
        persist_writes: False rolls every write back, as on the shared file (a single-answer
            case's copy with its state, :mod:`bench.executor.backends.states`: each call
            starts from that state).
    """

    def __init__(self, image: bytes, path: Path, persist_writes: bool = True) -> None:
        super().__init__(path, persist_writes=persist_writes)
        self.connection = sqlite3.connect(":memory:", isolation_level=None,
                                          check_same_thread=False)
        self.connection.deserialize(image)
        self.lock = threading.RLock()  # held by whoever uses the connection

    def reader(self, guarded: bool = False) -> sqlite3.Connection:
        """The one connection (take :attr:`lock` around its use; :meth:`reading` does)."""
        return self.connection

    def close(self) -> None:
        """Close the connection, which frees the database."""
        self.connection.close()

    @contextmanager
    def reading(self, ctx: CallContext | None, guarded: bool = False,
                budget_s: float | None = None) -> Iterator[sqlite3.Connection]:
        """The connection, locked, with rows as ``sqlite3.Row``; ``guarded`` adds the
        read-only authorizer and the value-size limit (as :meth:`ShopDB.reading`)."""
        with self.lock:
            conn = self.connection
            conn.row_factory = sqlite3.Row
            length = conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_SQL_VALUE_BYTES) \
                if guarded else None
            if guarded:
                conn.set_authorizer(_read_only_authorizer)
            try:
                with super().reading(ctx, guarded, budget_s) as same:
                    yield same
            finally:
                if guarded:
                    conn.set_authorizer(None)
                    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, length or 0)
                conn.row_factory = None

    @contextmanager
    def sandbox(self) -> Iterator[sqlite3.Connection]:
        """The connection, locked, inside a transaction committed when the block raised
        nothing and ``persist_writes`` (else rolled back). Its statements stop after
        :data:`SQL_TIMEOUT_S` (SQLite's progress handler; raised as a ``timeout``
        :class:`ToolError`): a case's ``state.overrides`` may have made a table a view
        without an end, and a write tool runs in the caller's thread, where no executor
        timeout could stop it (``bench run`` and ``bench lint`` hung for good)."""
        with self.lock:
            conn = self.connection
            conn.row_factory = sqlite3.Row
            stop_at = time.monotonic() + SQL_TIMEOUT_S
            conn.set_progress_handler(lambda: int(time.monotonic() > stop_at), 2000)
            conn.execute("BEGIN")
            commit = False
            try:
                yield conn
                commit = self.persist_writes
            except sqlite3.OperationalError as exc:
                if "interrupted" in str(exc):
                    raise ToolError("timeout", "timeout", "the write ran too long and was "
                                    "stopped") from None
                raise
            finally:
                conn.set_progress_handler(None, 0)
                if conn.in_transaction:  # an interrupted write rolled it back already
                    conn.execute("COMMIT" if commit else "ROLLBACK")
                conn.row_factory = None


def not_found(what: str, value: Any, hint: str) -> ToolError:
    """A ``not_found`` permanent error naming what was looked up."""
    return permanent_error("not_found", f"no {what} {value!s}; {hint}")
