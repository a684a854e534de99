"""Result rows as one pandas DataFrame with a documented column schema.

Every statistic, the table, ``bench compare``, the report and the gate read this frame, so a
column is defined here once. Rows are :class:`bench.results.Row` objects (or the dicts of
``results.jsonl``, see :func:`bench.runner.build_row`); a row seen twice (same ``key``)
counts once.

Column schema (dtype in brackets):

- ``key`` [str] ``case|variant|provider|trial``; ``run_id`` [str]; ``case_id`` [str];
  ``toolset`` [str]; ``variant`` [str]; ``provider`` [str]; ``trial`` [int]; ``lang`` [str];
  ``tags`` [tuple of str]; ``query`` [str] the last user message; ``info`` [str or None] the
  case's information bucket.
- ``expected_kind`` [str] ``calls`` | ``no_call`` | ``ask``.
- ``expected_tools`` [tuple of str] expected tool names in label order (empty on no-call/ask).
- ``predicted_tools`` [tuple of str, or None] called tool names in answer order; None when
  the answer could not be decoded.
- one column per registered rate (:mod:`bench.scoring.registry`, :func:`binary_metrics`) that
  at least one row carries [pandas nullable ``boolean``: True / False / <NA> where the metric
  does not apply].
  Execution outcomes (``execution_success``, ``execution_match``; the executor may name them
  ``exec_success`` / ``exec_match``) appear only when the executor ran; ``bfcl_valid``
  (BFCL's own checker, :func:`bench.scoring.bfcl.run_verdict`) only on imported BFCL datasets.
- one column per registered ``mean`` metric: ``selection_precision``, ``selection_recall``,
  ``selection_f1`` [float, NaN on no-call/ask].
- ``error_codes``, ``argument_errors``, ``lenient_repairs`` [tuple of str].
- ``prompt_tokens``, ``completion_tokens`` (reasoning included), ``cached_tokens``,
  ``reasoning_tokens`` (NaN where the provider does not report them separately),
  ``tool_definition_tokens`` [float, tokens; NaN when unknown]; ``latency_s`` [float,
  seconds]; ``cost_usd`` [float, USD at list price (:mod:`bench.providers.pricing`); NaN without a price or on old rows]:
  the registered ``tokens`` / ``seconds`` / ``usd`` / ``count`` metrics [float].
"""

from __future__ import annotations

import sys
from itertools import islice
from typing import Any, Hashable, Iterable, Mapping

import numpy as np
import pandas as pd

from bench.results import Row
from bench.scoring.registry import MetricSpec, metric_names, metric_specs

NO_CALL = "(no call)"
UNPARSEABLE = "(unparseable)"

_ID_COLUMNS = ("key", "run_id", "case_id", "toolset", "variant", "provider", "trial", "lang",
               "info")
_LIST_COLUMNS = ("error_codes", "argument_errors", "lenient_repairs")
_OBJECT_COLUMNS = ("tags", "expected_tools", "predicted_tools", *_LIST_COLUMNS)
_NUMBER_KINDS = ("count", "tokens", "usd", "seconds")


def binary_metrics() -> list[str]:
    """Every registered rate (:mod:`bench.scoring.registry`, kind ``rate``), in display order:
    the frame's nullable-boolean columns."""
    return metric_names(kind="rate")


def accuracy_metrics() -> list[str]:
    """Registered rates where True is good (polarity ``higher``), in display order."""
    return metric_names(kind="rate", polarity="higher")


def _names(calls: Any) -> tuple[str, ...]:
    return tuple(c.get("name", "") for c in calls or () if isinstance(c, dict))


def _expected_kind(expected: dict[str, Any]) -> str:
    if expected.get("no_call"):
        return "no_call"
    if expected.get("ask"):
        return "ask"
    return "calls"


