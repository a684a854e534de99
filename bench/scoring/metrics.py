"""Per-case metrics: one definition each, in one place (BRIEF §6).

Expected and predicted calls are matched as multisets by an optimal assignment (scipy's
``linear_sum_assignment``, ported in :mod:`bench.scoring.assignment`) whose cost prefers the
right tool name, then the most correct arguments; matching is never greedy, so scores do not depend on the order of calls and
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

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TypedDict

from bench.models import Expected, ExpectedCall, Tool, ToolCall
from bench.parse import ParsedAnswer
from bench.scoring.assignment import linear_sum_assignment
from bench.scoring.codes import (ENUM_CASE, ERROR_CODES, EXTRA_CALL, FALSE_CALL, FALSE_NO_CALL,
                                 HALLUCINATED_ARGUMENT, HALLUCINATED_TOOL, INVALID_ARGUMENTS,
                                 MISSING_ARGUMENT, MISSING_CALL, MISSING_REQUIRED,
                                 REPAIR_DOUBLE_ENCODED, REPAIRS, SCHEMA_INVALID, TYPE_ERROR,
                                 UNEXPECTED_ARGUMENT, UNPARSEABLE, WRONG_TOOL, WRONG_VALUE)
from bench.scoring.schema_checks import (MEMO_ARGUMENTS_CHARS, lenient_calls, schema_flags,
                                         SchemaFlags, strict_calls, repair_arguments,
                                         schema_errors, validation_memo_stats)
from bench.scoring.values import (REGEX_TIMEOUT_S, argument_results, regex_matches,
                                  schema_defaults, value_acceptable, value_equal)

# Names other modules and tests import from here (defined in the modules above).
__all__ = ["ENUM_CASE", "ERROR_CODES", "EXTRA_CALL", "FALSE_CALL", "FALSE_NO_CALL",
           "HALLUCINATED_ARGUMENT", "HALLUCINATED_TOOL", "INVALID_ARGUMENTS",
           "MISSING_ARGUMENT", "MISSING_CALL", "MISSING_REQUIRED", "REGEX_TIMEOUT_S",
           "REPAIR_DOUBLE_ENCODED", "REPAIRS", "SCHEMA_INVALID", "TYPE_ERROR",
           "UNEXPECTED_ARGUMENT", "UNPARSEABLE", "WRONG_TOOL", "WRONG_VALUE", "CaseScore",
           "ScoreMetrics",
           "argument_results", "asks_for", "match_calls", "regex_matches", "repair_arguments",
           "schema_errors", "score_case", "score_memo_stats", "validation_memo_stats",
           "value_acceptable", "value_equal"]

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
            acceptable values, as sent; a value equal to its parameter's schema ``default``
            counts as omitted where omitting is right (:mod:`bench.scoring.values`). None on
            no-call/ask cases.
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

    def as_dict(self) -> ScoreMetrics:
        """The metrics as a new dict (field name -> value; lists and dicts are shared): a
        result row's ``metrics`` (:class:`bench.results.RowMetrics`) takes it as it is."""
        return ScoreMetrics(
            selection_correct=self.selection_correct,
            selection_precision=self.selection_precision,
            selection_recall=self.selection_recall, selection_f1=self.selection_f1,
            arguments_correct=self.arguments_correct,
            arguments_correct_lenient=self.arguments_correct_lenient,
            argument_results=self.argument_results, schema_valid=self.schema_valid,
            schema_valid_lenient=self.schema_valid_lenient,
            no_call_correct=self.no_call_correct, ask_correct=self.ask_correct,
            ask_no_call=self.ask_no_call, hallucinated_tool=self.hallucinated_tool,
            hallucinated_argument=self.hallucinated_argument,
            missing_required=self.missing_required, enum_case_error=self.enum_case_error,
            type_error=self.type_error, lenient_repairs=self.lenient_repairs,
            error_codes=self.error_codes, argument_errors=self.argument_errors)


class ScoreMetrics(TypedDict):
    """:class:`CaseScore` as a dict (:meth:`CaseScore.as_dict`): one key per attribute, of
    its type, in its order; the keys are fields of :class:`bench.results.RowMetrics`."""

    selection_correct: bool
    selection_precision: float | None
    selection_recall: float | None
    selection_f1: float | None
    arguments_correct: bool | None
    arguments_correct_lenient: bool | None
    argument_results: dict[str, bool]
    schema_valid: bool | None
    schema_valid_lenient: bool | None
    no_call_correct: bool | None
    ask_correct: bool | None
    ask_no_call: bool | None
    hallucinated_tool: bool
    hallucinated_argument: bool
    missing_required: bool
    enum_case_error: bool
    type_error: bool
    lenient_repairs: list[str]
    error_codes: list[str]
    argument_errors: list[str]


#: Tool name -> its parameters' schema defaults (:func:`bench.scoring.values.schema_defaults`).
Defaults = Mapping[str, Mapping[str, Any]]


