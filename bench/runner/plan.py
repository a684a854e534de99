"""The plan: case x variant x provider x trial items, ordered provider, variant, trial, case
so that each provider sees one variant's cases back to back (the embedded model then reuses
the cached tools prefix)."""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from bench.datasets import Dataset, check_against_tools
from bench.datasets.labels import LabelProblem, iter_label_problems
from bench.datasets.sample import stratified_sample
from bench.datasets.splits import resolve_split, select_split
from bench.descriptions import Variant, load_variant
from bench.episodes.factors import Factors
from bench.errors import BenchError
from bench.models import Case, Message, Tool
from bench.plural import count
from bench.providers.pipeline import ModelRequest
from bench.runner.config import RunConfig
from bench.toolspace.setup import Retrieved, SpaceSetup
from bench.toolspace.space import ToolSpace


@dataclass(frozen=True, slots=True)  # slots: items in flight and in queues are many
class PlanItem:
    """One planned request (an episode for an episode case): a case under a variant for a
    provider, one trial; ``factors`` (episode cases only) the condition's settings.

    With tool-space settings (``space``: ``--tools``, ``--retriever``, ``--top-k``),
    ``variant`` is the grown catalog (the variant's own tools plus distractors, under the
    variant's name, :mod:`bench.toolspace.distractors`) and ``retrieved`` says which of its
    tools the model is sent (:attr:`tools`)."""

    case: Case
    variant: Variant
    provider_id: str
    trial: int
    factors: Factors | None = None
    space: ToolSpace | None = None
    retrieved: Retrieved | None = None

    @property
    def condition(self) -> str:
        """The variant's name, with the tool-space settings
        (:meth:`bench.toolspace.space.ToolSpace.condition`) and the factor settings that
        differ from the defaults (:meth:`bench.episodes.factors.Factors.condition`): the
        row's ``variant``, e.g. ``l3~tools=40~retriever=bm25~top_k=5``."""
        name = self.space.condition(self.variant.name) if self.space else self.variant.name
        return self.factors.condition(name) if self.factors else name

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools the model is sent: the retrieved ones, else the variant's."""
        return self.retrieved.offered if self.retrieved is not None else self.variant.tools

    @property
    def key(self) -> str:
        """Unique row key ``case|condition|provider|trial`` (resume skips done keys)."""
        return f"{self.case.id}|{self.condition}|{self.provider_id}|{self.trial}"

    def request(self, messages: Sequence[Message] | None = None) -> ModelRequest:
        """The provider-level request of this item: its case's messages (or an episode's
        conversation so far), its variant's tools, trial and key, and a native retriever's
        tool search (:attr:`bench.toolspace.setup.Retrieved.tool_search`)."""
        return ModelRequest(self.case.messages if messages is None else messages,
                            self.tools, self.trial, self.tools_sha256, self.key,
                            tool_search=self.retrieved.tool_search if self.retrieved else None)

    @property
    def tools_sha256(self) -> str:
        """Digest of :attr:`tools` (the request's ``variant_key``): the variant's SHA-256,
        or the retrieved tools' (:attr:`bench.toolspace.setup.Retrieved.tools_sha256`)."""
        return self.retrieved.tools_sha256 if self.retrieved is not None else \
            self.variant.sha256


def select_cases(dataset: Dataset, config: RunConfig) -> list[Case]:
    """The cases a config selects, in file order: those of the ``split``, then ``case_ids``
    (all when None), then of those ``limit`` cases as ``limit_sampling`` says (a stratified
    sample seeded by ``seed``, or the first N).

    Raises:
        BenchError: ``case_ids`` names a case the dataset does not have, or one of another
            split (the message names the split to ask for); the split has no case; ``split``
            cannot be resolved
            (:func:`bench.datasets.splits.resolve_split`).
    """
    # cases named by id come from every split unless a split is asked for (as the runner)
    split = config.split or ("all" if config.case_ids else resolve_split(dataset.cases, None))
    cases = select_split(dataset.cases, split)
    if not cases and dataset.cases:
        others = sorted({c.split for c in dataset.cases if c.split and c.split != split})
        raise BenchError(f"the {split} split has no case ({len(dataset.cases)} are "
                         f"{' or '.join(others) or 'unsplit'}): add --split "
                         f"{others[0] if others else 'all'} (or --split all)",
                         file=dataset.path, field="split")
    if config.case_ids:
        known = {c.id for c in cases}
        missing = [i for i in config.case_ids if i not in known]
        elsewhere = {c.id: c.split for c in dataset.cases if c.id in missing}
        if elsewhere:
            first = next(iter(elsewhere))
            raise BenchError(f"case '{first}' is in the {elsewhere[first]} split, not "
                             f"{split}: add --split {elsewhere[first]} (or --split all)",
                             file=dataset.path, line=dataset.lines.get(first), field="split")
        if missing:
            raise BenchError(f"unknown case id(s): {', '.join(missing)}", file=dataset.path)
        wanted = set(config.case_ids)
        cases = [c for c in cases if c.id in wanted]
    if config.limit:
        cases = stratified_sample(cases, config.limit, config.seed) \
            if config.limit_sampling == "stratified" else cases[:config.limit]
    return cases


