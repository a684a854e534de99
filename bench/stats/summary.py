"""Per-variant summary of result rows (the table ``bench run`` prints).

Denominators: tool-selection accuracy counts every row; argument accuracy counts rows whose
case expects calls; argument-schema validity counts rows that made at least one call; no-call
accuracy counts rows whose case expects no call. Each rate carries a 95% Wilson interval.
"""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from bench.stats.intervals import wilson_interval

# (column prefix, metric key in a row's "metrics")
RATE_METRICS = (
    ("selection", "selection_correct"),
    ("arguments", "arguments_correct"),
    ("schema_valid", "schema_valid"),
    ("no_call", "no_call_correct"),
    ("ask", "ask_correct"),
    ("execution", "execution_success"),
    ("exec_match", "execution_match"),
)


def rows_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Flatten result rows into one DataFrame, one row per result row.

    Columns: ``case_id, toolset, variant, provider, trial, lang`` (str/int), one column per
    metric of :data:`RATE_METRICS` (object: True/False/None), ``prompt_tokens``,
    ``completion_tokens``, ``cached_tokens``, ``tool_definition_tokens`` (int, tokens),
    ``latency_s`` (float, seconds).
    """
    records = []
    seen: set[str] = set()
    for row in rows:
        if row["key"] in seen:  # a row copied twice counts once
            continue
        seen.add(row["key"])
        record = {k: row[k] for k in ("case_id", "toolset", "variant", "provider", "trial",
                                      "lang")}
        for _, key in RATE_METRICS:
            record[key] = row["metrics"].get(key)
        record.update({f"{k}": v for k, v in row["usage"].items()})
        record["tool_definition_tokens"] = row.get("tool_definition_tokens")
        record["latency_s"] = row["latency_s"]
        records.append(record)
    return pd.DataFrame.from_records(records)


def _rate(values: pd.Series) -> tuple[int, int]:
    known = values.dropna()
    return int(known.astype(bool).sum()), int(len(known))


def summarize(frame: pd.DataFrame, variant_order: list[str] | None = None) -> pd.DataFrame:
    """One row per (provider, variant) with rates, Wilson intervals, tokens and latency.

    Columns: ``provider, variant, cases`` then for each metric prefix ``<p>_k, <p>_n, <p>_rate,
    <p>_low, <p>_high`` (fractions), then ``tool_definition_tokens`` (tokens),
    ``mean_prompt_tokens`` (tokens), ``mean_cached_tokens`` (tokens), ``p50_latency_s``
    (seconds) and ``cases_per_s`` (1 / mean latency, first row of each group excluded because
    it fills the prefix cache).
    """
    out = []
    for (provider, variant), group in frame.groupby(["provider", "variant"], sort=False):
        record: dict[str, Any] = {"provider": provider, "variant": variant,
                                  "cases": int(group["case_id"].nunique())}
        for prefix, key in RATE_METRICS:
            k, n = _rate(group[key])
            low, high = wilson_interval(k, n)
            record.update({f"{prefix}_k": k, f"{prefix}_n": n,
                           f"{prefix}_rate": k / n if n else float("nan"),
                           f"{prefix}_low": low, f"{prefix}_high": high})
        record["tool_definition_tokens"] = group["tool_definition_tokens"].max()
        record["mean_prompt_tokens"] = float(group["prompt_tokens"].mean())
        record["mean_cached_tokens"] = float(group["cached_tokens"].mean())
        record["p50_latency_s"] = float(group["latency_s"].median())
        warm = group["latency_s"].iloc[1:] if len(group) > 1 else group["latency_s"]
        record["cases_per_s"] = float(1.0 / warm.mean()) if warm.mean() > 0 else float("nan")
        out.append(record)
    summary = pd.DataFrame.from_records(out)
    if variant_order and not summary.empty:
        rank = {name: i for i, name in enumerate(variant_order)}
        summary = summary.sort_values(
            ["provider", "variant"], key=lambda s: s.map(rank) if s.name == "variant" else s,
            kind="stable").reset_index(drop=True)
    return summary
