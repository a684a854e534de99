"""The metrics added for issue 6: lenient repairs, schema-derived error flags, F1, invariance."""

import itertools
import json

import pytest

from bench.models import Expected, ExpectedCall, Tool, ToolCall
from bench.parse import ParsedAnswer, decode_arguments
from bench.scoring.metrics import (ENUM_CASE, ERROR_CODES, HALLUCINATED_ARGUMENT,
                                   INVALID_ARGUMENTS, MISSING_REQUIRED, REPAIRS, TYPE_ERROR,
                                   repair_arguments, score_case)

SEARCH = Tool(name="search_orders", description="Search.", input_schema={
    "type": "object", "additionalProperties": False, "required": ["keyword"],
    "properties": {"keyword": {"type": "string"},
                   "status": {"type": "string", "enum": ["paid", "shipped"]},
                   "page": {"type": "integer"},
                   "price": {"type": "number"},
                   "ids": {"type": "array", "items": {"type": "integer"}},
                   "note": {"type": ["string", "integer"]}}})
SORT = Tool(name="query", description="Query.", input_schema={
    "type": "object", "properties": {"order": {"type": "string", "enum": ["asc", "desc"]}}})
TOOLS = [SEARCH, SORT]


def call(name, i=0, raw=None, **arguments):
    if raw is not None:
        arguments, notes, valid = decode_arguments(raw)
        return ToolCall(id=f"c{i}", name=name, arguments=arguments, raw_arguments=raw,
                        notes=notes, valid=valid)
    return ToolCall(id=f"c{i}", name=name, arguments=arguments, raw_arguments=arguments)


def answer(*calls):
    return ParsedAnswer(calls=list(calls))


def search(keyword="耳机", **extra):
    return ExpectedCall(name="search_orders",
                        arguments={"keyword": [keyword], **{k: [v] for k, v in extra.items()}})


def test_repairs_follow_the_schema_not_the_value():
    fixed, repairs = repair_arguments(
        {"keyword": "42", "page": "3", "price": "9.5", "ids": "[1, \"2\"]", "status": "PAID",
         "note": "7"}, SEARCH.input_schema, "search_orders")
    # "42" stays a string (the schema says string); "7" stays (string allowed); ids decoded,
    # then its items coerced by the items schema.
    assert fixed == {"keyword": "42", "page": 3, "price": 9.5, "ids": [1, 2], "status": "paid",
                     "note": "7"}
    assert sorted(repairs) == sorted([
        "search_orders.page: string_number", "search_orders.price: string_number",
        "search_orders.ids: json_string_array", "search_orders.ids[1]: string_number",
        "search_orders.status: enum_case"])
    assert repair_arguments({"page": "3.5"}, SEARCH.input_schema)[0] == {"page": "3.5"}


def test_strict_and_lenient_side_by_side():
    expected = Expected(calls=[search(page=2, status="paid")])
    sent = call("search_orders", keyword="耳机", page="2", status="Paid")
    score = score_case(expected, answer(sent), TOOLS)
    assert score.selection_correct
    assert score.arguments_correct is False and score.arguments_correct_lenient is True
    assert score.schema_valid is False and score.schema_valid_lenient is True
    assert score.type_error and score.enum_case_error
    assert {TYPE_ERROR, ENUM_CASE} <= set(score.error_codes)
    assert sorted(score.lenient_repairs) == ["search_orders.page: string_number",
                                             "search_orders.status: enum_case"]
    clean = score_case(expected, answer(call("search_orders", keyword="耳机", page=2,
                                             status="paid")), TOOLS)
    assert clean.arguments_correct and clean.arguments_correct_lenient
    assert clean.lenient_repairs == [] and not clean.type_error and not clean.enum_case_error


def test_double_encoded_arguments_fail_strictly_and_pass_leniently():
    raw = json.dumps(json.dumps({"keyword": "耳机"}))
    score = score_case(Expected(calls=[search()]), answer(call("search_orders", raw=raw)), TOOLS)
    assert score.arguments_correct is False and score.arguments_correct_lenient is True
    assert score.schema_valid is False and score.schema_valid_lenient is True
    assert INVALID_ARGUMENTS in score.error_codes
    assert score.lenient_repairs == ["search_orders: double_encoded"]


def test_hallucinated_argument_and_missing_required():
    score = score_case(Expected(calls=[search()]),
                       answer(call("search_orders", status="paid", colour="red")), TOOLS)
    assert score.hallucinated_argument and score.missing_required
    assert {HALLUCINATED_ARGUMENT, MISSING_REQUIRED} <= set(score.error_codes)
    ok = score_case(Expected(calls=[search()]), answer(call("search_orders", keyword="耳机")),
                    TOOLS)
    assert not ok.hallucinated_argument and not ok.missing_required


