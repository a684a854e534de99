"""``bench merge``: join the runs of one plan's shards into one new run (:mod:`bench.merge`)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from bench.cli.output import INCOMPLETE_EXIT_CODE, err
from bench.cli.summary import print_summary
from bench.plural import count


def merge(
    runs: Annotated[list[str], typer.Argument(
        help="The shards' run ids under reports/runs/ (bench run --shard i/n), any order.")],
    run_id: Annotated[Optional[str], typer.Option(help="Name the merged run.")] = None,
    allow_partial: Annotated[bool, typer.Option(
        "--allow-partial", help="Accept missing or unfinished shards: the merged run is then "
                                "partial, and bench run --resume NEW runs the rows it lacks.")]
    = False,
) -> None:
    """Join the runs of one plan's shards into one new run, for show, report and compare.

    Refused, with one line naming the run and the field: runs that differ in config (except
    --shard and what a resume may change: concurrency, budgets, cache, pricing, attempts,
    batch, model path), dataset, variants or provider models; a shard given twice; a missing
    or unfinished shard (unless --allow-partial). The merge rebuilds the plan from this
    checkout's dataset and descriptions, which must be those the shards ran with.
    """
    from bench.merge import merge_runs

    result = merge_runs(runs, run_id=run_id, allow_partial=allow_partial,
                        command=list(sys.argv))
    manifest = result.manifest
    for line in result.warnings:
        err.print(line, markup=False)
    if len(result.commits) > 1:
        err.print(f"warning: the shards ran at different bench commits "
                  f"({', '.join(result.commits)}); their scoring may differ", markup=False)
    for shard_run, status, rows, planned in result.unfinished:
        err.print(f"run {shard_run} is {status}: {rows} of {count(planned, 'row')} merged",
                  markup=False)
    if result.missing_shards:
        err.print(f"shard{'s' if len(result.missing_shards) > 1 else ''} "
                  f"{', '.join(result.missing_shards)} missing", markup=False)
    variants = manifest.config.get("variants")
    print_summary(result.run_id, [str(v) for v in variants] if isinstance(variants, list) else [])
    err.print(f"merged {count(len(runs), 'run')} into run {result.run_id}: "
              f"{manifest.rows_done} of {count(manifest.rows_planned, 'row')} "
              f"({manifest.status})", markup=False)
    if manifest.status != "complete":
        err.print(f"finish it with: bench run --resume {result.run_id}", markup=False)
        raise typer.Exit(INCOMPLETE_EXIT_CODE)
