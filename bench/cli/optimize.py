"""``bench optimize run``: improve a toolset's descriptions from the target's failures on
``dev`` and keep only what ``test`` confirms; ``bench optimize adopt``: copy an accepted
output variant into ``descriptions/``. The work is :func:`bench.optimize.optimize`."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from bench.cli.options import split_list
from bench.cli.output import piped_console

out = piped_console(highlight=False)

optimize_app = typer.Typer(no_args_is_help=True, help="Optimize descriptions from failures "
                                                      "on dev; accept on test only.")
#: Exit code of ``bench optimize run`` when the final variant was not accepted.
NOT_ACCEPTED_EXIT_CODE = 1


@optimize_app.command("run")
def run(
    dataset: Annotated[str, typer.Argument(help="A dataset with a dev/test split (name or "
                                                ".jsonl path), one toolset.")],
    variant: Annotated[str, typer.Option(help="The starting variant.")],
    target: Annotated[str, typer.Option(help="Provider id of the model tuned for.")],
    proposer: Annotated[str, typer.Option(help="Provider id of the model that rewrites.")],
    rounds: Annotated[int, typer.Option(help="At most this many rounds.")] = 3,
    max_usd: Annotated[Optional[float], typer.Option(help="Search budget in USD billed.")]
    = None,
    max_tokens: Annotated[Optional[int], typer.Option(
        help="Search budget in prompt + completion tokens billed.")] = None,
    metric: Annotated[str, typer.Option(help="The target metric.")] = "selection_correct",
    gate: Annotated[Optional[list[str]], typer.Option(
        help="Metrics that must not regress on test (comma-separated or repeated; default "
             "selection, arguments, no-call, ask, task success).")] = None,
    min_gain: Annotated[float, typer.Option(help="Least gain of the target metric on test "
                                                 "(fraction).")] = 0.0,
    margin: Annotated[float, typer.Option(help="Largest tolerated loss on a gated metric "
                                               "(fraction).")] = 0.0,
    alpha: Annotated[float, typer.Option(help="Family-wise level (Holm).")] = 0.05,
    max_tokens_ratio: Annotated[float, typer.Option(
        help="Tool-definition tokens at most this times the start's.")] = 1.1,
    also_provider: Annotated[Optional[str], typer.Option(
        help="A second target that must not regress on test.")] = None,
    name: Annotated[Optional[str], typer.Option(help="Output variant name (default "
                                                     "<variant>-opt).")] = None,
    template: Annotated[Optional[str], typer.Option(help="A jinja2 prompt template for the "
                                                         "proposer.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="At most N cases per split.")] = None,
    max_failures: Annotated[int, typer.Option(help="Failures shown per tool.")] = 8,
    allow_assertive: Annotated[bool, typer.Option(
        help="Keep candidates with assertive wording (still flagged).")] = False,
    seed: Annotated[int, typer.Option(help="Sampling seed of the runs.")] = 1234,
    execute: Annotated[Optional[bool], typer.Option(
        help="Execute the target's calls (default: only for episode datasets).")] = None,
    model: Annotated[Optional[str], typer.Option(help="The local provider's model preset.")]
    = None,
    cache_path: Annotated[Optional[str], typer.Option(help="Response cache file (default "
                                                           "reports/cache/responses.sqlite).")]
    = None,
    opt_id: Annotated[Optional[str], typer.Option("--id", help="The optimization's id; an "
                                                               "existing one is resumed.")]
    = None,
) -> None:
    """Run the search on dev and the one held-out test; write the output variant folder
    and report under reports/optimize/<id>/. Exit 0 when accepted, 1 when not."""
    from bench.optimize import optimize
    from bench.project import Project

    settings: dict[str, object] = {}
    for key, value in (("execute", execute), ("model", model), ("cache_path", cache_path)):
        if value is not None:
            settings[key] = value
    options: dict[str, Any] = {
        "rounds": rounds, "max_usd": max_usd, "max_total_tokens": max_tokens, "metric": metric,
        "min_gain": min_gain, "margin": margin, "alpha": alpha,
        "max_tokens_ratio": max_tokens_ratio, "also_provider": also_provider, "name": name,
        "template": template, "limit": limit, "max_failures": max_failures,
        "allow_assertive": allow_assertive, "seed": seed, "settings": settings}
    gated = split_list(gate) if gate else None
    if gated is not None:
        options["gated"] = gated
    project = Project.from_env()
    result = optimize(dataset, variant, target, proposer, project=project, opt_id=opt_id,
                      **options)
    _print(result)
    if not result.accepted:
        raise typer.Exit(NOT_ACCEPTED_EXIT_CODE)


def _print(run: object) -> None:
    """The rounds, the decision and where the files are."""
    from bench.optimize import Optimization
    assert isinstance(run, Optimization)
    result = run.result
    for done in result.rounds:
        for case_id, why in done.withheld.items():
            out.print(f"round {done.round}: dev case {case_id} left out of the proposer's "
                      f"prompt: {why}", markup=False, soft_wrap=True)
    for c in result.candidates:
        dev = f"{c.dev_k}/{c.dev_n}" if c.dev_n else "-"
        out.print(f"round {c.round} {c.name}: dev {dev}, tokens {c.tokens} "
                  f"({c.token_ratio:.2f}x), {c.status}"
                  + (f" [{'; '.join(c.flags)}]" if c.flags else ""), markup=False)
    for r in result.rejections:
        out.print(f"rejected (round {r.round}, {r.tool}): {r.kind}: {r.reason}", markup=False)
    out.print(f"search stopped: {result.stop_reason}", markup=False)
    for t in result.acceptance.tests:
        out.print(f"test {t.provider} {t.metric}: {t.rate_start:.1%} -> {t.rate_final:.1%} "
                  f"({t.b_only} fixed, {t.a_only} broke; Holm p = {t.p_holm:.3g}; "
                  f"{t.verdict})", markup=False)
    verdict = "ACCEPTED" if run.accepted else "not accepted: " + "; ".join(
        result.acceptance.reasons)
    out.print(f"{result.final} {verdict}", markup=False)
    out.print(f"requests sent: {result.requests}; billed {result.billed_usd:.4f} USD", markup=False)
    out.print(f"report: {run.folder / 'report.html'}", markup=False)
    if run.accepted:
        out.print(f"adopt it with: bench optimize adopt {result.opt_id}", markup=False)


@optimize_app.command("adopt")
def adopt_command(
    opt_id: Annotated[str, typer.Argument(help="The optimization's id.")],
    force: Annotated[bool, typer.Option(help="Replace an existing variant file (never drops "
                                                  "what the start gained since the run).")]
    = False,
    unaccepted: Annotated[bool, typer.Option(
        help="Adopt a variant the held-out test did not accept.")] = False,
) -> None:
    """Copy an optimization's output variant to descriptions/<toolset>/variants/, where
    bench run, bench compare and the gate use it like any variant. When the start variant
    changed since the run, its edits are rebased onto the current start if they apply
    cleanly (one line says so), else adoption is refused naming what changed."""
    from bench.optimize.output import adopt
    from bench.project import Project
    adopted = adopt(Project.from_env(), opt_id, force=force, unaccepted=unaccepted)
    if adopted.rebased:
        out.print(adopted.rebased, markup=False, soft_wrap=True)  # one line, however long
    out.print(f"wrote {adopted.path}", markup=False)