def test_enum_case_error_from_the_label_when_schema_allows_any_string():
    # The ASC/asc drift: the label wants "asc"; an "ASC" is a wrong value and an enum-case error.
    tools = [Tool(name="query", description="q", input_schema={
        "type": "object", "properties": {"order": {"type": "string"}}})]
    expected = Expected(calls=[ExpectedCall(name="query", arguments={"order": ["asc"]})])
    score = score_case(expected, answer(call("query", order="ASC")), tools)
    assert score.schema_valid and score.enum_case_error and not score.arguments_correct
    wrong = score_case(expected, answer(call("query", order="desc")), tools)
    assert not wrong.enum_case_error


def test_type_error_is_not_an_enum_case_error():
    score = score_case(Expected(calls=[search()]), answer(call("search_orders", keyword=5)),
                       TOOLS)
    assert score.type_error and not score.enum_case_error


def test_selection_precision_recall_f1_on_multisets():
    expected = Expected(calls=[search("a"), search("b"), ExpectedCall(name="query")])
    got = answer(call("search_orders", 0, keyword="a"), call("search_orders", 1, keyword="b"),
                 call("search_orders", 2, keyword="c"), call("query", 3))
    score = score_case(expected, got, TOOLS)
    assert score.selection_precision == pytest.approx(3 / 4)
    assert score.selection_recall == pytest.approx(1.0)
    assert score.selection_f1 == pytest.approx(2 * 0.75 / 1.75)
    assert not score.selection_correct


def _invariant(score):
    data = score.as_dict()
    # argument_results are keyed by the expected call's index; compare their values only
    data["argument_results"] = sorted(data["argument_results"].values())
    data["argument_errors"] = sorted(data["argument_errors"])
    return json.dumps(data, sort_keys=True)


@pytest.mark.parametrize("predicted", [
    [("a", 1), ("b", 2), ("a", 1)],          # duplicates
    [("a", 1), ("b", "2"), ("c", 1)],        # one wrong, one lenient
    [("b", 2), ("a", 1)],                    # one call short
])
def test_permuting_expected_calls_never_changes_the_score(predicted):
    expected_calls = [search("a", page=1), search("b", page=2), search("a", page=1)]
    calls = [call("search_orders", i, keyword=k, page=p) for i, (k, p) in enumerate(predicted)]
    seen = {_invariant(score_case(Expected(calls=list(perm)), answer(*calls), TOOLS))
            for perm in itertools.permutations(expected_calls)}
    seen |= {_invariant(score_case(Expected(calls=expected_calls), answer(*perm), TOOLS))
             for perm in itertools.permutations(calls)}
    assert len(seen) == 1


def test_duplicate_expected_calls_need_duplicate_predictions():
    expected = Expected(calls=[search("a"), search("a")])
    once = score_case(expected, answer(call("search_orders", keyword="a")), TOOLS)
    assert once.selection_recall == 0.5 and not once.arguments_correct
    twice_wrong = score_case(expected, answer(call("search_orders", 0, keyword="a"),
                                              call("search_orders", 1, keyword="b")), TOOLS)
    assert twice_wrong.selection_correct and not twice_wrong.arguments_correct
    assert twice_wrong.argument_errors == ["search_orders.keyword: 'a' -> 'b'"]


def test_order_sensitive_case_pairs_by_position():
    expected = Expected(calls=[search("a"), search("b")], ordered=True)
    in_order = answer(call("search_orders", 0, keyword="a"), call("search_orders", 1, keyword="b"))
    swapped = answer(call("search_orders", 0, keyword="b"), call("search_orders", 1, keyword="a"))
    assert score_case(expected, in_order, TOOLS).arguments_correct
    ordered = score_case(expected, swapped, TOOLS)
    assert ordered.selection_correct and not ordered.arguments_correct
    unordered = expected.model_copy(update={"ordered": False})
    assert score_case(unordered, swapped, TOOLS).arguments_correct


def test_taxonomy_is_stable_and_distinct():
    assert len(set(ERROR_CODES)) == len(ERROR_CODES)
    assert set(REPAIRS) == {"double_encoded", "string_number", "enum_case", "json_string_array",
                            "string_boolean"}


@pytest.mark.timeout(60)  # without the limit this search would not end
def test_a_backtracking_regex_label_cannot_hang_scoring():
    """A label's ``$regex`` runs on model output: ``^(a|a)+$`` against 5,000 a's and a "!"
    backtracks exponentially in Python's ``re``; here it stops after the time limit and
    counts as no match, while ordinary patterns still match."""
    from bench.scoring.metrics import regex_matches, value_acceptable
    assert not value_acceptable("a" * 5000 + "!", [{"$regex": "^(a|a)+$"}])
    assert regex_matches(r"^SKU-\d{4}$", "SKU-1234") and not regex_matches(r"^\d+$", "12a")


def test_a_number_that_breaks_the_schema_check_is_an_invalid_call_not_a_crash():
    """``1e999`` is valid JSON syntax that Python reads as infinity; jsonschema's multipleOf
    check then raises OverflowError. Scoring and the executor report an invalid call."""
    from bench.executor.pipeline import schema_problems
    schema = {"type": "object", "properties": {"p": {"type": "number", "multipleOf": 0.01}}}
    tool = Tool(name="t", description="d", input_schema=schema)
    arguments, _, valid = decode_arguments('{"p": 1e999}')
    assert valid
    score = score_case(Expected(calls=[ExpectedCall(name="t", arguments={"p": [10.0]})]),
                       ParsedAnswer(calls=[ToolCall(id="a", name="t", arguments=arguments)]),
                       [tool])
    assert score.schema_valid is False and score.arguments_correct is False
    assert "cannot be checked" in schema_problems(arguments, schema)[0]


