"""The report's many-tools section: accuracy and tool-definition tokens against tool count,
one line per variant and retriever, and the split of selection errors into "not retrieved"
and "retrieved but confused" (:mod:`bench.toolspace`).

Reads only rows that carry ``tool_count`` and ``retrieval`` (``bench run --tools`` /
``--retriever``); every label comes from the rows (condition names are model-independent,
but tool names in rows are data: the template escapes every cell).
"""

from __future__ import annotations

from typing import Any, Iterable

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bench.models import CONDITION_SEPARATOR
from bench.report.charts import STYLE, _legend, _percent_axis, _short, _svg
from bench.report.table import format_rate
from bench.results import Row
from bench.stats.intervals import wilson_interval


def _retriever_label(retrieval: dict[str, Any]) -> str:
    retriever = str(retrieval.get("retriever") or "none")
    top_k = retrieval.get("top_k")  # None: no retriever, or a native one (the server's k)
    return retriever if top_k is None else f"{retriever} k={top_k}"


_SPACE_SETTINGS = frozenset({"tools", "retriever", "top_k"})  # ToolSpace.settings' names


def _line_name(condition: str) -> str:
    """A condition's name without its tool-space settings: the variant and any episode
    factor settings (``l3~tools=40~fault=503`` -> ``l3~fault=503``), so that rows of different
    factor settings are never pooled into one line."""
    variant, *settings = condition.split(CONDITION_SEPARATOR)
    return CONDITION_SEPARATOR.join(
        [variant, *(s for s in settings if s.split("=", 1)[0] not in _SPACE_SETTINGS)])


def _retriever_order(labels: pd.Series) -> pd.Series:
    """Sort keys for retriever labels: by name, then k as a number (``bm25 k=5`` before
    ``bm25 k=10``)."""
    def key(label: str) -> str:
        name, _, k = label.partition(" k=")
        return f"{name} {int(k):09d}" if k.isdigit() else name
    return labels.map(key)


def toolspace_table(rows: Iterable[Row]) -> pd.DataFrame:
    """One record per (provider, variant, retriever, tool count) of the tool-space rows.

    Columns: ``provider``, ``variant`` (the condition's variant with its episode factor
    settings, if any: ``l3~fault=503``), ``retriever`` (``none``
    or ``bm25 k=5``...), ``tools`` (catalog size), ``n`` (rows), ``selection`` /
    ``selection_low`` / ``selection_high`` (tool selection, 95% Wilson interval,
    fractions), ``retrieved_all`` (with ``_n``, ``_low``, ``_high``: recall@k over rows
    expecting a call), ``not_retrieved`` and ``confused`` (shares of all rows, with
    intervals; they sum to 1 - selection), ``tokens`` (mean tool-definition tokens sent,
    o200k_base). Empty without such rows.
    """
    groups: dict[tuple[str, str, str, int], list[Row]] = {}
    for row in rows:
        retrieval = row.retrieval
        if row.tool_count is None or retrieval is None:
            continue
        key = (row.provider, _line_name(row.variant), _retriever_label(retrieval),
               int(row.tool_count))
        groups.setdefault(key, []).append(row)
    records = []
    for (provider, variant, retriever, tools), group in groups.items():
        record: dict[str, Any] = {"provider": provider, "variant": variant,
                                  "retriever": retriever, "tools": tools, "n": len(group)}
        for name, values in (
                ("selection", [r.metrics.selection_correct for r in group]),
                ("retrieved_all", [r.metrics.retrieved_all for r in group]),
                ("not_retrieved", [r.metrics.error_not_retrieved for r in group]),
                ("confused", [r.metrics.error_confused for r in group])):
            known = [bool(v) for v in values if v is not None]
            k, n = sum(known), len(known)
            low, high = wilson_interval(k, n)
            record.update({name: k / n if n else float("nan"), f"{name}_n": n,
                           f"{name}_low": low, f"{name}_high": high})
        tokens = [r.retrieval.get("tool_tokens") for r in group if r.retrieval]
        known_tokens = [float(t) for t in tokens if isinstance(t, (int, float))]
        record["tokens"] = float(np.mean(known_tokens)) if known_tokens else float("nan")
        records.append(record)
    table = pd.DataFrame.from_records(records)
    if not table.empty:
        table = table.sort_values(
            ["provider", "variant", "retriever", "tools"], kind="stable",
            key=lambda column: _retriever_order(column) if column.name == "retriever"
            else column).reset_index(drop=True)
    return table


