"""Report charts drawn with matplotlib and returned as SVG text.

Labels can come from model output (a hallucinated tool name in the confusion matrix), so
mathtext parsing is off and the report embeds each SVG as an ``<img>`` data URI, where a
browser never runs scripts.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Any, Sequence

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench.scoring.registry import get_metric, primary_metrics  # noqa: E402
from bench.stats.frontier import pareto_frontier  # noqa: E402
from bench.report.table import bounds  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

STYLE: dict[RcKeyType, str | bool | float] = {
    "svg.fonttype": "none",        # text stays text: smaller files
    "svg.hashsalt": "bench",       # stable element ids: identical input, identical file
    "text.parse_math": False,      # "$" in a label is a dollar sign, not TeX
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


def ablation_metrics() -> list[tuple[str, str]]:
    """(metric, title) of the registry's primary metrics: the ablation charts' panels."""
    return [(name, get_metric(name).title) for name in primary_metrics()]


def _svg(fig: plt.Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue()


def _series(summary: pd.DataFrame) -> str:
    """The column that names a chart's lines: ``series`` (run and provider, when a report
    holds several runs) if present, else ``provider``."""
    return "series" if "series" in summary else "provider"


def _short(label: Any, limit: int = 28) -> str:
    """A tick label cut to ``limit`` characters (made-up tool names can be long)."""
    text = " ".join(str(label).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _percent_axis(ax: plt.Axes) -> None:
    ax.set_ylim(0, 100)
    ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(decimals=0))


def _legend(ax: Any, *, empty: str, title: str | None = None) -> None:
    """The legend to the right of ``ax``; when nothing was plotted (e.g. rows without token
    counts), the text ``empty`` in the panel instead (matplotlib warns on an empty legend)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(title=title, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    else:
        ax.text(0.5, 0.5, empty, transform=ax.transAxes, ha="center", va="center",
                fontsize=8, color="0.4")


def ablation_chart(summary: pd.DataFrame, x_column: str, x_label: str,
                   metrics: Sequence[tuple[str, str]] | None = None) -> str:
    """Accuracy against description size, one line per provider with its 95% interval band.

    Args:
        summary: :func:`bench.report.rates.headline` output (rates of
            :func:`bench.stats.aggregate.aggregate`) with ``x_column``; one row per
            (provider, variant).
        x_column: the size column, e.g. ``mean_lines`` (lines per tool) or
            ``tool_definition_tokens`` (tokens).
        x_label: the x axis title.
        metrics: (metric, title) pairs; one panel each, y in percent (default:
            :func:`ablation_metrics`).

    Returns:
        SVG text. Rows with a missing x value or rate are left out.
    """
    metrics = ablation_metrics() if metrics is None else metrics
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.2),
                                 squeeze=False)
        for ax, (prefix, title) in zip(axes[0], metrics):
            # a metric no row applies to has no rate column (a run of no-call cases only
            # has no argument rate): its panel stays empty
            groups = summary.groupby(_series(summary), sort=False) \
                if f"{prefix}_rate" in summary.columns else ()
            for index, (provider, group) in enumerate(groups):
                group = group.dropna(subset=[x_column, f"{prefix}_rate"]).sort_values(x_column)
                if group.empty:
                    continue
                x = group[x_column].astype(float).to_numpy()
                line, = ax.plot(x, group[f"{prefix}_rate"] * 100, marker="o", label=provider)
                low, high = bounds(group, prefix)
                ax.fill_between(x, low * 100, high * 100,
                                color=line.get_color(), alpha=0.15, linewidth=0)
                if index == 0:  # variant names once: the providers share them
                    for xi, yi, name in zip(x, group[f"{prefix}_rate"] * 100, group["variant"]):
                        ax.annotate(str(name), (xi, yi), textcoords="offset points",
                                    xytext=(4, 4), fontsize=7)
            ax.set_title(title)
            ax.set_xlabel(x_label)
            _percent_axis(ax)
        axes[0][0].set_ylabel("accuracy (95% CI band)")
        _legend(axes[0][-1], title="run · provider" if "series" in summary else "provider",
                empty=f"no rows with {x_label}")
        return _svg(fig)


def pareto_chart(summary: pd.DataFrame, metric: str = "selection_correct",
                 metric_label: str = "tool selection") -> str:
    """Accuracy against tool-definition tokens for every (provider, variant), with the
    Pareto frontier (:func:`bench.stats.frontier.pareto_frontier`) drawn as a step line.

    Args:
        summary: :func:`bench.report.rates.headline` output.
        metric: the metric to plot (``<metric>_rate`` and its interval columns).
        metric_label: y axis title.

    Returns:
        SVG text.
    """
    if f"{metric}_rate" not in summary or "tool_definition_tokens" not in summary:
        summary = summary.iloc[0:0].assign(**{f"{metric}_rate": [], f"{metric}_low": [],
                                              f"{metric}_high": [],
                                              "tool_definition_tokens": []})
    # no row applies (a run of episodes only): an empty chart that says so
    data = summary.dropna(subset=["tool_definition_tokens", f"{metric}_rate"])
    tokens = data["tool_definition_tokens"].astype(float).tolist()
    rates = data[f"{metric}_rate"].astype(float).tolist()
    front = pareto_frontier(tokens, rates)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(5.6, 3.4))
        for provider, group in data.groupby(_series(data), sort=False):
            low, high = bounds(group, metric)
            ax.errorbar(group["tool_definition_tokens"].astype(float), group[f"{metric}_rate"] * 100,
                        yerr=np.clip([(group[f"{metric}_rate"] - low) * 100,  # rounding: >= 0
                                      (high - group[f"{metric}_rate"]) * 100], 0, None),
                        fmt="o", capsize=3, label=provider)
        for x, y, name in zip(tokens, rates, data["variant"]):
            ax.annotate(str(name), (x, y * 100), textcoords="offset points", xytext=(4, 4),
                        fontsize=7)
        points = sorted((x, y) for x, y, on in zip(tokens, rates, front) if on)
        if points:
            xs, ys = zip(*points)
            ax.step(xs, np.array(ys) * 100, where="post", color="black", linewidth=1,
                    linestyle="--", marker="o", markersize=11, markerfacecolor="none",
                    label="Pareto frontier (ringed)")
        ax.set_xlabel("tool-definition tokens")
        ax.set_ylabel(f"{metric_label} (95% CI)")
        _percent_axis(ax)
        _legend(ax, empty=f"no rows with tool-definition tokens and {metric_label}")
        return _svg(fig)


