"""Per-episode metrics (BRIEF §10), defined once; the registry (:mod:`bench.scoring.registry`)
lists them for the table, report, compare and gate.

Inputs are a finished trajectory's made calls, in the order they were made, each with its
step and its executed outcome, and the case's label (:class:`bench.models.Case`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from bench.models import Case, ExpectedCall, ForbiddenCall
from bench.scoring.metrics import value_acceptable

REPEAT_GUARD = 3
"""The loop guard: the episode stops when one call (same tool, same canonical arguments) is
about to be made this many times (a retry storm, e.g. one API called 37 times with the same
arguments)."""


@dataclass(frozen=True)
class MadeCall:
    """One call of a trajectory.

    Attributes:
        step: the 0-based step (model answer) that made it.
        name: the tool name.
        arguments: the decoded arguments ({} when they did not decode).
        valid: the arguments decoded.
        success: the executor ran it and it returned data (None: not executed).
        error_code: the executor's error code when it failed.
    """

    step: int
    name: str
    arguments: dict[str, Any]
    valid: bool = True
    success: bool | None = None
    error_code: str | None = None


def canonical_call(name: str, arguments: Any) -> str:
    """The identity of a call for repeat counting: name and arguments as sorted-key JSON."""
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


def label_matches(call: MadeCall, label: ExpectedCall | ForbiddenCall) -> bool:
    """The call has the label's tool name and every argument the label lists has an
    acceptable value (arguments the label does not list are free)."""
    if call.name != label.name or not call.valid:
        return False
    sent = {k: v for k, v in call.arguments.items() if v is not None}
    for name, acceptable in label.arguments.items():
        if name in sent:
            if not value_acceptable(sent[name], acceptable):
                return False
        elif None not in acceptable:
            return False
    return True


def trajectory_match(required: Sequence[ExpectedCall], made: Sequence[MadeCall]
                     ) -> list[tuple[int, int]]:
    """``(required index, made index)`` pairs of a maximum matching (scipy's optimal
    assignment on a 0/1 cost, never greedy: BRIEF §6), earliest made calls preferred."""
    if not required or not made:
        return []
    cost = np.ones((len(required), len(made)))
    for i, label in enumerate(required):
        for j, call in enumerate(made):
            if label_matches(call, label):
                cost[i, j] = j / (len(made) * len(required) + 1)  # prefer early calls
    from scipy.optimize import linear_sum_assignment  # ~0.3 s to import: when needed

    rows, cols = linear_sum_assignment(cost)
    return [(int(r), int(c)) for r, c in zip(rows, cols) if cost[r, c] < 1]


def answer_has_fact(answer: str, alternatives: Sequence[str]) -> bool:
    """One of ``alternatives`` occurs in ``answer`` (case-folded substring)."""
    folded = answer.casefold()
    return any(alt.casefold() in folded for alt in alternatives)


def episode_metrics(case: Case, made: Sequence[MadeCall], *, steps: int, final_answer: str,
                    state_checks: Sequence[dict[str, Any]] | None,
                    stop_reason: str) -> dict[str, Any]:
    """The metrics of one finished episode.

    Args:
        case: the episode case (its ``success``, ``required_calls``, ``forbidden_calls``).
        made: every call made, in order.
        steps: model answers in the episode.
        final_answer: the text of the last answer ("" when it ended without one).
        state_checks: :func:`bench.episodes.state.run_checks` results; None when they could
            not run (an MCP server's state is not bench's to query).
        stop_reason: ``final_answer``, ``step_limit``, ``loop_guard`` or ``unparseable``.

    Returns:
        ``task_success`` (bool; None when the case's checks could not run): every state check
        and answer fact holds and the episode ended on a final answer;
        ``state_checks_passed`` / ``answer_facts_found`` (fractions, None without any);
        ``trajectory_recall`` (matched required / required; None without required calls),
        ``trajectory_precision`` (matched / made, None with no call made),
        ``order_violations`` (``after`` constraints broken by the matched calls);
        ``steps``, ``tool_calls``; ``repeated_calls`` (calls identical to an earlier one);
        ``errors_seen`` (calls that returned an error), ``recovery`` (fraction of those whose
        next call to the same tool succeeded with changed arguments, or with the same ones
        after a transient failure; None without errors); ``forbidden_attempted`` (bool: a
        forbidden call was made), ``forbidden_calls`` (how many); ``stopped_by_guard`` (bool).
    """
    success = case.success
    facts = success.answer_facts if success else []
    found = [answer_has_fact(final_answer, fact) for fact in facts]
    checks_ok = None if state_checks is None else [bool(c["ok"]) for c in state_checks]
    ended = stop_reason == "final_answer"
    if checks_ok is None and success is not None and success.state_checks:
        task_success = None
    else:
        task_success = ended and all(found) and all(checks_ok or [])
    pairs = trajectory_match(case.required_calls, made)
    where = {i: made[j].step for i, j in pairs}
    violations = sum(1 for i, label in enumerate(case.required_calls) if i in where
                     for before in label.after if before in where and where[before] >= where[i])
    seen: set[str] = set()
    repeated = 0
    for call in made:
        identity = canonical_call(call.name, call.arguments)
        repeated += identity in seen
        seen.add(identity)
    errors, recovered = 0, 0
    for index, call in enumerate(made):
        if call.success is not False:
            continue
        errors += 1
        later = next((c for c in made[index + 1:] if c.name == call.name), None)
        if later is not None and later.success:
            transient = call.error_code in ("http_503", "http_429", "timeout", "http_500",
                                            "injected_hang")
            recovered += transient or later.arguments != call.arguments
    forbidden = sum(1 for call in made if any(label_matches(call, f)
                                              for f in case.forbidden_calls))
    return {
        "task_success": task_success,
        "state_checks_passed": None if not checks_ok else sum(checks_ok) / len(checks_ok),
        "answer_facts_found": None if not found else sum(found) / len(found),
        "trajectory_recall": None if not case.required_calls else
        len(pairs) / len(case.required_calls),
        "trajectory_precision": None if not made else len(pairs) / len(made),
        "order_violations": violations,
        "steps": steps,
        "tool_calls": len(made),
        "repeated_calls": repeated,
        "errors_seen": errors,
        "recovery": None if not errors else recovered / errors,
        "forbidden_attempted": forbidden > 0,
        "forbidden_calls": forbidden,
        "stopped_by_guard": stop_reason == "loop_guard",
    }