def toolspace_chart(table: pd.DataFrame) -> str:
    """Three panels against tool count (log scale): tool selection, the share of rows lost
    to a retrieval miss ("not retrieved"), and mean tool-definition tokens sent; one line
    per provider, variant and retriever, with 95% Wilson interval bands on the rates.

    Returns:
        SVG text.
    """
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 3, figsize=(13.5, 3.4), squeeze=False)
        several = table["provider"].nunique() > 1 if not table.empty else False
        series = table.groupby(["provider", "variant", "retriever"], sort=False) \
            if not table.empty else ()
        for index, ((provider, variant, retriever), group) in enumerate(series):
            group = group.sort_values("tools")
            x = group["tools"].astype(float).to_numpy()
            label = _short(f"{provider} · " if several else "", 30) + \
                f"{variant} · {retriever}"
            style = "-" if retriever == "none" else "--"
            color = f"C{index % 10}"
            for ax, column in ((axes[0][0], "selection"), (axes[0][1], "not_retrieved")):
                ax.plot(x, group[column] * 100, style, marker="o", color=color, label=label)
                ax.fill_between(x, group[f"{column}_low"] * 100, group[f"{column}_high"] * 100,
                                color=color, alpha=0.12, linewidth=0)
            axes[0][2].plot(x, group["tokens"], style, marker="o", color=color, label=label)
        counts = sorted({int(t) for t in table["tools"]}) if not table.empty else []
        for ax, title in zip(axes[0], ("tool selection", "errors: not retrieved",
                                       "tool-definition tokens sent")):
            ax.set_title(title)
            ax.set_xlabel("tools in the catalog")
            ax.set_xscale("log")
            # the planned counts as plain numbers (log-scale labels are mathtext)
            ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(counts))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter(
                [str(c) for c in counts]))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        _percent_axis(axes[0][0])
        _percent_axis(axes[0][1])
        axes[0][0].set_ylabel("share of rows (95% CI band)")
        axes[0][2].set_ylabel("tokens per request (o200k_base)")
        _legend(axes[0][2], title="variant · retriever", empty="no tool-count rows")
        return _svg(fig)


def toolspace_view(rows: Iterable[Row]) -> dict[str, Any] | None:
    """The ``toolspace`` section's data: ``svg`` (:func:`toolspace_chart`) and ``rows`` of
    text cells (the template escapes every one), or None when no row carries a tool
    count."""
    table = toolspace_table(rows)
    if table.empty:
        return None
    cells = []
    for r in table.to_dict("records"):
        cells.append([r["provider"], r["variant"], r["retriever"], str(r["tools"]), str(r["n"]),
                      format_rate(r["selection"], r["selection_low"], r["selection_high"],
                                  r["selection_n"]),
                      format_rate(r["retrieved_all"], r["retrieved_all_low"],
                                  r["retrieved_all_high"], r["retrieved_all_n"]),
                      format_rate(r["not_retrieved"], r["not_retrieved_low"],
                                  r["not_retrieved_high"], r["not_retrieved_n"]),
                      format_rate(r["confused"], r["confused_low"], r["confused_high"],
                                  r["confused_n"]),
                      "-" if pd.isna(r["tokens"]) else f"{r['tokens']:.0f}"])
    return {"svg": toolspace_chart(table), "rows": cells}
