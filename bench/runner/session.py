"""A run's setup: its config, dataset, variants, plan, manifest and store, without any provider.

``bench run`` executes a :class:`RunSession` through the scheduler
(:mod:`bench.runner.scheduler`); ``bench merge``, ``bench show`` and ``bench compare``'s
run-now read plans from it (:mod:`bench.replan`) without starting anything.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from bench.datasets import Dataset, load_dataset
from bench.datasets.labels import LabelProblem
from bench.datasets.splits import has_splits, resolve_split
from bench.descriptions import Variant
from bench.episodes.factors import factor_grid
from bench.errors import BenchError
from bench.models import Case
from bench.project import Project, current_project
from bench.results import (Manifest, ManifestBfcl, ManifestChanges, ManifestDataset,
                           ManifestExecution, ManifestHost, ManifestSkippedCase,
                           ManifestVariant, Row)
from bench.runner.config import (
    DEFAULT_CACHE_PATH,
    RESUME_OVERRIDES,
    RunConfig,
    changed_settings,
    given_mcp_secrets,
    shown_setting,
    stored_run_config,
)
from bench.runner.budget import Spend
from bench.runner.ledger import Ledger
from bench.runner.plan import (
    PendingItems,
    PlanItem,
    check_episodes,
    episode_factor_note,
    load_variants,
    make_plan,
    select_cases,
    skip_invalid_cases,
)
from bench.runner.rows import _git_commit, _now, _versions
from bench.store import RunStore, new_run_id
from bench.store.files import named_os_error, write_fix
from bench.scoring.bfcl import BfclSource, load_sources, sources_path
from bench.shard import parse_shard, shard_plan
from bench.toolspace.setup import SpaceSetup, catalog_digests, changed_catalog
from bench.toolspace.space import space_grid


def _embedder(config: RunConfig) -> object:
    """The embedding retriever's model: the run's local model (``--model``,
    ``--model-path``, ``--threads``), loaded only when an embedding retriever is planned."""
    from bench.toolspace.embedding import LlamaEmbedder
    return LlamaEmbedder(config.model, config.model_path, threads=config.threads)


class RunSession:
    """What a run measures and where it is written: config, dataset, cases, variants, plan
    and store. Building one loads and checks the inputs; it starts no provider and writes
    nothing.

    Args:
        config: the run's configuration (``split`` None: the dataset's default split, stored
            resolved).
        store: where the run is written (default: ``project.store(run_id)``).
        run_id: a new run's id (default: generated), when ``store`` is None.
        command: the argv recorded in the manifest (default ``sys.argv``).
        project: where datasets, descriptions, runs, the response cache and ``pricing.yaml``
            are found (default :func:`bench.project.current_project`).

    Attributes:
        manifest: the stored manifest of a resumed run (its config with the overrides given),
            else None.
        notes: lines a new run's command shows before it starts (e.g. episode factors on a
            dataset that mixes episodes with single-answer cases: :meth:`check_new`).

    Raises:
        BenchError: a bad dataset, variant, split, shard or episode setting (one line naming
            the file and field).
    """

    manifest: Manifest | None = None

    def check_new(self) -> None:
        """The checks of a new run only (a stored run resumes with what it has): its episode
        factors fit its cases (:func:`bench.runner.plan.episode_factor_note`, whose note
        goes to :attr:`notes`).

        Raises:
            BenchError: episode factors given and no case of the run is an episode.
        """
        note = episode_factor_note(self.config.factors, self.dataset, self.cases)
        if note is not None:
            self.notes.append(note)

    def __init__(self, config: RunConfig, *, store: RunStore | None = None,
                 run_id: str | None = None, command: Sequence[str] | None = None,
                 project: Project | None = None, will_run: bool = False) -> None:
        #: Whether this session's plan is about to run (a runner's, not ``bench show``'s):
        #: only then is the executor's database generated alongside the loading.
        self.will_run = will_run
        self.notes: list[str] = []
        self.project = project or current_project()
        with self.project.activate():  # loaders below that take no root read it
            self._load(config)
        self.store = store or self.project.store(run_id or new_run_id())
        self.command = list(command) if command is not None else list(sys.argv)
        #: How the run's errors say to continue it (``bench.evaluate`` names itself instead).
        self.resume_hint = f"bench run --resume {self.store.run_id}"
        self.cache_path = Path(self.config.cache_path) if self.config.cache_path else \
            self.project.reports_dir.joinpath(*DEFAULT_CACHE_PATH[1:])

    def _load(self, config: RunConfig) -> None:
        from bench.descriptions.aliases import apply_aliases

        # labels naming a renamed tool score against its new name (descriptions/<toolset>/
        # aliases.yaml); the manifest records the renames. Each rename must fit each variant
        # run (a new name is a tool, an old one no longer is), checked before the labels are
        # so that a wrong rename is blamed on aliases.yaml, not on a case it renamed
        self.dataset: Dataset
        self.dataset, self.aliases = apply_aliases(load_dataset(config.dataset),
                                                   variants=config.variants)
        if self.will_run and config.execute and not config.mcp_server:
            from bench.executor.backends import REFERENCE_TOOLSETS
            if any(case.kind == "episode" or case.toolset in REFERENCE_TOOLSETS
                   for case in self.dataset.cases):
                # the reference executor's database, written alongside the loading below
                # when the project has none (an episode's label checks need it first); a
                # project of its own tools (or an imported BFCL dataset) never reads it
                from bench.executor.backends.shopcache import generate_ahead
                generate_ahead()
        self.invalid_cases: list[LabelProblem] = []
        if config.skip_invalid_cases:
            self.dataset, self.invalid_cases = skip_invalid_cases(self.dataset,
                                                                  config.variants)
        bfcl_path = sources_path(self.dataset.path)
        # an imported BFCL dataset: every row also gets BFCL's own verdict
        self.bfcl_path = bfcl_path if bfcl_path is not None and bfcl_path.is_file() else None
        self.bfcl: dict[str, BfclSource] = load_sources(self.bfcl_path) \
            if self.bfcl_path else {}
        if config.split is None:  # stored resolved: a run says which split its figures are on
            # cases named by id are taken from every split unless a split is asked for
            split = "all" if config.case_ids else resolve_split(self.dataset.cases, None)
            config = config.model_copy(update={"split": split})
        self.cases: list[Case] = select_cases(self.dataset, config)
        self.variants: list[Variant] = load_variants(self.dataset, config.variants)
        check_episodes(self.dataset, self.cases, config.execute)
        if config.no_call_layout is None and any(c.kind == "episode" or c.expected.ask
                                                 for c in self.cases):
            # an episode's final answer, and an ask case's question, need words: the embedded
            # model's layout that has them
            from bench.providers.local.prompt import EPISODE_NO_CALL_LAYOUT
            config = config.model_copy(update={"no_call_layout": EPISODE_NO_CALL_LAYOUT})
        self.config = config
        self.spaces = SpaceSetup(space_grid(config.tools, config.retrievers, config.top_k),
                                 config.seed, config.distractors,
                                 embedder=lambda: _embedder(config),
                                 always_loaded=config.always_loaded)
        self.plan: Sequence[PlanItem] = make_plan(self.cases, self.variants, config.providers,
                                              config.trials, factor_grid(config.factors),
                                              self.spaces)
        if config.shard:  # this machine's slice of the plan
            self.plan = shard_plan(self.plan, *parse_shard(config.shard))

    @classmethod
    def resume(cls, run_id: str, overrides: Mapping[str, object] | None = None, *,
               project: Project | None = None, setting_names: Mapping[str, str] | None = None,
               command: Sequence[str] | None = None, will_run: bool = False) -> "RunSession":
        """Reopen run ``run_id`` with its stored config (finished rows are kept); ``will_run``
        as in the constructor.

        Args:
            run_id: the run to finish.
            overrides: :class:`RunConfig` field -> value. :data:`RESUME_OVERRIDES` settings
                take the new value (e.g. a higher ``max_usd`` after the run stopped with
                ``budget_exhausted``); any other setting must equal the stored one
                (:func:`changed_settings`: ``factors`` holds the factors given). None values
                keep the stored ones.
            setting_names: how the refusal names a setting (e.g. ``{"trials": "--trials"}``,
                factors as ``factors.<name>``); default its field name.
            command: the argv recorded in the manifest (default ``sys.argv``).

        Raises:
            BenchError: no such run; a setting that is not a :data:`RESUME_OVERRIDES` one
                and differs from the stored value (one line naming each, with both
                values); or its dataset, variants or grown catalogs (``--tools``: the
                distractor toolsets) changed since it started.
        """
        project = project or current_project()
        store = project.store(run_id)
        manifest = store.load_manifest()
        if manifest.run_id != store.run_id:  # rows would carry one id, readers expect the other
            raise BenchError(f"cannot resume '{run_id}': its manifest names run "
                             f"'{manifest.run_id}'", file=store.manifest_path, field="run_id")
        changes = {k: v for k, v in (overrides or {}).items() if v is not None}
        config = stored_run_config(manifest.config, file=store.manifest_path,
                                   overrides={k: v for k, v in changes.items()
                                              if k in RESUME_OVERRIDES})
        # the MCP server's command line comes back with its secrets (never stored)
        config = given_mcp_secrets(config, changes.get("mcp_server"), run_id)
        _refuse_changes(run_id, config, changes, setting_names or {})
        session = cls(config, store=store, project=project, command=command,
                      will_run=will_run)
        session._check_inputs(manifest)
        session.manifest = manifest.model_copy(
            update=ManifestChanges(config=session.config.model_dump()))
        return session

    def _check_inputs(self, manifest: Manifest) -> None:
        """Refuse a resume whose dataset, variants or grown catalogs (:func:`bench.toolspace.
        setup.changed_catalog`) changed since the run started.

        Raises:
            BenchError: names the dataset file, the variant or the catalog.
        """
        run_id = self.store.run_id
        if manifest.dataset.sha256 != self.dataset.sha256:
            raise BenchError(f"cannot resume '{run_id}': dataset '{self.config.dataset}' "
                             "changed since the run started", file=self.dataset.path)
        stored = {(v.toolset, v.name): v.sha256 for v in manifest.variants}
        for variant in self.variants:
            if stored.get((variant.toolset, variant.name)) != variant.sha256:
                raise BenchError(f"cannot resume '{run_id}': variant '{variant.name}' of "
                                 f"'{variant.toolset}' changed since the run started")
        changed = changed_catalog(
            catalog_digests(manifest.toolspace.catalogs if manifest.toolspace else None),
            catalog_digests(self.spaces.describe()))
        if changed is not None:
            raise BenchError(f"cannot resume '{run_id}': the catalog {changed} changed since "
                             "the run started (its distractors come from the toolsets under "
                             "descriptions/: one was added, removed or edited); put them back "
                             "as they were, or start a new run")

    def execution_plan(self) -> dict[str, ManifestExecution]:
        """How each toolset of the run is executed
        (:func:`bench.executor.runhook.describe_execution`), for the manifest.

        Raises:
            BenchError: the project's ``[tool.bench.toolsets.*]`` settings are invalid.
        """
        from bench.executor.runhook import describe_execution
        from bench.toolset_config import load_toolset_settings
        config = self.config
        return describe_execution(
            [v.toolset for v in self.variants], execute=config.execute,
            mcp_command=config.mcp_server, allow_writes=config.allow_writes,
            settings={} if config.mcp_server else load_toolset_settings(self.project.root))

    def new_manifest(self) -> Manifest:
        """A new run's manifest (status ``running``)."""
        return Manifest(
            run_id=self.store.run_id,
            status="running",
            command=self.command,
            config=self.config.model_dump(),
            dataset=ManifestDataset(name=self.dataset.name, path=str(self.dataset.path),
                                    sha256=self.dataset.sha256, cases=len(self.cases),
                                    splits=has_splits(self.dataset.cases)),
            cases_skipped=[ManifestSkippedCase(case=p.case_id, line=p.line, field=p.field,
                                               why=p.message) for p in self.invalid_cases],
            bfcl=None if not self.bfcl_path else ManifestBfcl(
                path=str(self.bfcl_path), entries=len(self.bfcl),
                sha256=hashlib.sha256(self.bfcl_path.read_bytes()).hexdigest()),
            variants=[self._manifest_variant(v) for v in self.variants],
            toolspace=self.spaces.manifest_entry(),
            providers=[],
            execution=self.execution_plan(),
            versions=_versions(),
            git_commit=_git_commit(),
            host=ManifestHost(platform=platform.platform()),
            rows_planned=len(self.plan),
            rows_done=0,
            started_at=_now(),
            ended_at=None,
        )

    def _manifest_variant(self, variant: Variant) -> ManifestVariant:
        """A variant as the manifest lists it (``draft_tools`` and ``aliases`` only when it
        has any)."""
        entry = ManifestVariant(name=variant.name, toolset=variant.toolset,
                                sha256=variant.sha256, source=variant.source,
                                tools=len(variant.tools),
                                mean_lines_per_tool=round(variant.mean_lines, 2),
                                lines_per_tool=variant.line_counts)
        if variant.draft_tools:
            entry.draft_tools = list(variant.draft_tools)
        if variant.toolset in self.aliases:
            entry.aliases = self.aliases[variant.toolset]
        return entry

    def written_rows(self) -> Iterator[Row]:
        """The rows of ``results.jsonl`` (a half-written last row is cut first), each in this
        run's plan.

        Raises:
            BenchError: a corrupt row, or a row the readers would not count (they leave it
                out: :meth:`RunStore.iter_read`): its key is not planned, or it names another
                run (rows of another run appended to the file), naming file and line; or the
                half-written row cannot be cut (the file is read-only), naming the file and
                what to do.
        """
        try:
            self.store.repair()
        except OSError as exc:  # an immutable or read-only file with a cut last line
            raise self.write_failure(named_os_error(exc, self.store.results_path)) from None
        planned = {item.key for item in self.plan}
        run_id = self.store.run_id

        def stray(row: Row) -> str | None:
            if row.key not in planned:
                return f"no planned row has key '{row.key}'"
            if row.run_id not in (None, run_id):
                return f"it belongs to run '{row.run_id}'"
            return None

        return self.store.written_rows(stray)

    def pending_and_spent(self) -> tuple[PendingItems, Spend]:
        """In one pass over ``results.jsonl``: the planned items without a finished row, in
        plan order (made as they are read), and what the finished rows were billed
        (:meth:`Ledger.spent_by`).

        Raises:
            BenchError: as :meth:`written_rows`.
        """
        path = self.store.results_path
        if not path.exists() or (path.is_file() and path.stat().st_size == 0):
            # nothing written yet: no set of every planned key (a 100,000-row plan's keys
            # would stay in the process's peak memory for the whole run)
            return PendingItems(self.plan), Spend()
        done: set[str] = set()

        def noted(rows: Iterator[Row]) -> Iterator[Row]:
            for row in rows:
                done.add(row.key)
                yield row

        spend = Ledger.spent_by(noted(self.written_rows()), {item.key for item in self.plan})
        return PendingItems(self.plan, done), spend

    def pending(self) -> PendingItems:
        """Planned items without a finished row, in plan order.

        Raises:
            BenchError: as :meth:`written_rows`.
        """
        return self.pending_and_spent()[0]

    def failed_before_rows(self, exc: BenchError) -> BenchError:
        """The error to show for a run whose executor did not start (``exc``, an
        :class:`~bench.runner.errors.ExecutorNotStarted`): for a new run, unchanged when the
        run folder held nothing worth keeping and was removed
        (:meth:`RunStore.discard_if_empty`), or when it has rows (written before the
        failure); otherwise ``exc`` followed by where its files are kept and how to resume or
        remove them (e.g. an MCP server's log says why it did not start). For a resumed run,
        ``exc`` followed by how to resume it again once the cause is fixed.

        A resumed run's folder is never removed.
        """
        if self.manifest is not None:  # resumed: its folder and rows stay as they are
            return type(exc)(f"{exc.message}; fix the cause, then {self.resume_hint} "
                             "(its finished rows are kept)", file=exc.file, line=exc.line,
                             field=exc.field)
        try:
            if self.store.discard_if_empty():
                return exc
            if self.store.results_path.is_file() and self.store.results_path.stat().st_size:
                return exc  # the error already says how to resume
        except (BenchError, OSError):  # another process writes it, or it cannot be read
            return exc
        return type(exc)(f"{exc.message}; no row was written; the run's files are kept in "
                          f"{self.store.dir}: fix the cause, then {self.resume_hint} (or "
                          "delete that folder)", file=exc.file, line=exc.line, field=exc.field)

    def write_failure(self, exc: OSError) -> BenchError:
        """The one-line error for a run file that could not be written (a full disk, a
        file-size limit, a read-only or immutable file): names the file, says the finished
        rows are kept, what to do (:func:`bench.store.files.write_fix`) and how to resume."""
        where = f"{exc.filename}: " if exc.filename else ""
        return BenchError(f"{where}{exc.strerror or exc} while writing the run; finished rows "
                          f"are kept: {write_fix(exc)}, then: {self.resume_hint}")


def _refuse_changes(run_id: str, config: RunConfig, changes: Mapping[str, object],
                    names: Mapping[str, str]) -> None:
    """Refuse settings given to a resume that differ from the stored ones (the stored config
    decides what the run measures).

    Raises:
        BenchError: one line naming each changed setting with both values.
    """
    changed = changed_settings(config, changes, names)
    if not changed:
        return
    named = [names.get(field, field) for field, _, _ in changed]
    values = "; ".join(
        (f"{name} " if len(changed) > 1 else "")
        + f"stored {shown_setting(field, before)}, given {shown_setting(field, after)}"
        for name, (field, before, after) in zip(named, changed))
    raise BenchError(f"{', '.join(named)} cannot change when resuming '{run_id}': "
                     f"{values} (it would change what the run measures); start a new run")