def skip_invalid_cases(dataset: Dataset, names: Sequence[str]
                       ) -> tuple[Dataset, list[LabelProblem]]:
    """The dataset without the cases whose labels do not fit the named variants' tools, and
    every problem found (one per case, field and reason, in file order).

    Raises:
        BenchError: an unknown variant or bad spec, or no case left.
    """
    problems: dict[tuple[str, str, str], LabelProblem] = {}
    for toolset in dataset.toolsets:
        for name in names:
            for problem in iter_label_problems(dataset, toolset, load_variant(toolset, name).tools):
                problems.setdefault((problem.case_id, problem.field, problem.message), problem)
    bad = {p.case_id for p in problems.values()}
    kept = tuple(c for c in dataset.cases if c.id not in bad)
    if not kept:
        raise BenchError(f"every case has a label that does not fit its tools "
                         f"({count(len(bad), 'case')}); nothing to run", file=dataset.path)
    ordered = sorted(problems.values(), key=lambda p: (p.line, p.field))
    return dataclasses.replace(dataset, cases=kept), ordered


def load_variants(dataset: Dataset, names: Sequence[str]) -> list[Variant]:
    """Render each named variant for every toolset the dataset uses, and check the labels.

    Raises:
        BenchError: an unknown variant, a bad spec, a case naming an unknown tool/argument,
            or a toolset without descriptions (blamed on the first case naming it: file,
            line, field ``toolset``).
    """
    from bench.paths import descriptions_dir
    root = descriptions_dir()
    for toolset in dataset.toolsets:
        if not (root / toolset).is_dir():
            first = next(c for c in dataset.cases if c.toolset == toolset)
            known = sorted(p.name for p in root.iterdir() if p.is_dir() and
                           p.name != "templates") if root.is_dir() else []
            raise BenchError(f"unknown toolset '{toolset}' (no folder {root / toolset}; "
                             f"known: {', '.join(known) or 'none'})", file=dataset.path,
                             line=dataset.lines.get(first.id), field="toolset")
    variants = []
    for toolset in dataset.toolsets:
        for name in names:
            variant = load_variant(toolset, name)
            try:
                check_against_tools(dataset, toolset, variant.tools)
            except BenchError as exc:
                raise BenchError(f"{exc.message} (--skip-invalid-cases leaves such cases out)",
                                 file=exc.file, line=exc.line, field=exc.field) from None
            variants.append(variant)
    return variants


def check_episodes(dataset: Dataset, cases: Sequence[Case], execute: bool) -> None:
    """Load-time checks of the episode cases among ``cases``, and of the single-answer ones
    with a ``state``: their state overrides and state-check queries run on a fresh copy of
    the shop database, and their signed-in customer exists there
    (:func:`bench.episodes.state.check_label_state`).

    Raises:
        BenchError: an override or query that does not run, an unknown ``state.user_id``,
            or episodes with the executor off (file, line, field).
    """
    from bench.episodes.state import StateError, check_label_state

    checked: set[tuple[tuple[str, ...], tuple[str, ...], str | None]] = set()
    for case in cases:
        if case.kind != "episode" and case.state is None:
            continue
        line = dataset.lines.get(case.id)
        if not execute and case.kind == "episode":
            raise BenchError("an episode runs its calls on the executor; drop --no-execute",
                             file=dataset.path, line=line, field="kind")
        overrides = case.state.overrides if case.state else []
        checks = case.success.state_checks if case.success else []
        user_id = case.state.user_id if case.state else None
        # the same statements on the same pristine database: one check says it for all
        key = (tuple(overrides), tuple(check.sql for check in checks), user_id)
        if key in checked:
            continue
        checked.add(key)
        try:
            check_label_state(overrides, checks, user_id=user_id)
        except StateError as exc:
            raise BenchError(exc.message, file=dataset.path, line=line,
                             field=exc.field) from None


