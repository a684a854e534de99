"""A compact Markdown summary of runs (for a pull-request comment or a CI step summary)."""

from __future__ import annotations

import html
from typing import Any, Sequence

import pandas as pd

from bench.compare.core import Comparison
from bench.report.comparison import comparison_view
from bench.plural import count
from bench.report.data import LoadedRun, all_rows, frame_of, incomplete_runs, row_outcome
from bench.report.rates import bucket_section, headline, shown_metrics, split_statement
from bench.report.episodes import condition_summary
from bench.report.table import bounds, bucket_view, format_pass_k, format_rate
from bench.stats.codes import error_code_counts


def md_cell(value: Any) -> str:
    """Text safe in a GitHub Markdown table cell: HTML-escaped (GitHub renders inline HTML),
    ``|`` escaped, newlines folded to spaces."""
    text = html.escape(" ".join(str(value).split()), quote=False)
    return text.replace("|", "\\|").replace("`", "\\`")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], right_from: int,
           right_to: int | None = None) -> list[str]:
    right = range(right_from, len(header) if right_to is None else right_to)
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return lines


def _episode_lines(runs: Sequence[LoadedRun]) -> list[str]:
    """The agent-episode summary: one table row per (provider, condition)
    (:func:`bench.report.episodes.condition_summary`); [] without episodes."""
    conditions = condition_summary(runs)
    if not conditions:
        return []
    total = sum(c["episodes"] for c in conditions)
    rows = [[c["provider"], c["variant"], c["episodes"],
             format_rate(c["rate"], c["low"], c["high"], c["n"]), format_pass_k(c["pass_k"]),
             "-" if c["steps"] is None else f"{c['steps']:.1f}",
             "-" if c["recovery"] is None else f"{c['recovery']:.2f}",
             ", ".join(f"{reason} {n}" for reason, n in c["stops"].items())]
            for c in conditions]
    lines = ["", f"**Agent episodes** ({count(total, 'episode')}; task success with 95% "
                 "Wilson intervals, trials counted as independent episodes; pass@k / pass^k: "
                 "unbiased estimates over k trials, k the fewest trials of a case, - with one "
                 "trial; recovery: mean over episodes that saw an error result)", ""]
    return lines + _table(["provider", "condition", "episodes", "task success (95% CI)",
                           "pass@k / pass^k (k trials)", "mean steps", "mean recovery",
                           "stop reasons"], rows, right_from=2, right_to=7)


def render_markdown(runs: Sequence[LoadedRun], title: str, report_path: str | None = None,
                    comparison: Comparison | None = None) -> str:
    """The summary: a warning line per run that is not complete (rows done / planned, see
    :func:`bench.report.data.incomplete_runs`), headline rates with 95% Wilson intervals per
    (provider, variant), pass / fail / unparseable counts (an episode passes when its task
    succeeded), an agent-episode table per condition when there are episodes
    (task success, pass@k / pass^k over trials or ``-``, mean steps and recovery, stop
    reasons), error-code counts and, when given,
    the comparison's lines.

    Args:
        runs: loaded runs.
        title: heading text.
        report_path: where the HTML report is (mentioned at the end), or None.
        comparison: a comparison to summarise (tests and the number of flipped cases).

    Returns:
        Markdown text ending in a newline.
    """
    frame = frame_of(runs)
    summary = headline(runs, frame)
    lines = [f"### {md_cell(title)}", ""]
    for run in incomplete_runs(runs):  # before any figure: they cover only the rows written
        lines += [f"> **Incomplete run: {run['done']} of {run['planned']} planned rows.** "
                  f"{md_cell(run['text'])}", ""]
    lines += [md_cell(split_statement(runs)), ""]
    lines += _headline_lines(runs, summary)
    lines += _bucket_lines(runs, frame)
    lines += _episode_lines(runs)
    lines += _error_code_lines(runs)
    if comparison is not None:
        lines += _comparison_lines(comparison)
    runs_text = ", ".join(f"`{md_cell(r.run_id)}` ({md_cell(r.manifest.status)}, "
                          f"commit `{md_cell(str(r.manifest.git_commit)[:12])}`)"
                          for r in runs)
    lines += ["", f"Runs: {runs_text}."]
    if report_path:
        lines.append(f"Full report: `{md_cell(report_path)}`.")
    return "\n".join(lines) + "\n"


