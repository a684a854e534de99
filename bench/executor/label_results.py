"""Labels whose own calls fail: a label problem, found without touching a user's system.

``execution_match`` compares the model's results with the label's (:mod:`bench.executor.judge`);
a label whose call returns an error gives nothing to compare (a failing call never matches),
so its rows get no exec match and the run says ``label call failed: N``. ``bench lint`` finds
such labels before a run, where it can check without touching a user's system:

- a shipped reference toolset (``ecommerce``, ``analytics``, ``logistics``): the label's calls
  run on bench's own copy of the shop database (writes rolled back), with every permission
  (unless the project's ``pyproject.toml`` gives the toolset a backend of its own);
- any other toolset: the results ``bench labels record`` stored with the case
  (``expected.recorded``): a recorded failure is reported, nothing runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

from bench.models import Case, Tool

if TYPE_CHECKING:  # imported where the findings are built (lint_findings)
    from bench.descriptions.lint import Finding


@dataclass(frozen=True)
class LabelFailure:
    """One label call that fails.

    Attributes:
        case_id / tool: the case and the called tool.
        index: the call's 0-based position in ``expected.calls``.
        source: ``reference`` (run on bench's copy now) or ``recorded`` (``bench labels
            record`` stored the failure).
        error: the error's code and message.
    """

    case_id: str
    tool: str
    index: int
    source: str
    error: str


def label_failures(cases: Sequence[Case], toolset: str, tools: Sequence[Tool],
                   own_system: bool = False) -> Iterator[LabelFailure]:
    """The failing label calls of ``cases`` of ``toolset`` (module docstring); single-answer
    cases only (an episode's required calls are matched, not compared by result), each on
    its ``state`` as a run gives it. Labels that cannot be built (an argument offers only
    patterns) or declare ``expected.not_executable`` are not run.

    Args:
        cases: the cases (others than ``toolset``'s are ignored).
        toolset: the toolset.
        tools: the variant's tools whose schemas check the calls.
        own_system: the project declares its own backend for ``toolset``
            (``[tool.bench.toolsets.<name>]``, which a run uses even for a shipped toolset's
            name): only its recordings count, bench's reference backend is not asked.
    """
    from bench.executor.backends import REFERENCE_TOOLSETS

    mine = [c for c in cases if c.toolset == toolset and c.kind != "episode"
            and c.expected.calls and c.expected.not_executable is None]
    if toolset in REFERENCE_TOOLSETS and not own_system:
        yield from _reference_failures(mine, toolset, tools)
        return
    from bench.executor.judge import recording_current

    for case in mine:
        recorded = case.expected.recorded
        if recorded is None or not recording_current(recorded.results, case.expected, tools):
            continue
        for index, result in enumerate(recorded.results):
            if not result.ok:
                yield LabelFailure(case.id, result.name, index, "recorded",
                                   f"{result.error_code}: {result.error}")


def _reference_failures(cases: Sequence[Case], toolset: str, tools: Sequence[Tool]
                        ) -> Iterator[LabelFailure]:
    """Run the labels on bench's reference backend (its database is bench's own copy)."""
    from bench.executor.backends import ReferenceBackends
    from bench.executor.judge import build_expected_call, failed
    from bench.executor.pipeline import Executor
    from bench.executor.outcome import RunContext
    from bench.executor.runhook import case_context

    backends = ReferenceBackends()
    if not backends(toolset).runs_labels:  # never on a system bench does not own
        return
    executor = Executor(backends)
    by_name = {t.name: t for t in tools}
    try:
        for case in cases:
            # the case's state as a run gives it (label and answers alike)
            context = case_context(case, RunContext(
                run_id="lint", allow_writes=True, allow_sensitive=True, inject_faults=False,
                trace=False, label_side=True))
            for index, expected in enumerate(case.expected.calls):
                call = build_expected_call(expected, index)
                if call is None:
                    continue
                outcome = executor.execute(call, by_name, toolset, context)
                if failed(outcome):
                    yield LabelFailure(case.id, call.name, index, "reference",
                                       f"{outcome.error_code}: {outcome.error}")
    finally:
        executor.close()


def lint_findings(names: list[str], linted: Sequence[tuple[str, str]]) -> list[Finding]:
    """BL015 findings (``label-call-fails``) of the datasets ``names`` (``["none"]``: none;
    empty: every dataset under ``datasets/`` that uses a linted toolset), every split, one
    per failing label call, reported on the toolset's first linted variant (``l50`` when
    linted), whose schemas check the calls. A label run on bench's reference backend is an
    error (bench owns both the label and the data: the label, its ``state`` or its
    ``not_executable`` must say what the call needs); a failure recorded on a user's
    system (``bench labels record``) is a warning (the system may have changed since, and
    only its owner can say which is wrong). A shipped toolset's name that the project's
    ``pyproject.toml`` gives a backend of its own is the user's system (its runs execute
    there, :func:`label_failures`' ``own_system``).

    Args:
        names: the ``--dataset`` values of ``bench lint``.
        linted: the (toolset, variant) pairs linted.

    Raises:
        BenchError: a named dataset that cannot be loaded, or an invalid
            ``[tool.bench.toolsets]`` table.
    """
    from bench.datasets import available_datasets, load_dataset
    from bench.descriptions.aliases import apply_aliases
    from bench.descriptions.lint import ERROR, RULES, Finding
    from bench.descriptions.variants import load_variant
    from bench.errors import BenchError
    from bench.paths import project_root
    from bench.toolset_config import load_toolset_settings

    if names == ["none"]:
        return []
    own = load_toolset_settings(project_root())
    variants: dict[str, str] = {}
    for toolset, variant in linted:
        if variants.get(toolset) != "l50":
            variants[toolset] = "l50" if variant == "l50" else variants.get(toolset, variant)
    rule = RULES["label-call-fails"]
    found = []
    for name in names or available_datasets():
        try:
            dataset, _ = apply_aliases(load_dataset(name))
        except BenchError:  # an empty dataset (bench init writes one): nothing to check
            if names:
                raise
            continue
        for toolset in dataset.toolsets:
            if toolset not in variants:
                continue
            variant = variants[toolset]
            tools = load_variant(toolset, variant).tools
            for failure in label_failures(dataset.cases, toolset, tools,
                                          own_system=toolset in own):
                # bench's own label on bench's own data: nothing outside the label to blame
                reference = failure.source == "reference"
                found.append(Finding(
                    rule.code, rule.name, ERROR if reference else rule.severity, toolset,
                    variant, failure.tool, None,
                    f"{dataset.name} case {failure.case_id}: expected call {failure.index} "
                    f"fails ({failure.source}): {failure.error}",
                    "fix the label (its arguments, or the data it names"
                    + ("; 'state': {'overrides': [SQL]} gives the case the data its query "
                       "assumes, 'expected.not_executable' says why the call cannot run "
                       "alone" if reference else "")
                    + "), or expect the model to ask or make no call; a failing call is "
                    "never an exec match"))
    return found
