"""The self-contained HTML report (jinja2 with autoescaping, charts as SVG data URIs).

Safety (model output is untrusted): every text goes through jinja2's autoescaping; the
drill-down rows travel as JSON inside ``<script type="application/json">`` with ``<``, ``>``,
``&``, U+2028 and U+2029 escaped (:func:`script_json`) and the page script shows them with
``textContent`` only. A Content-Security-Policy allows no network, no plugin and only the
page's own script (by hash), so even an escaping bug could neither run script nor fetch.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from importlib import resources
import secrets
from typing import IO, Any, Iterator, Mapping, Sequence

import jinja2
import pandas as pd
from markupsafe import Markup

from bench.report import charts
from bench.compare.core import Comparison
from bench.report.comparison import comparison_view
from bench.report.execution import execution_notes
from bench.report.episodes import (FACTOR_NAMES, condition_summary, episodes_section,
                                   factor_pairs,
                                   factor_success)
from bench.report.answer_views import confusion_matrices, top_errors_table
from bench.report.data import (LoadedRun, all_rows, draft_variants, frame_of, incomplete_runs,
                               now_utc, renamed_tools, run_metadata, variant_order)
from bench.report.drilldown import Drilldown, drilldown_rows
from bench.report.rates import (bucket_section, group_metrics, group_rates, headline,
                                shown_metrics, split_statement)
from bench.report.pertool import METHOD_NOTE, pairs_view, per_tool_groups
from bench.report.table import bounds, bucket_view, format_rate
from bench.report.toolspace import toolspace_view
from bench.stats.codes import error_code_counts

_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                 "\u2028": "\\u2028", "\u2029": "\\u2029"})


def script_json(data: Any) -> Markup:
    """JSON text safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026`` (so no ``</script>`` or
    ``<!--`` can end or alter the element; JSON.parse restores them) and U+2028/U+2029 are
    escaped too (line terminators in older JavaScript). Lone surrogates stay ``\\udXXX``
    escapes. The result holds none of ``<>&``, which is why it may be marked safe.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      default=str)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return Markup(text.translate(_SCRIPT_ESCAPES))


# Rows of the drill-down encoded per piece written (bounds the text held at once).
DRILLDOWN_PIECE_ROWS = 500


def drilldown_json(runs: Sequence[LoadedRun], anchors: Mapping[str, str] | None = None,
                   piece_rows: int = DRILLDOWN_PIECE_ROWS) -> Iterator[str]:
    """:func:`bench.report.drilldown.drilldown` as :func:`script_json` text, in pieces of
    ``piece_rows`` rows: joined, the pieces are one JSON object equal to the drill-down
    (``rows`` first, the lookups the rows index into last), and no piece holds ``<>&``. The
    rows are made as they are written, so a large run's page never holds them all."""
    builder = Drilldown(runs, anchors)
    yield '{"rows":['
    first = True
    piece: list[list[Any]] = []
    for row in drilldown_rows(runs, builder):
        piece.append(row)
        if len(piece) == piece_rows:
            yield ("" if first else ",") + str(script_json(piece))[1:-1]
            first, piece = False, []
    if piece:
        yield ("" if first else ",") + str(script_json(piece))[1:-1]
    yield "]," + str(script_json(builder.tables()))[1:]


def svg_data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...``: shown through ``<img>``, where SVG never runs script."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bench.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["rate"] = lambda r, p: format_rate(r[f"{p}_rate"], *bounds(r, p),
                                                   r[f"{p}_n"])
    env.filters["rate_parts"] = _rate_parts
    env.filters["frac"] = lambda r, p: f"{r[f'{p}_k']}/{r[f'{p}_n']}" if r[f"{p}_n"] else ""
    env.filters["num"] = _number
    return env


def _rate_parts(record: Any, prefix: str) -> tuple[str, str]:
    """``("62.5%", "[51.2-72.6]")``: :func:`bench.report.table.format_rate` of a metric in an
    aggregate record, split so that the interval can go on its own line; ``("-", "")`` when
    no row applies."""
    text = format_rate(record[f"{prefix}_rate"], *bounds(record, prefix),
                       record[f"{prefix}_n"])
    rate, _, interval = text.partition(" ")
    return rate, interval


