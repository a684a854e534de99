"""``bench synth``'s checks by answers: one :func:`bench.evaluate` run over the live
candidates with the ``oracle`` (the label's own calls, run on the executor: ``execution``)
and the solver providers (their answers must agree with the label: ``unsolvable``); step 2
of :mod:`bench.synth.core`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from bench.models import Case, Tool
from bench.project import Project
from bench.results import ManifestExecution
from bench.synth.candidates import Candidate, SynthSettings, stamp
from bench.toolset_config import read_only_fix

if TYPE_CHECKING:  # the run's rows, read where the verification runs
    from bench.results import Row

#: The ``execution`` verdict of a label on a project's own toolset without a declared
#: ``reset`` (:attr:`bench.executor.backends.base.Backend.runs_labels`): its calls, read-only
#: ones too, are calls no model made, so they never run on the user's system
#: (docs/executor.md, "Where expected results come from").
USERS_SYSTEM_SKIP = ("skipped: bench does not run labels on your system; declare reset = "
                     "[...] or verify with bench labels record after review")


def answer_agrees(case: Case, metrics: dict[str, Any]) -> bool:
    """Whether one scored answer agrees with the case's label (bench's own scores,
    :class:`bench.results.RowMetrics`): calls: ``arguments_correct_lenient`` (the right tools
    with acceptable arguments, after the lenient repairs of encoding slips); no-call:
    ``no_call_correct``; ask: ``ask_correct``."""
    if case.expected.no_call:
        return metrics.get("no_call_correct") is True
    if case.expected.ask:
        return metrics.get("ask_correct") is True
    return metrics.get("arguments_correct_lenient") is True


def refused_calls(case: Case, permission: Mapping[str, str], *, allow_writes: bool,
                  allow_sensitive: bool, write_tools: frozenset[str] | set[str] = frozenset()
                  ) -> list[str]:
    """Why the executor would refuse the label's calls, one line per refused tool (sorted by
    tool; [] when none is refused), by the executor's own rule
    (:meth:`bench.executor.pipeline.Executor` admission): a ``write`` tool runs only with
    ``allow_writes`` or when it is in ``write_tools`` (the toolset's ``writes = [...]``), a
    ``sensitive`` one only with ``allow_sensitive``.

    Args:
        case: the candidate case.
        permission: tool name -> ``read`` / ``write`` / ``sensitive`` (the variant's tools).
        allow_writes / allow_sensitive: the run's allowances (``--allow-writes`` ...).
        write_tools: the write tools the project's toolset table allows.
    """
    out: list[str] = []
    for name in sorted({c.name for c in case.expected.calls}):
        level = permission.get(name)
        if level == "write" and not (allow_writes or name in write_tools):
            out.append(f"write refused: {name} is not in writes = [...] of its toolset's "
                       f"table (or pass --allow-writes; {read_only_fix([name])})")
        elif level == "sensitive" and not allow_sensitive:
            out.append(f"sensitive call refused: {name} needs --allow-sensitive")
    return out


def _execution_skip(plan: ManifestExecution | None, toolset: str) -> str:
    """The ``skipped: ...`` verdict of a label whose calls were not executed, from the
    verification run's execution plan for ``toolset`` (its manifest's ``execution``)."""
    plan = plan or ManifestExecution()
    mode = plan.mode
    if mode == "none":
        return f"skipped: toolset '{toolset}' is not executed ({plan.detail})"
    if mode == "off":
        return "skipped: execution off (--no-execute)"
    if mode in ("mcp", "python", "reference"):
        return "skipped: a called tool has nothing to run (a schema-only tool)"
    return f"skipped: toolset '{toolset}' has no executor"


def _trace_denials(project: Project, run_id: str) -> set[tuple[str, str]]:
    """``(case id, tool)`` of every call the verification run's executor refused for want
    of a permission (``permission_denied`` in its ``traces.jsonl``; none without the file)."""
    from bench.executor.traces import TRACES, read_traces

    path = project.store(run_id).dir / TRACES
    if not path.is_file():
        return set()
    return {(r.case_id or "", r.tool) for r in read_traces(path)
            if r.error_code == "permission_denied"}


def _denied(traces: set[tuple[str, str]], case_id: str, case: Case) -> list[str]:
    """The label's tools the executor refused on ``case_id`` (:func:`_trace_denials`)."""
    return sorted({c.name for c in case.expected.calls if (case_id, c.name) in traces})


def verify_by_answers(project: Project, settings: SynthSettings, variant: str,
                      tools: Sequence[Tool], candidates: Sequence[Candidate], work: Path
                      ) -> str | None:
    """The ``execution`` and ``unsolvable`` checks of every live candidate, from one
    :func:`bench.evaluate` run over them with the ``oracle`` (the label's own calls, run
    on the executor) and the solvers (``solver_trials`` answers each). On a project's own
    toolset without a declared ``reset`` the run executes nothing (every label's
    ``execution`` is :data:`USERS_SYSTEM_SKIP`). Returns the run id (None when no candidate
    was left to verify)."""
    from bench.api import evaluate
    from bench.store.files import atomic_write_text
    from bench.toolset_config import load_toolset_settings

    live = [c for c in candidates if c.reason is None and c.case is not None]
    if not live:
        return None
    path = work / "verify.jsonl"
    atomic_write_text(path, "".join(json.dumps(c.case, ensure_ascii=False) + "\n"
                                    for c in live))
    extra: dict[str, Any] = {}
    if settings.model and "local" in settings.solvers:
        extra["model"] = settings.model
    own = load_toolset_settings(project.root).get(settings.toolset)
    # a generated label is a call no model made: never run on a system bench does not own
    # unless a declared reset undoes it (Backend.runs_labels); the solvers' calls are not
    # run there either (agreement is scored on the calls, not their results)
    users_system = own is not None and own.execute != "none" and not own.reset
    result = evaluate(path, [variant], ["oracle", *settings.solvers], project=project,
                      run_id=f"synth-verify-{stamp()}", trials=settings.solver_trials,
                      split="all",
                      execute=settings.execute and not users_system,
                      allow_writes=settings.allow_writes,
                      allow_sensitive=settings.allow_sensitive, seed=settings.seed, **extra)
    rows: dict[str, list[Row]] = {}
    for row in result.rows:
        rows.setdefault(row.case_id, []).append(row)
    execution = _ExecutionCheck(
        settings=settings, users_system=users_system,
        permission={t.name: t.permission for t in tools},
        plan=result.manifest.execution.get(settings.toolset) if result.manifest.execution
        else None,
        write_tools=frozenset(own.writes) if own is not None else frozenset(),
        traces=_trace_denials(project, result.run_id))
    for candidate in live:
        case = Case.model_validate(candidate.case)
        mine = rows.get(candidate.id, [])
        execution.check(candidate, case, mine)
        if candidate.reason is None:
            _check_agreement(candidate, case, mine, settings.min_agree)
    path.unlink(missing_ok=True)
    return result.run_id


@dataclass(frozen=True)
class _ExecutionCheck:
    """The ``execution`` check of the verification run (:func:`verify_by_answers`).

    Attributes:
        settings: what ``bench synth`` was asked (``execute``, ``allow_writes`` ...).
        users_system: the toolset is the project's own without a declared ``reset``: no
            label runs (:data:`USERS_SYSTEM_SKIP`).
        permission: tool name -> ``read`` / ``write`` / ``sensitive`` (the variant's tools).
        plan: the run's execution plan for the toolset (its manifest's ``execution``).
        write_tools: the write tools the project's toolset table allows.
        traces: ``(case id, tool)`` the executor refused (:func:`_trace_denials`).
    """

    settings: SynthSettings
    users_system: bool
    permission: dict[str, str]
    plan: ManifestExecution | None
    write_tools: frozenset[str]
    traces: set[tuple[str, str]]

    def check(self, candidate: Candidate, case: Case, mine: Sequence[Row]) -> None:
        """Set the candidate's ``execution`` verdict from its oracle row among ``mine`` (its
        rows of the run): passed, skipped with the reason, or failed (its rejection)."""
        settings = self.settings
        oracle = [r for r in mine if r.provider == "oracle" and r.trial == 0]
        refused = refused_calls(case, self.permission, allow_writes=settings.allow_writes,
                                allow_sensitive=settings.allow_sensitive,
                                write_tools=self.write_tools)
        success = oracle[0].metrics.execution_success if oracle else None
        if not case.expected.calls:
            candidate.verdicts["execution"] = "skipped: no call to run"
        elif not settings.execute:
            candidate.verdicts["execution"] = "skipped: execution off (--no-execute)"
        elif self.users_system:
            candidate.verdicts["execution"] = USERS_SYSTEM_SKIP
        elif refused:
            candidate.verdicts["execution"] = "skipped: " + "; ".join(refused)
        elif (success is False or (oracle and oracle[0].metrics.write_refused)) \
                and (denied := _denied(self.traces, candidate.id, case)):
            # the backend marks the tool a write although the variant does not: the
            # executor refused it (permission_denied), which is not the label's fault; a
            # refused call is left out of execution_success (None when all were refused)
            candidate.verdicts["execution"] = (f"skipped: write refused: {', '.join(denied)} "
                                               "(the executor's permission check)")
        elif success is None:
            candidate.verdicts["execution"] = _execution_skip(self.plan, settings.toolset)
        elif not success:
            errors = oracle[0].metrics.execution_errors or {}
            candidate.fail("execution", "the label's calls failed on the executor ("
                           + (", ".join(f"{k} {v}" for k, v in errors.items()) or "error")
                           + ")")
        else:
            candidate.verdicts["execution"] = "pass"


def _check_agreement(candidate: Candidate, case: Case, mine: Sequence[Row],
                     min_agree: int) -> None:
    """The ``unsolvable`` check: at least ``min_agree`` independent solver answers among
    ``mine`` (the candidate's rows) agree with the label (:func:`answer_agrees`; the
    embedded model's trials count as one answer)."""
    from bench.providers.registry import runs_embedded_model

    agree: set[tuple[str, int]] = set()
    answers: set[tuple[str, int]] = set()
    for row in mine:
        if row.provider == "oracle":
            continue
        # the embedded model decodes greedily: its trials are one answer
        trial = 0 if runs_embedded_model(row.provider) else row.trial
        answers.add((row.provider, trial))
        if answer_agrees(case, row.metrics.model_dump()):
            agree.add((row.provider, trial))
    shown = f"{len(agree)} of {len(answers)} answers agree (need {min_agree})"
    if len(agree) < min_agree:
        candidate.fail("unsolvable", shown)
    else:
        candidate.verdicts["unsolvable"] = f"pass: {shown}"