def _pair_cost(call: ToolCall, expected: ExpectedCall, defaults: Defaults) -> float:
    if call.name != expected.name:
        return _NAME_MISMATCH_COST
    if not call.valid:
        return 1.0
    results = argument_results(call, expected, defaults.get(call.name))
    if not results:
        return 0.0
    return 1.0 - sum(results.values()) / len(results)


def match_calls(expected: Sequence[ExpectedCall], predicted: Sequence[ToolCall],
                ordered: bool = False, defaults: Defaults | None = None
                ) -> list[tuple[int, int]]:
    """Pair expected and predicted calls that share a tool name.

    Args:
        expected: the label's calls.
        predicted: the parsed calls.
        ordered: pair by position instead of by optimal assignment.
        defaults: tool name -> its parameters' schema defaults (a value equal to its
            default counts as omitted where omitting is right: :mod:`bench.scoring.values`).

    Returns:
        ``(expected index, predicted index)`` pairs with equal names; an optimal assignment
        minimising name mismatches first, then wrong arguments (ties broken as scipy's solver
        breaks them: :mod:`bench.scoring.assignment`).
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
    cost = [[_pair_cost(p, e, defaults or {}) for p in predicted] for e in expected]
    rows, cols = linear_sum_assignment(cost)
    return [(r, c) for r, c in zip(rows, cols) if expected[r].name == predicted[c].name]


def _arguments_score(expected: Expected, calls: Sequence[ToolCall], selection: bool,
                     defaults: Defaults) -> tuple[bool, dict[str, bool], set[str], list[str]]:
    """(arguments correct, per-argument results, error codes, argument error strings)."""
    pairs = match_calls(expected.calls, calls, expected.ordered, defaults)
    results: dict[str, bool] = {}
    codes: set[str] = set()
    arg_errors: list[str] = []
    all_ok = True
    for e_index, p_index in pairs:
        call, exp = calls[p_index], expected.calls[e_index]
        if not call.valid:
            all_ok = False
            continue
        for arg, ok in argument_results(call, exp, defaults.get(call.name)).items():
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


_SCORE_MEMO: dict[tuple[object, ...], tuple[Expected, Sequence[Tool], CaseScore]] = {}
_SCORE_MEMO_SIZE = 32768  # ~1.5 kB an entry
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
    if sum(len(c[1]) for c in calls) > MEMO_ARGUMENTS_CHARS:
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


def _unparseable_score(expected: Expected, answer: ParsedAnswer) -> CaseScore:
    """The score of an answer that could not be decoded (``answer.error`` set)."""
    is_no_call = expected.no_call or expected.ask
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


def _selection(expected: Expected, calls: Sequence[ToolCall], codes: set[str]
               ) -> tuple[bool, float, float, float]:
    """(selection correct, precision, recall, F1) of a case that expects calls; adds the
    selection's error codes (false no-call, missing / extra call, wrong tool) to ``codes``."""
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
    return selection, precision, recall, f1


def _score_case(expected: Expected, answer: ParsedAnswer, tools: Sequence[Tool]) -> CaseScore:
    """:func:`score_case` without the memo."""
    if answer.error is not None:
        return _unparseable_score(expected, answer)
    by_name = {t.name: t for t in tools}
    calls = strict_calls(answer.calls)
    lenient, repairs = lenient_calls(answer.calls, by_name)
    hallucinated = any(c.name not in by_name for c in calls)
    codes: set[str] = {HALLUCINATED_TOOL} if hallucinated else set()
    schema_valid, schema_codes = schema_flags(calls, by_name)
    codes |= schema_codes
    schema_valid_lenient = schema_valid if not repairs else schema_flags(lenient, by_name)[0]
    flags = SchemaFlags(hallucinated_tool=hallucinated,
                        hallucinated_argument=HALLUCINATED_ARGUMENT in codes,
                        missing_required=MISSING_REQUIRED in codes,
                        type_error=TYPE_ERROR in codes, schema_valid=schema_valid,
                        schema_valid_lenient=schema_valid_lenient, lenient_repairs=repairs)

    if expected.no_call or expected.ask:
        if calls:
            codes.add(FALSE_CALL)
        return CaseScore(
            selection_correct=not calls,
            no_call_correct=(not calls) if expected.no_call else None,
            ask_correct=(not calls and asks_for(expected.ask_for, answer.text))
            if expected.ask else None,
            ask_no_call=(not calls) if expected.ask else None,
            enum_case_error=ENUM_CASE in codes, error_codes=sorted(codes), **flags)

    selection, precision, recall, f1 = _selection(expected, calls, codes)
    # a value equal to its schema default counts as omitted where omitting is right
    defaults = {name: schema_defaults(by_name[name].input_schema)
                for name in {c.name for c in calls} if name in by_name}
    arguments_ok, results, arg_codes, arg_errors = _arguments_score(expected, calls, selection,
                                                                    defaults)
    codes |= arg_codes
    lenient_ok = arguments_ok if not repairs else _arguments_score(expected, lenient,
                                                                   selection, defaults)[0]
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


def _show(acceptable: Sequence[object]) -> str:
    shown = [v for v in acceptable if v is not None]
    return " | ".join(repr(v) for v in shown) if shown else "(omit)"
