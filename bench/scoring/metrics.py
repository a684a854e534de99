"""Per-case metrics: one definition each, in one place (BRIEF §6).

Expected and predicted calls are matched as multisets by an optimal assignment
(``scipy.optimize.linear_sum_assignment``) whose cost prefers the right tool name, then the most
correct arguments; matching is never greedy, so scores do not depend on the order of calls and
duplicates are counted right. Cases marked ``ordered`` pair calls by position instead.

Metric values are ``True``/``False``, or ``None`` where the metric does not apply to the case
(argument accuracy on a no-call case, no-call accuracy on a case that expects calls); rates
drop ``None`` from their denominator.

Strict and lenient scores sit side by side. The strict score takes the arguments exactly as
sent (a double-encoded arguments string is an invalid call). The lenient score first applies
the repairs of :func:`repair_arguments` (double-encoded JSON, numbers sent as strings coerced by
the schema type, enum values in the wrong case, arrays/objects sent as JSON strings) and
records which repairs it needed in ``CaseScore.lenient_repairs``.

Error codes (``CaseScore.error_codes``) are the stable taxonomy below; reports, the gate and
``bench compare`` key on these strings, so a code is never renamed, only added.
"""

from __future__ import annotations

import json
import math
import operator
from collections import Counter
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Sequence, TypedDict

import jsonschema
import regex
import numpy as np

from bench.models import Expected, ExpectedCall, Tool, ToolCall
from bench.parse import (ANSWER_ERROR_CODES, REPAIR_ENUM_CASE, REPAIR_JSON_STRING, REPAIR_STRING_BOOLEAN,
                         REPAIR_STRING_NUMBER, ParsedAnswer)
from bench.parse import repair_arguments as _repair_arguments

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
HALLUCINATED_ARGUMENT = "hallucinated_argument"  # an argument the tool's schema does not define
MISSING_REQUIRED = "missing_required"  # an argument the tool's schema requires was omitted
ENUM_CASE = "enum_case"                # an enum value differing only in letter case
TYPE_ERROR = "type_error"              # a value of the wrong JSON type for its schema
INVALID_ARGUMENTS = "invalid_arguments"  # arguments not decodable as a JSON object (strictly)

# An unparseable answer also carries why (ParsedAnswer.error_code: malformed_reply,
# truncated, refusal...; bench.parse.ANSWER_ERROR_CODES), next to UNPARSEABLE.
ERROR_CODES = (UNPARSEABLE, FALSE_NO_CALL, FALSE_CALL, WRONG_TOOL, MISSING_CALL, EXTRA_CALL,
               HALLUCINATED_TOOL, WRONG_VALUE, MISSING_ARGUMENT, UNEXPECTED_ARGUMENT,
               SCHEMA_INVALID, HALLUCINATED_ARGUMENT, MISSING_REQUIRED, ENUM_CASE, TYPE_ERROR,
               INVALID_ARGUMENTS, *ANSWER_ERROR_CODES)

# Lenient repairs (``CaseScore.lenient_repairs`` entries end with one of these).
# The value repairs are :func:`bench.parse.repair_arguments`'s (shared with the executor).
REPAIR_DOUBLE_ENCODED = "double_encoded"      # arguments were a JSON string inside a JSON string
REPAIRS = (REPAIR_DOUBLE_ENCODED, REPAIR_STRING_NUMBER, REPAIR_ENUM_CASE, REPAIR_JSON_STRING,
           REPAIR_STRING_BOOLEAN)

_NAME_MISMATCH_COST = 10.0