def heatmap(matrix: pd.DataFrame, title: str, x_label: str, y_label: str) -> str:
    """A count matrix as a heatmap with the count in each non-empty cell.

    Colours run from white at 0 to the darkest blue at the largest count, with a colour bar;
    a matrix whose cells all hold one value (a single cell, say) has nothing for a scale to
    tell apart, so it gets no colour bar: its cells are drawn in one colour (white for
    zeros) and read by the counts written in them.

    Args:
        matrix: counts; index = rows (e.g. expected tool), columns = predicted tool.
        title, x_label, y_label: chart texts.

    Returns:
        SVG text (an empty matrix gives a chart saying so).
    """
    with plt.rc_context({**STYLE, "axes.grid": False}):
        rows, cols = matrix.shape
        fig, ax = plt.subplots(figsize=(max(3.5, 0.65 * cols + 2.2), max(2.5, 0.4 * rows + 1.4)))
        if rows == 0 or cols == 0:
            ax.text(0.5, 0.5, "no data", ha="center", va="center")
            ax.set_axis_off()
            return _svg(fig)
        values = matrix.to_numpy(dtype=float)
        finite = values[~np.isnan(values)]
        uniform = finite.size == 0 or finite.min() == finite.max()
        # counts: the scale starts at 0 (imshow's default, min to max, would make the
        # smallest count of a matrix white however large it is)
        image = ax.imshow(values, cmap="Blues", aspect="auto", vmin=0,
                          vmax=max(float(finite.max()) if finite.size else 0.0, 1.0))
        ax.set_xticks(range(cols), [_short(c) for c in matrix.columns], rotation=40, ha="right")
        ax.set_yticks(range(rows), [_short(r) for r in matrix.index])
        peak = values.max() if values.size else 0
        for i in range(rows):
            for j in range(cols):
                if values[i, j] and not math.isnan(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="white" if values[i, j] > peak * 0.6 else "black")
        ax.set_title(title)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        if not uniform:
            bar = fig.colorbar(image, ax=ax, shrink=0.8)
            bar.locator = matplotlib.ticker.MaxNLocator(integer=True)  # counts
            bar.update_ticks()
        return _svg(fig)


def factor_chart(table: pd.DataFrame, factors: Sequence[str],
                 y_label: str = "task success (95% Wilson CI)") -> str:
    """Task success against each factor: one panel per factor, its settings on the x axis,
    one marker per provider with its 95% interval as an error bar (providers side by side).

    Args:
        table: :func:`bench.report.episodes.factor_success` output (``factor``, ``level``,
            ``provider``, ``rate``, ``low``, ``high``; fractions), levels in display order.
        factors: the panels, in order (a factor without rows gets a panel saying so).
        y_label: the first panel's y axis title.

    Returns:
        SVG text.
    """
    providers = list(dict.fromkeys(table["provider"])) if not table.empty else []
    width = 0.6 / max(1, len(providers))
    handles: dict[str, Any] = {}  # one legend entry per provider, whichever panel has it
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(factors), figsize=(2.9 * len(factors), 3.2),
                                 squeeze=False, sharey=True)
        for ax, factor in zip(axes[0], factors):
            part = table[table["factor"] == factor] if not table.empty else table
            levels = list(dict.fromkeys(part["level"])) if not part.empty else []
            for index, provider in enumerate(providers):
                rows = part[part["provider"] == provider]
                if rows.empty:
                    continue
                x = np.array([levels.index(level) for level in rows["level"]], dtype=float)
                x += (index - (len(providers) - 1) / 2) * width
                rate = rows["rate"].astype(float).to_numpy() * 100
                low = rows["low"].astype(float).to_numpy() * 100
                high = rows["high"].astype(float).to_numpy() * 100
                bars = ax.errorbar(x, rate, yerr=np.clip([rate - low, high - rate], 0, None),
                                   fmt="o", capsize=3, color=f"C{index}")
                handles.setdefault(_short(provider, 40), bars)
            ax.set_xticks(range(len(levels)), [_short(level, 18) for level in levels],
                          rotation=30 if len(levels) > 3 else 0,
                          ha="right" if len(levels) > 3 else "center")
            ax.set_xlim(-0.6, max(len(levels), 1) - 0.4)
            ax.set_title(factor + ("" if len(levels) != 1 else " (one setting)"))
            if not levels:
                ax.text(0.5, 0.5, "no episodes", transform=ax.transAxes, ha="center",
                        va="center", fontsize=8, color="0.4")
            _percent_axis(ax)
            ax.set_ylim(-3, 103)  # markers at 0% and 100% stay whole
        axes[0][0].set_ylabel(y_label)
        if handles:
            axes[0][-1].legend(list(handles.values()), list(handles), title="provider",
                               fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
        return _svg(fig)
