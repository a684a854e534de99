"""``bench compare A B``: the command line around :func:`bench.compare.core.compare_rows`.

Where A and B come from:
- ``--run RUN_ID``: A and B are variants of that stored run;
- otherwise, when both name stored runs: two run ids (paired variant by variant when the runs
  have the same variants; a run with a single variant pairs with the other's single variant);
- otherwise A and B are variants, run now on ``--dataset`` with ``--provider`` (a new run).

Exit codes: 0 no significant regression; 1 a significant regression beyond ``--margin``;
2 bad input (one ``error:`` line); 3 no regression among the rows compared, but rows are
missing: running now, a provider was skipped (no key, SDK missing); a stored run compared
(``--run``, or two run ids) has fewer rows than it planned (partial, failed, interrupted,
budget-stopped, crashed or still running). Its rows are left for ``bench run --resume``; the
pairs compared are those done, which need not be a random part of the plan (a skipped provider,
a budget stop), so the comparison is not a pass.
"""

from __future__ import annotations

import os
from typing import Annotated, Iterable, Optional

import typer
from rich.console import Console

from bench.cli.compare_table import print_comparison
from bench.cli.options import split_list
from bench.errors import BenchError
from bench.plural import count
from bench.project import Project
from bench.results import Row
from bench.store import StoredRows


def _console(stderr: bool = False) -> Console:
    if not stderr and "COLUMNS" not in os.environ and not Console().is_terminal:
        return Console(width=200)
    return Console(stderr=stderr)


class Incomplete(Exception):
    """A stored run lacks the rows a comparison needs because it is unfinished (killed,
    interrupted, budget-stopped...): ``bench run --resume`` makes them, so it is not bad
    input. :func:`compare` prints ``incomplete: <message>`` and exits 3, as ``bench run``
    does for an incomplete run."""


def _rows_of(project: Project, run_id: str) -> StoredRows:
    """The counted rows of stored run ``run_id``, read again on each pass (never held).

    Raises:
        BenchError: no such run, or a finished run without rows.
        Incomplete: an unfinished run without rows yet.
    """
    store = project.store(run_id)
    manifest = store.load_manifest()  # BenchError when the run does not exist
    rows = store.stored_rows(manifest)
    if not len(rows):
        unfinished = _unfinished_state(rows)
        if unfinished is not None:
            raise Incomplete(f"{unfinished}; resume with bench run --resume {run_id}, then "
                             "compare again")
        raise BenchError(f"run '{run_id}' has no finished rows", file=store.results_path)
    return rows


def _unfinished(rows: StoredRows) -> str | None:
    """``run '<id>' is <status>: N of M rows done (bench run --resume <id>)`` when the stored
    run has fewer rows than it planned (``manifest.rows_planned``), else None."""
    state = _unfinished_state(rows)
    return None if state is None else f"{state} (bench run --resume {rows.store.run_id})"


def _unfinished_state(rows: StoredRows) -> str | None:
    """``run '<id>' is <status>: N of M rows done`` when the stored run has fewer rows than
    it planned, else None."""
    planned = rows.manifest.rows_planned
    if len(rows) >= planned:
        return None
    status = rows.store.shown_status(rows.manifest)
    return (f"run '{rows.store.run_id}' is {'incomplete' if status == 'complete' else status}"
            f": {len(rows)} of {count(planned, 'row')} done")


def _is_run(project: Project, name: str) -> bool:
    from bench.store import RUN_ID_PATTERN

    return bool(RUN_ID_PATTERN.fullmatch(name)) and project.store(name).exists()


