"""The per-variant table ``bench run`` prints (rich)."""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table

COLUMNS = (
    ("selection", "tool selection"),
    ("arguments", "arguments"),
    ("schema_valid", "schema valid"),
    ("no_call", "no-call"),
    ("ask", "ask"),
    ("execution", "exec success"),
    ("exec_match", "exec match"),
)


def format_rate(rate: float, low: float, high: float, n: int) -> str:
    """``"62.5% [51.2-72.6]"``; ``"-"`` when the metric had no applicable rows."""
    if n == 0 or math.isnan(rate):
        return "-"
    return f"{rate * 100:.1f}% [{low * 100:.1f}-{high * 100:.1f}]"


def summary_table(summary: pd.DataFrame, title: str | None = None) -> Table:
    """A rich Table of :func:`bench.stats.summary.summarize` output (one row per variant)."""
    table = Table(title=title, title_justify="left",
                  caption="rates with 95% Wilson intervals \\[low-high] (case-clustered bootstrap "
                          "with several trials); - : no case of that kind",
                  caption_justify="left")
    table.add_column("provider")
    table.add_column("variant")
    table.add_column("cases", justify="right")
    for _, label in COLUMNS:
        table.add_column(label, justify="right")
    table.add_column("tool-def tokens", justify="right", no_wrap=True)
    table.add_column("mean prompt tokens", justify="right", no_wrap=True)
    table.add_column("p50 latency s", justify="right", no_wrap=True)
    table.add_column("cases/s", justify="right", no_wrap=True)
    has_cost = "cost_usd" in summary
    if has_cost:
        table.add_column("cost USD (per case)", justify="right")
    for record in summary.to_dict("records"):
        cells = [str(record["provider"]), str(record["variant"]), str(record["cases"])]
        for prefix, _ in COLUMNS:
            cells.append(format_rate(record[f"{prefix}_rate"], record[f"{prefix}_low"],
                                     record[f"{prefix}_high"], record[f"{prefix}_n"]))
        tokens = record["tool_definition_tokens"]
        cells.append("-" if tokens is None or pd.isna(tokens) else str(int(tokens)))
        cells.append(f"{record['mean_prompt_tokens']:.0f}")
        cells.append(f"{record['p50_latency_s']:.2f}")
        cells.append(f"{record['cases_per_s']:.2f}")
        if has_cost:
            cost = record["cost_usd"]
            cells.append("-" if pd.isna(cost) else
                         f"{cost:.4f} ({record['cost_per_case_usd']:.6f})")
        table.add_row(*cells)
    return table