@dataclass(slots=True)
class CaseScore:
    """The metrics of one answer to one case (one result row's ``metrics``: :meth:`as_dict`).

    A slotted dataclass, not a pydantic model: scoring builds one per row from values of the
    declared types, and pydantic's construction cost ~20 us per row (benchmarks/score_100k.py).

    Attributes:
        selection_correct: the multiset of called tool names equals the expected one (ordered
            cases: the sequence); for a no-call or ask case: no call was made. False for an
            unparseable answer.
        selection_precision: matched names / called names (multiset overlap; 0.0 when no call
            was made; None on no-call/ask cases).
        selection_recall: matched names / expected names (None on no-call/ask cases).
        selection_f1: harmonic mean of the two (0.0 when both are 0; None on no-call/ask cases).
        arguments_correct: strict: selection is correct and every matched call sends only
            acceptable values, as sent (None on no-call/ask cases).
        arguments_correct_lenient: the same after the lenient repairs (None on no-call/ask).
        argument_results: per-argument correctness (strict), ``"<expected call index>.<arg>"
            -> bool``, for calls paired with an expected call.
        schema_valid: every call's arguments, as sent, validate against its tool's JSON Schema
            (None when no call was made).
        schema_valid_lenient: the same after the lenient repairs.
        no_call_correct: on a no-call case, no call was made (None on other cases).
        ask_correct: on an ask case (information missing), no call was made and the reply
            asks for what is missing (:func:`asks_for`; None on other cases).
        ask_no_call: on an ask case, no call was made, whatever the reply says (what
            ``ask_correct`` meant before ask labels named the missing information; None on
            other cases).
        hallucinated_tool: some call names a tool the variant does not have.
        hallucinated_argument: some call sends an argument its tool's schema does not define
            (top-level ``properties``).
        missing_required: some call omits an argument its tool's schema ``required`` lists (at
            any depth, as ``jsonschema`` reports it).
        enum_case_error: some value is outside its ``enum`` but equals an enum member
            case-insensitively (the "ASC" vs "asc" failure).
        type_error: some value has the wrong JSON type for its schema (``jsonschema`` "type"
            errors, any depth; an integer is a number, a boolean is not).
        lenient_repairs: ``"<tool>.<argument>: <repair>"`` (``"<tool>: double_encoded"`` for a
            whole call) for every repair the lenient score needed; see :data:`REPAIRS`.
        error_codes: sorted distinct codes of :data:`ERROR_CODES` (strict); an unparseable
            answer has ``unparseable`` and its ``ParsedAnswer.error_code``.
        argument_errors: ``"tool.argument: expected -> got"`` strings for wrong values (strict).
    """

    selection_correct: bool
    selection_precision: float | None = None
    selection_recall: float | None = None
    selection_f1: float | None = None
    arguments_correct: bool | None = None
    arguments_correct_lenient: bool | None = None
    argument_results: dict[str, bool] = field(default_factory=dict)
    schema_valid: bool | None = None
    schema_valid_lenient: bool | None = None
    no_call_correct: bool | None = None
    ask_correct: bool | None = None
    ask_no_call: bool | None = None
    hallucinated_tool: bool = False
    hallucinated_argument: bool = False
    missing_required: bool = False
    enum_case_error: bool = False
    type_error: bool = False
    lenient_repairs: list[str] = field(default_factory=list)
    error_codes: list[str] = field(default_factory=list)
    argument_errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The metrics as a new dict (field name -> value; lists and dicts are shared)."""
        return dict(zip(_SCORE_FIELDS, _score_values(self)))


_SCORE_FIELDS = tuple(f.name for f in fields(CaseScore))
_score_values = operator.attrgetter(*_SCORE_FIELDS)


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


# Seconds a label's ``$regex`` may run on one value. The value is model output (untrusted),
# and a backtracking pattern such as ``^(a|a)+$`` would take exponential time on it.
REGEX_TIMEOUT_S = 0.1


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def regex_matches(pattern: str, text: str) -> bool:
    """``re.search`` semantics through the ``regex`` module (same syntax), stopped after
    :data:`REGEX_TIMEOUT_S` seconds; a search that runs out of time counts as no match."""
    try:
        return _regex(pattern).search(text, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        return False


def value_acceptable(got: Any, acceptable: Sequence[Any]) -> bool:
    """True when a sent value matches one entry of the label's acceptable-values list.

    Entries: literals (compared by :func:`value_equal`), ``{"$regex": p}`` (``re.search`` on
    a string value, time-limited: :func:`regex_matches`), ``{"$any": true}``. ``None`` entries mean "may be omitted" and never match
    a sent value.
    """
    for want in acceptable:
        if want is None:
            continue
        if isinstance(want, dict) and "$regex" in want:
            if isinstance(got, str) and regex_matches(want["$regex"], got):
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
    names_e = [e.name for e in expected]
    names_p = [p.name for p in predicted]
    if len(set(names_e)) == len(names_e) and len(set(names_p)) == len(names_p):
        # Every name occurs at most once on each side: pairing equal names is the optimal
        # assignment (breaking an equal-name pair costs a name mismatch, 10, more than any
        # argument cost, at most 1), so the solver is not needed.
        where = {name: index for index, name in enumerate(names_p)}
        return [(i, where[name]) for i, name in enumerate(names_e) if name in where]
    cost = np.array([[_pair_cost(p, e) for p in predicted] for e in expected])
    from scipy.optimize import linear_sum_assignment  # ~0.3 s to import: when needed

    rows, cols = linear_sum_assignment(cost)
    return [(int(r), int(c)) for r, c in zip(rows, cols)
            if expected[r].name == predicted[c].name]


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        json.loads(schema_json), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


_SCHEMA_KEYS: dict[int, tuple[dict[str, Any], str]] = {}


def _schema_key(tool: Tool) -> str:
    """The tool schema's canonical JSON, cached by the identity of the schema object (no
    re-serialising per call); a reused id with another schema object is detected."""
    schema = tool.input_schema
    cached = _SCHEMA_KEYS.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_SCHEMA_KEYS) > 1024:
            _SCHEMA_KEYS.clear()
        cached = (schema, json.dumps(schema, sort_keys=True))
        _SCHEMA_KEYS[id(schema)] = cached
    return cached[1]


def _classify(validator: jsonschema.Draft202012Validator, arguments: Any
              ) -> tuple[bool, frozenset[str]]:
    codes: set[str] = set()
    valid = True
    try:
        errors = list(validator.iter_errors(arguments))
    except (OverflowError, ValueError, TypeError, RecursionError):
        # e.g. 1e308 against multipleOf 0.01: jsonschema's arithmetic fails on the model's
        # value; the call is invalid, not the run
        return False, frozenset((TYPE_ERROR,))
    for error in errors:
        valid = False
        if error.validator == "required":
            codes.add(MISSING_REQUIRED)
        elif error.validator == "type":
            codes.add(TYPE_ERROR)
        elif error.validator == "enum" and isinstance(error.instance, str) and any(
                isinstance(e, str) and e.casefold() == error.instance.casefold()
                for e in error.validator_value):
            codes.add(ENUM_CASE)
    return valid, frozenset(codes)


_VALIDATION_MEMO: dict[tuple[str, str], tuple[bool, frozenset[str]]] = {}
_VALIDATION_MEMO_SIZE = 65536
validation_memo_stats = {"hits": 0, "misses": 0}


def _validation(tool: Tool, arguments: dict[str, Any]) -> tuple[bool, frozenset[str]]:
    """(valid, codes among missing_required / type_error / enum_case) of one call's arguments
    against its tool's JSON Schema.

    Memoised on the schema and ``repr(arguments)`` (distinct JSON values have distinct reprs:
    ``1``, ``1.0``, ``True`` and ``"1"`` differ): a model repeats the same call across trials,
    variants and cases, and validation is the costliest step of scoring. The memo is cleared
    when it reaches 65,536 entries; arguments whose repr exceeds 512 characters are not kept.
    """
    key = (_schema_key(tool), repr(arguments))
    found = _VALIDATION_MEMO.get(key)
    if found is not None:
        validation_memo_stats["hits"] += 1
        return found
    validation_memo_stats["misses"] += 1
    found = _classify(_validator(key[0]), arguments)
    if len(key[1]) > _MEMO_ARGUMENTS_CHARS:
        return found  # too big to keep
    if len(_VALIDATION_MEMO) >= _VALIDATION_MEMO_SIZE:
        _VALIDATION_MEMO.clear()
    _VALIDATION_MEMO[key] = found
    return found


def schema_errors(call: ToolCall, tool: Tool | None) -> list[str]:
    """JSON Schema errors of a call's arguments (``["unknown tool"]`` when there is no tool)."""
    if tool is None:
        return ["unknown tool"]
    if not call.valid:
        return ["arguments are not a JSON object"]
    validator = _validator(json.dumps(tool.input_schema, sort_keys=True))
    return [e.message for e in validator.iter_errors(call.arguments)]


