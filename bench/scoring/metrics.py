"""Per-case metrics: one definition each, in one place (BRIEF §6).

Expected and predicted calls are matched as multisets by an optimal assignment
(``scipy.optimize.linear_sum_assignment``) whose cost prefers the right tool name, then the most
correct arguments; matching is never greedy, so scores do not depend on the order of calls and
duplicates are counted right. Cases marked ``ordered`` pair calls by position instead.

Metric values are ``True``/``False``, or ``None`` where the metric does not apply to the case
(argument accuracy on a no-call case, no-call accuracy on a case that expects calls); rates
drop ``None`` from their denominator.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import lru_cache
from typing import Any, Sequence

import jsonschema
import numpy as np
from pydantic import BaseModel, Field
from scipy.optimize import linear_sum_assignment

from bench.models import Expected, ExpectedCall, Tool, ToolCall
from bench.parse import ParsedAnswer

# Error codes (a small, stable taxonomy; reports and the gate key on these strings).
UNPARSEABLE = "unparseable"            # the answer could not be decoded into calls
FALSE_NO_CALL = "false_no_call"        # calls were expected, none was made
FALSE_CALL = "false_call"              # no call was expected, one was made
WRONG_TOOL = "wrong_tool"              # a call's tool is not the expected one
MISSING_CALL = "missing_call"          # fewer calls of a tool than expected
EXTRA_CALL = "extra_call"              # more calls of a tool than expected
HALLUCINATED_TOOL = "hallucinated_tool"  # a call names a tool that does not exist
WRONG_VALUE = "wrong_argument_value"   # an argument's value is not acceptable
MISSING_ARGUMENT = "missing_argument"  # an argument that may not be omitted was omitted
UNEXPECTED_ARGUMENT = "unexpected_argument"  # an argument the label does not allow was sent
SCHEMA_INVALID = "schema_invalid"      # a call's arguments fail the tool's JSON Schema

_NAME_MISMATCH_COST = 10.0


class CaseScore(BaseModel):
    """The metrics of one answer to one case.

    Attributes:
        selection_correct: the multiset of called tool names equals the expected one (for a
            no-call case: no call was made). False for an unparseable answer.
        selection_precision / selection_recall / selection_f1: multiset overlap of names
            (None on no-call cases).
        arguments_correct: selection is correct and every matched call has only acceptable
            argument values (None on no-call cases).
        argument_results: ``"<call index>.<argument>" -> bool`` for matched calls.
        schema_valid: every call's arguments validate against its tool's JSON Schema (None when
            no call was made).
        no_call_correct: on a no-call case, no call was made (None on other cases).
        ask_correct: on an ask case (information missing), no call was made (None on other
            cases). Whether the prose really asks is not judged.
        hallucinated_tool: some call names a tool the variant does not have.
        error_codes: sorted distinct error codes.
        argument_errors: ``"tool.argument: expected -> got"`` strings for wrong values.
    """

    selection_correct: bool
    selection_precision: float | None = None
    selection_recall: float | None = None
    selection_f1: float | None = None
    arguments_correct: bool | None = None
    argument_results: dict[str, bool] = Field(default_factory=dict)
    schema_valid: bool | None = None
    no_call_correct: bool | None = None
    ask_correct: bool | None = None
    hallucinated_tool: bool = False
    error_codes: list[str] = Field(default_factory=list)
    argument_errors: list[str] = Field(default_factory=list)


def _numbers_equal(a: Any, b: Any) -> bool:
    return (isinstance(a, (int, float)) and isinstance(b, (int, float))
            and not isinstance(a, bool) and not isinstance(b, bool)
            and math.isclose(a, b, rel_tol=0, abs_tol=1e-9))


def value_equal(got: Any, want: Any) -> bool:
    """Deep equality where ``1 == 1.0`` but ``True != 1`` and ``"1" != 1`` (no coercion)."""
    if _numbers_equal(got, want):
        return True
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(value_equal(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(value_equal(g, w) for g, w in zip(got, want))
    return got == want


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def value_acceptable(got: Any, acceptable: Sequence[Any]) -> bool:
    """True when a sent value matches one entry of the label's acceptable-values list.

    Entries: literals (compared by :func:`value_equal`), ``{"$regex": p}`` (``re.search`` on
    a string value), ``{"$any": true}``. ``None`` entries mean "may be omitted" and never match
    a sent value.
    """
    for want in acceptable:
        if want is None:
            continue
        if isinstance(want, dict) and "$regex" in want:
            if isinstance(got, str) and _regex(want["$regex"]).search(got):
                return True
        elif isinstance(want, dict) and "$any" in want:
            return True
        elif value_equal(got, want):
            return True
    return False


def argument_results(call: ToolCall, expected: ExpectedCall) -> dict[str, bool]:
    """Per-argument correctness of one call against one expected call.

    Every argument the label lists is checked (omitted is right only when the list holds
    ``None``); every argument sent that the label does not list is wrong. A sent ``null``
    counts as omitted (the schema-validity metric judges it separately).
    """
    sent = {k: v for k, v in call.arguments.items() if v is not None}
    results: dict[str, bool] = {}
    for name, acceptable in expected.arguments.items():
        if name in sent:
            results[name] = value_acceptable(sent[name], acceptable)
        else:
            results[name] = None in acceptable
    for name in sent:
        if name not in expected.arguments:
            results[name] = False
    return results


def _pair_cost(call: ToolCall, expected: ExpectedCall) -> float:
    if call.name != expected.name:
        return _NAME_MISMATCH_COST
    if not call.valid:
        return 1.0
    results = argument_results(call, expected)
    if not results:
        return 0.0
    return 1.0 - sum(results.values()) / len(results)


def match_calls(expected: Sequence[ExpectedCall], predicted: Sequence[ToolCall],
                ordered: bool = False) -> list[tuple[int, int]]:
    """Pair expected and predicted calls that share a tool name.

    Args:
        expected: the label's calls.
        predicted: the parsed calls.
        ordered: pair by position instead of by optimal assignment.

    Returns:
        ``(expected index, predicted index)`` pairs with equal names; an optimal assignment
        minimising name mismatches first, then wrong arguments (ties broken by scipy's solver,
        which is deterministic).
    """
    if ordered:
        return [(i, i) for i in range(min(len(expected), len(predicted)))
                if expected[i].name == predicted[i].name]
    if not expected or not predicted:
        return []
    cost = np.array([[_pair_cost(p, e) for p in predicted] for e in expected])
    rows, cols = linear_sum_assignment(cost)
    return [(int(r), int(c)) for r, c in zip(rows, cols)
            if expected[r].name == predicted[c].name]


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        json.loads(schema_json), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def schema_errors(call: ToolCall, tool: Tool | None) -> list[str]:
    """JSON Schema errors of a call's arguments (``["unknown tool"]`` when there is no tool)."""
    if tool is None:
        return ["unknown tool"]
    if not call.valid:
        return ["arguments are not a JSON object"]
    validator = _validator(json.dumps(tool.input_schema, sort_keys=True))
    return [e.message for e in validator.iter_errors(call.arguments)]