def _reader(spec: MetricSpec) -> tuple[str, int, Any]:
    """(name, how, what) telling the per-row loop where a metric's value is, cheapest first:
    0 ``row["metrics"][what]``, 1 ``row[what]``, 2 ``row[what[0]][what[1]]``, 3 ``what(row)``
    (any other spec: :meth:`MetricSpec.row_value`), 4 the first of the keys ``what`` present
    in ``row["metrics"]`` (a name and its aliases)."""
    if spec.value is None and not spec.path and spec.aliases:
        return spec.name, 4, (spec.name, *spec.aliases)
    if spec.value is None and not spec.aliases:
        if not spec.path:
            return spec.name, 0, spec.name
        if len(spec.path) == 1:
            return spec.name, 1, spec.path[0]
        if len(spec.path) == 2:
            return spec.name, 2, spec.path
    return spec.name, 3, spec.row_value


def _value(row: Mapping[str, Any], metrics: dict[str, Any], how: int, what: Any) -> Any:
    if how == 0:
        return metrics.get(what)
    if how == 1:
        return row.get(what)
    if how == 2:
        inner = row.get(what[0])
        return inner.get(what[1]) if isinstance(inner, dict) else None
    if how == 4:
        for key in what:
            if key in metrics:
                return metrics[key]
        return None
    return what(row)


def results_frame(rows: Iterable[Row | Mapping[str, Any]]) -> pd.DataFrame:
    """Flatten result rows into the frame described in this module's docstring.

    Args:
        rows: :class:`bench.results.Row` objects (as :meth:`bench.runstore.RunStore.load_rows`
            gives them) or dicts as stored in ``results.jsonl``; rows written before a metric
            existed simply lack it (its column then holds <NA> for them). The registry's
            metric readers (:meth:`bench.scoring.registry.MetricSpec.row_value`) take the
            row's JSON shape, so a :class:`~bench.results.Row` is dumped to it here.

    Returns:
        One row per distinct ``key``, in input order. An empty input gives an empty frame
        with the identifier columns.
    """
    rates = [_reader(s) for s in metric_specs(kind="rate")]
    means = [_reader(s) for s in metric_specs(kind="mean")]
    numbers = [_reader(s) for s in metric_specs(kind=_NUMBER_KINDS)]
    binary = {name for name, _, _ in rates}
    numeric = {name for name, _, _ in numbers}
    all_columns = (*_ID_COLUMNS, "tags", "query", "expected_kind", "expected_tools",
                   "predicted_tools", *(n for n, _, _ in rates), *(n for n, _, _ in means),
                   *_LIST_COLUMNS, *(n for n, _, _ in numbers))
    columns: dict[str, list[Any]] = {name: [] for name in all_columns}
    seen: set[str] = set()
    # bound appends, looked up once: this loop runs once per row of the run
    ids = [(name, columns[name].append) for name in _ID_COLUMNS]
    rate_cols = [(how, what, columns[name].append) for name, how, what in rates]
    mean_cols = [(how, what, columns[name].append) for name, how, what in means]
    number_cols = [(how, what, columns[name].append) for name, how, what in numbers]
    lists = [(name, columns[name].append) for name in _LIST_COLUMNS]
    tags, query = columns["tags"].append, columns["query"].append
    kind, expected_tools = columns["expected_kind"].append, columns["expected_tools"].append
    predicted_tools = columns["predicted_tools"].append
    nan = float("nan")
    for row in rows:
        if isinstance(row, Row):  # the registry reads JSON-shaped rows
            row = row.to_json_dict()
        key = row["key"]
        if key in seen:  # a row copied twice counts once
            continue
        seen.add(key)
        get = row.get
        metrics = get("metrics") or {}
        for name, append in ids:
            append(get(name))
        expected = get("expected") or {}
        parsed = get("parsed") or {}
        tags(tuple(get("tags") or ()))
        query(get("query") or "")
        kind(_expected_kind(expected))
        expected_tools(_names(expected.get("calls")))
        predicted_tools(None if parsed.get("error") else _names(parsed.get("calls")))
        for how, what, append in rate_cols:
            value = metrics.get(what) if how == 0 else _value(row, metrics, how, what)
            append(value if value is None else bool(value))
        for how, what, append in mean_cols:
            value = metrics.get(what) if how == 0 else _value(row, metrics, how, what)
            append(nan if value is None else float(value))
        for name, append in lists:
            append(tuple(metrics.get(name) or ()))
        for how, what, append in number_cols:
            if how == 1:
                append(get(what))
            elif how == 2:
                inner = get(what[0])
                append(inner.get(what[1]) if isinstance(inner, dict) else None)
            else:
                append(_value(row, metrics, how, what))
    if not seen:
        return pd.DataFrame(columns=list(_ID_COLUMNS))
    data: dict[str, Any] = {}
    for name, values in columns.items():
        if name in binary:
            if values.count(None) < len(values):  # some row carries the metric
                data[name] = pd.array(values, dtype="boolean")
        elif name in numeric:
            data[name] = pd.to_numeric(pd.Series(values, dtype=object),
                                       errors="coerce").astype(float).to_numpy()
        elif name == "trial":
            data[name] = np.asarray(values, dtype=int)
        elif name in _OBJECT_COLUMNS:
            column = np.empty(len(values), dtype=object)
            column[:] = values
            data[name] = column
        else:
            data[name] = values
    return pd.DataFrame(data)


