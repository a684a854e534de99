"""The ``bench`` command line (typer)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, NoReturn, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from bench.cli_import import import_app
from bench.cli_init import init
from bench.cli_lint import lint
from bench.cli_split import split
from bench.cli_synth import review, synth
from bench.cli_variants import variants_app
from bench.cli_toolspace import OPTION_FIELDS as SPACE_OPTIONS
from bench.collector import paused_until_the_run
from bench.cli_toolspace import (SignalAhead, option_value, print_signal, space_fields,
                                 toolspace_notes)
from bench.episodes.factors import FACTORS
from bench.errors import BenchError, RunIncomplete, pydantic_error_field, shorten_message
from bench.limits import (DEFAULT_ATTEMPTS,
                          DEFAULT_CONCURRENCY, DEFAULT_PROVIDERS, DEFAULT_VARIANTS,
                          MAX_ATTEMPTS, MAX_CONCURRENCY, MAX_TRIALS)
from bench.plural import count

if TYPE_CHECKING:
    from bench.results import Row
    from bench.runner import Runner
    from bench.runner.plan import PendingItems
    from bench.stats.running import RunningSummary

# The run ended incomplete and can be resumed: it stopped at --max-usd / --max-total-tokens
# (status budget_exhausted), or a provider was skipped, e.g. for a missing key (partial).
INCOMPLETE_EXIT_CODE = 3
BUDGET_EXIT_CODE = INCOMPLETE_EXIT_CODE

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Benchmark LLM tool descriptions: tool selection, arguments and token "
                       "cost per description variant and provider.")
out = Console()
if not out.is_terminal and "COLUMNS" not in os.environ:
    out = Console(width=200)  # logs and CI: keep the table's rows on one line each
err = Console(stderr=True, soft_wrap=True)  # messages unwrapped: commands stay copyable


def _split(values: list[str] | None, option: str | None = None) -> list[str]:
    """The names of a comma-separated, repeatable option (``--variants a,b --variants c``).

    Raises:
        BenchError: ``option`` given (not None) only with empty names (``--variants ""``):
            an empty list would silently mean the default.
    """
    items: list[str] = []
    for value in values or []:
        items += [v.strip() for v in value.split(",") if v.strip()]
    if option and values is not None and not items:
        raise BenchError(f"{option} needs at least one name (got {', '.join(map(repr, values))})")
    return items


def _print_summary(run_id: str, variant_order: list[str], project: Any = None,
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
        _print_pass_k(running, trials)


def _print_pass_k(running: RunningSummary, trials: int) -> None:
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


def _shard_option(value: str | None) -> str | None:
    """``--shard``'s check: ``i/n`` (:func:`bench.shard.parse_shard`), canonical form.

    Raises:
        typer.BadParameter: another form (a one-line usage error, exit 2).
    """
    if value is None:
        return None
    from bench.shard import format_shard, parse_shard
    try:
        return format_shard(*parse_shard(value))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _with_factors(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (whose last parameter is ``**factor_values``) with one keyword option per
    episode factor of :data:`bench.episodes.factors.FACTORS` in its signature, as typer reads
    it (``inspect.signature``, then the annotations): ``--<factor>`` takes comma-separated or
    repeated settings and reaches ``factor_values[<factor>]``. A new factor needs no edit
    here (docs/extending.md, "Add an episode factor").
    """
    import inspect

    from bench.episodes.factors import FACTOR_HELP, FACTORS

    signature = inspect.signature(command, eval_str=True)
    fixed = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation=Annotated[Optional[list[str]],
                                                    typer.Option(help=FACTOR_HELP[name])])
             for name in FACTORS]
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*fixed, *added])
    command.__annotations__ = {**{p.name: p.annotation for p in fixed},
                               **{p.name: p.annotation for p in added}, "return": None}
    return command


