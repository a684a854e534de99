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
  [float, tokens; NaN when unknown]; ``latency_s`` [float, seconds]; ``cost_usd`` [float, USD
  at list price; NaN without a price].
"""

from __future__ import annotations

from typing import Any, Iterable

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


def _names(calls: Any) -> tuple[str, ...]:
    return tuple(c.get("name", "") for c in calls or () if isinstance(c, dict))


def _expected_kind(expected: dict[str, Any]) -> str:
    if expected.get("no_call"):
        return "no_call"
    if expected.get("ask"):
        return "ask"
    return "calls"


def _bool(value: Any) -> Any:
    return None if value is None else bool(value)


def results_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Flatten result rows into the frame described in this module's docstring.

    Args:
        rows: result rows (dicts) as stored in ``results.jsonl``; rows written before a metric
            existed simply lack it (its column then holds <NA> for them).

    Returns:
        One row per distinct ``key``, in input order. An empty input gives an empty frame
        with the identifier columns.
    """
    records = []
    seen: set[str] = set()
    present: set[str] = set()
    for row in rows:
        if row["key"] in seen:  # a row copied twice counts once
            continue
        seen.add(row["key"])
        metrics = dict(row.get("metrics") or {})
        for alias, name in METRIC_ALIASES.items():
            if alias in metrics and name not in metrics:
                metrics[name] = metrics[alias]
        record = {k: row.get(k) for k in _ID_COLUMNS}
        expected = row.get("expected") or {}
        parsed = row.get("parsed") or {}
        record["tags"] = tuple(row.get("tags") or ())
        record["query"] = row.get("query") or ""
        record["expected_kind"] = _expected_kind(expected)
        record["expected_tools"] = _names(expected.get("calls"))
        record["predicted_tools"] = None if parsed.get("error") else _names(parsed.get("calls"))
        for name in BINARY_METRICS:
            value = metrics.get(name)
            if value is not None:
                present.add(name)
            record[name] = _bool(value)
        for name in FRACTION_METRICS:
            value = metrics.get(name)
            record[name] = float("nan") if value is None else float(value)
        for name in ("error_codes", "argument_errors", "lenient_repairs"):
            record[name] = tuple(metrics.get(name) or ())
        usage = row.get("usage") or {}
        for name in _USAGE:
            record[name] = usage.get(name)
        record["tool_definition_tokens"] = row.get("tool_definition_tokens")
        record["latency_s"] = row.get("latency_s")
        record["cost_usd"] = row.get("cost_usd")
        records.append(record)
    if not records:
        return pd.DataFrame(columns=list(_ID_COLUMNS))
    frame = pd.DataFrame.from_records(records)
    absent = [m for m in BINARY_METRICS if m not in present]
    frame = frame.drop(columns=absent)
    for name in BINARY_METRICS:
        if name in frame:
            frame[name] = frame[name].astype("boolean")
    for name in (*_USAGE, "tool_definition_tokens", "latency_s", "cost_usd"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype(float)
    frame["trial"] = frame["trial"].astype(int)
    return frame


def metric_columns(frame: pd.DataFrame, metrics: Iterable[str] = BINARY_METRICS) -> list[str]:
    """The binary metrics of ``metrics`` that ``frame`` carries, in the given order."""
    return [m for m in metrics if m in frame.columns]
