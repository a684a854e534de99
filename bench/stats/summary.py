"""Per-variant summary of result rows (the table ``bench run`` prints).

Denominators: tool-selection accuracy counts every row; argument accuracy counts rows whose
case expects calls; argument-schema validity counts rows that made at least one call; no-call
accuracy counts rows whose case expects no call. Each rate carries a 95% Wilson interval.
The metrics are those of the registry's ``table`` view (:mod:`bench.scoring.registry`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from bench.results import Row
from bench.scoring.registry import metric_specs
from bench.stats.frame import FRAME_CHUNK_ROWS, compact_frame, results_frame
from bench.stats.intervals import wilson_interval


def rows_frame(rows: Iterable[Row | Mapping[str, Any]]) -> pd.DataFrame:
    """Result rows as a DataFrame: :func:`bench.stats.frame.results_frame` (column schema
    documented there)."""
    return results_frame(rows)


SUMMARY_CHUNK_ROWS = FRAME_CHUNK_ROWS
"""Rows flattened at a time by :func:`summary_frame` (:data:`bench.stats.frame.FRAME_CHUNK_ROWS`)."""

_SUMMARY_COLUMNS = ("provider", "variant", "case_id", "trial", "info",
                    "tool_definition_tokens", "prompt_tokens", "cached_tokens",
                    "reasoning_tokens", "latency_s", "cost_usd")


def summary_frame(rows: Iterable[Row | Mapping[str, Any]],
                  chunk_rows: int = SUMMARY_CHUNK_ROWS) -> pd.DataFrame:
    """The columns :func:`summarize` reads, of rows streamed ``chunk_rows`` at a time
    (:func:`bench.stats.frame.compact_frame`).

    Memory grows by about a hundred bytes per row (booleans, floats, pointers to interned
    provider / variant / case id strings) instead of the whole frame's few kilobytes
    (:func:`bench.stats.frame.results_frame` keeps queries, tags and calls), so the table at
    the end of a long run does not hold every row's text (``benchmarks/provider_throughput.py
    --only memory``).

    Args:
        rows: as :func:`bench.stats.frame.results_frame` takes them; a row seen twice (same
            ``key``) counts once, across chunks too.
        chunk_rows: rows flattened at a time (positive).

    Returns:
        The frame's identifier, table-metric (:func:`bench.scoring.registry.metric_specs`,
        view ``table``) and usage columns; an empty frame when there are no rows.
    """
    wanted = {*_SUMMARY_COLUMNS, *(s.name for s in metric_specs(view="table"))}
    return compact_frame(rows, wanted, chunk_rows)


def _rate(values: pd.Series) -> tuple[int, int]:
    known = values.dropna()
    return int(known.astype(bool).sum()), int(len(known))


def summarize(frame: pd.DataFrame, variant_order: list[str] | None = None) -> pd.DataFrame:
    """One row per (provider, variant) with rates, Wilson intervals, tokens and latency.

    Columns: ``provider, variant, cases`` then for each rate of the registry's ``table`` view
    ``<m>_k, <m>_n, <m>_rate, <m>_low, <m>_high`` (fractions), for each other metric of that
    view ``<m>_mean`` (mean over the rows that carry it; NaN when none), then
    ``tool_definition_tokens`` (tokens),
    ``mean_prompt_tokens`` (tokens), ``mean_cached_tokens`` (tokens), ``p50_latency_s``
    (seconds), ``cases_per_s`` (1 / mean latency, first row of each group excluded because
    it fills the prefix cache), ``mean_reasoning_tokens`` (tokens, over the rows that report
    them: null means not reported; NaN when no row of the group does) only when some row of
    the frame has reasoning tokens, and, when any row carries a cost, ``cost_usd`` (USD at list
    price, summed over the group's rows; NaN when a row has no price) and
    ``cost_per_case_usd`` (that sum / rows).
    """
    out = []
    specs = metric_specs(view="table")
    has_cost = "cost_usd" in frame and bool(frame["cost_usd"].notna().any())
    has_reasoning = "reasoning_tokens" in frame and bool((frame["reasoning_tokens"].fillna(0)
                                                          > 0).any())
    for (provider, variant), group in frame.groupby(["provider", "variant"], sort=False):
        record: dict[str, Any] = {"provider": provider, "variant": variant,
                                  "cases": int(group["case_id"].nunique())}
        for spec in specs:
            key = spec.name
            if spec.kind != "rate":
                record[f"{key}_mean"] = float(group[key].mean()) if key in group \
                    else float("nan")
                continue
            k, n = _rate(group[key]) if key in group else (0, 0)
            low, high = wilson_interval(k, n)
            record.update({f"{key}_k": k, f"{key}_n": n,
                           f"{key}_rate": k / n if n else float("nan"),
                           f"{key}_low": low, f"{key}_high": high})
        record["tool_definition_tokens"] = group["tool_definition_tokens"].max()
        record["mean_prompt_tokens"] = float(group["prompt_tokens"].mean())
        record["mean_cached_tokens"] = float(group["cached_tokens"].mean())
        if has_reasoning:
            # null is "not reported" (an error row, a model that does not count them), not 0
            record["mean_reasoning_tokens"] = float(group["reasoning_tokens"].mean())
        record["p50_latency_s"] = float(group["latency_s"].median())
        warm = group["latency_s"].iloc[1:] if len(group) > 1 else group["latency_s"]
        record["cases_per_s"] = float(1.0 / warm.mean()) if warm.mean() > 0 else float("nan")
        if has_cost:
            costs = group["cost_usd"]
            record["cost_usd"] = float(costs.sum()) if costs.notna().all() else float("nan")
            record["cost_per_case_usd"] = record["cost_usd"] / len(group)
        out.append(record)
    summary = pd.DataFrame.from_records(out)
    if variant_order and not summary.empty:
        rank = {name: i for i, name in enumerate(variant_order)}
        summary = summary.sort_values(
            ["provider", "variant"], key=lambda s: s.map(rank) if s.name == "variant" else s,
            kind="stable").reset_index(drop=True)
    return summary
