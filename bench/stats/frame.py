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
  ``exec_success`` / ``exec_match``) appear only when the executor ran.
- ``selection_precision``, ``selection_recall``, ``selection_f1`` [float, NaN on no-call/ask].
- ``error_codes``, ``argument_errors``, ``lenient_repairs`` [tuple of str].
- ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, ``tool_definition_tokens``
  [float, tokens; NaN when unknown]; ``latency_s`` [float, seconds].
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
_USAGE = ("prompt_tokens", "completion_tokens", "cached_tokens")
_LIST_COLUMNS = ("error_codes", "argument_errors", "lenient_repairs")
_OBJECT_COLUMNS = ("tags", "expected_tools", "predicted_tools", *_LIST_COLUMNS)
_ALL_COLUMNS = (*_ID_COLUMNS, "tags", "query", "expected_kind", "expected_tools",
                "predicted_tools", *BINARY_METRICS, *FRACTION_METRICS, *_LIST_COLUMNS, *_USAGE,
                "tool_definition_tokens", "latency_s")


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
    present: set[str] = set()
    for row in rows:
        key = row["key"]
        if key in seen:  # a row copied twice counts once
            continue
        seen.add(key)
        metrics = row.get("metrics") or {}
        for alias, name in METRIC_ALIASES.items():
            if alias in metrics and name not in metrics:
                metrics = {**metrics, name: metrics[alias]}
        for name in _ID_COLUMNS:
            columns[name].append(row.get(name))
        expected = row.get("expected") or {}
        parsed = row.get("parsed") or {}
        columns["tags"].append(tuple(row.get("tags") or ()))
        columns["query"].append(row.get("query") or "")
        columns["expected_kind"].append(_expected_kind(expected))
        columns["expected_tools"].append(_names(expected.get("calls")))
        columns["predicted_tools"].append(None if parsed.get("error")
                                          else _names(parsed.get("calls")))
        for name in BINARY_METRICS:
            value = metrics.get(name)
            if value is not None:
                present.add(name)
                value = bool(value)
            columns[name].append(value)
        for name in FRACTION_METRICS:
            value = metrics.get(name)
            columns[name].append(float("nan") if value is None else float(value))
        for name in _LIST_COLUMNS:
            columns[name].append(tuple(metrics.get(name) or ()))
        usage = row.get("usage") or {}
        for name in _USAGE:
            columns[name].append(usage.get(name))
        columns["tool_definition_tokens"].append(row.get("tool_definition_tokens"))
        columns["latency_s"].append(row.get("latency_s"))
    if not seen:
        return pd.DataFrame(columns=list(_ID_COLUMNS))
    data: dict[str, Any] = {}
    for name, values in columns.items():
        if name in BINARY_METRICS:
            if name in present:
                data[name] = pd.array(values, dtype="boolean")
        elif name in (*_USAGE, "tool_definition_tokens", "latency_s"):
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