def repair_arguments(arguments: dict[str, Any], input_schema: dict[str, Any],
                     tool_name: str = "") -> tuple[dict[str, Any], list[str]]:
    """The lenient repairs of one call's arguments (:func:`bench.parse.repair_arguments`:
    decided by the schema, never by the value), as scoring records them.

    Args:
        arguments: decoded arguments (dict).
        input_schema: the tool's JSON Schema.
        tool_name: prefix of the repair paths.

    Returns:
        (repaired copy, ``["<tool>.<arg path>: <repair code>", ...]``, codes of
        :data:`REPAIRS`); the input is not modified.
    """
    repaired, repairs = _repair_arguments(arguments, input_schema)
    return repaired, [f"{tool_name}.{r.path}: {r.kind}" for r in repairs]


def _lenient_calls(calls: Sequence[ToolCall], by_name: dict[str, Tool]
                   ) -> tuple[list[ToolCall], list[str]]:
    lenient: list[ToolCall] = []
    repairs: list[str] = []
    for call in calls:
        if REPAIR_DOUBLE_ENCODED in call.notes and call.valid:
            repairs.append(f"{call.name}: {REPAIR_DOUBLE_ENCODED}")
        tool = by_name.get(call.name)
        if tool is None or not call.valid or _validation(tool, call.arguments)[0]:
            # every repair replaces a value its (sub)schema's type or enum rejects, so
            # arguments that validate need none (and the validation is memoised)
            lenient.append(call)
            continue
        fixed, found = repair_arguments(call.arguments, tool.input_schema, call.name)
        repairs += found
        lenient.append(call.model_copy(update={"arguments": fixed}) if found else call)
    return lenient, repairs


