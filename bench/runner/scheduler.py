"""The scheduler (BRIEF §3: provider -> parse -> score -> ``results.jsonl``): the run's setup
from a :class:`~bench.runner.session.RunSession`, models asked only through each provider's
request pipeline (:mod:`bench.providers.pipeline`), money kept in a
:class:`~bench.runner.ledger.Ledger`."""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Sequence

from bench.episodes.factors import Factors
from bench.episodes.loop import EpisodeOutcome, EpisodeRun, run_episode
from bench.errors import RunIncomplete
from bench.models import Message
from bench.plural import count
from bench.providers.batch import CHUNK as BATCH_CHUNK
from bench.providers.batch import BatchLedger
from bench.providers.batcher import BatchFailed, Batcher
from bench.providers.cache import ResponseCache
from bench.providers.errors import STOPS_RUN, ProviderError, StopRequested
from bench.providers.pipeline import LayerFactory, Outcome, Pipeline
from bench.providers.ratelimit import GateClosed
from bench.results import (Manifest, ManifestBatchError, ManifestCache, ManifestChanges,
                           ManifestProviderNote, ManifestRequestError)
from bench.runner.budget import ProgressHook, RowHook
from bench.runner.config import FAILED_IN_A_ROW_TO_PAUSE, STOP_GRACE_S
from bench.providers.replay import ReplayMiss
from bench.runner.errors import cancelled_error, error_text, item_error, left_over_error
from bench.runner.manifest import final_fields
from bench.runner.inflight import BudgetStop, InFlight
from bench.runner.ledger import Ledger
from bench.runner.plan import PendingItems, PlanItem
from bench.runner.finisher import RowFinisher
from bench.runner.session import RunSession
from bench.runner.signals import StopSignals
from bench.runner.startup import StartedProviders, start_execution

if TYPE_CHECKING:
    from bench.executor.runhook import RunExecution

Answer = Outcome | EpisodeOutcome

WARM_UP_AHEAD = 256
"""Dispatched items whose labels may wait to be prepared ahead (the newest kept): a held
item is about 100 bytes, and a provider faster than row finishing never idles the loop
(a 50,000-row oracle run held 48,000 of them, 4 MiB, at its peak)."""


