"""Result rows as one pandas DataFrame with a documented column schema.

Every statistic, the table, ``bench compare``, the report and the gate read this frame, so a
column is defined here once. Rows are the dicts of ``results.jsonl`` (see
:func:`bench.runner.build_row`); a row seen twice (same ``key``) counts once.

Column schema (dtype in brackets):

- ``key`` [str] ``case|variant|provider|trial``; ``run_id`` [str]; ``case_id`` [str];
  ``toolset`` [str]; ``variant`` [str]; ``provider`` [str]; ``trial`` [int]; ``lang`` [str];
  ``tags`` [tuple of str]; ``query`` [str] the last user message.
- ``expected_kind`` [str] ``calls`` | ``no_call`` | ``ask``.
- ``expected_tools`` [tuple of str] expected tool names in label order (empty on no-call/ask).
- ``predicted_tools`` [tuple of str, or None] called tool names in answer order; None when
  the answer could not be decoded.
- one column per binary metric of :data:`BINARY_METRICS` that at least one row carries
  [pandas nullable ``boolean``: True / False / <NA> where the metric does not apply].
  Execution outcomes (``execution_success``, ``execution_match``; the executor may name them
  ``exec_success`` / ``exec_match``) appear only when the executor ran; ``bfcl_valid``
  (BFCL's own checker, :func:`bench.scoring.bfcl.run_verdict`) only on imported BFCL datasets.
- ``selection_precision``, ``selection_recall``, ``selection_f1`` [float, NaN on no-call/ask].
- ``error_codes``, ``argument_errors``, ``lenient_repairs`` [tuple of str].
- ``prompt_tokens``, ``completion_tokens`` (reasoning included), ``cached_tokens``,
  ``reasoning_tokens`` (NaN where the provider does not report them separately),
  ``tool_definition_tokens`` [float, tokens; NaN when unknown]; ``latency_s`` [float, seconds]; ``cost_usd`` [float,
  USD at list price (:mod:`bench.providers.pricing`); NaN without a price or on old rows].
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

# Binary metrics where True is good (rates, compare, gate). Order = display order.
ACCURACY_METRICS = (
    "selection_correct",
    "arguments_correct",
    "arguments_correct_lenient",
    "schema_valid",
    "schema_valid_lenient",
    "no_call_correct",
    "ask_correct",
    "execution_success",
    "execution_match",
    "bfcl_valid",  # BFCL's own checker (imported BFCL datasets only)
)
# Binary error flags where True is bad (rates of how often a failure occurs).
ERROR_FLAGS = ("hallucinated_tool", "hallucinated_argument", "missing_required",
               "enum_case_error", "type_error")
BINARY_METRICS = ACCURACY_METRICS + ERROR_FLAGS
# Names the executor may use for the same outcomes (issue 4): mapped onto ours.
METRIC_ALIASES = {"exec_success": "execution_success", "exec_match": "execution_match"}
FRACTION_METRICS = ("selection_precision", "selection_recall", "selection_f1")
NO_CALL = "(no call)"
UNPARSEABLE = "(unparseable)"

_ID_COLUMNS = ("key", "run_id", "case_id", "toolset", "variant", "provider", "trial", "lang")
_USAGE = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
_LIST_COLUMNS = ("error_codes", "argument_errors", "lenient_repairs")
_OBJECT_COLUMNS = ("tags", "expected_tools", "predicted_tools", *_LIST_COLUMNS)
_ALL_COLUMNS = (*_ID_COLUMNS, "tags", "query", "expected_kind", "expected_tools",
                "predicted_tools", *BINARY_METRICS, *FRACTION_METRICS, *_LIST_COLUMNS, *_USAGE,
                "tool_definition_tokens", "latency_s", "cost_usd")
_NUMERIC = (*_USAGE, "tool_definition_tokens", "latency_s", "cost_usd")


def _names(calls: Any) -> tuple[str, ...]:
    return tuple(c.get("name", "") for c in calls or () if isinstance(c, dict))


def _expected_kind(expected: dict[str, Any]) -> str:
    if expected.get("no_call"):
        return "no_call"
    if expected.get("ask"):
        return "ask"
    return "calls"


def results_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Flatten result rows into the frame described in this module's docstring.

    Args:
        rows: result rows (dicts) as stored in ``results.jsonl``; rows written before a metric
            existed simply lack it (its column then holds <NA> for them).

    Returns:
        One row per distinct ``key``, in input order. An empty input gives an empty frame
        with the identifier columns.
    """
    columns: dict[str, list[Any]] = {name: [] for name in _ALL_COLUMNS}
    seen: set[str] = set()
    # bound appends, looked up once: this loop runs once per row of the run
    ids = [(name, columns[name].append) for name in _ID_COLUMNS]
    binary = [(name, columns[name].append) for name in BINARY_METRICS]
    fractions = [(name, columns[name].append) for name in FRACTION_METRICS]
    lists = [(name, columns[name].append) for name in _LIST_COLUMNS]
    usages = [(name, columns[name].append) for name in _USAGE]
    tags, query = columns["tags"].append, columns["query"].append
    kind, expected_tools = columns["expected_kind"].append, columns["expected_tools"].append
    predicted_tools = columns["predicted_tools"].append
    definition_tokens = columns["tool_definition_tokens"].append
    latency, cost = columns["latency_s"].append, columns["cost_usd"].append
    nan = float("nan")
    for row in rows:
        key = row["key"]
        if key in seen:  # a row copied twice counts once
            continue
        seen.add(key)
        get = row.get
        metrics = get("metrics") or {}
        if "exec_success" in metrics or "exec_match" in metrics:
            for alias, name in METRIC_ALIASES.items():
                if alias in metrics and name not in metrics:
                    metrics = {**metrics, name: metrics[alias]}
        for name, append in ids:
            append(get(name))
        expected = get("expected") or {}
        parsed = get("parsed") or {}
        tags(tuple(get("tags") or ()))
        query(get("query") or "")
        kind(_expected_kind(expected))
        expected_tools(_names(expected.get("calls")))
        predicted_tools(None if parsed.get("error") else _names(parsed.get("calls")))
        for name, append in binary:
            value = metrics.get(name)
            append(value if value is None else bool(value))
        for name, append in fractions:
            value = metrics.get(name)
            append(nan if value is None else float(value))
        for name, append in lists:
            append(tuple(metrics.get(name) or ()))
        usage = get("usage") or {}
        for name, append in usages:
            append(usage.get(name))
        definition_tokens(get("tool_definition_tokens"))
        latency(get("latency_s"))
        cost(get("cost_usd"))
    if not seen:
        return pd.DataFrame(columns=list(_ID_COLUMNS))
    data: dict[str, Any] = {}
    for name, values in columns.items():
        if name in BINARY_METRICS:
            if values.count(None) < len(values):  # some row carries the metric
                data[name] = pd.array(values, dtype="boolean")
        elif name in _NUMERIC:
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


def metric_columns(frame: pd.DataFrame, metrics: Iterable[str] = BINARY_METRICS) -> list[str]:
    """The binary metrics of ``metrics`` that ``frame`` carries, in the given order."""
    return [m for m in metrics if m in frame.columns]