def _split_variant(rows: StoredRows, variant: str, where: str) -> Iterable[Row]:
    """The rows of ``variant`` (a view, read with ``rows``).

    Raises:
        Incomplete: the run planned ``variant`` but is unfinished and has no row of it yet.
        BenchError: the run has no such variant.
    """
    from bench.compare.core import RowSelection
    from bench.models import condition_variant

    if variant not in rows.variants:
        unfinished = _unfinished_state(rows)
        stored = rows.manifest.config.get("variants")
        planned = rows.manifest.variant_names() | (
            {str(v) for v in stored} if isinstance(stored, list) else set())
        if unfinished is not None and condition_variant(variant) in planned:
            run_id = rows.store.run_id
            raise Incomplete(f"{unfinished}, none of variant '{variant}' yet; resume with "
                             f"bench run --resume {run_id}, then compare again")
        raise BenchError(f"{where} has no variant '{variant}' (it has "
                         f"{', '.join(sorted(rows.variants))})")
    return RowSelection([rows], lambda row: row.variant == variant)


def _run_now(variant_a: str, variant_b: str, dataset: str, providers: list[str], trials: int,
             limit: int | None, cases: list[str] | None, model_path: str | None, seed: int,
             run_id: str | None, project: Project) -> tuple[StoredRows, dict[str, str]]:
    """Run the two variants now; their rows, and the providers skipped (id -> why: no key,
    SDK missing), whose rows are left for ``bench run --resume``.

    Raises:
        BenchError: every provider was skipped, or as :class:`bench.runner.Runner`.
        KeyboardInterrupt: a stop signal ended the run (its finished rows are kept).
    """
    from bench.runner import RunConfig
    from bench.runner.lifecycle import RunHooks, execute_run, open_run

    config = RunConfig(dataset=dataset, variants=[variant_a, variant_b],
                       providers=providers or ["local"], trials=trials, limit=limit,
                       case_ids=cases or None, model_path=model_path, seed=seed)
    runner = open_run(project, config=config, run_id=run_id,
                      taken=f"compare it with --run {run_id}")
    store = runner.store
    say = _console(stderr=True)
    hooks = RunHooks(
        # as bench run: a skipped provider is said before any row
        provider_skipped=lambda pid, why: say.print(f"provider {pid} skipped: {why}",
                                                    markup=False, soft_wrap=True),
        started=lambda run, pending: say.print(f"running {variant_a} and {variant_b}: "
                                               f"{count(len(run.plan), 'row')} -> {store.dir}"))
    try:
        execute_run(runner, hooks)
    except KeyboardInterrupt:  # its finished rows are kept: say how to finish and compare
        kept = sum(1 for _ in store.load_rows())
        say.print(f"{kept} of {count(len(runner.plan), 'row')} kept in {store.results_path}; "
                  f"finish with: bench run --resume {store.run_id}, then: bench compare "
                  f"{variant_a} {variant_b} --run {store.run_id}", markup=False,
                  soft_wrap=True)
        raise
    return store.stored_rows(store.load_manifest()), dict(runner.skipped)