def metric_columns(frame: pd.DataFrame, metrics: Iterable[str] | None = None) -> list[str]:
    """The binary metrics of ``metrics`` (default: :func:`binary_metrics`) that ``frame``
    carries, in the given order."""
    return [m for m in (binary_metrics() if metrics is None else metrics) if m in frame.columns]


FRAME_CHUNK_ROWS = 1_000
"""Rows flattened at a time by :func:`compact_frame`: bounds its transient memory (a row as
JSON-shaped Python objects took about 30 KB here, so 1,000 rows peaked near 40 MB)."""

# Object columns whose values repeat across variants, providers and trials: one object per
# distinct value (the query of a case, its tags, its expected tools...).
_SHARED_COLUMNS = ("key", "run_id", "case_id", "toolset", "variant", "provider", "lang", "info",
                   "query", "expected_kind", *_OBJECT_COLUMNS)


def compact_frame(rows: Iterable[Row | Mapping[str, Any]],
                  columns: Iterable[str] | None = None,
                  chunk_rows: int = FRAME_CHUNK_ROWS) -> pd.DataFrame:
    """:func:`results_frame` of ``rows`` streamed ``chunk_rows`` at a time, with each
    repeated tuple (tags, expected and predicted tools, error codes) or string of an object
    column stored once: the same frame (same columns, dtypes and values) in far less memory
    for a large run (``benchmarks/report_memory.py``), because the frame of all rows at once
    holds every row's JSON dump while it is built and a tuple per row and column. Text
    columns are pandas' string dtype, compact already.

    Args:
        rows: as :func:`results_frame` takes them; a row seen twice (same ``key``) counts
            once, across chunks too.
        columns: keep only these columns (those the rows carry); None: all.
        chunk_rows: rows flattened at a time (positive).

    Returns:
        The frame; an empty frame with the identifier columns when there are no rows.
    """
    wanted = None if columns is None else set(columns)
    seen: set[str] = set()
    shared: dict[Hashable, Any] = {}

    def first_copies() -> Iterable[Row | Mapping[str, Any]]:
        for row in rows:
            key = row.key if isinstance(row, Row) else row["key"]
            if key not in seen:
                seen.add(key)
                yield row

    def one(value: Any) -> Any:
        if isinstance(value, str):
            return sys.intern(value)
        try:
            return shared.setdefault(value, value)
        except TypeError:  # not hashable: kept as it is
            return value

    stream = iter(first_copies())
    parts = []
    while chunk := list(islice(stream, chunk_rows)):
        part = results_frame(chunk)
        if wanted is not None:
            part = part[[c for c in part.columns if c in wanted]].copy()
        for name in _SHARED_COLUMNS:
            if name in part and part[name].dtype == object:
                column = np.empty(len(part), dtype=object)
                column[:] = [one(v) for v in part[name]]
                part[name] = column
        parts.append(part)
    if not parts:
        return results_frame(())
    if len(parts) == 1:
        return parts[0]
    frame = pd.concat(parts, ignore_index=True)
    for name in frame.columns:  # a rate column some chunk lacked comes back as object
        if name in set(binary_metrics()) and frame[name].dtype == object:
            frame[name] = frame[name].astype("boolean")
    return frame