def _strict_calls(calls: Sequence[ToolCall]) -> list[ToolCall]:
    # Strictly, a double-encoded arguments string is not a JSON object: the call is invalid.
    return [c.model_copy(update={"valid": False}) if REPAIR_DOUBLE_ENCODED in c.notes else c
            for c in calls]


class _SchemaFlags(TypedDict):
    """The :class:`CaseScore` fields an answer's calls set whatever the case expects."""

    hallucinated_tool: bool
    hallucinated_argument: bool
    missing_required: bool
    type_error: bool
    schema_valid: bool | None
    schema_valid_lenient: bool | None
    lenient_repairs: list[str]


def _schema_flags(calls: Sequence[ToolCall], by_name: dict[str, Tool]) -> tuple[
        bool | None, set[str]]:
    """(all calls schema-valid or None without calls, error codes found in the schema check)."""
    if not calls:
        return None, set()
    codes: set[str] = set()
    valid = True
    for call in calls:
        tool = by_name.get(call.name)
        if tool is None:
            valid = False
            continue
        if not call.valid:
            valid = False
            codes.add(INVALID_ARGUMENTS)
            continue
        props = tool.input_schema.get("properties", {})
        if isinstance(props, dict) and any(k not in props for k in call.arguments):
            codes.add(HALLUCINATED_ARGUMENT)
        call_valid, call_codes = _validation(tool, call.arguments)
        valid = valid and call_valid
        codes |= call_codes
    if not valid:
        codes.add(SCHEMA_INVALID)
    return valid, codes


