"""The one lifecycle of a run: open it (new or resumed), start its providers, run it, end it.

``bench run``, :func:`bench.evaluate`, the pytest gate and ``bench compare``'s run-now all go
through :func:`open_run` and :func:`execute_run`; each only renders what happens through
:class:`RunHooks`. What a lifecycle does in between is the same for all of them: a new run's
id must be free and its folder makeable before any provider starts, a run whose every
provider is skipped sends nothing, a new run that fails before its first row leaves no empty
folder, and a resumed one is never removed (as inspect_ai's ``eval`` -> ``eval_async`` is the
one way a task runs: ``inspect_ai/_eval/eval.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from bench.errors import BenchError
from bench.project import Project
from bench.providers.pipeline import LayerFactory
from bench.results import Manifest
from bench.runner.budget import ProgressHook, RowHook
from bench.runner.config import RunConfig
from bench.runner.core import Runner
from bench.runner.errors import ExecutorNotStarted
from bench.runner.plan import PendingItems
from bench.runner.session import RunSession
from bench.runner.startup import ProviderFactory

__all__ = ["RunHooks", "execute_run", "open_run"]


@dataclass(frozen=True)
class RunHooks:
    """What the caller shows while :func:`execute_run` runs; every hook is optional.

    Attributes:
        provider_skipped: ``(provider id, why)`` for each provider that cannot run here (no
            key, SDK missing), after the providers start and before any row.
        started: ``(runner, pending items)`` once the providers run, before the first row
            (``bench run``'s ``run <id>: N cases x ...`` line).
        progress: called per row written (:data:`bench.runner.ProgressHook`).
        on_row: each row once written (:data:`bench.runner.budget.RowHook`).
    """

    provider_skipped: Callable[[str, str], None] | None = None
    started: Callable[[Runner, PendingItems], None] | None = None
    progress: ProgressHook | None = None
    on_row: RowHook | None = None


def open_run(project: Project, *, config: RunConfig | None = None, run_id: str | None = None,
             resume: str | None = None, overrides: Mapping[str, object] | None = None,
             setting_names: Mapping[str, str] | None = None,
             command: Sequence[str] | None = None,
             provider_factory: ProviderFactory | None = None,
             layers: Sequence[LayerFactory] = (), taken: str = "use --resume") -> Runner:
    """The runner of a new run (``config``) or of the stored run ``resume``; nothing is sent.

    Args:
        project: where the run reads and writes.
        config: a new run's configuration (exactly one of ``config`` and ``resume``).
        run_id: a new run's id (default: generated).
        resume: the id of a stored run to finish with its stored settings.
        overrides: settings given again for ``resume`` (:meth:`RunSession.resume`).
        setting_names: field -> the option that set it, for messages about ``overrides``.
        command: the argv recorded in the manifest (default ``sys.argv``).
        provider_factory: builds providers (default: the registry).
        layers: request-pipeline layers added for every provider.
        taken: what to do when a new run's id is taken, ending the one-line refusal.

    Raises:
        BenchError: bad settings or inputs (one line naming file and field; a new run's
            episode factors with no episode among its cases:
            :meth:`RunSession.check_new`); a new run whose id is taken, or whose
            folder cannot be made (a file or dangling link in its way).
    """
    if (config is None) == (resume is None):
        raise ValueError("open_run(): give a new run's config or the id to resume, not both")
    if resume is not None:
        session = RunSession.resume(resume, overrides, project=project,
                                    setting_names=setting_names, command=command,
                                    will_run=True)
        return Runner.of(session, provider_factory=provider_factory, layers=layers)
    assert config is not None  # checked above
    session = RunSession(config, run_id=run_id, project=project, command=command,
                         will_run=True)
    session.check_new()
    if session.store.exists():
        raise BenchError(f"run '{session.store.run_id}' already exists; {taken}")
    session.store.check_dir()  # e.g. a dangling link: said before any provider starts
    return Runner.of(session, provider_factory=provider_factory, layers=layers)


def execute_run(runner: Runner, hooks: RunHooks = RunHooks(), *,
                pending: PendingItems | None = None) -> Manifest:
    """Start the providers of ``runner``'s run, run every pending item, and end the run.

    ``pending`` is :meth:`Runner.pending` when the caller has read it already (it reads
    ``results.jsonl``: a resumed run's file is not read twice for it).

    A run with nothing pending starts no provider. A provider that cannot run here is given
    to ``hooks.provider_skipped`` and its rows are left for a resume; when every provider is
    skipped nothing is sent. A new run that fails before its first row (its executor did not
    start, or its toolset settings are invalid) leaves no empty run folder.

    Returns:
        The final manifest (status ``complete``, ``budget_exhausted`` or ``partial``).

    Raises:
        BenchError: every provider was skipped (names each and why); the executor did not
            start (:class:`~bench.runner.errors.ExecutorNotStarted`, saying where the run's
            files are kept if any); or as :meth:`Runner.run`, e.g.
            :class:`~bench.errors.RunIncomplete` for rows left to a resume.
        KeyboardInterrupt: stopped while the providers started (they are closed; nothing was
            sent) or while it ran (finished rows are kept).
    """
    session = runner.session
    new = session.manifest is None
    if pending is None:
        pending = runner.pending()
    if pending:
        with runner.project.activate():
            try:
                runner.open_providers()  # a missing model fails here, before anything is sent
            except KeyboardInterrupt:  # e.g. while a model loads
                runner.close_providers()
                raise
        for provider_id, why in runner.skipped.items():
            if hooks.provider_skipped is not None:
                hooks.provider_skipped(provider_id, why)
        if not runner.providers:
            runner.close_providers()
            reasons = "" if hooks.provider_skipped is not None else " (" + "; ".join(
                f"{pid}: {why}" for pid, why in runner.skipped.items()) + ")"  # else said
            raise BenchError(f"every provider was skipped{reasons}; nothing to run")
    if hooks.started is not None:
        hooks.started(runner, pending)
    try:
        runner.run(hooks.progress, on_row=hooks.on_row)
    except ExecutorNotStarted as exc:  # a new run's empty folder is not left behind
        raise session.failed_before_rows(exc) from None
    except BenchError:  # e.g. invalid [tool.bench.toolsets.*]: before any manifest
        if new and not session.store.exists():
            session.store.discard_if_empty()
        raise
    return session.store.load_manifest()