def _number(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return f"{value:,.{digits}f}"


def _sha256_b64(text: str) -> str:
    """The CSP source hash of an inline element's text."""
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _asset(name: str) -> str:
    return resources.files("bench.report").joinpath("templates", name).read_text("utf-8")


def pivot_groups(groups: pd.DataFrame) -> dict[str, Any]:
    """Lay out :func:`bench.report.rates.group_rates` output as a grid for the page.

    Returns:
        ``{"columns": ["variant" or "provider · variant", ...], "rows": [{"group": str,
        "cases": int, "cells": [aggregate record or None per column]}]}``.
    """
    if groups.empty:
        return {"columns": [], "rows": []}
    pairs = list(dict.fromkeys(zip(groups["provider"], groups["variant"])))
    providers = {p for p, _ in pairs}
    columns = [v if len(providers) == 1 else f"{p} · {v}" for p, v in pairs]
    rows = []
    for name, part in groups.groupby("group", sort=False):
        records = {(r["provider"], r["variant"]): r for r in part.to_dict("records")}
        rows.append({"group": name, "cases": int(part["cases"].max()),
                     "cells": [records.get(pair) for pair in pairs]})
    return {"columns": columns, "rows": rows}


def _renamed_groups(view: dict[str, Any], renamed: Mapping[str, str]) -> dict[str, Any]:
    """:func:`pivot_groups`' view with each renamed tool shown as ``new (was old)``."""
    from bench.stats.pertool import shown_tool

    if renamed:
        for row in view["rows"]:
            row["group"] = shown_tool(str(row["group"]), renamed)
    return view


def confusion_charts(frame: pd.DataFrame, order: Sequence[str]) -> list[dict[str, str]]:
    """Heatmaps of :func:`bench.stats.aggregate.selection_confusion`, one per
    :func:`bench.report.answer_views.confusion_matrices` matrix: every panel has the same
    rows and columns (:func:`~bench.report.answer_views.confusion_layout`); every expected
    tool has a column; chosen names beyond
    :data:`~bench.report.answer_views.MAX_CONFUSION_COLUMNS` (made-up names can be many) are
    summed into one ``(other N)`` column.

    Returns:
        ``[{"label": str, "uri": data URI}]``.
    """
    return [{"label": label, "uri": svg_data_uri(charts.heatmap(
        matrix, label, "chosen tool", "expected tool"))}
        for label, matrix in confusion_matrices(frame, order)]


def render_html(runs: Sequence[LoadedRun], title: str,
                comparison: Comparison | None = None) -> str:
    """The report page for ``runs`` as one HTML string (no external resources):
    :func:`write_html` into memory.

    Args:
        runs: loaded runs (see :func:`bench.report.data.load_runs`).
        title: the page title (escaped).
        comparison: the comparison to show (see
            :func:`bench.report.comparison.choose_comparison`), or None.

    Returns:
        HTML text, UTF-8 ready.
    """
    buffer = io.StringIO()
    write_html(runs, title, buffer, comparison)
    return buffer.getvalue()


def write_html(runs: Sequence[LoadedRun], title: str, out: IO[str],
               comparison: Comparison | None = None) -> None:
    """Write the report page for ``runs`` to ``out`` (a text stream), the drill-down rows
    streamed (:func:`drilldown_json`): the page is rendered around a placeholder, then
    written head, rows, tail, so a large run's page is never held whole in memory.

    Args:
        runs: loaded runs (see :func:`bench.report.data.load_runs`).
        title: the page title (escaped).
        out: where the HTML text goes (UTF-8 when it is a file).
        comparison: the comparison to show, or None.
    """
    frame = frame_of(runs)
    order = variant_order(runs)
    summary = headline(runs, frame)
    metrics = shown_metrics(summary)
    episodes = episodes_section(runs)
    chart_uris = _ablation_charts(summary, bool(episodes))
    factors = _factors_view(runs) if episodes else None
    single = _single_answers(runs, frame) if episodes else frame
    renamed, drafts = renamed_tools(runs), draft_variants(runs)
    many_tools = _toolspace(runs)
    by_tool = group_rates(runs, "tool", frame)
    by_tag = group_rates(runs, "tag", frame)
    script, style = _asset("report.js"), _asset("report.css")
    counts = _error_counts(runs, order)
    # no escaped text can hold it: it is made of letters and digits chosen now
    placeholder = f"bench-drilldown-{secrets.token_hex(16)}"
    buckets = bucket_section(runs, frame)  # rows of datasets whose kappa allows, and why
    page = _environment().get_template("report.html.j2").render(
        title=title,
        generated_at=now_utc(),
        run_ids=[run.run_id for run in runs],
        split=split_statement(runs),
        execution_notes=[(f"{run.run_id}: " if len(runs) > 1 else "") + note for run in runs
                         for note in execution_notes(run.manifest.execution,
                                                     run.rows.store.dir)],
        buckets=bucket_view(buckets[0]),
        bucket_agreement=buckets[1],
        incomplete=incomplete_runs(runs),
        summary=summary.to_dict("records"),
        metrics=metrics,
        cost_column="cost_usd" if "cost_usd" in summary else None,
        reasoning_column="mean_reasoning_tokens" if "mean_reasoning_tokens" in summary
        else None,
        bootstrap=any(c.endswith("_boot_low") for c in summary.columns),
        charts=chart_uris,
        by_tool=_renamed_groups(pivot_groups(by_tool), renamed),
        by_tag=pivot_groups(by_tag),
        group_metrics=shown_metrics(by_tool, group_metrics()),
        comparison=comparison_view(comparison) if comparison else None,
        metadata=[run_metadata(run) for run in runs],
        error_codes=sorted({code for g in counts for code in g["counts"]}),
        error_counts=counts,
        confusion=confusion_charts(single, order),
        # per tool: episodes count too, by their trajectories' calls (bench.stats.pertool)
        per_tool=per_tool_groups(frame, order, renamed, drafts),
        per_tool_note=METHOD_NOTE,
        confusion_pairs=pairs_view(frame, renamed),
        renamed=sorted(renamed.items()),
        drafts=drafts,
        top_errors=top_errors_table(single, order),
        episodes=episodes,
        factors=factors,
        toolspace=many_tools,
        rows_json=Markup(placeholder),  # the rows are streamed in its place below
        style=Markup(style),  # package files, not data
        script=Markup(script),
        style_hash=_sha256_b64(style),
        script_hash=_sha256_b64(script),
    )
    head, tail = page.split(placeholder, 1)
    out.write(head)
    del page
    for piece in drilldown_json(runs, episodes["anchors"] if episodes else None):
        out.write(piece)
    out.write(tail)


def _ablation_charts(summary: pd.DataFrame, episodes: bool) -> dict[str, str]:
    """The page's ablation and Pareto charts as data URIs (``lines``, ``tokens``,
    ``pareto``): the primary metrics' panels, and task success when the run has episodes."""
    panels = charts.ablation_metrics() + [
        m for m in shown_metrics(summary, ["task_success"]) if episodes]
    return {
        "lines": svg_data_uri(charts.ablation_chart(summary, "mean_lines",
                                                    "description lines per tool (mean)",
                                                    panels)),
        "tokens": svg_data_uri(charts.ablation_chart(summary, "tool_definition_tokens",
                                                     "tool-definition tokens", panels)),
        "pareto": svg_data_uri(charts.pareto_chart(summary)),
    }


def _factors_view(runs: Sequence[LoadedRun]) -> dict[str, Any]:
    """The episodes' factor section: its chart (a data URI), factor names, the success rate
    per factor level, per condition, and the paired differences between levels."""
    table = factor_success(runs)
    return {"uri": svg_data_uri(charts.factor_chart(table, FACTOR_NAMES)),
            "names": list(FACTOR_NAMES),
            "rows": [[r["factor"], r["level"], r["provider"], f"{r['k']}/{r['n']}",
                      format_rate(r["rate"], r["low"], r["high"], r["n"])]
                     for r in table.to_dict("records")],
            "conditions": [{**c, "rate_text": format_rate(c["rate"], c["low"],
                                                          c["high"], c["n"])}
                           for c in condition_summary(runs)],
            "pairs": [[p["factor"], f"{p['level']} vs {p['base']}", p["provider"],
                       str(p["pairs"]), f"{p['base_only']}/{p['level_only']}",
                       f"{100 * p['diff']:+.1f} [{100 * p['diff_low']:+.1f}, "
                       f"{100 * p['diff_high']:+.1f}]", f"{p['p_value']:.3g}"]
                      for p in factor_pairs(runs)]}


def _error_counts(runs: Sequence[LoadedRun], order: Sequence[str]) -> list[dict[str, Any]]:
    """Error-code counts per (provider, variant) (:func:`bench.stats.codes.error_code_counts`),
    by provider, variants in ``order``."""
    counts = error_code_counts(all_rows(runs))
    rank = {name: i for i, name in enumerate(order)}
    counts.sort(key=lambda g: (g["provider"], rank.get(g["variant"], len(rank))))
    return counts


def _single_answers(runs: Sequence[LoadedRun], frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without its episode rows: a single answer's views (confusion, argument
    errors) leave them out, an episode's calls live in its trajectory, not in one parsed
    answer."""
    return frame[~frame["key"].isin({run.label(key) for run in runs
                                     for key in run.stats.episode_keys})]


def _toolspace(runs: Sequence[LoadedRun]) -> dict[str, Any] | None:
    """The tool-space section (:func:`bench.report.toolspace.toolspace_view`, its chart as
    a data URI), or None when no row carries a tool count."""
    many_tools = toolspace_view(all_rows(runs))
    if many_tools is None:
        return None
    return {"uri": svg_data_uri(many_tools["svg"]), "rows": many_tools["rows"]}
