"""``bench run``: options -> :class:`bench.runner.RunConfig` (:mod:`bench.cli.run_config`)
-> the run (:func:`bench.runner.lifecycle.execute_run`) with its progress -> the per-variant
table and what to do next."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, NoReturn, Optional

import typer

from bench.cli.output import BUDGET_EXIT_CODE, INCOMPLETE_EXIT_CODE, err, out, say
from bench.cli.options import with_factors
from bench.cli.run_config import open_from_options, shard_option
from bench.cli.stops import stopped, was_terminated
from bench.cli.summary import print_summary
from bench.cli.toolspace import SignalAhead, print_signal, toolspace_notes
from bench.collector import paused_until_the_run
from bench.errors import BenchError, RunIncomplete
from bench.limits import (DEFAULT_CONCURRENCY, DEFAULT_PROVIDERS, DEFAULT_VARIANTS,
                          MAX_ATTEMPTS, MAX_CONCURRENCY, MAX_TRIALS, DEFAULT_ATTEMPTS)
from bench.plural import count

if TYPE_CHECKING:
    from bench.project import Project
    from bench.results import Manifest
    from bench.runner import Runner
    from bench.runner.plan import PendingItems
    from bench.stats.running import RunningSummary


@with_factors
def run(
    ctx: typer.Context,
    dataset: Annotated[Optional[str], typer.Option(
        help="Dataset name under datasets/, a .jsonl path, or hf:owner/name[:split] "
             "(default: the project's only dataset, else ecommerce).")]
    = None,
    variants: Annotated[Optional[list[str]], typer.Option(
        "--variants", "-v", help="Variants, comma-separated or repeated (default: "
                                 f"{','.join(DEFAULT_VARIANTS)}).")] = None,
    provider: Annotated[Optional[list[str]], typer.Option(
        "--provider", "-p", help="Provider id; repeat for several (default: "
                                 f"{','.join(DEFAULT_PROVIDERS)}). With --resume: only a "
                                 "stored provider's id again with its base URL's "
                                 "user:password@ (never stored).")] = None,
    trials: Annotated[int, typer.Option(min=1, max=MAX_TRIALS, help="Repetitions per case.")]
    = 1,
    limit: Annotated[Optional[int], typer.Option(
        min=1, help="Only N cases: a sample stratified by expected tool (no-call and ask "
                    "cases included), seeded by --seed, nested (N+1 adds one case) and in "
                    "dataset order.")] = None,
    split: Annotated[Optional[str], typer.Option(
        help="Dataset split: test (the default when the dataset has splits), dev (what "
             "descriptions may be written from) or all (the default without splits).")]
    = None,
    cases: Annotated[Optional[list[str]], typer.Option(help="Only these case ids.")] = None,
    model: Annotated[Optional[str], typer.Option(
        help="Local provider: a model preset: qwen2.5-coder-0.5b (default), smollm2-135m, "
             "gemma3-270m.")] = None,
    model_path: Annotated[Optional[str], typer.Option(
        help="Local provider: a GGUF file instead of a preset (default: --model, else "
             "$BENCH_LOCAL_MODEL, else the default preset).")]
    = None,
    seed: Annotated[int, typer.Option(help="Base sampling seed.")] = 1234,
    max_tokens: Annotated[int, typer.Option(min=16, help="Completion cap in tokens.")] = 512,
    no_call_layout: Annotated[Optional[str], typer.Option(
        help="Local provider: how 'no tool fits' is offered (see benchmarks/no_call_layout.py)."
    )] = None,
    threads: Annotated[Optional[int], typer.Option(min=1, help=(
        "Local model CPU threads (default $BENCH_THREADS, else min(4, cores)).")
    )] = None,
    tool_choice: Annotated[str, typer.Option(
        help="HTTP providers: auto, required, none, or a tool name.")] = "auto",
    parallel_tool_calls: Annotated[Optional[bool], typer.Option(
        "--parallel-tool-calls/--no-parallel-tool-calls",
        help="HTTP providers: allow several calls per answer (default: provider's).")] = None,
    openai_strict: Annotated[bool, typer.Option(
        help="OpenAI strict mode: schemas rewritten, every change logged.")] = False,
    stream: Annotated[bool, typer.Option(help="HTTP providers: stream answers (SSE).")]
    = False,
    request_timeout: Annotated[float, typer.Option(
        min=0.001, help="Seconds one request may take: HTTP providers and function:.")]
    = 60.0,
    run_id: Annotated[Optional[str], typer.Option(
        help="Name the new run (letters, digits, '.', '_', '-'; not runs, cache or "
             "gate-junit.xml).")] = None,
    resume: Annotated[Optional[str], typer.Option(
        help="Finish an interrupted run; its stored settings are used (an option given again "
             "must have its stored value).")] = None,
    concurrency: Annotated[Optional[int], typer.Option(
        min=1, max=MAX_CONCURRENCY,
        help=f"Requests in flight per provider (default {DEFAULT_CONCURRENCY}; local always 1)."
    )] = None,
    max_usd: Annotated[Optional[float], typer.Option(
        min=0.0, help="Stop (resumably) once the run has billed this many USD.")] = None,
    max_total_tokens: Annotated[Optional[int], typer.Option(
        min=1, help="Stop (resumably) once the run has billed this many tokens.")] = None,
    cache: Annotated[Optional[str], typer.Option(
        help="Response cache: off, read, write or readwrite (default off).")] = None,
    cache_path: Annotated[Optional[str], typer.Option(
        help="Cache file (default reports/cache/responses.sqlite).")] = None,
    pricing: Annotated[Optional[str], typer.Option(
        help="Pricing YAML overriding bench/data/pricing.yaml.")] = None,
    attempts: Annotated[Optional[int], typer.Option(
        min=1, max=MAX_ATTEMPTS,
        help=f"Most attempts per request (429/5xx/timeouts retried; default {DEFAULT_ATTEMPTS})."
    )] = None,
    batch: Annotated[Optional[bool], typer.Option(
        "--batch/--no-batch", help="OpenAI/Anthropic via their batch APIs (resumable).")] = None,
    batch_poll_s: Annotated[Optional[float], typer.Option(
        min=0.0, help="Seconds between batch status polls (default 30).")] = None,
    execute: Annotated[bool, typer.Option(
        help="Run each answer's calls on the reference backends (execution metrics).")] = True,
    allow_writes: Annotated[bool, typer.Option(help="Let write tools run (sandboxed).")] = False,
    allow_sensitive: Annotated[bool, typer.Option(help="Let sensitive tools run.")] = False,
    execute_mcp: Annotated[Optional[str], typer.Option(
        help="Execute the calls on this MCP server (a command line, started over stdio, e.g. "
             "'python server.py') instead of the reference backends.")] = None,
    error_pattern: Annotated[Optional[str], typer.Option(
        help="With --execute-mcp: a Python regular expression searched in each text result "
             "of the server's tools; a match fails the call (for a server that answers its "
             "errors as text, without isError).")] = None,
    skip_invalid_cases: Annotated[bool, typer.Option(
        "--skip-invalid-cases",
        help="Leave out, and list, cases whose labels do not fit the tools (unknown tool or "
             "argument, a value the schema rejects) instead of refusing the dataset.")]
    = False,
    shard: Annotated[Optional[str], typer.Option(
        callback=shard_option, metavar="I/N",
        help="Run only shard I of N of the plan (1/4 .. 4/4), e.g. one per CI machine; join "
             "the shards' runs with bench merge. Every shard needs the same other options.")]
    = None,
    tools: Annotated[Optional[list[str]], typer.Option(
        help="Grow each case's toolset to N tools with seeded distractors from the other "
             "toolsets (comma-separated counts, each a condition: l3~tools=40).")] = None,
    retriever: Annotated[Optional[list[str]], typer.Option(
        help="Tool retrieval before the model: none (every tool sent), bm25, embedding "
             "(the local model), native / native-bm25 (Anthropic's tool search: every tool "
             "sent deferred); comma-separated, each a condition.")] = None,
    top_k: Annotated[Optional[list[str]], typer.Option(
        help="Tools a bm25 / embedding retriever sends to the model (comma-separated; "
             "default 5).")] = None,
    distractors: Annotated[Optional[list[str]], typer.Option(
        help="Toolsets distractors are drawn from (default: every other toolset under "
             "descriptions/).")] = None,
    always_loaded: Annotated[Optional[list[str]], typer.Option(
        help="With --retriever native: tools sent without defer_loading (comma-separated; "
             "default none).")] = None,
    **factor_values: Optional[list[str]],  # one option per episode factor: with_factors
) -> None:
    """Run every case x variant x provider x trial, score it and print a per-variant table.

    Exit code 0: complete; 3: incomplete but resumable (a budget reached, or a provider
    skipped, e.g. for a missing key: one line says which); 2: bad input; 130/143: stopped.
    """
    options = dict(locals())  # every option by parameter name, as typer gave them
    with contextlib.ExitStack() as stack:  # holds the run's write lock when resuming
        # no collection while the run starts; its own setting once it runs (bench.collector)
        start_the_run = stack.enter_context(paused_until_the_run())
        from bench.project import Project

        project = Project.from_env()  # the command line's edge: BENCH_HOME or the cwd
        runner = open_from_options(ctx, project, options, stack)
        _print_start_notes(runner, resumed=bool(resume))
        pending = runner.pending()
        if resume and not pending and runner.store.load_manifest().status == "complete":
            err.print(f"run {runner.store.run_id} is already complete "
                      f"({count(len(runner.plan), 'row')}); nothing to do")
            print_summary(runner.store.run_id, runner.config.variants, project)
            return
        if resume:
            err.print(f"resuming run {runner.store.run_id}: {len(runner.plan) - len(pending)} "
                      f"of {count(len(runner.plan), 'row')} already done")
        _run_and_report(runner, project, pending, start_the_run)


def _run_and_report(runner: Runner, project: Project, pending: PendingItems,
                    start_the_run: Callable[[], None]) -> None:
    """Run ``pending`` with a progress display, then print the table, the retrieval signal
    and what to do next.

    Raises:
        typer.Exit: 3 for an incomplete run (a budget reached, a provider skipped), 130/143
            for a stop.
    """
    from bench.stats.running import RunningSummary

    # a run with no earlier rows sums its table as it writes: no second read at the end
    running = RunningSummary(runner.config.variants, unique_keys=True) \
        if len(pending) == len(runner.plan) else None
    manifest, incomplete, signal_ahead = _execute(runner, pending, start_the_run, running)
    # the project found at the start: code the run called may have changed the cwd since
    print_summary(runner.store.run_id, runner.config.variants, project, running=running)
    print_signal(runner, out, err, signal_ahead.future)
    _say_server_logs(runner.store.dir)
    _print_end(runner, manifest, incomplete)


def _execute(runner: Runner, pending: PendingItems, start_the_run: Callable[[], None],
             running: RunningSummary | None
             ) -> tuple[Manifest, RunIncomplete | None, SignalAhead]:
    """Run ``pending`` (:func:`bench.runner.lifecycle.execute_run`) under a progress display
    (a bar on a terminal, plain lines in CI logs), summing rows into ``running`` if given;
    return the run's manifest, the stop that left rows for a resume (or None) and the
    retrieval signal started on the way.

    Raises:
        BenchError: the run failed.
        typer.Exit: a stop (Ctrl-C, SIGTERM): 130 or 143, after saying what was kept.
    """
    from bench.progress import RunProgress
    from bench.runner.lifecycle import RunHooks, execute_run

    with RunProgress(err) as progress:  # a bar on a terminal, plain lines in CI logs
        signal_ahead = SignalAhead(runner, progress)

        running_now: list[bool] = []  # set once the providers run: a stop is then kept rows

        def started(runner: Runner, pending: PendingItems) -> None:
            running_now.append(True)
            _print_run_line(runner)
            # the time left, per condition at its own pace (a skipped provider's rows are
            # not sent)
            progress.set_plan(pending.without(runner.skipped))
            # Objects made so far (modules, dataset, variants, providers) live as long as
            # the command: frozen out of the collector's sight, which starts now
            start_the_run()

        hooks = RunHooks(provider_skipped=lambda pid, why: say(
                             f"provider {pid} skipped: {why}"),
                         started=started, progress=signal_ahead,
                         on_row=running.add if running is not None else None)
        incomplete = None
        try:
            manifest = execute_run(runner, hooks, pending=pending)
        except RunIncomplete as exc:  # rows left for a resume: show what is done
            progress.stop()
            incomplete, manifest = exc, runner.store.load_manifest()
        except BenchError:
            progress.stop()
            raise
        except KeyboardInterrupt:
            progress.stop()
            _say_stopped(runner, starting=not running_now)
    return manifest, incomplete, signal_ahead


def _print_end(runner: Runner, manifest: Manifest, incomplete: RunIncomplete | None) -> None:
    """The run's last lines (stderr): its rows and times, what to do next, and why it is
    incomplete.

    Raises:
        typer.Exit: 3 when the run is incomplete but resumable.
    """
    from bench.runner.plan import plan_conditions

    run_name = runner.store.run_id
    err.print(f"{count(manifest.rows_done or 0, 'row')} in {runner.store.results_path} "
              f"({manifest.started_at} -> {manifest.ended_at})")
    if manifest.status == "complete" and not manifest.rows_done:
        err.print("this run planned no rows (a shard larger than the plan, or no case "
                  "selected): nothing to report")
    elif manifest.status == "complete":
        # the first two conditions (variant names, or names with factors: l3~tools=40)
        compared = plan_conditions(runner.plan)[:2]
        err.print(f"next: bench report {run_name} (HTML in reports/{run_name}/)"
                  + (f"; bench compare {compared[0]} {compared[1]} --run {run_name}"
                     if len(compared) == 2 else ""))
    if incomplete is not None:
        say(f"partial run: {incomplete}")
        raise typer.Exit(INCOMPLETE_EXIT_CODE)
    if manifest.status == "budget_exhausted":  # incomplete: not to be taken as done
        err.print(f"budget reached ({manifest.to_json_dict().get('spent')}): "
                  f"{manifest.rows_done} of "
                  f"{count(len(runner.plan), 'row')}; continue with: bench run --resume "
                  f"{run_name} --max-usd N / --max-total-tokens N")
        raise typer.Exit(BUDGET_EXIT_CODE)
    if manifest.status == "partial":  # a skipped provider's rows are missing
        skipped = ", ".join(f"{p.provider} ({p.reason})"
                            for p in manifest.providers_skipped or [])
        say(f"partial run: {manifest.rows_done} of {count(len(runner.plan), 'row')}; "
            f"skipped {skipped}; fix that, then: bench run --resume {run_name}")
        raise typer.Exit(INCOMPLETE_EXIT_CODE)


def _print_start_notes(runner: Runner, resumed: bool) -> None:
    """The notes ``bench run`` prints before its providers start: a dataset without a split,
    cases left out by ``--skip-invalid-cases``, the session's (:attr:`bench.runner.session.
    RunSession.notes`), the tool space's, and variants that render the same text (stderr)."""
    from bench.descriptions.variants import same_text_groups, same_text_note

    if runner.config.split == "all" and not resumed:
        from bench.datasets.splits import has_splits
        if not has_splits(runner.dataset.cases):
            err.print(f"note: dataset '{runner.config.dataset}' has no dev/test split: "
                      "figures are on all its cases ('bench split' adds one)", markup=False)
    for problem in runner.invalid_cases:
        say(f"skipped case '{problem.case_id}' ({runner.dataset.path}:{problem.line}, "
            f"{problem.field}): {problem.message}")
    if runner.invalid_cases:
        skipped_cases = len({p.case_id for p in runner.invalid_cases})
        err.print(f"{count(skipped_cases, 'case')} skipped for labels that do not fit the "
                  "tools", markup=False)
    for line in [*runner.session.notes, *toolspace_notes(runner)]:  # session: episode factors
        err.print(line, markup=False, soft_wrap=True)
    for same_toolset, same_names in same_text_groups(runner.variants):
        err.print(f"note: {same_text_note(same_toolset, same_names)}", markup=False,
                  soft_wrap=True)


def _print_run_line(runner: Runner) -> None:
    """``run <id>: N cases x M variants x P providers x T trials -> <folder>`` (stderr)."""
    from bench.runner.plan import plan_conditions

    conditions = len(plan_conditions(runner.plan))
    shown = count(len(runner.variants), 'variant') if conditions <= len(runner.variants) \
        else count(conditions, 'condition')  # variants crossed with --tools, faults...
    err.print(f"run {runner.store.run_id}: {count(len(runner.cases), 'case')} x {shown} x "
              f"{count(len(runner.config.providers), 'provider')} x "
              f"{count(runner.config.trials, 'trial')}"
              + (f", shard {runner.config.shard}: {count(len(runner.plan), 'row')}"
                 if runner.config.shard else "") + f" -> {runner.store.dir}")


def _say_stopped(runner: Runner, starting: bool) -> NoReturn:
    """Say what a stop (Ctrl-C, SIGTERM) kept and how to finish, then exit 130 or 143.

    Args:
        starting: it came while the providers started (nothing was sent).

    Raises:
        typer.Exit: always.
    """
    terminated = was_terminated() or (runner.signals is not None
                                      and runner.signals.signum == signal.SIGTERM)
    if starting:
        err.print(f"{'terminated' if terminated else 'interrupted'} while starting the "
                  "providers; nothing was sent")
        raise typer.Exit(stopped(143 if terminated else 130))
    kept = sum(1 for _ in runner.store.load_rows())
    err.print(f"{'terminated' if terminated else 'interrupted'}: {kept} of "
              f"{count(len(runner.plan), 'row')} kept in {runner.store.results_path}; see "
              f"them with: bench show {runner.store.run_id}; finish with: bench run --resume "
              f"{runner.store.run_id}")
    raise typer.Exit(stopped(143 if terminated else 130))


def _say_server_logs(run_dir: Path) -> None:
    """One line naming the MCP server logs of the run folder that are not empty (its stderr:
    a traceback it printed lands there, not in bench's output)."""
    from bench.executor.runhook import server_logs
    logs = server_logs(run_dir)
    if logs:
        err.print(f"MCP server output (its stderr) in {', '.join(map(str, logs))}",
                  markup=False, soft_wrap=True)