class Scheduler:
    """Executes the pending items of one run; :meth:`run` returns the final manifest.

    One task per request in flight, at most ``concurrency(provider)`` per provider (each
    waits at its provider's gate, :class:`~bench.providers.ratelimit.ProviderGate`); in batch
    mode a batch-capable provider's requests are awaited through its
    :class:`~bench.providers.batcher.Batcher` instead. Rows are scored and appended as answers
    arrive, in any order (each row carries its own key). The run ends with status
    ``complete``, ``budget_exhausted`` (a budget was reached: nothing new is sent, requests in
    flight are finished and kept; resume with a higher budget), ``interrupted`` (a stop
    signal, or a provider's :class:`StopRequested`, which stops the run as the first signal
    does; KeyboardInterrupt is raised), ``partial`` or ``failed``. After a first stop signal,
    requests in flight get ``request_timeout_s`` (a provider's own ``stop_wait_s`` when set) +
    :data:`STOP_GRACE_S` seconds to answer (their rows are written); then, or at a second
    signal, they are cancelled (not written; a resume sends them again).

    Only auth and configuration errors stop the run (class ``permanent``: a bad key, an
    unknown model, a replay miss; ``client``: a request the HTTP client refused to send). A
    request failing after every retry is left for the resume (manifest ``request_errors``,
    named on stderr at once); after :data:`FAILED_IN_A_ROW_TO_PAUSE` in a row, so are that
    provider's remaining items.

    Args:
        session: the run's setup.
        started: its providers (started here when there is work).
        ledger: cost, spend and budget.
        progress: called per row written (:data:`ProgressHook`).
        on_row: given each row once it is written (:data:`RowHook`).
        signals: the stop signals to install.
        layers: user layers added to every provider's pipeline.
        sleep: how batch polling waits (seconds; tests replace it).
    """

    def __init__(self, session: RunSession, started: StartedProviders, ledger: Ledger, *,
                 progress: ProgressHook | None, signals: StopSignals,
                 on_row: RowHook | None = None,
                 layers: Sequence[LayerFactory] = (),
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.session, self.started, self.ledger = session, started, ledger
        self.config, self.store = session.config, session.store
        self.progress, self.signals, self.layers, self.sleep = progress, signals, layers, sleep
        self.pipelines, self.batchers = dict[str, Pipeline](), dict[str, Batcher]()
        self.cache: ResponseCache | None = None
        # requests that failed after every retry (a resume sends them again) or in a batch;
        # replay misses (the run looks the rest up, then fails naming them all)
        self.batch_errors: list[ManifestBatchError] = []
        self.request_errors: list[ManifestRequestError] = []
        self.replay_misses: list[tuple[PlanItem, ReplayMiss]] = []
        self.paused: dict[str, str] = {}  # provider id -> why its remaining items were not sent
        self.in_flight: InFlight[Answer] = InFlight(PendingItems(()), [])
        self.failed_in_a_row: dict[str, int] = {}
        # dispatched items whose labels are not prepared: the newest only (warming up is
        # optional, and a fast provider never leaves the loop idle to do it)
        self.sent: deque[PlanItem] = deque(maxlen=WARM_UP_AHEAD)
        self.status = "complete"
        self.failure_error: BaseException | None = None
        self.execution: RunExecution | None = None
        self.finisher = RowFinisher(session, ledger, progress, on_row,
                                    hook_failed=self._hook_failed)
        self.give_up_timer: asyncio.TimerHandle | None = None
        self.gave_up = False  # the run cancelled its tasks
        self.manifest: Manifest = session.manifest or session.new_manifest()
        self.previous_cache: ManifestCache | None = None

    def _start(self) -> PendingItems:
        """Read what is done, start the providers and build their pipelines; return the
        items to send."""
        session, started = self.session, self.started
        todo, self.ledger.spend = session.pending_and_spent()  # a resume keeps its spend
        self.finisher.finished = len(session.plan) - len(todo)
        self.previous_cache = self.manifest.cache
        if todo:
            started.open()
            self.manifest = self.manifest.model_copy(update=ManifestChanges(
                providers=[p.describe() for p in started.providers.values()],
                providers_skipped=[ManifestProviderNote(provider=k, reason=v)
                                   for k, v in started.skipped.items()]))
            todo = todo.without(started.skipped)
        if self.config.cache != "off":
            # RunConfig.cache is a str its validator limits to the cache modes
            self.cache = ResponseCache(session.cache_path,
                                       self.config.cache)  # type: ignore[arg-type]
        self._build_pipelines()
        self.manifest = self.manifest.model_copy(update=ManifestChanges(
            status="running", rows_done=self.finisher.finished, ended_at=None,
            pricing=self.ledger.pricing.describe())).without(
            "error", "request_errors", "providers_paused")
        return todo

    def _build_pipelines(self) -> None:
        """One request pipeline per started provider (a batcher below it in batch mode)."""
        batches = BatchLedger(self.store.dir) if self.config.batch else None
        self.pipelines, self.batchers = self.started.pipelines(
            cache=self.cache, batches=batches, layers=self.layers,
            sleep=lambda s: self.sleep(s))
        self.failed_in_a_row = {pid: 0 for pid in self.started.providers}

    def _work(self, item: PlanItem) -> Coroutine[Any, Any, Answer]:
        """The coroutine answering one plan item: one request, or a whole episode."""
        pipeline = self.pipelines[item.provider_id]
        if item.case.kind != "episode":
            return pipeline.complete(item.request())

        def answer(conversation: Sequence[Message]) -> Awaitable[Outcome]:
            return pipeline.complete(item.request(conversation))

        episode = EpisodeRun(item.case, item.tools, item.factors or Factors(),
                             item.trial, self.store.run_id, self.config.allow_sensitive)
        return run_episode(episode, answer, self.execution)

    def _cap(self, pid: str) -> int:
        """Tasks in flight per provider: its concurrency, or a whole batch in batch mode."""
        return BATCH_CHUNK if pid in self.batchers else self.started.concurrency(pid)

    def _dispatch(self) -> None:
        """Start tasks while the budget and each provider's cap allow."""
        try:
            self.sent.extend(self.in_flight.fill(self._work, self._cap, self.ledger.decision))
        except BudgetStop:
            self.status = "budget_exhausted"

    def _warm_up(self) -> bool:
        """One label prepared ahead (:meth:`CaseSummaries.warm_up`); False: nothing to do."""
        return self.status == "complete" and self.finisher.summaries.warm_up(self.sent, self.execution)

    def _stop_everything(self) -> None:
        self.in_flight.clear_queues()
        for pipeline in self.pipelines.values():
            pipeline.gate.close()

    def _give_up(self) -> None:
        """Cancel the requests still in flight (their rows are not written: resumable)."""
        why = "the run stopped before this request was answered"
        self.gave_up = True
        self.in_flight.cancel()
        for provider in self.started.providers.values():
            provider.abandon(why)

    def stop(self, stops: int) -> None:
        """Stop as the ``stops``-th Ctrl-C (1: finish what is in flight within its wait; 2:
        give up now); the run's own signal handler, and a notebook's thread, call it."""
        self.status = "interrupted"
        self._stop_everything()
        if stops > 1:
            self._give_up()
            return
        wait = max((self.config.request_timeout_s if p.stop_wait_s is None
                    else p.stop_wait_s for p in self.started.providers.values()),
                   default=0.0) + STOP_GRACE_S
        if self.in_flight:
            print(f"stopping: waiting up to {wait:.0f} s for "
                  f"{count(len(self.in_flight), 'request')} in flight (a second "
                  "Ctrl-C stops now)", file=sys.stderr, flush=True)
        self.give_up_timer = asyncio.get_running_loop().call_later(wait, self._give_up)

    # -- the loop -------------------------------------------------------------------------

    def _finished_task(self, task: asyncio.Task[Answer]) -> None:
        """Record a finished task's row, or deal with its failure."""
        item = self.in_flight.finished(task)
        pid = item.provider_id
        if task.cancelled():
            if not self.gave_up and self.failure_error is None:
                # cancelled from inside (a layer, a provider), not by a stop: not a row
                self._fail(cancelled_error(item, self.session.resume_hint))
            return  # given up after a stop signal: a resume sends it again
        exc = task.exception()
        if exc is None:
            self.failed_in_a_row[pid] = 0
            self.finisher.answered(item, task.result())
        elif isinstance(exc, GateClosed):
            pass
        elif isinstance(exc, StopRequested):  # as if Ctrl-C: its row is not written
            if self.status == "complete":
                print(exc, file=sys.stderr, flush=True)
                self.stop(1)
        elif isinstance(exc, BatchFailed):
            self.batch_errors.append(ManifestBatchError(key=item.key, batch=exc.batch_id,
                                                        error=str(exc)))
        elif isinstance(exc, ReplayMiss) and self.failure_error is None:
            # looking up is cheap: find every miss, so that one command records them all
            self.replay_misses.append((item, exc))
        elif isinstance(exc, ProviderError) and exc.error_class not in STOPS_RUN and \
                self.failure_error is None:
            self._left_for_resume(item, exc)
        elif self.failure_error is None:
            if not isinstance(exc, Exception):
                raise exc  # KeyboardInterrupt, SystemExit: not a provider's failure
            self._fail(item_error(item, exc, self.config.dataset, self.session.resume_hint))

    def _fail(self, error: BaseException) -> None:
        """The run fails with ``error``: nothing more is sent."""
        self.failure_error, self.status = error, "failed"
        self._stop_everything()

    def _hook_failed(self, error: BaseException) -> None:
        """A caller's hook raised (:meth:`RowFinisher.report`): the run fails with ``error``
        (the rows answered are still written), unless it has already failed or is stopping,
        when the error is only said."""
        if self.failure_error is None and self.status != "interrupted":
            self._fail(error)
        else:
            print(error, file=sys.stderr, flush=True)

    def _left_for_resume(self, item: PlanItem, exc: ProviderError) -> None:
        """A request that failed after every retry: the item stays pending, the run goes on;
        said at once (the run's own message comes at its end)."""
        pid = item.provider_id
        self.request_errors.append(ManifestRequestError(key=item.key, error=str(exc)))
        print(f"{pid}: case '{item.case.id}', variant '{item.condition}', trial {item.trial} "
              f"left for --resume: {exc}", file=sys.stderr, flush=True)
        self.failed_in_a_row[pid] += 1
        if self.failed_in_a_row[pid] >= FAILED_IN_A_ROW_TO_PAUSE and pid not in self.paused:
            self.paused[pid] = (f"{FAILED_IN_A_ROW_TO_PAUSE} requests in a row failed after "
                                f"every retry (last: {exc})")
            self.in_flight.clear_queues(pid)

    async def _loop(self, todo: PendingItems) -> None:
        """Open the writer and executor, send everything, record every answer."""
        # in the caller's try: a run file that cannot be written, or an executor (its MCP
        # server) that cannot start, fails the run, closes the writer, never leaves "running"
        self.store.write_manifest(self.manifest)
        self.finisher.writer = self.store.writer()
        if todo:
            # blocks the loop (its MCP server starting): a stop meanwhile ends it, not sends
            with self.signals.raising():
                self.execution = self.finisher.execution = start_execution(self.session)
        self.in_flight = InFlight(todo, self.started.providers)
        if self.status == "complete":  # a stop may have come before the first dispatch
            self._dispatch()
        while self.in_flight or self.finisher:
            if self.in_flight.completed.empty():
                # answers first: a finished request frees a slot for the next send, and
                # rows are finished while the loop would otherwise wait
                if self.finisher:
                    self.finisher.finish_next()
                    await asyncio.sleep(0)  # let finished requests report first
                    continue
                if self._warm_up():
                    await asyncio.sleep(0)
                    continue
            self._finished_task(await self.in_flight.completed.get())
            if self.status == "complete":
                self._dispatch()
        self._incomplete()

    def _incomplete(self) -> None:
        """Replay misses or requests left for the resume make the run's failure, once the
        rest is done (:func:`left_over_error`)."""
        if self.failure_error is None:
            self.failure_error = left_over_error(
                self.replay_misses, self.request_errors, self.batch_errors, self.paused,
                self.status == "interrupted", self.session)

    async def run(self) -> Manifest:
        """Execute every pending item; return the final manifest.

        Raises:
            BenchError: an auth or configuration error, or requests that failed after every
                retry (raised once the rest is done); rows finished are kept and the run can
                be resumed.
            KeyboardInterrupt: a stop signal ended the run.
        """
        todo = self._start()
        self.finisher.report(None)  # a hook that raises here fails the run: see _loop
        self.signals.install(asyncio.get_running_loop(), self.stop)
        try:
            await self._loop(todo)
        except (KeyboardInterrupt, asyncio.CancelledError):
            self.status = "interrupted"
            raise
        except OSError as exc:  # a file of the run could not be written (the disk is full)
            self.status = "failed"
            self.failure_error = self.session.write_failure(exc)
            self.manifest = self.manifest.model_copy(
                update=ManifestChanges(error=str(self.failure_error)))
        except BaseException as exc:
            self.status = "failed"
            self.manifest = self.manifest.model_copy(
                update=ManifestChanges(error=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            # Nothing here awaits before the manifest is written: a signal (a loop callback)
            # cannot leave it at "running".
            self._write_final_manifest()
            await self._close()
        if self.failure_error is not None:
            raise self.failure_error
        if self.status == "interrupted":
            raise KeyboardInterrupt
        return self.manifest

    # -- the end --------------------------------------------------------------------------

    def _fail_write(self, exc: OSError) -> None:
        if self.failure_error is None:
            self.failure_error = self.session.write_failure(exc)

    def _write_final_manifest(self) -> None:
        """Close the writer and executor and write the manifest's final state (status,
        spend, rate limits, cache, errors); on a full disk, at least the status."""
        self.signals.remove()
        if self.give_up_timer is not None:
            self.give_up_timer.cancel()
        self._stop_everything()
        self.gave_up = True
        self.in_flight.cancel()
        try:
            if self.finisher.writer is not None:
                try:
                    self.finisher.finish_all()
                finally:
                    self.finisher.writer.close()
        except OSError as exc:  # e.g. the disk filled up: recorded, cleanup goes on
            self._fail_write(exc)
        except Exception as exc:  # noqa: BLE001 - a row that cannot be built fails the run
            self.finisher.queued.clear()
            self.failure_error = self.failure_error or exc
        changes = ManifestChanges()
        if self.failure_error is not None:  # resumable rows left (partial), or a failure
            self.status = "partial" if isinstance(self.failure_error, RunIncomplete) \
                else "failed"
            changes["error"] = error_text(self.failure_error)
        if self.status == "complete" and self.started.skipped:
            self.status = "partial"  # a skipped provider's rows are missing; --resume runs them
        changes.update(self._final_fields())
        if self.execution is not None:
            try:
                self.execution.close()
            except OSError as exc:
                if self.failure_error is None:
                    self._fail_write(exc)
                    self.status = "failed"
                    changes.update(ManifestChanges(status=self.status,
                                                   error=str(self.failure_error)))
        self.manifest = self.manifest.model_copy(update=changes)
        try:
            self.store.write_manifest(self.manifest)
        except OSError as exc:  # a full disk: the status, at least, must not say running
            self.store.set_status_in_place(self.status)
            self._fail_write(exc)

    def _final_fields(self) -> ManifestChanges:
        """The manifest fields a finished run sets (:func:`final_fields`)."""
        return final_fields(
            status=self.status, rows_done=self.finisher.finished, ledger=self.ledger,
            config=self.config,
            gates={pid: p.gate for pid, p in self.pipelines.items()},
            batch_errors=self.batch_errors, request_errors=self.request_errors,
            paused=self.paused, cache=self.cache.stats() if self.cache is not None else None,
            previous_cache=self.previous_cache)

    async def _close(self) -> None:
        """Let cancelled tasks finish, close batchers, providers and the cache."""
        await self.in_flight.drain()  # cancelled above: let them finish cancelling
        for batcher in self.batchers.values():
            await batcher.aclose()
        for provider in self.started.providers.values():
            try:
                await provider.aclose()
            except Exception:  # noqa: BLE001 - a connection pool that fails to close
                pass
        self.started.providers.clear()
        if self.cache is not None:
            self.cache.close()
