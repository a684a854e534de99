"""The optimization's report, ``report.md`` and ``report.html``, built from one list of
sections so the two say the same: settings and verdict, rounds, candidates, the Pareto chart
(dev rate against tool-definition tokens), per-tool diffs with the ``dev`` cases each kept
edit fixed or broke, rejections, the held-out test and what every run cost.

Everything a model wrote (descriptions, reasons) is escaped in the HTML, and the chart is an
``<img>`` data URI, as in :mod:`bench.report.charts`.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from typing import Sequence

from bench.descriptions.diff import diff_variants
from bench.descriptions.variants import Variant
from bench.optimize.config import OptimizeConfig
from bench.optimize.records import OptimizeResult
from bench.optimize.workspace import Workspace
from bench.store.files import atomic_write_text


@dataclass
class Section:
    """One part of the report: a title, lines of text, an optional table, an optional code
    block (``diff`` text)."""

    title: str
    lines: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    code: str = ""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _summary(config: OptimizeConfig, result: OptimizeResult) -> Section:
    verdict = "ACCEPTED" if result.acceptance.accepted else "not accepted"
    lines = [f"Toolset `{result.toolset}`, start `{result.start}`, final `{result.final}` "
             f"(output variant `{result.output}`): **{verdict}**.",
             f"Target `{config.target}`, proposer `{config.proposer}`, dataset "
             f"`{config.dataset}`; metric `{config.metric}`, min gain {config.min_gain:.1%}, "
             f"margin {config.margin:.1%}, alpha {config.alpha}, token ratio at most "
             f"{config.max_tokens_ratio}.",
             f"The search stopped: {result.stop_reason}.",
             f"Requests sent: {result.requests}; billed: {result.billed_usd:.4f} USD; "
             f"wall time of the runs: {sum(r.seconds for r in result.runs):.1f} s."]
    lines += [f"Not accepted: {reason}." for reason in result.acceptance.reasons]
    return Section("Summary", lines)


def _rounds(result: OptimizeResult) -> Section:
    rows = [[str(r.round), r.current, _pct(r.current_dev_rate),
             ", ".join(f"{t}: {n}" for t, n in r.failures.items()) or "none",
             str(r.proposals), ", ".join(r.candidates) or "-", r.kept or "-"]
            for r in result.rounds]
    lines = [f"Round {r.round}: dev case `{case_id}` left out of the proposer's prompt: {why}."
             for r in result.rounds for case_id, why in r.withheld.items()]
    return Section("Rounds (dev)", lines, ["round", "from", "dev rate", "failures per tool",
                                        "proposals", "candidates", "kept"], rows)


def _candidates(result: OptimizeResult) -> Section:
    rows = [[c.name, str(c.round), ", ".join(c.tools) or "-",
             f"{c.tokens} ({c.token_ratio:.2f}x)",
             f"{c.dev_k}/{c.dev_n} ({_pct(c.dev_rate)})" if c.dev_n else "-",
             _pct(c.parent_rate), "-" if c.p_value is None else f"{c.p_value:.3g}",
             ", ".join(c.fixed) or "-", ", ".join(c.broke) or "-",
             "-" if c.restraint_calls is None else str(c.restraint_calls),
             "; ".join(c.flags) or "-", c.status + (" (Pareto)" if c.pareto else "")]
            for c in result.candidates]
    return Section("Candidates (dev, paired against their parent)",
                   ["McNemar p on dev is information only: dev chooses, test decides."],
                   ["name", "round", "edits", "tokens", "dev", "parent", "p (dev)",
                    "fixed", "broke", "calls on no-call/ask", "flags", "status"], rows)


def _rejections(result: OptimizeResult) -> Section:
    rows = [[str(r.round), r.tool, r.candidate or "-", r.kind, r.reason]
            for r in result.rejections]
    return Section("Rejections", [] if rows else ["None."],
                   ["round", "tool", "candidate", "kind", "reason"] if rows else [], rows)


def _diffs(result: OptimizeResult, variants: dict[str, Variant]) -> list[Section]:
    """One section per kept candidate: its parent -> it diff, reasons, dev flips."""
    out = []
    for c in result.candidates:
        if c.status != "kept" or c.parent not in variants or c.name not in variants:
            continue
        lines = [f"`{tool}`: {reason}" for tool, reason in c.reasons.items()]
        lines.append(f"dev cases fixed: {', '.join(c.fixed) or 'none'}; broke: "
                     f"{', '.join(c.broke) or 'none'}.")
        out.append(Section(f"Edit {c.name} (from {c.parent})", lines,
                           code=diff_markdown(variants[c.parent], variants[c.name])))
    return out


def _test(result: OptimizeResult) -> Section:
    acceptance = result.acceptance
    if not acceptance.tested:
        return Section("Held-out test", ["Not run: " + "; ".join(acceptance.reasons)])
    rows = [[t.provider, t.metric, str(t.n), _pct(t.rate_start), _pct(t.rate_final),
             f"{t.diff:+.1%}", str(t.b_only), str(t.a_only), f"{t.p_value:.3g}",
             f"{t.p_holm:.3g}", t.verdict] for t in acceptance.tests]
    lines = [f"Test cases fixed: {', '.join(acceptance.flips.get('fixed', [])) or 'none'}; "
             f"broke: {', '.join(acceptance.flips.get('broke', [])) or 'none'}.",
             f"Tool-definition tokens: {acceptance.token_ratio:.3f}x the start's."]
    lines += [f"Mean steps on {p}: {a:.2f} -> {b:.2f}." for p, (a, b) in
              acceptance.steps.items()]
    return Section("Held-out test (once, start vs final)", lines,
                   ["provider", "metric", "n", "start", "final", "diff", "fixed", "broke",
                    "p", "Holm p", "verdict"], rows)


def _costs(result: OptimizeResult) -> Section:
    rows = [[r.purpose, r.run_id, r.status, str(r.rows), str(r.requests), str(r.cache_hits),
             f"{r.billed_usd:.4f}", str(r.billed_tokens), f"{r.seconds:.2f}"]
            for r in result.runs]
    return Section("Runs and costs", [], ["purpose", "run", "status", "rows", "requests",
                                          "cache hits", "USD", "tokens", "seconds"], rows)


def sections(config: OptimizeConfig, result: OptimizeResult,
             variants: dict[str, Variant]) -> list[Section]:
    """The report's sections, in order."""
    return [_summary(config, result), _rounds(result), _candidates(result),
            *_diffs(result, variants), _rejections(result), _test(result), _costs(result)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(title: str, parts: Sequence[Section]) -> str:
    """The sections as Markdown."""
    out = [f"# {title}", ""]
    for part in parts:
        out += [f"## {part.title}", "", *[line + "  " for line in part.lines], ""]
        if part.header:
            out.append("| " + " | ".join(part.header) + " |")
            out.append("|" + "---|" * len(part.header))
            out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in part.rows]
            out.append("")
        if part.code:
            out += [part.code, ""]
    return "\n".join(out)