def _headline_lines(runs: Sequence[LoadedRun], summary: pd.DataFrame) -> list[str]:
    """The headline table: per (provider, variant) of ``summary``
    (:func:`bench.report.rates.headline`), its cases, rates with 95% intervals,
    tool-definition tokens, cost and pass / fail / unparseable counts."""
    metrics = shown_metrics(summary)
    rows = []
    outcomes: dict[tuple[str, str], dict[str, int]] = {}
    for row in all_rows(runs):
        counts = outcomes.setdefault((row.provider, row.variant), {})
        outcome = row_outcome(row)
        counts[outcome] = counts.get(outcome, 0) + 1
    for record in summary.to_dict("records"):
        cells = [record["provider"], record["variant"], record["cases"]]
        cells += [format_rate(record[f"{p}_rate"], *bounds(record, p), record[f"{p}_n"])
                  for p, _ in metrics]
        tokens = record["tool_definition_tokens"]
        cells.append("-" if tokens != tokens or tokens is None else f"{int(tokens):,}")
        if "cost_usd" in record:
            cost = record["cost_usd"]
            cells.append("-" if cost is None or cost != cost else f"{cost:.4f}")
        counts = outcomes.get((record["provider"], record["variant"]), {})
        cells.append(f"{counts.get('pass', 0)} / {counts.get('fail', 0)} / "
                     f"{counts.get('unparseable', 0)}")
        rows.append(cells)
    header = ["provider", "variant", "cases", *[f"{label} (95% CI)" for _, label in metrics],
              "tool-def tokens", *(["cost USD"] if "cost_usd" in summary else []),
              "pass / fail / unparseable"]
    return _table(header, rows, right_from=2)


def _bucket_lines(runs: Sequence[LoadedRun], frame: pd.DataFrame) -> list[str]:
    """The per-bucket table (folded) and the agreement it rests on, or why it is not
    shown (:func:`bench.report.rates.bucket_section`); none without buckets."""
    lines: list[str] = []
    bucket_rows, agreement = bucket_section(runs, frame)
    buckets = bucket_view(bucket_rows)
    if buckets:
        lines += ["", "<details><summary>per information bucket (the lowest description level "
                      "whose text carries what a case needs)</summary>", ""]
        lines += _table(["provider", "variant", "information", "cases",
                         *[f"{label} (95% CI)" for label in buckets["metrics"]]],
                        buckets["rows"], right_from=3)
        lines += ["", "</details>"]
    if agreement:  # the kappa beside the table, or why there is none
        lines += ["", *(f"{md_cell(line)}  " for line in agreement)]
    return lines


def _error_code_lines(runs: Sequence[LoadedRun]) -> list[str]:
    """The error-code counts per (provider, variant), folded; none without a code."""
    code_counts = error_code_counts(all_rows(runs))
    codes = sorted({c for g in code_counts for c in g["counts"]})
    if not codes:
        return []
    lines = ["", "<details><summary>error codes (rows with each code)</summary>", ""]
    lines += _table(["provider", "variant", *codes],
                    [[g["provider"], g["variant"], *[g["counts"].get(c, 0) for c in codes]]
                     for g in code_counts], right_from=2)
    return lines + ["", "</details>"]


def _comparison_lines(comparison: Comparison) -> list[str]:
    """The comparison's tests (group, metric, A, B, B-A with its interval, Holm p, verdict)
    and the number of flipped pairs each way."""
    view = comparison_view(comparison)
    keep = [0, 1, 3, 4, 5, 8, 10]  # group, metric, A, B, B-A [CI], p (Holm), verdict
    lines = ["", f"**Comparison: {md_cell(view['title'])}** ({md_cell(view['settings'])})",
             ""]
    lines += _table([view["tests"]["columns"][i] for i in keep],
                    [[row[i] for i in keep] for row in view["tests"]["rows"]], right_from=2,
                    right_to=len(keep) - 1)
    lost = sum(f.direction == "lost" for f in comparison.flips)
    return lines + ["", f"Flipped (case, trial, metric) pairs: {lost} right in A but wrong "
                        f"in B, {len(comparison.flips) - lost} wrong in A but right in B."]