def score_case(expected: Expected, answer: ParsedAnswer, tools: Sequence[Tool]) -> CaseScore:
    """Score one parsed answer against one case's label.

    Args:
        expected: the case's label.
        answer: the parsed answer (``answer.error`` set means undecodable).
        tools: the variant's tools (for schema validity and hallucinated tools).

    Returns:
        A :class:`CaseScore`; see its attributes for each metric's definition.
    """
    is_no_call = expected.no_call or expected.ask
    if answer.error is not None:
        return CaseScore(
            selection_correct=False,
            selection_precision=None if is_no_call else 0.0,
            selection_recall=None if is_no_call else 0.0,
            selection_f1=None if is_no_call else 0.0,
            arguments_correct=None if is_no_call else False,
            schema_valid=False,
            no_call_correct=False if expected.no_call else None,
            ask_correct=False if expected.ask else None,
            error_codes=[UNPARSEABLE],
        )
    by_name = {t.name: t for t in tools}
    calls = answer.calls
    codes: set[str] = set()
    hallucinated = any(c.name not in by_name for c in calls)
    if hallucinated:
        codes.add(HALLUCINATED_TOOL)
    schema_valid: bool | None = None
    if calls:
        schema_valid = all(not schema_errors(c, by_name.get(c.name)) for c in calls)
        if not schema_valid:
            codes.add(SCHEMA_INVALID)

    if is_no_call:
        if calls:
            codes.add(FALSE_CALL)
        return CaseScore(selection_correct=not calls, schema_valid=schema_valid,
                         no_call_correct=(not calls) if expected.no_call else None,
                         ask_correct=(not calls) if expected.ask else None,
                         hallucinated_tool=hallucinated,
                         error_codes=sorted(codes))

    want = Counter(e.name for e in expected.calls)
    got = Counter(c.name for c in calls)
    overlap = sum((want & got).values())
    precision = overlap / sum(got.values()) if calls else 0.0
    recall = overlap / sum(want.values())
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    if expected.ordered:
        selection = [e.name for e in expected.calls] == [c.name for c in calls]
    else:
        selection = want == got
    if not calls:
        codes.add(FALSE_NO_CALL)
    elif not selection:
        for name in want.keys() | got.keys():
            if got[name] < want[name]:
                codes.add(MISSING_CALL)
            if got[name] > want[name]:
                codes.add(EXTRA_CALL if name in want else WRONG_TOOL)

    pairs = match_calls(expected.calls, calls, expected.ordered)
    results: dict[str, bool] = {}
    arg_errors: list[str] = []
    all_args_ok = True
    for e_index, p_index in pairs:
        call, exp = calls[p_index], expected.calls[e_index]
        if not call.valid:
            all_args_ok = False
            continue
        for arg, ok in argument_results(call, exp).items():
            results[f"{e_index}.{arg}"] = ok
            if ok:
                continue
            all_args_ok = False
            if arg not in exp.arguments:
                codes.add(UNEXPECTED_ARGUMENT)
                arg_errors.append(f"{exp.name}.{arg}: (not allowed) -> {call.arguments[arg]!r}")
            elif call.arguments.get(arg) is None:
                codes.add(MISSING_ARGUMENT)
                arg_errors.append(f"{exp.name}.{arg}: {_show(exp.arguments[arg])} -> (omitted)")
            else:
                codes.add(WRONG_VALUE)
                arg_errors.append(
                    f"{exp.name}.{arg}: {_show(exp.arguments[arg])} -> {call.arguments[arg]!r}")
    arguments_ok = selection and all_args_ok and len(pairs) == len(expected.calls)
    return CaseScore(
        selection_correct=selection,
        selection_precision=precision,
        selection_recall=recall,
        selection_f1=f1,
        arguments_correct=arguments_ok,
        argument_results=results,
        schema_valid=schema_valid,
        no_call_correct=None,
        hallucinated_tool=hallucinated,
        error_codes=sorted(codes),
        argument_errors=arg_errors,
    )


def _show(acceptable: Sequence[Any]) -> str:
    shown = [v for v in acceptable if v is not None]
    return " | ".join(repr(v) for v in shown) if shown else "(omit)"