@app.command()
@_with_factors
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
        callback=_shard_option, metavar="I/N",
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
    **factor_values: Optional[list[str]],  # one option per episode factor: _with_factors
) -> None:
    """Run every case x variant x provider x trial, score it and print a per-variant table.

    Exit code 0: complete; 3: incomplete but resumable (a budget reached, or a provider
    skipped, e.g. for a missing key: one line says which); 2: bad input; 130/143: stopped.
    """
    with contextlib.ExitStack() as stack:  # holds the run's write lock when resuming
        # no collection while the run starts; its own setting once it runs (bench.collector)
        start_the_run = stack.enter_context(paused_until_the_run())
        from bench.project import Project
        from bench.runner import RunConfig
        from bench.runner.lifecycle import RunHooks, execute_run, open_run
        from bench.runner.plan import plan_conditions

        project = Project.from_env()  # the command line's edge: BENCH_HOME or the cwd

        throughput = {"concurrency": concurrency,
                      "max_usd": max_usd, "cache": cache,
                      "max_total_tokens": max_total_tokens, "cache_path": cache_path,
                      "pricing": pricing, "attempts": attempts, "batch": batch,
                      "batch_poll_s": batch_poll_s,
                      # may change on resume (the model's SHA-256 is checked against the run's)
                      "model": model, "model_path": model_path}
        if cache is not None and cache not in ("off", "read", "write", "readwrite"):
            raise BenchError(f"--cache must be off, read, write or readwrite, not '{cache}'")
        if model and model_path:
            raise BenchError("--model and --model-path both name the model: give one")
        if resume:
            # options given again are compared with the stored config: only a change is refused
            given, options = _resume_settings(ctx)
            runner = open_run(project, resume=resume, overrides={**throughput, **given},
                              setting_names=options)
            _resume_credentials(resume, _split(provider, "--provider"),
                                runner.config.providers)
            # before anything reads the rows or starts a provider: another process may be writing
            stack.enter_context(runner.store.writing())
        else:
            mcp_server = _mcp_argv(execute_mcp)
            try:
                # the options' raw values, checked by RunConfig (e.g. --split's text)
                config = RunConfig.model_validate(dict(
                    dataset=dataset or _default_dataset(),
                    variants=_split(variants, "--variants") or list(DEFAULT_VARIANTS),
                    providers=_split(provider, "--provider") or list(DEFAULT_PROVIDERS),
                    trials=trials,
                    limit=limit,
                    split=split,
                    case_ids=_split(cases, "--cases") or None,
                    seed=seed,
                    max_tokens=max_tokens, no_call_layout=no_call_layout, threads=threads,
                    tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                    openai_strict=openai_strict, stream=stream, request_timeout_s=request_timeout,
                    execute=execute, allow_writes=allow_writes, allow_sensitive=allow_sensitive,
                    mcp_server=mcp_server, error_pattern=error_pattern,
                    skip_invalid_cases=skip_invalid_cases, shard=shard,
                    factors={name: _split(values, f"--{name.replace('_', '-')}")
                             for name, values in factor_values.items() if values},
                    **space_fields(tools, retriever, top_k, distractors, always_loaded),
                    **{k: v for k, v in throughput.items() if v is not None}))
            except ValidationError as exc:  # a limit the options do not state
                field, message = pydantic_error_field(exc)
                # a factor's setting (factors.error_style) is its own option (--error-style)
                option = (field or "").removeprefix("factors.").replace("_", "-")
                raise BenchError(f"--{option}: {message}" if field else message) from None
            runner = open_run(project, config=config, run_id=run_id)
        run_name = runner.store.run_id
        _print_start_notes(runner, resumed=bool(resume))
        pending = runner.pending()
        if resume and not pending and runner.store.load_manifest().status == "complete":
            err.print(f"run {run_name} is already complete ({count(len(runner.plan), 'row')}); "
                      "nothing to do")
            _print_summary(run_name, runner.config.variants, project)
            return
        if resume:
            err.print(f"resuming run {run_name}: {len(runner.plan) - len(pending)} of "
                      f"{count(len(runner.plan), 'row')} already done")
        from bench.progress import RunProgress
        from bench.stats.running import RunningSummary

        # a run with no earlier rows sums its table as it writes: no second read at the end
        running = RunningSummary(runner.config.variants, unique_keys=True) \
            if len(pending) == len(runner.plan) else None
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

            hooks = RunHooks(provider_skipped=lambda pid, why: _say(
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
        # the project found at the start: code the run called may have changed the cwd since
        _print_summary(run_name, runner.config.variants, project, running=running)
        print_signal(runner, out, err, signal_ahead.future)
        _say_server_logs(runner.store.dir)
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
            _say(f"partial run: {incomplete}")
            raise typer.Exit(INCOMPLETE_EXIT_CODE)
        if manifest.status == "budget_exhausted":  # incomplete: not to be taken as done
            err.print(f"budget reached ({manifest.to_json_dict().get('spent')}): "
                      f"{manifest.rows_done} of "
                      f"{count(len(runner.plan), 'row')}; continue with: bench run --resume "
                      f"{run_name} --max-usd N / --max-total-tokens N")
            raise typer.Exit(BUDGET_EXIT_CODE)
        if manifest.status == "partial":  # a skipped provider's rows are missing
            skipped = ", ".join(f"{p['provider']} ({p['reason']})"
                                for p in manifest.providers_skipped or [])
            _say(f"partial run: {manifest.rows_done} of {count(len(runner.plan), 'row')}; "
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
        _say(f"skipped case '{problem.case_id}' ({runner.dataset.path}:{problem.line}, "
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
    terminated = _terminated or (runner.signals is not None
                                 and runner.signals.signum == signal.SIGTERM)
    if starting:
        err.print(f"{'terminated' if terminated else 'interrupted'} while starting the "
                  "providers; nothing was sent")
        raise typer.Exit(_stopped(143 if terminated else 130))
    kept = sum(1 for _ in runner.store.load_rows())
    err.print(f"{'terminated' if terminated else 'interrupted'}: {kept} of "
              f"{count(len(runner.plan), 'row')} kept in {runner.store.results_path}; see "
              f"them with: bench show {runner.store.run_id}; finish with: bench run --resume "
              f"{runner.store.run_id}")
    raise typer.Exit(_stopped(143 if terminated else 130))


def _say_server_logs(run_dir: Path) -> None:
    """One line naming the MCP server logs of the run folder that are not empty (its stderr:
    a traceback it printed lands there, not in bench's output)."""
    from bench.executor.runhook import server_logs
    logs = server_logs(run_dir)
    if logs:
        err.print(f"MCP server output (its stderr) in {', '.join(map(str, logs))}",
                  markup=False, soft_wrap=True)


def _default_dataset() -> str:
    """The dataset ``bench run`` takes without ``--dataset``: a project's only one (a
    ``bench init`` project has one), else the shipped ``ecommerce``."""
    from bench.datasets import available_datasets
    found = available_datasets()
    return found[0] if len(found) == 1 else "ecommerce"


def _mcp_argv(execute_mcp: str | None) -> list[str] | None:
    """``--execute-mcp``'s command line as argv (:func:`shlex.split`), or None.

    Raises:
        BenchError: it cannot be split (e.g. an unclosed quote).
    """
    try:
        return shlex.split(execute_mcp) if execute_mcp else None
    except ValueError as exc:
        raise BenchError(f"--execute-mcp: {exc} in '{execute_mcp}'") from None


# `bench run` options whose RunConfig field has another name; the factor options set
# factors.<option>.
_OPTION_FIELDS = {"cases": "case_ids", "request_timeout": "request_timeout_s",
                  "execute_mcp": "mcp_server"}
_FACTOR_OPTIONS = tuple(FACTORS)


def _resume_settings(ctx: typer.Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The run settings given on ``bench run --resume``'s command line, for
    :meth:`bench.runner.Runner.resume` to compare with the stored ones: (RunConfig field ->
    value, with ``factors`` holding the factor options given; setting -> the option that
    gave it, ``factors.<name>`` for a factor). ``--provider`` is checked by
    :func:`_resume_credentials`; the settings a resume may change
    (:data:`bench.runner.config.RESUME_OVERRIDES`) are passed on their own.

    Raises:
        BenchError: ``--run-id`` names another run than ``--resume``, or an option's value
            cannot be read (an empty ``--variants``, an unclosed quote in
            ``--execute-mcp``).
    """
    from bench.runner.config import RESUME_OVERRIDES

    params = ctx.params
    given: dict[str, Any] = {}
    factors: dict[str, list[str]] = {}
    options: dict[str, str] = {}
    for name, value in params.items():
        if name in ("resume", "provider", *RESUME_OVERRIDES) or \
                getattr(ctx.get_parameter_source(name), "name", "") != "COMMANDLINE":
            continue
        option = f"--{name.replace('_', '-')}"
        options[f"factors.{name}" if name in _FACTOR_OPTIONS
                else SPACE_OPTIONS.get(name) or _OPTION_FIELDS.get(name, name)] = option
        if name == "run_id":
            if value != params["resume"]:
                raise BenchError(f"--run-id cannot change when resuming '{params['resume']}':"
                                 f" stored {params['resume']}, given {value}; start a new run "
                                 "to use another id")
        elif name in _FACTOR_OPTIONS:
            factors[name] = _split(value, option)
        elif name in SPACE_OPTIONS:
            given[SPACE_OPTIONS[name]] = option_value(name, value)
        elif name in ("variants", "cases"):
            given[_OPTION_FIELDS.get(name, name)] = _split(value, option)
        elif name == "execute_mcp":
            given["mcp_server"] = _mcp_argv(value)
        else:
            given[_OPTION_FIELDS.get(name, name)] = value
    if factors:
        given["factors"] = factors
    return given, options


def _resume_credentials(run_id: str, given: list[str], stored: list[str]) -> None:
    """Check ``--provider`` ids given with ``--resume``: each must be a stored provider, given
    again as it is or with its base URL's credentials (``user:password@``, never stored:
    :mod:`bench.redact`); their public ids were registered when ``given`` was parsed here.

    Raises:
        BenchError: an id whose public form is not a provider of the run (names the stored
            and the given providers).
    """
    from bench.redact import public_provider_id
    for provider_id in given:
        public = public_provider_id(provider_id)
        if public not in stored:
            raise BenchError(f"--provider cannot change when resuming '{run_id}': stored "
                             f"{','.join(stored)}, given {public} (it would change what the "
                             "run measures); with --resume it only gives a stored provider's "
                             "id again, or its base-URL secrets (user:password@, ?key=<value>)")


@app.command()
def doctor(
    model: Annotated[Optional[str], typer.Option(help="A model preset (default qwen2.5-coder-0.5b).")]
    = None,
    model_path: Annotated[Optional[str], typer.Option(help="A GGUF file instead of a preset.")]
    = None,
) -> None:
    """Check that the embedded model runs well here: versions, CPU and llama.cpp build, load on
    the cores, a one-line answer, tokens/s, and the default run's expected time. Exit 1 on a
    failed check (each says its fix)."""
    if model and model_path:
        raise BenchError("--model and --model-path both name the model: give one")
    from bench.providers.local.doctor import main as doctor_main
    raise typer.Exit(doctor_main(model, model_path))


@app.command()
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
    _print_summary(run_id, [str(v) for v in order], project, rows=rows)  # streamed
    if per_tool:
        from bench.cli_pertool import print_per_tool
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


@app.command()
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
    _print_summary(result.run_id, [str(v) for v in manifest.config["variants"]])
    err.print(f"merged {count(len(runs), 'run')} into run {result.run_id}: "
              f"{manifest.rows_done} of {count(manifest.rows_planned, 'row')} "
              f"({manifest.status})", markup=False)
    if manifest.status != "complete":
        err.print(f"finish it with: bench run --resume {result.run_id}", markup=False)
        raise typer.Exit(INCOMPLETE_EXIT_CODE)


from bench.compare.command import compare  # noqa: E402 - typer needs the function object
app.command()(compare)
app.add_typer(variants_app, name="variants")
app.add_typer(import_app, name="import")
app.command("lint")(lint)
app.command("split")(split)
from bench.cli_check import check  # noqa: E402
app.command("check")(check)
app.command("init")(init)
app.command("synth")(synth)
app.command("review")(review)
from bench.gate.command import baseline_app  # noqa: E402
app.add_typer(baseline_app, name="baseline")
from bench.traces_cmd import traces  # noqa: E402
app.command("traces")(traces)
from bench.cli_labels import labels_app  # noqa: E402
app.add_typer(labels_app, name="labels")
from bench.cli_optimize import optimize_app  # noqa: E402
app.add_typer(optimize_app, name="optimize")


from bench.report.command import report  # noqa: E402
app.command()(report)


def _unwrap_docstrings(typer_app: typer.Typer) -> None:
    """Give each command's help its docstring with each paragraph on one line: rich keeps a
    docstring's line breaks and wraps again, which cut sentences mid-line in ``--help``."""
    import inspect
    for command in typer_app.registered_commands:
        if command.help is None and command.callback is not None and command.callback.__doc__:
            paragraphs = inspect.cleandoc(command.callback.__doc__).split("\n\n")
            command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _unwrap_docstrings(group.typer_instance)


_unwrap_docstrings(app)


def main() -> None:
    """Console-script entry point.

    Exit codes: 0 done; 2 bad input (one ``error:`` line naming file, line and field, or a
    usage error from the CLI parser); 3 an incomplete, resumable run (a budget reached, or a
    provider skipped: status ``partial``; one line says which); 130 interrupted (Ctrl-C); 143
    terminated (SIGTERM, e.g. a CI job's timeout); 141 the reader of the output went away
    (``bench compare ... | head``: 128 + SIGPIPE, as a shell reports it). Both stops (130, 143)
    end a run the same way: finished rows are kept, the manifest says ``interrupted``, and
    ``bench run --resume`` continues. Bad input never shows a
    traceback.
    """
    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C raises KeyboardInterrupt even when bench inherited SIGINT ignored (a shell
    # script's `bench ... &`): Python and asyncio.run then leave it ignored, so only the
    # run loop, which installs its own handler, stopped on it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    atexit.register(_ignore_stop_signals)
    from bench.redact import RedactingStream
    if not isinstance(sys.stderr, RedactingStream):  # every message, from bench or a library
        sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    # typer 0.29 vendors click as typer._click (typer.core uses it); older typer uses click
    click = getattr(typer.core, "_click", None) or __import__("click")
    try:
        # not standalone: usage errors come here and are said in one line like every other
        # error (typer's standalone mode draws a multi-line box)
        code = app(prog_name="bench", standalone_mode=False)
        if code == 130 and _stop_code is None:  # typer's silent exit for a KeyboardInterrupt
            _fail_stopped()
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)
    except click.exceptions.NoArgsIsHelpError as exc:  # `bench` or `bench variants` alone
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        sys.exit(2)
    except click.exceptions.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "bench"
        _fail(f"{command}: {exc.format_message()} (see {command} --help)", 2)
    except click.exceptions.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except typer.Abort:  # end of input at a prompt
        _fail_stopped()
    except BenchError as exc:
        _fail(str(exc), exc.exit_code)
    except OSError as exc:  # unreadable or unwritable files and folders
        where = f"{exc.filename}: " if exc.filename else ""
        _fail(f"{where}{exc.strerror or exc}", 2)
    except KeyboardInterrupt:
        _fail_stopped()
    finally:
        # Everything is written and said. A signal while the interpreter joins worker threads
        # exits at once with the stop's code (it used to end the process by SIGINT, exit -2).
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _exit_at_once)


def _ignore_stop_signals() -> None:
    """atexit (after worker threads are joined): ignore SIGINT/SIGTERM for the rest of the
    interpreter's teardown (about 1 s here), which would otherwise put back the default
    handlers and let a late signal kill a finished command (Python keeps SIG_IGN as it is)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


_terminated = False


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM handler: stop like Ctrl-C (the run loop saves what is finished)."""
    global _terminated
    _terminated = True
    raise KeyboardInterrupt


_stop_code: int | None = None  # the exit code a stop chose (130/143), kept by a late signal


def _stopped(code: int) -> int:
    """Note ``code`` as the exit code of this stop (the first one counts); return it."""
    global _stop_code
    if _stop_code is None:
        _stop_code = code
    return _stop_code


def _exit_at_once(signum: int, frame: object) -> None:
    """Signal handler for after the command: exit now, with the code the stop already chose,
    else 143 (SIGTERM) or 130 (SIGINT)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_stop_code or (143 if signum == signal.SIGTERM else 130))


def _fail_stopped() -> None:
    """Exit for a stop signal that no command reported: say which one, exit 143 or 130."""
    _fail("terminated" if _terminated else "interrupted", _stopped(143 if _terminated else 130))


def _say(message: str) -> None:
    """Print one message line to stderr, cut by :func:`bench.errors.shorten_message` (it
    may hold a provider's or user code's text of any length) and as is: its brackets (an
    extra's name, a list) are not rich markup."""
    err.print(shorten_message(message), soft_wrap=True, markup=False)


def _fail(message: str, code: int) -> None:
    """Print ``error: <message>`` (cut as :func:`_say` cuts) and exit with ``code``."""
    err.print(Text.assemble(("error: ", "bold red"), shorten_message(message)), soft_wrap=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