def episode_factor_note(factors: Mapping[str, Sequence[str]], dataset: Dataset,
                        cases: Sequence[Case]) -> str | None:
    """Check a new run's episode factors (``bench run --fault`` ...: :data:`bench.episodes.
    factors.FACTORS`) against its cases: they change only episodes (:func:`make_plan`).

    Args:
        factors: the run's ``factors`` (factor -> settings; empty: none given).
        dataset: the run's dataset (named in the messages).
        cases: the run's selected cases.

    Returns:
        None, or a note when the cases mix episodes with single-answer cases (those run once,
        without the factors).

    Raises:
        BenchError: factors given and no case of the run is an episode (one line naming each
            factor's option), since they would change nothing.
    """
    given = [name for name, settings in factors.items() if settings]
    if not given:
        return None
    options = ", ".join(f"--{name.replace('_', '-')}" for name in given)
    episodes = sum(1 for case in cases if case.kind == "episode")
    if not episodes:
        where = f"dataset '{dataset.name}' has no episode cases" if not any(
            case.kind == "episode" for case in dataset.cases) else \
            f"none of the run's {count(len(cases), 'case')} of dataset '{dataset.name}' is " \
            "an episode"
        raise BenchError(f"{options}: {where}; episode factors change only episodes: drop "
                         f"{'it' if len(given) == 1 else 'them'}, or run a dataset of "
                         "episodes")
    if episodes < len(cases):
        return (f"note: episode factors ({options}) change only episodes: "
                f"{episodes} of the run's {count(len(cases), 'case')}; the single-answer "
                "cases run once, as they are")
    return None


@dataclass(frozen=True, slots=True)
class _Block:
    """One provider's items on one catalog and tool-space setting: ``entries`` (case,
    retrieved tools, episode factors) once per trial, trials outermost."""

    provider_id: str
    catalog: Variant
    space: ToolSpace | None
    entries: tuple[tuple[Case, Retrieved | None, Factors | None], ...]
    trials: int

    def item(self, position: int) -> PlanItem:
        """The item at ``position`` (``0 <= position < trials * len(entries)``)."""
        trial, entry = divmod(position, len(self.entries))
        case, retrieved, factors = self.entries[entry]
        return PlanItem(case, self.catalog, self.provider_id, trial, factors, self.space,
                        retrieved)

    def __iter__(self) -> Iterator[PlanItem]:
        for trial in range(self.trials):
            for case, retrieved, factors in self.entries:
                yield PlanItem(case, self.catalog, self.provider_id, trial, factors,
                               self.space, retrieved)


class Plan(Sequence[PlanItem]):
    """Every planned item of a run, in plan order (:func:`make_plan`), made when read.

    Items are built on demand from blocks of (provider, catalog, setting) x trials x cases:
    a run holds only its cases and catalogs, not one object per row (100,000 held
    :class:`PlanItem` objects cost about 10 MiB for the whole run; ``benchmarks/
    provider_throughput.py --only memory``). Items are equal, not identical, between reads.
    """

    def __init__(self, blocks: Sequence[_Block]) -> None:
        self._blocks = [b for b in blocks if b.entries and b.trials > 0]
        self._starts: list[int] = []
        total = 0
        for block in self._blocks:
            self._starts.append(total)
            total += block.trials * len(block.entries)
        self._len = total

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> PlanItem: ...

    @overload
    def __getitem__(self, index: slice) -> list[PlanItem]: ...

    def __getitem__(self, index: int | slice) -> PlanItem | list[PlanItem]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("plan index out of range")
        block = bisect_right(self._starts, index) - 1
        return self._blocks[block].item(index - self._starts[block])

    def __iter__(self) -> Iterator[PlanItem]:
        for block in self._blocks:
            yield from block

    def of_provider(self, provider_id: str) -> Iterator[PlanItem]:
        """The items of one provider, in plan order."""
        for block in self._blocks:
            if block.provider_id == provider_id:
                yield from block

    def conditions(self) -> list[str]:
        """Each condition (:attr:`PlanItem.condition`) once, in plan order."""
        return list(dict.fromkeys(PlanItem(case, b.catalog, b.provider_id, 0, factors, b.space,
                                           retrieved).condition
                                  for b in self._blocks
                                  for case, retrieved, factors in b.entries))