def _arguments_score(expected: Expected, calls: Sequence[ToolCall], selection: bool
                     ) -> tuple[bool, dict[str, bool], set[str], list[str]]:
    """(arguments correct, per-argument results, error codes, argument error strings)."""
    pairs = match_calls(expected.calls, calls, expected.ordered)
    results: dict[str, bool] = {}
    codes: set[str] = set()
    arg_errors: list[str] = []
    all_ok = True
    for e_index, p_index in pairs:
        call, exp = calls[p_index], expected.calls[e_index]
        if not call.valid:
            all_ok = False
            continue
        for arg, ok in argument_results(call, exp).items():
            results[f"{e_index}.{arg}"] = ok
            if ok:
                continue
            all_ok = False
            if arg not in exp.arguments:
                codes.add(UNEXPECTED_ARGUMENT)
                arg_errors.append(f"{exp.name}.{arg}: (not allowed) -> {call.arguments[arg]!r}")
            elif call.arguments.get(arg) is None:
                codes.add(MISSING_ARGUMENT)
                arg_errors.append(f"{exp.name}.{arg}: {_show(exp.arguments[arg])} -> (omitted)")
            else:
                got = call.arguments[arg]
                codes.add(WRONG_VALUE)
                if isinstance(got, str) and any(isinstance(w, str) and w != got and
                                                w.casefold() == got.casefold()
                                                for w in exp.arguments[arg]):
                    codes.add(ENUM_CASE)
                arg_errors.append(f"{exp.name}.{arg}: {_show(exp.arguments[arg])} -> {got!r}")
    return selection and all_ok and len(pairs) == len(expected.calls), results, codes, arg_errors




_SCORE_MEMO: dict[tuple[Any, ...], tuple[Expected, Sequence[Tool], CaseScore]] = {}
_SCORE_MEMO_SIZE = 32768  # ~1.5 kB an entry
# Answers whose arguments' reprs exceed this many characters are not memoised (scores and
# validations): the memos' memory stays bounded (~100 MB at most) whatever a model sends.
_MEMO_ARGUMENTS_CHARS = 512
score_memo_stats = {"hits": 0, "misses": 0}


def score_case(expected: Expected, answer: ParsedAnswer, tools: Sequence[Tool]) -> CaseScore:
    """Score one parsed answer against one case's label, strictly and leniently.

    Memoised: trials, variants with the same tools object and providers repeat the same answer
    to the same case, and the score depends only on the label, the tools and the answer's
    error and calls (names, ``repr`` of the arguments, validity, parse notes), and on an ask
    case its text. The memo is
    keyed on the identity of ``expected`` and ``tools`` (both kept alive by the memo, so an
    identity is never reused) and holds up to 32,768 scores, then starts over; answers whose
    arguments' reprs exceed 512 characters are scored without it (bounded memory).

    Args:
        expected: the case's label (not mutated afterwards).
        answer: the parsed answer (``answer.error`` set means undecodable).
        tools: the variant's tools (for schema validity and hallucinated tools/arguments;
            not mutated afterwards).

    Returns:
        A :class:`CaseScore`, shared with other calls on equal inputs: read it, do not modify
        it (:meth:`CaseScore.as_dict` gives a new dict). See its attributes for each metric's
        definition. The label's case-insensitive match of a wrong string value (an enum value
        in the wrong case) also sets ``enum_case_error``.
    """
    calls = tuple((c.name, repr(c.arguments), c.valid, tuple(c.notes)) for c in answer.calls)
    if sum(len(c[1]) for c in calls) > _MEMO_ARGUMENTS_CHARS:
        return _score_case(expected, answer, tools)  # too big to keep
    # an ask case's score reads the reply's words too
    said = answer.text if expected.ask else None
    key = (id(expected), id(tools), answer.error, answer.error_code, calls, said)
    found = _SCORE_MEMO.get(key)
    if found is not None and found[0] is expected and found[1] is tools:
        score_memo_stats["hits"] += 1
        return found[2]
    score_memo_stats["misses"] += 1
    score = _score_case(expected, answer, tools)
    if len(_SCORE_MEMO) >= _SCORE_MEMO_SIZE:
        _SCORE_MEMO.clear()
    _SCORE_MEMO[key] = (expected, tools, score)
    return score


_QUESTION_MARKS = ("?", "？")


def asks_for(missing: Sequence[Sequence[str]], reply: str | None) -> bool:
    """True when ``reply`` asks for what is ``missing``.

    Args:
        missing: an ask label's ``ask_for``: per missing item, its alternatives (zh and en).
        reply: the model's words (None: it wrote none).

    Returns:
        With ``missing``: every item has an alternative that occurs in the reply (case-folded
        substring, as episodes match ``answer_facts``). Without (a label that does not say
        what is missing): the reply holds a question mark. No words never ask.
    """
    if not reply:
        return False
    said = reply.casefold()
    if not missing:
        return any(mark in said for mark in _QUESTION_MARKS)
    return all(any(a.casefold() in said for a in alternatives) for alternatives in missing)