def compare(
    a: Annotated[str, typer.Argument(help="Variant A (the baseline), or a run id.")],
    b: Annotated[str, typer.Argument(help="Variant B (the candidate), or a run id.")],
    run: Annotated[Optional[str], typer.Option(
        "--run", help="Take variants A and B from this stored run.")] = None,
    variant: Annotated[Optional[str], typer.Option(
        help="Comparing two runs: only this variant of each.")] = None,
    dataset: Annotated[str, typer.Option(help="Running now: dataset name or .jsonl path.")]
    = "ecommerce",
    provider: Annotated[Optional[list[str]], typer.Option(
        "--provider", "-p", help="Running now: provider id(s).")] = None,
    trials: Annotated[int, typer.Option(min=1, help="Running now: trials per case.")] = 1,
    limit: Annotated[Optional[int], typer.Option(
        min=1, help="Running now: N cases, stratified by expected tool and seeded by --seed "
                    "(as bench run --limit).")]
    = None,
    cases: Annotated[Optional[list[str]], typer.Option(help="Running now: these case ids.")]
    = None,
    model_path: Annotated[Optional[str], typer.Option(help="Running now: local GGUF.")] = None,
    run_id: Annotated[Optional[str], typer.Option(help="Running now: name the new run.")]
    = None,
    metrics: Annotated[Optional[list[str]], typer.Option(
        "--metrics", "-m", help="Binary metrics to test (default: every rate of the metric "
                                "registry's compare view).")]
    = None,
    alpha: Annotated[float, typer.Option(min=0.0001, max=0.5,
                                         help="Family-wise significance level (Holm).")] = 0.05,
    margin: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Regressions no larger than this fraction pass (0.02 = 2 points).")]
    = 0.0,
    n_boot: Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")] = 2000,
    mid_p: Annotated[bool, typer.Option(
        "--mid-p", help="McNemar mid-p values (closer to alpha, not guaranteed below it).")]
    = False,
    seed: Annotated[int, typer.Option(help="Bootstrap seed (and sampling seed when running).")]
    = 1234,
    show: Annotated[int, typer.Option(min=0, help="Flipped cases shown per direction.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")]
    = False,
) -> None:
    """Compare A and B on the cases both have: McNemar exact tests, paired bootstrap
    intervals, Holm correction, minimum detectable difference, and the flipped cases.

    Exit code 0: no significant regression; 1: a significant regression beyond --margin;
    2: bad input; 3: rows are missing (running now, a provider was skipped; a stored run is
    unfinished): one line says which and how to resume."""
    try:
        _compare(a, b, run, variant, dataset, provider, trials, limit, cases, model_path,
                 run_id, metrics, alpha, margin, n_boot, mid_p, seed, show, as_json)
    except Incomplete as exc:
        _console(stderr=True).print(f"incomplete: {exc}", markup=False, soft_wrap=True)
        raise typer.Exit(3) from None  # bench run's exit code of an incomplete run


def _compare(a: str, b: str, run: str | None, variant: str | None, dataset: str,
             provider: list[str] | None, trials: int, limit: int | None,
             cases: list[str] | None, model_path: str | None, run_id: str | None,
             metrics: list[str] | None, alpha: float, margin: float, n_boot: int,
             mid_p: bool, seed: int, show: int, as_json: bool) -> None:
    """:func:`compare`'s work (its options, as given).

    Raises:
        Incomplete: a stored run lacks rows it planned and the comparison needs.
        BenchError: bad input.
        typer.Exit: the exit code of the comparison.
    """
    from bench.compare.core import compare_rows

    project = Project.from_env()  # the command line's edge
    group_by: tuple[str, ...] = ("provider",)
    partial: str | None = None  # rows missing: which, and what next
    unfinished: list[str | None] = []  # stored runs compared that lack rows of their plan
    if a == b:  # every pair would agree: a comparison that cannot find anything
        raise BenchError(f"A and B are both '{a}': name two different variants or runs")
    if run:
        rows = _rows_of(project, run)
        unfinished = [_unfinished(rows)]
        rows_a = _split_variant(rows, a, f"run '{run}'")
        rows_b = _split_variant(rows, b, f"run '{run}'")
        label_a, label_b = a, b
    elif _is_run(project, a) and _is_run(project, b):
        rows_a, rows_b, group_by, unfinished = _two_runs(project, a, b, variant)
        label_a, label_b = a, b
    elif _is_run(project, a) or _is_run(project, b):  # one run id: the other is no run
        run_id, other = (a, b) if _is_run(project, a) else (b, a)
        raise BenchError(f"'{run_id}' is a run but '{other}' is not (no run of that id under "
                         f"{project.runs_dir}); give two run ids, two variants, or --run "
                         f"{run_id} with two of its variants")
    else:
        from bench.models import CONDITION_SEPARATOR
        for name in (a, b):  # a condition is a stored run's (bench run --tools/--fault ...)
            if CONDITION_SEPARATOR in name:
                raise BenchError(f"'{name}' is a condition of a stored run, not a variant "
                                 "compare can run now: give --run RUN (bench run ... "
                                 f"then bench compare {a} {b} --run RUN)")
        rows, skipped = _run_now(a, b, dataset, split_list(provider), trials, limit,
                                 split_list(cases), model_path, seed, run_id, project)
        if skipped:
            new_run = rows.store.run_id
            partial = (f"partial: {', '.join(skipped)} not compared (skipped); fix that, "
                       f"then: bench run --resume {new_run}, then: bench compare {a} {b} "
                       f"--run {new_run}")
        rows_a = _split_variant(rows, a, "the new run")
        rows_b = _split_variant(rows, b, "the new run")
        label_a, label_b = a, b
    try:
        comparison = compare_rows(rows_a, rows_b, label_a=label_a, label_b=label_b,
                                  metrics=split_list(metrics) or None, group_by=group_by,
                                  alpha=alpha, margin=margin, n_boot=n_boot, seed=seed,
                                  mid_p=mid_p)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    if as_json:
        print(comparison.model_dump_json(indent=2))
    else:
        print_comparison(_console(), comparison, show)
    said = [text for text in unfinished if text]  # stored runs that lack rows of their plan
    if said:
        partial = (f"{'; '.join(said)}; the comparison covers the pairs done only (not a "
                   "pass): finish with bench run --resume, then compare again")
    if partial is not None:  # not a pass: rows are missing
        _console(stderr=True).print(partial, markup=False, soft_wrap=True)
        if comparison.exit_code == 0:
            raise typer.Exit(3)  # bench run's exit code of an incomplete run
    raise typer.Exit(comparison.exit_code)