def to_html(title: str, parts: Sequence[Section], chart_svg: str) -> str:
    """The sections as one HTML page (every text escaped), the chart after the summary."""
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>"]
    for index, part in enumerate(parts):
        body.append(f"<h2>{esc(part.title)}</h2>")
        body += [f"<p>{esc(line)}</p>" for line in part.lines]
        if part.header:
            body.append("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in part.header)
                        + "</tr>")
            body += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
                     for row in part.rows]
            body.append("</table>")
        if part.code:
            body.append(f"<pre>{esc(part.code)}</pre>")
        if index == 0 and chart_svg:
            data = base64.b64encode(chart_svg.encode("utf-8")).decode("ascii")
            body.append(f'<h2>Pareto set (dev)</h2><img alt="dev rate against tool-definition '
                        f'tokens" src="data:image/svg+xml;base64,{data}">')
    style = ("body{font-family:sans-serif;max-width:80em;margin:2em auto}table{border-collapse:"
             "collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}"
             "pre{background:#f6f6f6;padding:8px;overflow:auto}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def pareto_svg(config: OptimizeConfig, result: OptimizeResult) -> str:
    """The dev rate of every evaluated, not rejected candidate against its tokens, with the
    Pareto frontier (:func:`bench.report.charts.pareto_chart`); "" when no candidate has a
    dev rate (no chart: the report says why in its rounds)."""
    import pandas as pd

    from bench.report.charts import pareto_chart
    from bench.scoring.registry import get_metric
    from bench.stats.intervals import wilson_interval
    metric = config.metric
    records = []
    for c in result.candidates:
        if c.status == "rejected" or not c.dev_n or c.dev_k is None:
            continue
        low, high = wilson_interval(c.dev_k, c.dev_n)
        records.append({"provider": "dev", "variant": c.name,
                        "tool_definition_tokens": c.tokens, f"{metric}_rate": c.dev_rate,
                        f"{metric}_low": low, f"{metric}_high": high})
    if not records:
        return ""
    return pareto_chart(pd.DataFrame.from_records(records), metric, get_metric(metric).title)


def write_report(workspace: Workspace, config: OptimizeConfig, result: OptimizeResult,
                 variants: dict[str, Variant]) -> None:
    """Write ``report.md`` and ``report.html`` into the optimization's folder."""
    title = f"bench optimize {result.opt_id}"
    parts = sections(config, result, variants)
    atomic_write_text(workspace.root / "report.md", to_markdown(title, parts))
    atomic_write_text(workspace.root / "report.html",
                      to_html(title, parts, pareto_svg(config, result)))


def diff_markdown(start: Variant, final: Variant) -> str:
    """The spec diff per tool (:func:`bench.descriptions.diff.diff_variants`) as Markdown:
    one section per changed tool, its changes, then the unified diff of its description."""
    lines: list[str] = []
    for tool in diff_variants(start.tools, final.tools):
        lines.append(f"### {tool.name}\n")
        for change in tool.changes:
            where = f" `{change.param}`" if change.param else ""
            lines.append(f"- {change.kind}{where}{': ' + change.detail if change.detail else ''}")
        if tool.description_diff:
            lines += ["", "```diff", *tool.description_diff, "```"]
        lines.append("")
    return "\n".join(lines) if lines else "No change.\n"
