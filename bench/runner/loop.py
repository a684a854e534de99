"""The run loop: one asyncio task per request in flight, rows scored and written as answers
arrive, stop signals, budgets, failures and the final manifest (BRIEF §3: provider -> parse ->
score -> ``results.jsonl``). :class:`bench.runner.core.Runner` sets the run up and calls
:func:`execute_plan`.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from typing import TYPE_CHECKING, Any, Coroutine

from bench.episodes.loop import EpisodeOutcome, run_episode
from bench.errors import RunIncomplete
from bench.plural import count
from bench.providers import HTTPProvider
from bench.providers.batch import CHUNK as BATCH_CHUNK
from bench.providers.batch import BatchLedger, batch_kind
from bench.providers.cache import ResponseCache
from bench.providers.errors import STOPS_RUN, ProviderError, StopRequested
from bench.providers.ratelimit import GateClosed, ProviderGate
from bench.results import row_from_build
from bench.runner.batch import BatchFailed, Batcher
from bench.runner.budget import ProgressHook
from bench.runner.config import FAILED_IN_A_ROW_TO_PAUSE, STOP_GRACE_S
from bench.runner.plan import PlanItem
from bench.runner.rows import Outcome, _now, build_episode_row, build_row, summarize_case
from bench.runner.signals import StopSignals

if TYPE_CHECKING:
    from bench.runner.core import Runner
    from bench.runstore import RowWriter


async def execute_plan(runner: Runner, progress: ProgressHook | None,
                       signals: StopSignals) -> dict[str, Any]:
    """Execute every planned item not yet done; return the final manifest.

    One task per request in flight, at most ``concurrency(provider)`` per provider (each
    waits at its provider's gate, :class:`~bench.providers.ratelimit.ProviderGate`); in
    batch mode a batch-capable provider's requests are awaited through its
    :class:`~bench.runner.batch.Batcher` instead. Rows are scored and appended by the loop
    as answers arrive, in any order (each row carries its own key). The run ends with
    status ``complete``, ``budget_exhausted`` (a budget was reached: nothing new is sent,
    requests in flight are finished and kept; resume with a higher budget),
    ``interrupted`` (a stop signal, or a provider's :class:`StopRequested`, which stops the
    run as the first signal does; KeyboardInterrupt is raised) or ``failed``. After a
    first stop signal, requests in flight get ``request_timeout_s`` (a provider's own
    ``stop_wait_s`` when set) + :data:`STOP_GRACE_S` seconds to answer (their rows are
    written); then, or at a second signal, they are cancelled (not written; a resume sends
    them again).

    Provider errors never stop the run except auth and configuration errors (class
    ``permanent``: a bad key, an unknown model, a replay miss; class ``client``: a request the
    HTTP client refused to send, e.g. a bad base URL). A request that fails after
    every retry is left unwritten (listed in the manifest's ``request_errors``; a resume
    sends it again; stderr names it at once) and the run goes on; after
    :data:`FAILED_IN_A_ROW_TO_PAUSE` such
    failures in a row, that provider's remaining items are left for the resume too.

    Raises:
        BenchError: an auth or configuration error, or requests that failed after every
            retry (raised once the rest is done); rows finished are kept and the run can be
            resumed.
        KeyboardInterrupt: a stop signal ended the run.
    """
    loop = asyncio.get_running_loop()
    manifest = runner._manifest or runner._new_manifest()
    todo = runner.pending()
    done = len(runner.plan) - len(todo)
    previous_cache = manifest.get("cache") or {}
    if todo:
        runner.open_providers()
        manifest["providers"] = [p.describe() for p in runner.providers.values()]
        manifest["providers_skipped"] = [{"provider": k, "reason": v}
                                         for k, v in runner.skipped.items()]
        todo = [item for item in todo if item.provider_id not in runner.skipped]
    if runner.config.cache != "off":
        # RunConfig.cache is a str its validator limits to the cache modes
        runner.cache = ResponseCache(runner.cache_path,
                                     runner.config.cache)  # type: ignore[arg-type]
    runner.gates = {pid: ProviderGate(runner.concurrency(pid)) for pid in runner.providers}
    runner.batchers = {}
    if runner.config.batch:
        ledger = BatchLedger(runner.store.dir)
        for pid, provider in runner.providers.items():
            kind = batch_kind(provider)
            if kind is not None:
                assert isinstance(provider, HTTPProvider)
                runner.batchers[pid] = Batcher(provider, kind, ledger,
                                             poll_s=runner.config.batch_poll_s,
                                             sleep=lambda s: runner._sleep(s))
    manifest.update(status="running", rows_done=done, ended_at=None,
                    pricing=runner.pricing.describe())
    for stale in ("error", "request_errors", "providers_paused"):
        manifest.pop(stale, None)
    spend = runner._spent()
    finished = done
    if progress:
        progress(finished, len(runner.plan), None)
    queues: dict[str, deque[PlanItem]] = {}
    in_flight: dict[asyncio.Task[Outcome | EpisodeOutcome], PlanItem] = {}
    # Finished tasks arrive here through their done-callbacks: O(1) per request, where
    # asyncio.wait() adds and removes a callback on every task in flight at each call.
    completed: asyncio.Queue[asyncio.Task[Outcome | EpisodeOutcome]] = asyncio.Queue()
    failed_in_a_row = {pid: 0 for pid in runner.providers}
    per_provider = {pid: 0 for pid in runner.providers}
    rows: RowWriter | None = None  # opened in the try below: a failure there fails the run
    status, failure = "complete", None
    execution = None  # set in the try below: a failing MCP server start fails the run there
    case_summaries: dict[str, tuple[str, dict[str, Any]]] = {}

    def record(item: PlanItem, outcome: Outcome | EpisodeOutcome) -> None:
        nonlocal finished
        summary = case_summaries.get(item.case.id)
        if summary is None:
            summary = case_summaries[item.case.id] = summarize_case(item.case)
        if isinstance(outcome, EpisodeOutcome):
            record_episode(item, outcome, summary)
        else:
            cost, billed = runner._cost(item, outcome)
            assert rows is not None  # opened before any request is sent
            # written through the results contract (bench.results.Row): a row that does not
            # fit it is a bench bug, caught here rather than by the next reader
            rows.append(row_from_build(build_row(
                item, runner.store.run_id, outcome.response, cost_usd=cost,
                billed_usd=billed, attempts=outcome.attempts, cache=outcome.cache,
                execution=execution, case_summary=summary,
                bfcl=runner.bfcl.get(item.case.id))))
            if outcome.cache != "hit" and not item.provider_id.startswith("replay:"):
                usage = outcome.response.usage
                spend.add(billed or 0.0, usage.prompt_tokens + usage.completion_tokens)
        finished += 1
        if progress:
            progress(finished, len(runner.plan), item)

    def record_episode(item: PlanItem, episode: EpisodeOutcome,
                       summary: tuple[str, dict[str, Any]]) -> None:
        costs, billed_total = [], 0.0
        for response in episode.responses:  # each step priced as its own request
            cost, billed = runner._cost(item, Outcome(response, 1, episode.cache))
            costs.append(cost)
            billed_total += billed or 0.0
        total = None if not costs or None in costs else sum(c for c in costs if c is not None)
        assert rows is not None  # opened before any request is sent
        rows.append(row_from_build(build_episode_row(
            item, runner.store.run_id, episode, cost_usd=total, billed_usd=billed_total,
            case_summary=summary)))
        if episode.cache != "hit" and not item.provider_id.startswith("replay:"):
            spend.add(billed_total, episode.usage["prompt_tokens"]
                      + episode.usage["completion_tokens"])

    sent: deque[PlanItem] = deque()  # dispatched items whose labels are not prepared
    prepared: set[tuple[str, str]] = set()

    def warm_up() -> bool:
        """For one dispatched (case, variant): the row's case summary and the label's
        reference results, computed while the loop would otherwise wait for an answer.
        Only for requests already sent (a label's reference calls may run on a user's MCP
        server: none for rows that a budget stop or failure never records). Returns False
        when there is nothing to do."""
        while sent and status == "complete":
            item = sent.popleft()
            if (item.case.id, item.variant.name) in prepared:
                continue
            prepared.add((item.case.id, item.variant.name))
            if item.case.id not in case_summaries:
                case_summaries[item.case.id] = summarize_case(item.case)
            if execution is not None and item.case.kind != "episode":
                try:
                    execution.prepare(item.case, item.variant.tools, item.case.toolset)
                except Exception:  # noqa: BLE001 - the row's own scoring reports it
                    pass
            return True
        return False

    def cap(pid: str) -> int:
        """Tasks in flight per provider: its concurrency, or a whole batch in batch mode."""
        return BATCH_CHUNK if pid in runner.batchers else runner.concurrency(pid)

    def dispatch() -> None:
        nonlocal status
        for pid, pending in queues.items():
            while pending and per_provider[pid] < cap(pid):
                decision = runner._budget(spend, len(in_flight))
                if decision == "wait":
                    return
                if decision == "stop":
                    status = "budget_exhausted"
                    return
                item = pending.popleft()
                request: Coroutine[Any, Any, Outcome | EpisodeOutcome] = (
                    run_episode(runner, item, execution) if item.case.kind == "episode"
                    else runner.execute(item))
                task = loop.create_task(request)
                in_flight[task] = item
                per_provider[pid] += 1
                task.add_done_callback(completed.put_nowait)
                sent.append(item)

    def stop_everything() -> None:
        for pending in queues.values():
            pending.clear()
        for gate in runner.gates.values():
            gate.close()

    give_up_timer: asyncio.TimerHandle | None = None

    def give_up() -> None:
        """Cancel the requests still in flight (their rows are not written: resumable)."""
        why = "the run stopped before this request was answered"
        for task in in_flight:
            task.cancel()
        for provider in runner.providers.values():
            provider.abandon(why)

    def stop_signal(stops: int) -> None:
        nonlocal status, give_up_timer
        status = "interrupted"
        stop_everything()
        if stops > 1:
            give_up()
            return
        wait = max((runner.config.request_timeout_s if p.stop_wait_s is None
                    else p.stop_wait_s for p in runner.providers.values()),
                   default=0.0) + STOP_GRACE_S
        if in_flight:
            print(f"stopping: waiting up to {wait:.0f} s for "
                  f"{count(len(in_flight), 'request')} in flight (a second "
                  "Ctrl-C stops now)", file=sys.stderr, flush=True)
        give_up_timer = loop.call_later(wait, give_up)

    signals.install(loop, stop_signal)
    try:
        # inside the try: a manifest or results.jsonl that cannot be written (read-only,
        # immutable, a folder in its place) marks the run failed, never leaves it "running"
        runner.store.write_manifest(manifest)
        rows = runner.store.writer()
        # inside the try: a failure to start the executor (e.g. its MCP server) marks the
        # run failed and closes the row writer (whose fsync thread would otherwise live on)
        execution = _execution(runner.config, runner.store) if todo else None
        queues.update({pid: deque(i for i in todo if i.provider_id == pid)
                       for pid in runner.providers})
        dispatch()
        while in_flight:
            if completed.empty() and warm_up():
                await asyncio.sleep(0)  # let finished requests report first
                continue
            task = await completed.get()
            item = in_flight.pop(task)
            per_provider[item.provider_id] -= 1
            if task.cancelled():
                continue  # given up after a stop signal: a resume sends it again
            exc = task.exception()
            if exc is None:
                failed_in_a_row[item.provider_id] = 0
                record(item, task.result())
            elif isinstance(exc, GateClosed):
                pass
            elif isinstance(exc, StopRequested):  # as if Ctrl-C: its row is not written
                if status == "complete":
                    print(exc, file=sys.stderr, flush=True)
                    stop_signal(1)
            elif isinstance(exc, BatchFailed):
                runner.batch_errors.append({"key": item.key, "batch": exc.batch_id,
                                          "error": str(exc)})
            elif isinstance(exc, ProviderError) and exc.error_class not in STOPS_RUN and \
                    failure is None:
                # retries exhausted: the item stays pending, the run goes on; said at once
                # (the run's own message comes at its end)
                runner.request_errors.append({"key": item.key, "error": str(exc)})
                print(f"{item.provider_id}: case '{item.case.id}', variant '{item.condition}'"
                      f", trial {item.trial} left for --resume: {exc}", file=sys.stderr,
                      flush=True)
                failed_in_a_row[item.provider_id] += 1
                if failed_in_a_row[item.provider_id] >= FAILED_IN_A_ROW_TO_PAUSE and \
                        item.provider_id not in runner.paused:
                    runner.paused[item.provider_id] = (
                        f"{FAILED_IN_A_ROW_TO_PAUSE} requests in a row failed after "
                        f"every retry (last: {exc})")
                    queues[item.provider_id].clear()
            elif failure is None:
                if not isinstance(exc, Exception):
                    raise exc  # KeyboardInterrupt, SystemExit: not a provider's failure
                failure = runner._error(item, exc)
                status = "failed"
                stop_everything()
            if status == "complete":
                dispatch()
        if runner.request_errors and failure is None and status != "interrupted":
            first = runner.request_errors[0]
            paused = "".join(f"; stopped sending to {pid}: {why}"
                             for pid, why in runner.paused.items())
            failure = RunIncomplete(
                f"{count(len(runner.request_errors), 'request')} failed after every retry "
                f"(first: {first['key']}: {first['error']}){paused}; finished rows are "
                f"kept, send the rest again with: bench run --resume {runner.store.run_id}")
        if runner.batch_errors and failure is None:
            first = runner.batch_errors[0]
            failure = RunIncomplete(
                f"{count(len(runner.batch_errors), 'batch request')} failed (first: "
                f"{first['key']}: {first['error']}); finished rows are kept, submit the "
                f"rest again with: bench run --resume {runner.store.run_id}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        status = "interrupted"
        raise
    except OSError as exc:  # a file of the run could not be written (e.g. the disk is full)
        status = "failed"
        failure = runner._write_failure(exc)
        manifest["error"] = str(failure)
    except BaseException as exc:
        status = "failed"
        manifest["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        # Nothing here awaits before the manifest is written: a signal (a loop callback)
        # cannot leave it at "running".
        signals.remove()
        if give_up_timer is not None:
            give_up_timer.cancel()
        stop_everything()
        for task in in_flight:
            task.cancel()
        try:
            if rows is not None:
                rows.close()
        except OSError as exc:  # e.g. the disk filled up: recorded, cleanup goes on
            if failure is None:
                failure = runner._write_failure(exc)
        if failure is not None:  # resumable rows left (partial), or a failure
            status = "partial" if isinstance(failure, RunIncomplete) else "failed"
            manifest["error"] = str(failure)
        if status == "complete" and runner.skipped:
            status = "partial"  # a skipped provider's rows are missing; --resume runs them
        manifest.update(status=status, rows_done=finished, ended_at=_now(),
                        spent={"billed_usd": round(spend.usd, 6),
                               "billed_tokens": spend.tokens,
                               "billed_requests": spend.requests},
                        budget={"max_usd": runner.config.max_usd,
                                "max_total_tokens": runner.config.max_total_tokens},
                        rate_limits={pid: vars(g.stats) for pid, g in runner.gates.items()})
        if runner.batch_errors:
            manifest["batch_errors"] = runner.batch_errors[:100]
        if runner.request_errors:
            manifest["request_errors"] = runner.request_errors[:100]
        if runner.paused:
            manifest["providers_paused"] = [{"provider": k, "reason": v}
                                            for k, v in runner.paused.items()]
        if runner.cache is not None or previous_cache:
            now = runner.cache.stats() if runner.cache is not None else {}
            manifest["cache"] = {
                **previous_cache, **now,
                **{k: int(previous_cache.get(k, 0)) + int(now.get(k, 0))
                   for k in ("hits", "misses", "writes")}}
        if execution is not None:
            try:
                execution.close()
            except OSError as exc:
                if failure is None:
                    failure = runner._write_failure(exc)
                    status = "failed"
                    manifest.update(status=status, error=str(failure))
        try:
            runner.store.write_manifest(manifest)
        except OSError as exc:  # a full disk: the status, at least, must not say running
            runner.store.set_status_in_place(status)
            if failure is None:
                failure = runner._write_failure(exc)
        if in_flight:  # cancelled above: let them finish cancelling
            await asyncio.gather(*in_flight, return_exceptions=True)
        for batcher in runner.batchers.values():
            await batcher.aclose()
        for provider in runner.providers.values():
            try:
                await provider.aclose()
            except Exception:  # noqa: BLE001 - a connection pool that fails to close
                pass
        runner.providers.clear()
        if runner.cache is not None:
            runner.cache.close()
    if failure is not None:
        raise failure
    if status == "interrupted":
        raise KeyboardInterrupt
    return manifest


def _execution(config: Any, store: Any) -> Any:
    """The run's executor hook, or None with ``--no-execute``."""
    if not config.execute:
        return None
    from bench.executor.runhook import RunExecution
    return RunExecution(store.dir, store.run_id, allow_writes=config.allow_writes,
                        allow_sensitive=config.allow_sensitive, mcp_command=config.mcp_server)
