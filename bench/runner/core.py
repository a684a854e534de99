"""Create or resume a run and execute its plan: the :class:`Runner` facade over the run's
session (:mod:`bench.runner.session`), providers (:mod:`bench.runner.startup`), ledger
(:mod:`bench.runner.ledger`) and scheduler (:mod:`bench.runner.scheduler`).

Data flow (BRIEF §3): dataset + variants + providers -> plan -> request pipeline -> parse ->
score -> ``results.jsonl``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Awaitable, Callable, Mapping, Sequence

from bench.datasets import Dataset
from bench.datasets.labels import LabelProblem
from bench.descriptions import Variant
from bench.models import Case
from bench.project import Project
from bench.providers import Provider
from bench.providers.pipeline import LayerFactory
from bench.providers.pricing import Pricing
from bench.results import ManifestChanges
from bench.runner.budget import ProgressHook, RowHook
from bench.runner.config import RunConfig
from bench.runner.ledger import Ledger
from bench.runner.plan import PendingItems, PlanItem
from bench.runner.scheduler import Scheduler
from bench.runner.session import RunSession
from bench.runner.signals import StopSignals
from bench.runner.startup import ProviderFactory, StartedProviders
from bench.runner.startup import default_factory as _default_factory
from bench.store import RunStore

__all__ = ["Runner", "_default_factory"]


#: Seconds between the checks for Ctrl-C of a thread waiting on a run in a worker thread
#: (a notebook's): signals may reach any thread, their Python handlers run in the main one.
SIGNAL_POLL_S = 0.1

class Runner:
    """Creates or resumes a run and executes its plan.

    Args:
        config: the run's configuration.
        run_id: a new run's id (default: generated).
        command: the argv recorded in the manifest (default ``sys.argv``).
        provider_factory: ``(provider id, config) -> Provider`` (default
            :func:`bench.runner.startup.default_factory`).
        store: where the run is written (default: ``project.store(run_id)``).
        project: where datasets, descriptions, runs, the response cache and
            ``pricing.yaml`` are found (default: :func:`bench.project.current_project`). The
            run reads everything through it, never through the cwd or ``BENCH_HOME``, so runs
            of two projects may share a process.
        layers: user layers added to every provider's request pipeline
            (:data:`bench.providers.pipeline.LayerFactory`).

    Raises:
        BenchError: bad dataset, variants, provider, or a resumed run whose inputs changed.
    """

    def __init__(self, config: RunConfig, *, run_id: str | None = None,
                 command: Sequence[str] | None = None,
                 provider_factory: ProviderFactory | None = None,
                 store: RunStore | None = None, project: Project | None = None,
                 layers: Sequence[LayerFactory] = ()) -> None:
        self._setup(RunSession(config, store=store, run_id=run_id, command=command,
                               project=project, will_run=True), provider_factory, layers)

    def _setup(self, session: RunSession, provider_factory: ProviderFactory | None,
               layers: Sequence[LayerFactory]) -> None:
        self.session = session
        self.pricing = Pricing(session.config.pricing, project=session.project)
        self.started = StartedProviders(session, provider_factory, self.pricing)
        self.layers = list(layers)
        self.signals: StopSignals | None = None  # the last run's (which one stopped it)
        # how batch polling waits (s); tests replace it
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        # passes a stop signal (1st, 2nd...) to the running scheduler from another thread
        self._stop: Callable[[int], object] | None = None
        self._early_stops = 0  # Ctrl-C before the scheduler existed (a notebook's thread)

    @classmethod
    def of(cls, session: RunSession, *, provider_factory: ProviderFactory | None = None,
           layers: Sequence[LayerFactory] = ()) -> "Runner":
        """The runner executing an already built :class:`RunSession`."""
        runner = cls.__new__(cls)
        runner._setup(session, provider_factory, layers)
        return runner

    @classmethod
    def resume(cls, run_id: str, overrides: Mapping[str, object] | None = None, *,
               project: Project | None = None, setting_names: Mapping[str, str] | None = None,
               command: Sequence[str] | None = None,
               provider_factory: ProviderFactory | None = None,
               layers: Sequence[LayerFactory] = ()) -> "Runner":
        """Reopen run ``run_id`` with its stored config; finished rows are kept
        (:meth:`RunSession.resume` says what may change).

        Raises:
            BenchError: as :meth:`RunSession.resume`.
        """
        return cls.of(RunSession.resume(run_id, overrides, project=project,
                                        setting_names=setting_names, command=command,
                                        will_run=True),
                      provider_factory=provider_factory, layers=layers)

    # the session's setup, read by the CLI and tests
    @property
    def config(self) -> RunConfig:
        """The run's configuration (split resolved)."""
        return self.session.config

    @property
    def store(self) -> RunStore:
        """Where the run is written."""
        return self.session.store

    @property
    def plan(self) -> Sequence[PlanItem]:
        """The planned items (this shard's slice for a shard), made as they are read."""
        return self.session.plan

    @property
    def dataset(self) -> Dataset:
        """The loaded dataset."""
        return self.session.dataset

    @property
    def cases(self) -> list[Case]:
        """The selected cases."""
        return self.session.cases

    @property
    def variants(self) -> list[Variant]:
        """The loaded variants."""
        return self.session.variants

    @property
    def invalid_cases(self) -> list[LabelProblem]:
        """Cases left out by ``--skip-invalid-cases``, with why."""
        return self.session.invalid_cases

    @property
    def project(self) -> Project:
        """The project the run reads and writes."""
        return self.session.project

    @property
    def providers(self) -> dict[str, Provider]:
        """Started providers by id (empty before :meth:`open_providers` or after a run)."""
        return self.started.providers

    @property
    def skipped(self) -> dict[str, str]:
        """Provider id -> why it cannot run here (no key, SDK missing)."""
        return self.started.skipped

    def pending(self) -> PendingItems:
        """Planned items without a finished row, in plan order (:meth:`RunSession.pending`)."""
        return self.session.pending()

    def open_providers(self) -> None:
        """Start every provider (:meth:`StartedProviders.open`)."""
        self.started.open()

    def close_providers(self) -> None:
        """Close every started provider and forget them."""
        self.started.close()

    def concurrency(self, provider_id: str) -> int:
        """Requests in flight for a provider (:meth:`StartedProviders.concurrency`)."""
        return self.started.concurrency(provider_id)

    def run(self, progress: ProgressHook | None = None,
            on_row: RowHook | None = None) -> dict[str, object]:
        """Execute every planned item not yet done; return the final manifest.

        ``progress`` is called per row written; ``on_row`` gets each row once it is written
        (e.g. :meth:`bench.stats.running.RunningSummary.add`, so the end-of-run table needs
        no second read of ``results.jsonl``).

        Runs one asyncio event loop (:func:`asyncio.run`) for the whole run, holding the run's
        write lock throughout (:meth:`bench.store.RunStore.writing`): a second process
        resuming the same run gets a one-line error instead of duplicate rows. See
        :class:`~bench.runner.scheduler.Scheduler` for what a run does and raises.

        Raises:
            BenchError: the run is being written by another process; or as
                :meth:`Scheduler.run`.
            KeyboardInterrupt: the run was stopped (Ctrl-C, SIGTERM); finished rows are kept
                and the manifest says ``interrupted``.
        """
        try:
            asyncio.get_running_loop()
            in_a_loop = True
        except RuntimeError:
            in_a_loop = False
        if not in_a_loop:  # outside the except: errors are not chained to "no running loop"
            return asyncio.run(self.arun(progress, on_row))
        # A loop already runs in this thread (a notebook, Playwright's sync API): the run gets
        # its own loop in a worker thread. Ctrl-C reaches this thread: it is passed on to the
        # run as a stop signal (a second one stops at once), and the run's own
        # KeyboardInterrupt comes back once its manifest is written.
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bench-run") as pool:
            future = pool.submit(asyncio.run, self.arun(progress, on_row))
            stops = 0
            while True:
                try:
                    # a short wait, not one long one: a Ctrl-C that the kernel hands to another
                    # thread only sets Python's flag, and the handler runs (and raises here)
                    # when this thread next runs bytecode
                    return future.result(timeout=SIGNAL_POLL_S)
                except concurrent.futures.TimeoutError:
                    continue
                except KeyboardInterrupt:
                    if future.done():
                        raise
                    stops += 1
                    if self._stop is not None:
                        self._stop(stops)
                    else:  # the run has not started its scheduler yet: it stops at once
                        self._early_stops = stops

    async def arun(self, progress: ProgressHook | None = None,
                   on_row: RowHook | None = None) -> dict[str, object]:
        """:meth:`run` on the caller's event loop (e.g. from async code or a notebook).

        Raises:
            BenchError, KeyboardInterrupt: as :meth:`run`.
        """
        session = self.session
        with session.store.writing(), session.project.activate():
            if session.manifest is not None:  # resumed: another process may have run since
                session.manifest = session.store.load_manifest().model_copy(
                    update=ManifestChanges(config=session.manifest.config))  # overrides
            self.signals = StopSignals()
            config = session.config
            ledger = Ledger(self.pricing, max_usd=config.max_usd,
                            max_total_tokens=config.max_total_tokens)
            scheduler = Scheduler(session, self.started, ledger, progress=progress, on_row=on_row,
                                  signals=self.signals, layers=self.layers,
                                  sleep=lambda s: self._sleep(s))
            loop = asyncio.get_running_loop()
            self._stop = lambda stops: loop.call_soon_threadsafe(scheduler.stop, stops)
            if self._early_stops:
                self._stop(self._early_stops)
            try:
                return (await scheduler.run()).to_json_dict()
            finally:
                self._stop = None
