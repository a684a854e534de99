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
- ``expected_kind`` [str] ``calls`` | ``no_call`` | ``ask``, or ``episode`` for an episode
  row (a row with ``episode``: the whole tool loop, :class:`bench.results.RowEpisode`).
- ``expected_tools`` [tuple of str] expected tool names in label order (empty on no-call/ask;
  an episode's required calls, from which its ``expected`` is derived).
- ``predicted_tools`` [tuple of str, or None] called tool names in answer order; None when
  the answer could not be decoded. For an episode row: every call of its trajectory, in the
  order made (steps in order, each step's calls in order, an undecodable call's name
  included), never None.
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
from operator import attrgetter
from typing import Any, Hashable, Iterable, Mapping

import numpy as np
import pandas as pd

from bench.results import Row, RowCall, RowExpected, as_row
from bench.scoring.registry import metric_names, metric_specs
from bench.stats.readers import MetricReaders

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


def _expected_tools(expected: RowExpected | None) -> tuple[str, ...]:
    """The label's tool names (its calls are stored as objects: ``name`` "" when absent)."""
    if expected is None:
        return ()
    return tuple(c.get("name", "") for c in expected.calls or () if isinstance(c, dict))


def _called_tools(calls: list[RowCall] | None) -> tuple[str | None, ...]:
    """The parsed calls' tool names ("" for a call without ``name``, None for a null one)."""
    names: list[str | None] = []
    for call in calls or ():
        name = call.name
        if name is None and "name" not in call.model_fields_set:
            name = ""
        names.append(name)
    return tuple(names)


def _trajectory_tools(episode: Any) -> tuple[str | None, ...]:
    """The tool names of every call of an episode's trajectory, in the order made (a
    :class:`bench.results.RowEpisode`; a call stored without a name gives None)."""
    return tuple(call.name for step in episode.steps for call in step.calls)


def _expected_kind(expected: RowExpected | None) -> str:
    if expected is None:
        return "calls"
    if expected.no_call:
        return "no_call"
    if expected.ask:
        return "ask"
    return "calls"


def results_frame(rows: Iterable[Row | Mapping[str, Any]]) -> pd.DataFrame:
    """Flatten result rows into the frame described in this module's docstring.

    Args:
        rows: :class:`bench.results.Row` objects (as :meth:`bench.store.RunStore.load_rows`
            gives them) or dicts as stored in ``results.jsonl`` (validated into rows:
            :func:`bench.results.as_row`); rows written before a metric existed simply lack it
            (its column then holds <NA> for them). The registry's metric readers
            (:meth:`bench.scoring.registry.MetricSpec.row_value`) read the rows' attributes.

    Returns:
        One row per distinct ``key``, in input order. An empty input gives an empty frame
        with the identifier columns.

    Raises:
        pydantic.ValidationError: a dict that does not fit the results contract.
    """
    rates = MetricReaders(metric_specs(kind="rate"))
    means = MetricReaders(metric_specs(kind="mean"))
    numbers = MetricReaders(metric_specs(kind=_NUMBER_KINDS))
    columns: dict[str, list[Any]] = {name: [] for name in _frame_columns()}
    seen: set[str] = set()
    # bound appends, looked up once: this loop runs once per row of the run
    id_get = attrgetter(*_ID_COLUMNS)
    id_appends = [columns[name].append for name in _ID_COLUMNS]
    rate_appends = [columns[name].append for name in rates.names()]
    mean_appends = [columns[name].append for name in means.names()]
    number_appends = [columns[name].append for name in numbers.names()]
    list_get = attrgetter(*_LIST_COLUMNS)
    list_appends = [columns[name].append for name in _LIST_COLUMNS]
    tags, query = columns["tags"].append, columns["query"].append
    kind, expected_tools = columns["expected_kind"].append, columns["expected_tools"].append
    predicted_tools = columns["predicted_tools"].append
    r_metric, r_row, r_usage, r_none, r_other = rates.parts()
    m_metric, m_row, m_usage, m_none, m_other = means.parts()
    n_metric, n_row, n_usage, n_none, n_other = numbers.parts()
    nan = float("nan")
    for item in rows:
        row = item if isinstance(item, Row) else as_row(item)
        key = row.key
        if key in seen:  # a row copied twice counts once
            continue
        seen.add(key)
        metrics = row.metrics
        for value, append in zip(id_get(row), id_appends):
            append(value)
        expected, parsed = row.expected, row.parsed
        tags(tuple(row.tags or ()))
        query(row.query or "")
        expected_tools(_expected_tools(expected))
        episode = row.episode
        if episode is None:
            kind(_expected_kind(expected))
            predicted_tools(None if parsed is not None and parsed.error
                            else _called_tools(parsed.calls if parsed is not None else None))
        else:
            kind("episode")
            predicted_tools(_trajectory_tools(episode))
        usage = row.usage
        found = r_metric(metrics) + r_row(row) + (r_none if usage is None else r_usage(usage))
        if r_other:
            found += tuple([read(row) for read in r_other])
        for value, append in zip(found, rate_appends):
            append(value if value is None else bool(value))
        found = m_metric(metrics) + m_row(row) + (m_none if usage is None else m_usage(usage))
        if m_other:
            found += tuple([read(row) for read in m_other])
        for value, append in zip(found, mean_appends):
            append(nan if value is None else float(value))  # type: ignore[arg-type]
        for value, append in zip(list_get(metrics), list_appends):
            append(tuple(value or ()))
        found = n_metric(metrics) + n_row(row) + (n_none if usage is None else n_usage(usage))
        if n_other:
            found += tuple([read(row) for read in n_other])
        for value, append in zip(found, number_appends):
            append(value)
    if not seen:
        return pd.DataFrame(columns=list(_ID_COLUMNS))
    return _typed_frame(columns, set(rates.names()), set(numbers.names()))


def _frame_columns() -> tuple[str, ...]:
    """The frame's columns in order: identifiers, tags, query, the expected and predicted
    tools, the registry's rates and means, the list columns, then its numbers."""
    return (*_ID_COLUMNS, "tags", "query", "expected_kind", "expected_tools",
            "predicted_tools", *(s.name for s in metric_specs(kind="rate")),
            *(s.name for s in metric_specs(kind="mean")), *_LIST_COLUMNS,
            *(s.name for s in metric_specs(kind=_NUMBER_KINDS)))


def _typed_frame(columns: dict[str, list[Any]], binary: set[str],
                 numeric: set[str]) -> pd.DataFrame:
    """The frame of the collected ``columns``, each with its type: ``binary`` metrics as
    nullable booleans (left out when no row carries one), ``numeric`` ones as floats,
    ``trial`` as integers, the tuple columns as objects."""
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
        del chunk, part  # else this chunk's rows live on while the next chunk is read
    if not parts:
        return results_frame(())
    if len(parts) == 1:
        return parts[0]
    frame = pd.concat(parts, ignore_index=True)
    for name in frame.columns:  # a rate column some chunk lacked comes back as object
        if name in set(binary_metrics()) and frame[name].dtype == object:
            frame[name] = frame[name].astype("boolean")
    return frame
