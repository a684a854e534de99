"""Per-episode metrics (BRIEF §10), defined once; the registry (:mod:`bench.scoring.registry`)
lists them for the table, report, compare and gate.

Inputs are a finished trajectory's made calls, in the order they were made, each with its
step and its executed outcome, and the case's label (:class:`bench.models.Case`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, TypedDict

from bench.models import Case, ExpectedCall, ForbiddenCall, Tool
from bench.scoring.assignment import linear_sum_assignment
from bench.scoring.values import listed_argument_acceptable, schema_defaults

REPEAT_GUARD = 3
"""The loop guard: the episode stops when one call (same tool, same canonical arguments) is
about to be made this many times since the episode's last successful write (a retry storm,
e.g. one API called 37 times with the same arguments; reading again after a write is not one)."""

TRANSIENT_CODES = frozenset({"http_503", "http_429", "http_500", "timeout", "injected_hang"})
"""Error codes of failures that the same call, sent again, may get past."""


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
        write: the tool writes (permission ``write`` or ``sensitive``).
        raw_arguments: the arguments as received (what identifies an undecodable call).
    """

    step: int
    name: str
    arguments: dict[str, object]
    valid: bool = True
    success: bool | None = None
    error_code: str | None = None
    write: bool = False
    raw_arguments: object = None


def canonical_call(name: str, arguments: object, valid: bool = True, raw: object = None
                   ) -> str:
    """The identity of a call for repeat counting: name and arguments as sorted-key JSON;
    for an undecodable call (``valid`` False, arguments ``{}``), the ``raw`` arguments it
    sent (two different malformed calls are no repeat)."""
    shown = arguments if valid else {"$undecodable": raw}
    return name + json.dumps(shown, sort_keys=True, ensure_ascii=False, default=str)


#: Tool name -> its parameters' schema defaults (:func:`bench.scoring.values.schema_defaults`).
Defaults = Mapping[str, Mapping[str, Any]]


def tool_defaults(tools: Sequence[Tool]) -> dict[str, dict[str, Any]]:
    """Tool name -> the schema defaults of its parameters
    (:func:`bench.scoring.values.schema_defaults`), for the tools an episode offers."""
    return {tool.name: schema_defaults(tool.input_schema) for tool in tools}


def label_matches(call: MadeCall, label: ExpectedCall | ForbiddenCall,
                  defaults: Defaults | None = None) -> bool:
    """The call has the label's tool name and every argument the label lists has an
    acceptable value (arguments the label does not list are free); a sent value equal to
    its parameter's schema default counts as omitted where omitting is right, as in
    single-answer scoring (:func:`bench.scoring.values.listed_argument_acceptable`).

    Args:
        call: the made call.
        label: a required or forbidden call of the label.
        defaults: tool name -> its parameters' schema defaults (:func:`tool_defaults`; None:
            no defaults).
    """
    if call.name != label.name or not call.valid:
        return False
    sent = {k: v for k, v in call.arguments.items() if v is not None}
    own = (defaults or {}).get(call.name)
    return all(listed_argument_acceptable(name, sent, acceptable, own)
               for name, acceptable in label.arguments.items())


def trajectory_match(required: Sequence[ExpectedCall], made: Sequence[MadeCall],
                     defaults: Defaults | None = None) -> list[tuple[int, int]]:
    """``(required index, made index)`` pairs of a maximum matching (the optimal
    assignment of :mod:`bench.scoring.assignment`, never greedy: BRIEF §6). A required call
    is done by a made call that matches its label and succeeded (a call that failed, or that
    the loop guard stopped, did not happen); among those, the pairing that breaks the fewest
    ``after`` constraints is not searched for, but earlier calls are preferred for calls
    without constraints and later ones for calls that must come after others. ``defaults``:
    the tools' schema defaults (:func:`label_matches`)."""
    if not required or not made:
        return []
    cost = [[1.0] * len(made) for _ in required]
    for i, label in enumerate(required):
        late = bool(getattr(label, "after", None))
        for j, call in enumerate(made):
            if call.success and label_matches(call, label, defaults):
                rank = (len(made) - 1 - j) if late else j
                cost[i][j] = rank / (len(made) * len(required) + 1)
    rows, cols = linear_sum_assignment(cost)
    return [(r, c) for r, c in zip(rows, cols) if cost[r][c] < 1]


def answer_has_fact(answer: str, alternatives: Sequence[str]) -> bool:
    """One of ``alternatives`` occurs in ``answer`` (case-folded substring)."""
    folded = answer.casefold()
    return any(alt.casefold() in folded for alt in alternatives)


def repeat_identities(made: Sequence[MadeCall]) -> list[str | None]:
    """For each call, its identity (:func:`canonical_call`) when an identical call came
    earlier since the last successful write, else None: the repeated calls."""
    seen: set[str] = set()
    out: list[str | None] = []
    for call in made:
        identity = canonical_call(call.name, call.arguments, call.valid, call.raw_arguments)
        out.append(identity if identity in seen else None)
        seen.add(identity)
        if call.write and call.success:  # reading again after a write is not a repeat
            seen.clear()
    return out


def _recovered(error: MadeCall, later: MadeCall) -> bool:
    """``later`` (the next call to the same tool) fixes what ``error`` named: it does not fail
    the same way, and, unless the failure was transient, it changed the arguments."""
    if later.success is None or later.error_code == error.error_code:
        return False
    return error.error_code in TRANSIENT_CODES or later.arguments != error.arguments


