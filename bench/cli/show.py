"""``bench show RUN``: the per-variant table of a stored run and its status; with
``--per-tool``, each tool's selection figures (:mod:`bench.report.pertool`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Sequence

import typer
from rich.console import Console

from bench.cli.output import err, out
from bench.cli.summary import print_summary
from bench.errors import BenchError
from bench.plural import count

if TYPE_CHECKING:
    from bench.results import Manifest
    from bench.store import RunStore


def show(run_id: Annotated[str, typer.Argument(help="A run id under reports/runs/.")],
         per_tool: Annotated[bool, typer.Option(
             "--per-tool", help="Also print each tool's selection precision, recall and F1 "
                                "with intervals, required and forbidden calls, and the "
                                "confusion pairs.")] = False) -> None:
    """Print the per-variant table of a stored run, and its status with the rows counted in
    its results.jsonl against the rows planned. Rows left out are named on stderr: later
    copies of a key (the first counts), rows outside the run's plan or shard, a last line cut
    mid-way."""
    from bench.project import Project
    from bench.replan import planned_keys
    from bench.store import CRASHED, RowsRead

    project = Project.from_env()  # the command line's edge
    store = project.store(run_id)
    manifest = store.load_manifest()
    order = manifest.config.get("variants")
    if not isinstance(order, list):
        raise BenchError("corrupt manifest: must be a list", file=store.manifest_path,
                         field="config.variants")
    try:  # which rows are the run's: its plan (its shard's), rebuilt as a resume does
        keys = planned_keys(store, manifest, project)
    except BenchError as exc:  # e.g. the dataset changed since: the manifest still checks
        keys = None
        err.print(f"note: rows not checked against the run's plan: {exc}", markup=False)
    shard = manifest.config.get("shard")
    stray = f"not in shard {shard}: another shard's row, or a case the run did not select" \
        if shard else "no planned row has this key: a case the run did not select"
    read = RowsRead(store.results_path)
    rows = store.iter_read(manifest, into=read, plan=None if keys is None else
                           lambda row: None if row.key in keys else stray)
    print_summary(run_id, [str(v) for v in order], project, rows=rows)  # streamed
    if per_tool:
        print_per_tool(out, store, manifest, [str(v) for v in order])
    status = store.shown_status(manifest)
    for line in read.report(writing=status == "running"):
        err.print(line, markup=False)
    # the rows in the file, not the manifest's count: the file may have lost rows since
    done, planned = read.counted, manifest.rows_planned
    if status == "complete" and done < planned:
        out.print(f"status: incomplete (manifest says complete), rows {done}/{planned}; "
                  f"bench run --resume {run_id} redoes the missing rows", markup=False)
    else:
        out.print(f"status: {status}, rows {done}/{planned}"
                  + (f"; finish with: bench run --resume {run_id}" if status == CRASHED else ""),
                  markup=False)


def print_per_tool(out: Console, store: RunStore, manifest: Manifest,
                   order: Sequence[str]) -> None:
    """Print the per-tool tables of the run in ``store`` to ``out``: single-answer rows and
    episode rows (an episode by its trajectory's calls, :mod:`bench.stats.pertool`).

    When there is nothing to count, one line says why instead of a table: the run has no
    finished row yet, or none of its rows expects or calls a tool (every case is no-call
    or ask and no answer called one).
    """
    from bench.report.pertool import per_tool_rich_tables
    from bench.stats.frame import results_frame

    rows = list(store.load_rows(manifest))
    if not rows:
        out.print(f"per tool: run {store.run_id} has no finished row yet: nothing to count "
                  f"(rows 0/{manifest.rows_planned})", markup=False)
        return
    renamed: dict[str, str] = {}
    for variant in manifest.variants:
        renamed.update(variant.aliases or {})
    drafts = {v.name for v in manifest.variants if v.draft_tools and v.name}
    from bench.report.table import fitted_tables

    tables = per_tool_rich_tables(results_frame(rows), order, renamed, drafts)
    if not tables:
        out.print(f"per tool: no tool was expected or called in the "
                  f"{count(len(rows), 'finished row')} (every case is no-call or ask, and no "
                  "answer called a tool): nothing to count", markup=False)
        return
    for table in tables:
        for part in fitted_tables(table, out.width, keys=1):
            out.print(part)