def test_the_score_memo_hits_only_on_the_same_label_tools_and_answer():
    from bench.scoring.metrics import _score_case, score_memo_stats
    expected = Expected(calls=[search(page=2)])
    first = score_case(expected, answer(call("search_orders", keyword="耳机", page="2")), TOOLS)
    hits = score_memo_stats["hits"]
    again = score_case(expected, answer(call("search_orders", keyword="耳机", page="2")), TOOLS)
    assert again is first and score_memo_stats["hits"] == hits + 1
    # 2 and "2" have different reprs: a different answer, scored afresh
    exact = score_case(expected, answer(call("search_orders", keyword="耳机", page=2)), TOOLS)
    assert exact.arguments_correct and not first.arguments_correct
    # the same answer against another tools object whose schema allows strings for page
    loose = [SEARCH.model_copy(update={"input_schema": {
        **SEARCH.input_schema, "properties": {**SEARCH.input_schema["properties"],
                                              "page": {"type": ["integer", "string"]}}}}), SORT]
    other = score_case(expected, answer(call("search_orders", keyword="耳机", page="2")), loose)
    assert other.schema_valid and not first.schema_valid
    # an equal label in another object is scored afresh, to the same result
    copy = score_case(Expected(calls=[search(page=2)]),
                      answer(call("search_orders", keyword="耳机", page="2")), TOOLS)
    assert copy is not first and copy.as_dict() == first.as_dict() == _score_case(
        expected, answer(call("search_orders", keyword="耳机", page="2")), TOOLS).as_dict()


def test_scoring_and_the_executor_make_the_same_repairs():
    from bench.executor.decode import lenient_repairs
    schema = {"type": "object", "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"}, "flag": {"type": "boolean"},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "sort": {"type": "string", "enum": ["ASC", "DESC"]},
        "inner": {"type": "object", "properties": {"k": {"type": "integer"}}}}}
    sent = {"n": " 7 ", "x": "NaN", "flag": "TRUE", "ids": '[1, "2"]', "sort": "asc",
            "inner": '{"k": "4"}'}
    scored, codes = repair_arguments(sent, schema, "t")
    executed, notes = lenient_repairs(sent, schema)
    assert scored == executed == {"n": 7, "x": "NaN", "flag": True, "ids": [1, 2],
                                  "sort": "ASC", "inner": {"k": 4}}
    assert codes == ["t.n: string_number", "t.flag: string_boolean",
                     "t.ids: json_string_array", "t.ids[1]: string_number", "t.sort: enum_case",
                     "t.inner: json_string_array", "t.inner.k: string_number"]
    assert notes == ["n: string ' 7 ' -> number 7", "flag: string 'TRUE' -> boolean",
                     "ids: JSON string -> array", "ids[1]: string '2' -> number 2",
                     "sort: enum case 'asc' -> 'ASC'", "inner: JSON string -> object",
                     "inner.k: string '4' -> number 4"]


def test_answers_with_huge_arguments_are_scored_but_not_memoised():
    from bench.scoring.metrics import _SCORE_MEMO, score_memo_stats
    expected = Expected(calls=[search()])
    big = answer(call("search_orders", keyword="x" * 5000))
    size, counts = len(_SCORE_MEMO), dict(score_memo_stats)
    first, second = score_case(expected, big, TOOLS), score_case(expected, big, TOOLS)
    assert first is not second and first.as_dict() == second.as_dict()
    assert not first.arguments_correct and first.schema_valid
    assert len(_SCORE_MEMO) == size and score_memo_stats == counts


def test_repairs_keep_numbers_exact_respect_prefix_items_and_the_depth_limit():
    from bench.parse import MAX_ARGUMENT_DEPTH
    from bench.parse import repair_arguments as repairs_of
    schema = {"type": "object", "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}],
                 "items": {"type": "integer"}},
        "ids": {"type": "array"}}}
    huge = "1" + "0" * 400
    fixed, found = repairs_of({"n": huge, "x": "1e400"}, schema)
    assert fixed == {"n": 10 ** 400, "x": "1e400"}  # exact int; inf is not a JSON number
    assert repairs_of({"n": "1e23"}, schema)[0] == {"n": "1e23"}  # a float cannot hold it
    assert repairs_of({"n": "3.0"}, schema)[0] == {"n": 3}
    assert repairs_of({"pair": ["3", "4"]}, schema)[0] == {"pair": ["3", 4]}
    deep = "[" * (MAX_ARGUMENT_DEPTH + 5) + "]" * (MAX_ARGUMENT_DEPTH + 5)
    assert repairs_of({"ids": deep}, schema) == ({"ids": deep}, [])
    assert repairs_of({"ids": "[[1]]"}, schema)[0] == {"ids": [[1]]}