def episode_metrics(case: Case, made: Sequence[MadeCall], *, steps: int, final_answer: str,
                    state_checks: Sequence[Mapping[str, object]] | None,
                    stop_reason: str, confirmed_at: int | None = None,
                    tools: Sequence[Tool] = ()) -> EpisodeMetrics:
    """The metrics of one finished episode (:class:`EpisodeMetrics`).

    Args:
        case: the episode case (its ``success``, ``required_calls``, ``forbidden_calls``).
        made: every call made, in order.
        steps: model answers in the episode.
        final_answer: the text of the last answer ("" when it ended without one).
        state_checks: :func:`bench.episodes.state.run_checks` results; None when they could
            not run (an MCP server's state is not bench's to query).
        stop_reason: ``final_answer``, ``step_limit``, ``loop_guard`` or ``unparseable``.
        confirmed_at: the step after which the first scripted user reply was sent (None:
            none was), for ``until_confirmed`` forbidden calls.
        tools: the tools the episode offered: a sent value equal to its parameter's schema
            default counts as omitted where omitting is right (:func:`label_matches`);
            empty: no defaults.

    Returns:
        ``task_success`` (bool; None when the case's checks could not run): the episode ended
        on a final answer, every state check and answer fact holds, and no forbidden call was
        made;
        ``state_checks_passed`` / ``answer_facts_found`` (fractions, None without any);
        ``trajectory_recall`` (matched required / required; None without required calls),
        ``trajectory_precision`` (matched / made, None with no call made),
        ``order_violations`` (``after`` constraints broken by the matched calls);
        ``steps``, ``tool_calls``; ``repeated_calls`` (calls identical to an earlier one since
        the last successful write, :func:`repeat_identities`);
        ``errors_seen`` (calls that returned an error), ``recovery`` (fraction of those whose
        next call to the same tool fixed what the error named, :func:`_recovered`; None
        without errors); ``forbidden_attempted`` (bool: a
        forbidden call was made), ``forbidden_calls`` (how many); ``stopped_by_guard`` (bool).
    """
    success = case.success
    facts = success.answer_facts if success else []
    found = [answer_has_fact(final_answer, fact) for fact in facts]
    checks_ok = None if state_checks is None else [bool(c["ok"]) for c in state_checks]
    ended = stop_reason == "final_answer"
    defaults = tool_defaults(tools)
    forbidden = _forbidden_count(case, made, defaults, confirmed_at)
    if checks_ok is None and success is not None and success.state_checks:
        task_success = None
    else:
        task_success = ended and all(found) and all(checks_ok or []) and not forbidden
    pairs = trajectory_match(case.required_calls, made, defaults)
    where = {i: made[j].step for i, j in pairs}
    violations = sum(1 for i, label in enumerate(case.required_calls) if i in where
                     for before in label.after if before in where and where[before] >= where[i])
    repeated = sum(1 for identity in repeat_identities(made) if identity is not None)
    errors, recovered = _errors_recovered(made)
    return EpisodeMetrics(
        task_success=task_success,
        state_checks_passed=None if not checks_ok else sum(checks_ok) / len(checks_ok),
        answer_facts_found=None if not found else sum(found) / len(found),
        trajectory_recall=None if not case.required_calls else
        len(pairs) / len(case.required_calls),
        trajectory_precision=None if not made else len(pairs) / len(made),
        order_violations=violations,
        steps=steps,
        tool_calls=len(made),
        repeated_calls=repeated,
        errors_seen=errors,
        recovery=None if not errors else recovered / errors,
        forbidden_attempted=forbidden > 0,
        forbidden_calls=forbidden,
        stopped_by_guard=stop_reason == "loop_guard",
    )


def _forbidden_count(case: Case, made: Sequence[MadeCall], defaults: Defaults,
                     confirmed_at: int | None) -> int:
    """The calls of ``made`` that a forbidden call of ``case`` matches (an
    ``until_confirmed`` one only up to the step ``confirmed_at``)."""
    def forbidden_call(call: MadeCall) -> bool:
        return any(label_matches(call, f, defaults) and not (
            f.until_confirmed and confirmed_at is not None and call.step > confirmed_at)
            for f in case.forbidden_calls)

    return sum(1 for call in made if forbidden_call(call))


def _errors_recovered(made: Sequence[MadeCall]) -> tuple[int, int]:
    """(the calls that returned an error, those whose next call to the same tool fixed what
    the error named: :func:`_recovered`)."""
    errors, recovered = 0, 0
    following: dict[str, MadeCall] = {}  # tool -> its next call, walking backwards: O(calls)
    for call in reversed(made):
        if call.success is False:
            errors += 1
            later = following.get(call.name)
            recovered += later is not None and _recovered(call, later)
        following[call.name] = call
    return errors, recovered


class EpisodeMetrics(TypedDict):
    """The metrics of one finished episode (:func:`episode_metrics` defines them): fields of
    :class:`bench.results.RowMetrics`, of their types."""

    task_success: bool | None
    state_checks_passed: float | None
    answer_facts_found: float | None
    trajectory_recall: float | None
    trajectory_precision: float | None
    order_violations: int
    steps: int
    tool_calls: int
    repeated_calls: int
    errors_seen: int
    recovery: float | None
    forbidden_attempted: bool
    forbidden_calls: int
    stopped_by_guard: bool
