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
import json
from importlib import resources
from typing import Any, Sequence

import jinja2
import pandas as pd
from markupsafe import Markup

from bench.report import charts
from bench.report.data import (LoadedRun, all_rows, drilldown, group_summaries, headline,
                               now_utc, run_metadata, shown_metrics, variant_order)
from bench.report.table import format_rate
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


def svg_data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...``: shown through ``<img>``, where SVG never runs script."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bench.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["rate"] = lambda r, p: format_rate(r[f"{p}_rate"], r[f"{p}_low"],
                                                   r[f"{p}_high"], r[f"{p}_n"])
    env.filters["frac"] = lambda r, p: f"{r[f'{p}_k']}/{r[f'{p}_n']}" if r[f"{p}_n"] else ""
    env.filters["num"] = _number
    return env


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
    """Lay out :func:`bench.report.data.group_summaries` output as a grid for the page.

    Returns:
        ``{"columns": ["provider · variant", ...], "rows": [{"group": str, "cases": int,
        "cells": [summary record or None per column]}]}``.
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


def render_html(runs: Sequence[LoadedRun], title: str,
                comparison: dict[str, Any] | None = None) -> str:
    """The report page for ``runs`` as one HTML string (no external resources).

    Args:
        runs: loaded runs (see :func:`bench.report.data.load_runs`).
        title: the page title (escaped).
        comparison: a JSON-like comparison of two variants to show, or None.

    Returns:
        HTML text, UTF-8 ready.
    """
    summary = headline(runs)
    metrics = shown_metrics(summary)
    chart_uris = {
        "lines": svg_data_uri(charts.ablation_chart(summary, "mean_lines",
                                                    "description lines per tool (mean)")),
        "tokens": svg_data_uri(charts.ablation_chart(summary, "tool_definition_tokens",
                                                     "tool-definition tokens")),
        "pareto": svg_data_uri(charts.pareto_chart(summary)),
    }
    by_tool = group_summaries(runs, "tool")
    by_tag = group_summaries(runs, "tag")
    script, style = _asset("report.js"), _asset("report.css")
    counts = error_code_counts(all_rows(runs))
    order = {name: i for i, name in enumerate(variant_order(runs))}
    counts.sort(key=lambda g: (g["provider"], order.get(g["variant"], len(order))))
    cost_column = "cost_usd" if "cost_usd" in summary else None
    return _environment().get_template("report.html.j2").render(
        title=title,
        generated_at=now_utc(),
        run_ids=[run.run_id for run in runs],
        summary=summary.to_dict("records"),
        metrics=metrics,
        cost_column=cost_column,
        charts=chart_uris,
        by_tool=pivot_groups(by_tool),
        by_tag=pivot_groups(by_tag),
        group_metrics=[m for m in metrics if m[0] in ("selection", "arguments",
                                                      "execution_success")],
        comparison=comparison,
        metadata=[run_metadata(run) for run in runs],
        rows_json=script_json(drilldown(runs)),
        error_codes=sorted({code for g in counts for code in g["counts"]}),
        error_counts=counts,
        confusion=None,
        top_errors=None,
        style=Markup(style),  # package files, not data
        script=Markup(script),
        style_hash=_sha256_b64(style),
        script_hash=_sha256_b64(script),
    )
