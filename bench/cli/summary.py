"""The per-variant table of a run that ``bench run``, ``bench show`` and ``bench merge``
print (stdout), with its notes: renamed tools, execution notes, drafts, information buckets
and pass@k over trials."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from bench.cli.output import out
from bench.errors import BenchError

if TYPE_CHECKING:
    from bench.results import Row
    from bench.stats.running import RunningSummary


def print_summary(run_id: str, variant_order: list[str], project: Any = None,
                   rows: Iterable[Row] | None = None,
                   running: RunningSummary | None = None) -> None:
    """Print the per-variant table of run ``run_id`` of ``project`` (a
    :class:`bench.project.Project`; default: the one the environment names), made of
    ``rows`` (default: the run's rows, :meth:`bench.store.RunStore.load_rows`), read
    once and summed as they stream (:class:`bench.stats.running.RunningSummary`: no frame of
    every row, no pandas); or of ``running``, already summed while the run wrote its rows."""
    from bench.project import Project
    from bench.report.table import bucket_rich_table, fitted_tables, summary_table
    from bench.stats.running import RunningSummary

    project = project or Project.from_env()
    store = project.store(run_id)
    manifest = store.load_manifest()
    if running is None:
        if rows is None:
            rows = store.load_rows(manifest)
        running = RunningSummary(variant_order).add_all(rows)
    if not len(running):
        out.print(f"run {run_id}: no finished rows yet")
        return
    trials = running.trials
    split = manifest.config.get("split") or "all"  # runs from before splits ran every case
    # stacked when too wide: no interval or metric name is cut (80-160 columns and up)
    drafts = {v.name for v in manifest.variants if v.draft_tools and v.name}
    for table in fitted_tables(summary_table(running.summary(),
                                             title=f"run {run_id}, {split} split",
                                             trials=trials, drafts=drafts), out.width, keys=2):
        out.print(table)
    renamed = {old: new for v in manifest.variants for old, new in (v.aliases or {}).items()}
    if renamed:
        out.print("renamed tools (labels naming the old name score against the new): "
                  + ", ".join(f"{old} -> {new}" for old, new in sorted(renamed.items())),
                  markup=False)
    from bench.report.execution import execution_notes
    for note in execution_notes(manifest.execution, store.dir):
        out.print(f"note: {note}", markup=False)  # wrapped: tables and notes fit the terminal
    if drafts:
        out.print(f"draft descriptions (unreviewed; bench variants accept): "
                  f"{', '.join(sorted(drafts))}", markup=False)
    buckets = running.buckets()
    if buckets:
        # shown only when two labelling passes agree on the buckets (Cohen's kappa in the
        # datasheet above 0.60); the kappa is the table's caption, or the line saying why not
        from bench.datasets.agreement import dataset_agreement
        try:
            agreement = dataset_agreement(manifest.dataset.name, manifest.dataset.path,
                                          project.root)
            shown, line = agreement.shown, agreement.line()
        except BenchError as exc:
            shown = False
            line = (f"information buckets of '{manifest.dataset.name}' not shown: {exc}")
        if shown:
            for table in fitted_tables(bucket_rich_table(buckets, caption=line), out.width,
                                       keys=3):
                out.print(table)
        else:
            out.print(line, markup=False)
    if trials > 1 and running.carries_pass_k_metric:
        print_pass_k(running, trials)


def print_pass_k(running: RunningSummary, trials: int) -> None:
    """pass@k and pass^k of episode task success per provider and condition, k = 1 and
    ``trials`` (:meth:`bench.stats.running.RunningSummary.pass_k`); ``-`` where no case of
    the condition has k trials (nothing to estimate from), as the HTML report shows it."""
    from rich.table import Table

    from bench.report.table import as_float, fitted_tables, format_percent

    ks = sorted({1, trials})
    records = running.pass_k(ks)
    if not records:
        return
    shown = Table(title="episode task success over trials (unbiased pass@k / pass^k, mean "
                        "over cases)", caption="- : no case of the condition has k trials")
    for column in ("provider", "variant", "cases", *(f"pass{s}{k}" for k in ks
                                                    for s in ("@", "^"))):
        shown.add_column(column, justify="left" if column in ("provider", "variant")
                         else "right")
    for record in records:
        shown.add_row(str(record["provider"]), str(record["variant"]), str(record["cases"]),
                      *(format_percent(as_float(record[f"pass{s}{k}"]))
                        for k in ks for s in ("@", "^")))
    for part in fitted_tables(shown, out.width, keys=2):
        out.print(part)
