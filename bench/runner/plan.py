"""The plan: case x variant x provider x trial items, ordered provider, variant, trial, case
so that each provider sees one variant's cases back to back (the embedded model then reuses
the cached tools prefix)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

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


@dataclass(frozen=True, slots=True)  # slots: a 100,000-row plan is held for the whole run
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
    """Load-time checks of the episode cases among ``cases``: their state overrides and
    state-check queries run on a fresh copy of the shop database, and their signed-in
    customer exists there (:func:`bench.episodes.state.check_label_state`).

    Raises:
        BenchError: an override or query that does not run, an unknown ``state.user_id``,
            or episodes with the executor off (file, line, field).
    """
    from bench.episodes.state import StateError, check_label_state

    for case in cases:
        if case.kind != "episode":
            continue
        line = dataset.lines.get(case.id)
        if not execute:
            raise BenchError("an episode runs its calls on the executor; drop --no-execute",
                             file=dataset.path, line=line, field="kind")
        try:
            check_label_state(case.state.overrides if case.state else [],
                              case.success.state_checks if case.success else [],
                              user_id=case.state.user_id if case.state else None)
        except StateError as exc:
            raise BenchError(exc.message, file=dataset.path, line=line,
                             field=exc.field) from None


def make_plan(cases: Sequence[Case], variants: Sequence[Variant], provider_ids: Sequence[str],
              trials: int, factors: Sequence[Factors] = (),
              setup: SpaceSetup | None = None) -> list[PlanItem]:
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
    items: list[PlanItem] = []
    for provider_id in provider_ids:
        for variant in variants:
            mine = [case for case in cases if case.toolset == variant.toolset]
            for space in spaces:
                catalog, retrieved = variant, None
                if space is not None and setup is not None:
                    catalog = setup.catalog(variant, space)
                    if space.retriever != "none":
                        setup.rank_all(mine, catalog, space.retriever)
                for trial in range(trials):
                    for case in mine:
                        if space is not None and setup is not None:
                            retrieved = setup.retrieve(case, catalog, space)
                        items.extend(
                            PlanItem(case, catalog, provider_id, trial,
                                     setting if case.kind == "episode" else None, space,
                                     retrieved)
                            for setting in (grid if case.kind == "episode" else grid[:1]))
    return items
