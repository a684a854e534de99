"""``bench.optimize(...)``: improve a toolset's descriptions from the target's failures on
``dev``, and keep only what the held-out ``test`` split confirms.

The method, its sources and its guards are described in ``docs/optimize.md``; the steps live
in :mod:`bench.optimize.search` (the loop on ``dev``), :mod:`bench.optimize.candidates` and
:mod:`bench.optimize.guards` (what a candidate must pass), :mod:`bench.optimize.acceptance`
(the decision on ``test``) and :mod:`bench.optimize.output` (the variant folder, the report,
adoption). Every request goes through :func:`bench.evaluate`, so through the response cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from bench.datasets import Dataset, load_dataset
from bench.datasets.splits import has_splits, select_split
from bench.descriptions.containment import TestIndex, project_test_cases
from bench.descriptions.leaks import reviewed_mirrors
from bench.descriptions.variants import Variant, load_variant
from bench.errors import BenchError, pydantic_error_field
from bench.optimize.acceptance import decide
from bench.optimize.candidates import Guards
from bench.optimize.config import OptimizeConfig
from bench.optimize.evidence import check_template, load_template
from bench.optimize.guards import tool_tokens
from bench.optimize.records import Acceptance, OptimizeResult
from bench.optimize.runs import Runs
from bench.optimize.search import Search
from bench.optimize.workspace import Workspace
from bench.project import Project
from bench.providers.pipeline import LayerFactory
from bench.providers.registry import known_provider
from bench.runner.budget import ProgressHook
from bench.runner.startup import ProviderFactory

#: Target metrics an episode row carries (:func:`bench.scoring.episodes.episode_metrics`;
#: the label metrics such as ``selection_correct`` belong to single-answer rows only).
EPISODE_TARGETS = ("task_success",)


@dataclass(frozen=True)
class Optimization:
    """What :func:`optimize` returns.

    Attributes:
        result: the whole record (``result.json``): rounds, candidates, rejections, runs and
            their costs, the acceptance.
        folder: the optimization's folder (``<project>/reports/optimize/<id>``).
        final: the variant the search ended with (the start when nothing was kept).
    """

    result: OptimizeResult
    folder: Path
    final: Variant

    @property
    def accepted(self) -> bool:
        """The final variant passed the held-out test."""
        return self.result.acceptance.accepted


def _config(fields: dict[str, Any]) -> OptimizeConfig:
    try:
        return OptimizeConfig.model_validate(fields)
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(f"optimize(): {field}: {message}") from None


def _inputs(project: Project, config: OptimizeConfig) -> tuple[Dataset, Variant]:
    """The dataset (with splits, one toolset) and the starting variant.

    Raises:
        BenchError: no ``dev``/``test`` split, several toolsets, an empty split, an
            episode-only dataset with a target metric episodes do not carry, or as
            :func:`load_dataset` / :func:`load_variant`.
    """
    with project.activate():
        dataset = load_dataset(config.dataset)
        if not has_splits(dataset.cases):
            raise BenchError("optimize needs a dataset whose cases carry a dev/test split "
                             "(give it one with 'bench split')", file=dataset.path)
        if len(dataset.toolsets) != 1:
            raise BenchError(f"optimize works on one toolset; this dataset uses "
                             f"{', '.join(dataset.toolsets)}", file=dataset.path)
        if all(c.kind == "episode" for c in dataset.cases) and \
                config.metric not in EPISODE_TARGETS:
            raise BenchError(f"episode rows carry no {config.metric}; optimize an episode "
                             f"dataset for {' or '.join(EPISODE_TARGETS)} (--metric)",
                             file=dataset.path)
        for split in ("dev", "test"):
            if not select_split(dataset.cases, split):
                raise BenchError(f"the dataset has no {split} case", file=dataset.path)
        variant = load_variant(dataset.toolsets[0], config.variant)
    return dataset, variant


def optimize(dataset: str | Path, variant: str, target: str, proposer: str, *,
             project: Project | str | Path, opt_id: str | None = None,
             provider_factory: ProviderFactory | None = None,
             layers: Sequence[LayerFactory] = (), progress: ProgressHook | None = None,
             **options: Any) -> Optimization:
    """Optimize ``variant``'s descriptions for ``target`` on ``dataset``'s ``dev`` split with
    ``proposer`` rewriting them, and test the result once on ``test``.

    Args:
        dataset: a dataset name or ``.jsonl`` path with a ``dev``/``test`` split, one toolset.
        variant: the starting variant.
        target / proposer: provider ids (any bench provider; ``function:`` ones included).
        project: the project folder (datasets, descriptions, reports, the response cache).
        opt_id: the optimization's id (its folder name); an existing one is resumed (its
            settings must match, except ``rounds``, ``max_usd`` and ``max_total_tokens``);
            default: ``<variant>-<target>`` made safe, so the same call resumes.
        provider_factory, layers, progress: as :func:`bench.evaluate`.
        **options: the other :class:`~bench.optimize.config.OptimizeConfig` fields
            (``rounds``, ``max_usd``, ``min_gain``, ``margin``, ``max_tokens_ratio``,
            ``also_provider``, ``limit``, ``template``, ``settings``...).

    Returns:
        The :class:`Optimization`; its folder holds the output variant and the report.

    Raises:
        BenchError: bad options, dataset or variant (one line naming the field), or a run
            that failed (as :func:`bench.evaluate`).
    """
    from bench.api import _project

    config = _config({"dataset": str(dataset), "variant": variant, "target": target,
                      "proposer": proposer, **options})
    project = _project(project)
    loaded, start = _inputs(project, config)
    for field in ("target", "proposer", "also_provider"):  # before any folder is made
        provider_id = getattr(config, field)
        if provider_id is not None:
            try:
                known_provider(provider_id)
            except BenchError as exc:
                raise BenchError(f"optimize(): {field}: {exc.message}") from None
    workspace = Workspace(project, opt_id or _default_id(config), start.toolset)
    new = not workspace.root.exists()
    workspace.prepare(config)
    try:
        return _search_and_test(workspace, config, loaded, start, provider_factory, layers,
                                progress)
    except BenchError:
        if new:  # e.g. a provider that does not start: no empty folder is left behind
            workspace.discard_if_unstarted()
        raise


def _search_and_test(workspace: Workspace, config: OptimizeConfig, loaded: Dataset,
                     start: Variant, provider_factory: ProviderFactory | None,
                     layers: Sequence[LayerFactory], progress: ProgressHook | None
                     ) -> Optimization:
    """The search on ``dev``, the held-out test and the outputs (:func:`optimize`)."""
    from bench.optimize.output import write_outputs

    template = load_template(config.template)
    example = check_template(template, start.tools, max_tokens_ratio=config.max_tokens_ratio)
    guards = Guards(start, tool_tokens(start.tools), select_split(loaded.cases, "test"),
                    reviewed_mirrors(Path(loaded.path).parent / "README.md"), config,
                    everywhere=TestIndex(project_test_cases(
                        workspace.project.datasets_dir, {config.dataset: loaded.cases})))
    _refuse_leaky_template(config, guards, example)
    runs = Runs(workspace, config, provider_factory=provider_factory, layers=layers,
                progress=progress)
    runs.execute_default = any(c.kind == "episode" for c in loaded.cases)
    result = OptimizeResult(opt_id=workspace.opt_id, toolset=start.toolset, start=start.name,
                            start_sha256=start.sha256, final=start.name,
                            output=config.output_name, stop_reason="")
    search = Search(workspace, runs, guards, template, Path(loaded.path).resolve(), result)
    result.stop_reason = search.run(config.rounds)
    kept = [c for c in result.candidates if c.status == "kept"]
    result.final = kept[-1].name if kept else start.name
    final = search.variants[result.final]
    result.acceptance = _accept(runs, search, config, start, final)
    result.runs = runs.costs
    write_outputs(workspace, config, result, search.variants)
    return Optimization(result, workspace.root, final)


def _refuse_leaky_template(config: OptimizeConfig, guards: Guards, example: str) -> None:
    """Refuse a proposer prompt template (``config.template``, else the shipped one) whose
    own text, or whose prompt rendered for the start variant (``example``:
    :func:`~bench.optimize.evidence.check_template`, so the start's descriptions too),
    contains a test query (the containment signal of :mod:`bench.descriptions.containment`,
    every test split of the project): only ``dev`` cases may inform prompts. The ``dev``
    failures a round shows are checked in the round
    (:func:`bench.optimize.evidence.withhold_test_copies`): a dev case of one dataset can be
    a test case of another.

    Raises:
        BenchError: names the template file, the case and the words found.
    """
    from bench.descriptions.containment import ModelText
    from bench.optimize.evidence import DEFAULT_TEMPLATE, refuse_test_copies

    index = guards.test_index()
    file = Path(config.template) if config.template else DEFAULT_TEMPLATE
    text = file.read_text(encoding="utf-8")  # load_template read it already
    for copy in index.copies([ModelText("", "proposer prompt template", text)]):
        raise BenchError(f"the proposer's prompt template contains test case {copy.case_id} "
                         f"of dataset {copy.dataset} ('{copy.evidence[:80]}'); prompts may "
                         "quote dev cases only", file=file)
    refuse_test_copies(example, index, f"the proposer's prompt ({file}, with the tools of "
                                       f"variant {config.variant})")


def _accept(runs: Runs, search: Search, config: OptimizeConfig, start: Variant,
            final: Variant) -> Acceptance:
    """Run the start and the final variant once on ``test`` and decide."""
    if final.name == start.name:
        return Acceptance(reasons=["the search kept no candidate: nothing to test"])
    providers = [config.target] + ([config.also_provider] if config.also_provider else [])
    test = runs.target("test", "test", search.dataset, [start.name, final.name],
                       split="test", providers=providers)
    return decide(test, start.name, final.name, config,
                  tool_tokens(final.tools) / max(tool_tokens(start.tools), 1))


def _default_id(config: OptimizeConfig) -> str:
    """``opt-<variant>-<target>``, characters outside ``[A-Za-z0-9_.-]`` as ``-``."""
    import re
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"opt-{config.variant}-{config.target}")[:100]
