"""``bench report``: write an HTML report, a Markdown summary or JUnit XML for stored runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Annotated, Optional

import typer

from bench.errors import BenchError
from bench.plural import noun
from bench.project import Project
from bench.report.paths import MAX_REPORT_NAME, ReportFormat, compare_suffix, report_path
from bench.store.files import atomic_writer


def report(
    run_ids: Annotated[list[str], typer.Argument(help="Run ids under reports/runs/.")],
    name: Annotated[Optional[str], typer.Option(
        help="Report folder under reports/ (default: the run ids joined by '+', then "
             "'.A+B' with --compare A,B).")] = None,
    fmt: Annotated[ReportFormat, typer.Option(
        "--format", "-f", help="html (one self-contained page), md (a summary for a PR "
                               "comment) or junit (one testcase per row).")] = ReportFormat.html,
    compare: Annotated[Optional[str], typer.Option(
        help="Compare these two variants, e.g. l3,l30 (default: the two runs, or the two "
             "variants, when the report has exactly two).")] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", help="Write here instead of reports/<name>/; '-' prints to stdout.")]
    = None,
) -> None:
    """Write a report of one or more stored runs (HTML by default)."""
    from bench.report.data import load_runs

    from bench.report.comparison import choose_comparison

    project = Project.from_env()  # the command line's edge
    runs = load_runs(run_ids, project)
    pair = [p.strip() for p in compare.split(",")] if compare else None
    comparison = None if fmt is ReportFormat.junit else choose_comparison(runs, pair)
    if comparison is None and len(runs) == 2 and fmt is not ReportFormat.junit:
        variants = [set(run.stats.variants) for run in runs]
        shared = variants[0] & variants[1]
        why = (f"no (provider, case, trial) in common on the variants both have "
               f"({', '.join(sorted(shared))})" if shared
               else "no variant in common, and they are not one variant each")
        typer.echo(f"note: no comparison section: {runs[0].run_id} and {runs[1].run_id} have "
                   f"{why}; --compare A,B picks two variants", err=True)
    title_ids = [run.run_id for run in runs]
    if not name:
        joined = "+".join(title_ids)
        name = joined if len(joined) <= 120 else f"{title_ids[0]}+{len(title_ids) - 1}-more"
        if pair and fmt is not ReportFormat.junit:  # its own folder: not the plain report's
            suffix = compare_suffix(pair)
            name = name[:MAX_REPORT_NAME - len(suffix)] + suffix
    title = f"bench report: {', '.join(title_ids)}"
    path = None if output else report_path(name, fmt, project)  # checks the name
    if fmt is ReportFormat.html:
        from bench.report.html import write_html

        def write(handle: IO[str]) -> None:
            write_html(runs, title, handle, comparison)
    elif fmt is ReportFormat.md:
        from bench.report.markdown import render_markdown
        try:
            html_path: Path | None = report_path(name, ReportFormat.html, project)
        except BenchError:  # a name only -o makes irrelevant: no HTML report to link
            html_path = None
        shown = html_path.relative_to(project.root) if html_path else None
        text = render_markdown(runs, title, str(shown) if html_path and html_path.exists()
                               else None, comparison)

        def write(handle: IO[str]) -> None:
            handle.write(text)
    else:
        from bench.report.junit import write_junit

        def write(handle: IO[str]) -> None:
            write_junit(runs, title, handle)
    if output == "-":
        write(sys.stdout)
        return
    target = Path(output) if output else path
    assert target is not None
    # written as it is made (a large run's page is never held whole), replaced atomically
    with atomic_writer(target) as handle:
        write(handle)
    size = target.stat().st_size
    typer.echo(f"wrote {target} ({size:,} {noun(size, 'byte')})", err=True)
