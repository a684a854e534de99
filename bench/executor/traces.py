"""Structured call traces: one JSON line per call attempt in ``<run dir>/traces.jsonl``.

A line holds: ``ts`` (UTC ISO time), ``run_id``, ``case_id``, ``trial``, ``call_id``, ``tool``,
``args_sha256`` (SHA-256 of the canonical arguments JSON, so arguments never reach the log),
``attempt`` (0-based; equals the retry count), ``status`` (ok | error | fallback | rejected),
``final`` (the call's last attempt), ``error_class``, ``error_code``, ``fault`` (injected
fault), ``waited_s`` (backoff/rate wait before it) and ``duration_ms``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from pydantic import ValidationError

from bench.errors import BenchError
from bench.executor.outcome import ERROR_CLASSES
from bench.jsonl import canonical_bytes, dumps
from bench.results import TraceRecord, validation_problem

if TYPE_CHECKING:  # pandas costs ~0.4 s to import; only summaries need it
    import pandas as pd

TRACES = "traces.jsonl"


def arguments_hash(arguments: Any) -> str:
    """SHA-256 hex of :func:`bench.jsonl.canonical_bytes` of ``arguments`` (sorted keys)."""
    return hashlib.sha256(canonical_bytes(arguments)).hexdigest()


class TraceWriter:
    """Appends trace lines to one file; safe to share between threads (one lock per file).

    Args:
        path: the ``traces.jsonl`` file (created with its folder if missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._handle = open(self.path, "a", encoding="utf-8")

    def write(self, record: TraceRecord) -> None:
        """Append one record as a JSON line with ``schema_version`` and ``ts`` (now, when the
        record has none), flushed at once. Written as it is: a trace holds identifiers, codes
        and numbers, no free text (arguments are hashed), and redacting the ids would part a
        trace from its row.

        Raises:
            OSError: the line cannot be written (names the file).
            TypeError: ``record`` is not a :class:`bench.results.TraceRecord`.
        """
        if not isinstance(record, TraceRecord):
            raise TypeError(f"a trace is a bench.results.TraceRecord, not "
                            f"{type(record).__name__}")
        data = record.model_dump(exclude_none=False)
        if not data.get("ts"):
            data["ts"] = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        line = dumps(data)
        with self._lock:
            try:
                self._handle.write(line + "\n")
                self._handle.flush()
            except OSError as exc:  # e.g. the disk is full: name the file
                from bench.store.files import named_os_error
                raise named_os_error(exc, self.path) from None

    def close(self) -> None:
        """Close the file (later writes raise ValueError)."""
        with self._lock:
            self._handle.close()


def read_traces(path: Path) -> list[TraceRecord]:
    """The trace records of a file, as a list (:func:`iter_traces`).

    Raises:
        BenchError: as :func:`iter_traces`.
    """
    return list(iter_traces(path))


def iter_traces(path: Path) -> Iterator[TraceRecord]:
    """The trace records of a file, one at a time (a 100,000-row run's traces are never all
    in memory); a half-written last line is skipped; lines without ``schema_version`` (the
    release before the contract) are migrated.

    Raises:
        BenchError: the file is missing, or a complete line is not a JSON object of the
            :class:`bench.results.TraceRecord` shape (names file, line and field), or was
            written by a newer bench, or the file is not UTF-8.
    """
    if not path.is_file():
        raise BenchError("no traces for this run (was it run with --execute?)", file=path)
    offset = 0
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.endswith("\n"):  # the last piece, half-written
                    return
                offset += len(line)
                if line.strip():
                    yield _trace(path, number, line)
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text ({exc.reason} after character {offset})",
                         file=path) from None


def _trace(path: Path, number: int, line: str) -> TraceRecord:
    """One complete line of a traces file as a record (raises as :func:`iter_traces`)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BenchError(f"not a JSON line: {exc.msg}", file=path, line=number) from None
    if not isinstance(record, dict):
        raise BenchError("a trace line must be a JSON object", file=path, line=number)
    try:
        return TraceRecord.model_validate(record)
    except ValidationError as exc:
        field, problem = validation_problem(exc)
        raise BenchError(f"trace line: {problem}" if "newer bench" in problem
                         else f"corrupt trace line: {problem}", file=path, line=number,
                         field=field) from None


def summarize_traces(records: Iterable[TraceRecord]) -> pd.DataFrame:
    """Per tool: calls, attempts, retries, failure rate, latency percentiles, error classes.

    Returns:
        One row per tool, sorted by name, columns ``tool, calls, attempts, retries, failed,
        failure_rate`` (failed / calls: calls whose final attempt was not ok or fallback),
        ``p50_ms, p95_ms, p99_ms, max_ms`` (attempt durations, milliseconds), one
        ``<error class>`` column per class (attempt counts) and ``error_codes``
        (``{error class: {error code: attempts}}``, e.g. ``{"permanent":
        {"permission_denied": 2}}``; attempts without a code count under ``"?"``).
    """
    import pandas as pd

    frame = pd.DataFrame.from_records(
        [r.model_dump() for r in records])
    if frame.empty:
        return pd.DataFrame(columns=["tool", "calls", "attempts", "retries", "failed",
                                     "failure_rate", "p50_ms", "p95_ms", "p99_ms", "max_ms",
                                     "error_codes"])
    for column, default in (("final", True), ("error_class", None), ("error_code", None),
                            ("duration_ms", 0.0), ("status", "ok"), ("attempt", 0)):
        if column not in frame:
            frame[column] = default
    out = []
    for tool, group in frame.groupby("tool", sort=True):
        finals = group[group["final"].fillna(True).astype(bool)]
        failed = int((~finals["status"].isin(["ok", "fallback"])).sum())
        durations = group["duration_ms"].astype(float)
        record: dict[str, Any] = {
            "tool": tool, "calls": len(finals), "attempts": len(group),
            "retries": int((group["attempt"].astype(int) > 0).sum()), "failed": failed,
            "failure_rate": failed / len(finals) if len(finals) else float("nan"),
            "p50_ms": float(durations.quantile(0.50)), "p95_ms": float(durations.quantile(0.95)),
            "p99_ms": float(durations.quantile(0.99)), "max_ms": float(durations.max())}
        for name, count in group["error_class"].dropna().value_counts().items():
            record[str(name)] = int(count)
        codes: dict[str, dict[str, int]] = {}
        for name, code in zip(group["error_class"], group["error_code"]):
            if isinstance(name, str):
                per_class = codes.setdefault(name, {})
                key = code if isinstance(code, str) and code else "?"
                per_class[key] = per_class.get(key, 0) + 1
        record["error_codes"] = codes
        out.append(record)
    return pd.DataFrame.from_records(out).fillna(
        {c: 0 for c in ERROR_CLASSES})