def _score_case(expected: Expected, answer: ParsedAnswer, tools: Sequence[Tool]) -> CaseScore:
    """:func:`score_case` without the memo."""
    is_no_call = expected.no_call or expected.ask
    if answer.error is not None:
        return CaseScore(
            selection_correct=False,
            selection_precision=None if is_no_call else 0.0,
            selection_recall=None if is_no_call else 0.0,
            selection_f1=None if is_no_call else 0.0,
            arguments_correct=None if is_no_call else False,
            arguments_correct_lenient=None if is_no_call else False,
            schema_valid=False,
            schema_valid_lenient=False,
            no_call_correct=False if expected.no_call else None,
            ask_correct=False if expected.ask else None,
            ask_no_call=False if expected.ask else None,
            error_codes=sorted({c for c in (UNPARSEABLE, answer.error_code) if c is not None}),
        )
    by_name = {t.name: t for t in tools}
    calls = _strict_calls(answer.calls)
    lenient, repairs = _lenient_calls(answer.calls, by_name)
    hallucinated = any(c.name not in by_name for c in calls)
    codes: set[str] = {HALLUCINATED_TOOL} if hallucinated else set()
    schema_valid, schema_codes = _schema_flags(calls, by_name)
    codes |= schema_codes
    schema_valid_lenient = schema_valid if not repairs else _schema_flags(lenient, by_name)[0]
    flags = _SchemaFlags(hallucinated_tool=hallucinated,
                         hallucinated_argument=HALLUCINATED_ARGUMENT in codes,
                         missing_required=MISSING_REQUIRED in codes,
                         type_error=TYPE_ERROR in codes, schema_valid=schema_valid,
                         schema_valid_lenient=schema_valid_lenient, lenient_repairs=repairs)

    if is_no_call:
        if calls:
            codes.add(FALSE_CALL)
        return CaseScore(
            selection_correct=not calls,
            no_call_correct=(not calls) if expected.no_call else None,
            ask_correct=(not calls and asks_for(expected.ask_for, answer.text))
            if expected.ask else None,
            ask_no_call=(not calls) if expected.ask else None,
            enum_case_error=ENUM_CASE in codes, error_codes=sorted(codes), **flags)

    names_e = [e.name for e in expected.calls]
    names_p = [c.name for c in calls]
    same_names = sorted(names_e) == sorted(names_p)  # the usual case: no Counter arithmetic
    if same_names:
        overlap = len(names_e)
    else:
        want, got = Counter(names_e), Counter(names_p)
        overlap = sum((want & got).values())
    precision = overlap / len(names_p) if calls else 0.0
    recall = overlap / len(names_e)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    selection = names_e == names_p if expected.ordered else same_names
    if not calls:
        codes.add(FALSE_NO_CALL)
    elif not selection:
        want, got = Counter(names_e), Counter(names_p)
        for name in want.keys() | got.keys():
            if got[name] < want[name]:
                codes.add(MISSING_CALL)
            if got[name] > want[name]:
                codes.add(EXTRA_CALL if name in want else WRONG_TOOL)

    arguments_ok, results, arg_codes, arg_errors = _arguments_score(expected, calls, selection)
    codes |= arg_codes
    lenient_ok = arguments_ok if not repairs else _arguments_score(expected, lenient,
                                                                   selection)[0]
    return CaseScore(
        selection_correct=selection,
        selection_precision=precision,
        selection_recall=recall,
        selection_f1=f1,
        arguments_correct=arguments_ok,
        arguments_correct_lenient=lenient_ok,
        argument_results=results,
        no_call_correct=None,
        enum_case_error=ENUM_CASE in codes,
        error_codes=sorted(codes),
        argument_errors=arg_errors,
        **flags,
    )


def _show(acceptable: Sequence[Any]) -> str:
    shown = [v for v in acceptable if v is not None]
    return " | ".join(repr(v) for v in shown) if shown else "(omit)"