def _two_runs(project: Project, a: str, b: str, variant: str | None
              ) -> tuple[Iterable[Row], Iterable[Row], tuple[str, ...], list[str | None]]:
    """The rows of stored runs ``a`` and ``b`` to compare (only ``variant``'s if given),
    how to group them (by provider, and by variant when both runs have the same variants
    or share some), and each run's :func:`_unfinished` line.

    Raises:
        BenchError: the runs differ in split, or in variants that cannot be paired.
        Incomplete: a run is unfinished and has no row (of ``variant``) yet.
    """
    from bench.compare.core import RowSelection
    from bench.datasets.splits import refuse_mixed_splits, run_split

    refuse_mixed_splits({name: run_split(project.store(name).load_manifest().config)
                         for name in (a, b)})
    stored_a, stored_b = _rows_of(project, a), _rows_of(project, b)
    unfinished = [_unfinished(stored_a), _unfinished(stored_b)]
    rows_a: Iterable[Row] = stored_a
    rows_b: Iterable[Row] = stored_b
    group_by: tuple[str, ...] = ("provider",)
    variants_a, variants_b = set(stored_a.variants), set(stored_b.variants)
    if variant:
        rows_a = _split_variant(stored_a, variant, f"run '{a}'")
        rows_b = _split_variant(stored_b, variant, f"run '{b}'")
        variants_a = variants_b = {variant}
    shared = variants_a & variants_b
    if variants_a == variants_b:
        group_by = ("provider", "variant")
    elif shared and not (len(variants_a) == 1 and len(variants_b) == 1):
        # paired variant by variant on the variants both runs have
        rows_a = RowSelection([stored_a], lambda row: row.variant in shared)
        rows_b = RowSelection([stored_b], lambda row: row.variant in shared)
        group_by = ("provider", "variant")
        _console(stderr=True).print(f"comparing the variants both runs have: {', '.join(sorted(shared))} "
                  f"(left out: {', '.join(sorted((variants_a | variants_b) - shared))})")
    elif not (len(variants_a) == 1 and len(variants_b) == 1):
        raise BenchError(f"runs '{a}' and '{b}' have different variants "
                         f"({', '.join(sorted(variants_a))} vs "
                         f"{', '.join(sorted(variants_b))}); pick one with --variant")
    return rows_a, rows_b, group_by, unfinished