def plan_conditions(plan: Sequence[PlanItem]) -> list[str]:
    """Each condition of ``plan`` once, in plan order (a :class:`Plan` reads its blocks only)."""
    if isinstance(plan, Plan):
        return plan.conditions()
    return list(dict.fromkeys(item.condition for item in plan))


class PendingItems:
    """The items of a plan still to send, made when read: those whose key is not in
    ``done`` and whose provider is not in ``skipped``, in plan order.

    Args:
        plan: the run's plan (a :class:`Plan`, or a shard's list).
        done: keys of the finished rows.
        skipped: provider ids whose items are left out (providers that did not start).
    """

    def __init__(self, plan: Sequence[PlanItem], done: Collection[str] = frozenset(),
                 skipped: Collection[str] = frozenset()) -> None:
        self.plan, self.done, self.skipped = plan, done, skipped
        self._len: int | None = None if done or skipped else len(plan)

    def __len__(self) -> int:
        if self._len is None:  # counted once, by reading the plan
            self._len = sum(1 for _ in self)
        return self._len

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[PlanItem]:
        for item in self.plan:
            if self._wanted(item):
                yield item

    def _wanted(self, item: PlanItem) -> bool:
        return item.provider_id not in self.skipped and not (self.done and item.key in self.done)

    def of_provider(self, provider_id: str) -> Iterator[PlanItem]:
        """The pending items of one provider, in plan order."""
        items = self.plan.of_provider(provider_id) if isinstance(self.plan, Plan) else \
            (item for item in self.plan if item.provider_id == provider_id)
        return (item for item in items if self._wanted(item))

    def without(self, skipped: Collection[str]) -> "PendingItems":
        """The same items but those of the ``skipped`` providers."""
        if not skipped:
            return self
        return PendingItems(self.plan, self.done, {*self.skipped, *skipped})


def make_plan(cases: Sequence[Case], variants: Sequence[Variant], provider_ids: Sequence[str],
              trials: int, factors: Sequence[Factors] = (),
              setup: SpaceSetup | None = None) -> Plan:
    """All planned items, grouped by provider, then variant, then tool-space setting, then
    trial, then case; an episode case is planned once per setting of ``factors``
    (:func:`bench.episodes.factors.factor_grid`; none: the defaults), a single-answer case
    once. ``setup`` (tool counts and retrievers, :class:`bench.toolspace.setup.SpaceSetup`)
    plans each variant once per tool-space setting, on its grown catalog with each case's
    retrieved tools; without it (or with no setting) each variant once, as it is.

    Raises:
        BenchError: a catalog cannot be grown (:func:`bench.toolspace.distractors.
            expand_variant`).
    """
    grid = list(factors) or [Factors()]
    spaces: list[ToolSpace | None] = list(setup.spaces) if setup and setup.spaces else [None]
    blocks: list[_Block] = []
    for provider_id in provider_ids:
        for variant in variants:
            mine = [case for case in cases if case.toolset == variant.toolset]
            for space in spaces:
                catalog, retrieved = variant, None
                if space is not None and setup is not None:
                    catalog = setup.catalog(variant, space)
                    if space.retriever != "none":
                        setup.rank_all(mine, catalog, space.retriever)
                entries: list[tuple[Case, Retrieved | None, Factors | None]] = []
                for case in mine:
                    if space is not None and setup is not None:
                        retrieved = setup.retrieve(case, catalog, space)
                    entries.extend((case, retrieved, setting if case.kind == "episode" else None)
                                   for setting in (grid if case.kind == "episode" else grid[:1]))
                blocks.append(_Block(provider_id, catalog, space, tuple(entries), trials))
    return Plan(blocks)
