"""Per-case metrics: optimal (order-independent) matching, acceptable values, no-call."""

import itertools

import pytest

from bench.models import Expected, ExpectedCall, Tool, ToolCall
from bench.parse import ParsedAnswer
from bench.scoring.metrics import (FALSE_CALL, FALSE_NO_CALL, HALLUCINATED_TOOL, MISSING_ARGUMENT,
                                   SCHEMA_INVALID, UNEXPECTED_ARGUMENT, UNPARSEABLE, WRONG_TOOL,
                                   WRONG_VALUE, score_case, value_acceptable)

WEATHER = Tool(name="get_weather", description="Weather.", input_schema={
    "type": "object", "additionalProperties": False, "required": ["city"],
    "properties": {"city": {"type": "string"},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}})
STATUS = Tool(name="get_order_status", description="Status.", input_schema={
    "type": "object", "additionalProperties": False, "required": ["order_id"],
    "properties": {"order_id": {"type": "string", "pattern": "^ORD[0-9]{8}$"}}})
TOOLS = [WEATHER, STATUS]


def call(name, i=0, **arguments):
    return ToolCall(id=f"call_{i}", name=name, arguments=arguments, raw_arguments=arguments)


def answer(*calls):
    return ParsedAnswer(calls=list(calls), declined=not calls)


def weather(city, unit=(None, "celsius")):
    return ExpectedCall(name="get_weather", arguments={"city": [city], "unit": list(unit)})


def test_exact_single_call():
    score = score_case(Expected(calls=[weather("Paris")]), answer(call("get_weather", city="Paris")),
                       TOOLS)
    assert score.selection_correct and score.arguments_correct and score.schema_valid
    assert score.no_call_correct is None and score.error_codes == []
    assert score.selection_f1 == 1.0


def test_omitting_is_allowed_only_when_label_lists_null():
    expected = Expected(calls=[ExpectedCall(name="get_weather",
                                            arguments={"city": ["Paris"], "unit": ["celsius"]})])
    score = score_case(expected, answer(call("get_weather", city="Paris")), TOOLS)
    assert score.selection_correct and not score.arguments_correct
    assert MISSING_ARGUMENT in score.error_codes
    assert score.argument_results == {"0.city": True, "0.unit": False}


def test_unexpected_argument_is_wrong():
    expected = Expected(calls=[ExpectedCall(name="get_order_status",
                                            arguments={"order_id": ["ORD20261105"]})])
    got = call("get_order_status", order_id="ORD20261105", verbose=True)
    score = score_case(expected, answer(got), TOOLS)
    assert not score.arguments_correct
    assert UNEXPECTED_ARGUMENT in score.error_codes and SCHEMA_INVALID in score.error_codes


def test_parallel_calls_score_is_independent_of_order():
    expected_calls = [weather("Paris"), weather("Berlin"), weather("上海")]
    predicted = [call("get_weather", 0, city="Berlin"), call("get_weather", 1, city="上海"),
                 call("get_weather", 2, city="Paris")]
    outcomes = set()
    for perm in itertools.permutations(expected_calls):
        score = score_case(Expected(calls=list(perm)), answer(*predicted), TOOLS)
        outcomes.add((score.selection_correct, score.arguments_correct))
    assert outcomes == {(True, True)}


def test_greedy_trap_is_solved_by_optimal_assignment():
    # Expected A accepts Paris or Berlin; expected B accepts only Paris. Greedy pairing of the
    # first expected call with the first matching prediction (Paris) would fail B.
    expected = Expected(calls=[
        ExpectedCall(name="get_weather", arguments={"city": ["Paris", "Berlin"]}),
        ExpectedCall(name="get_weather", arguments={"city": ["Paris"]})])
    got = answer(call("get_weather", 0, city="Paris"), call("get_weather", 1, city="Berlin"))
    assert score_case(expected, got, TOOLS).arguments_correct


def test_duplicates_are_counted():
    expected = Expected(calls=[weather("Paris"), weather("Paris")])
    one = score_case(expected, answer(call("get_weather", city="Paris")), TOOLS)
    assert not one.selection_correct and one.selection_recall == 0.5
    assert one.selection_precision == 1.0
    two = score_case(expected, answer(call("get_weather", 0, city="Paris"),
                                      call("get_weather", 1, city="Paris")), TOOLS)
    assert two.selection_correct and two.arguments_correct


def test_ordered_case_requires_order():
    expected = Expected(calls=[weather("Paris"), ExpectedCall(
        name="get_order_status", arguments={"order_id": ["ORD20261105"]})], ordered=True)
    swapped = answer(call("get_order_status", 0, order_id="ORD20261105"),
                     call("get_weather", 1, city="Paris"))
    assert not score_case(expected, swapped, TOOLS).selection_correct
    assert score_case(expected.model_copy(update={"ordered": False}), swapped,
                      TOOLS).arguments_correct


def test_wrong_tool_and_wrong_value_codes():
    expected = Expected(calls=[weather("Paris")])
    wrong_tool = score_case(expected, answer(call("get_order_status", order_id="ORD20261105")),
                            TOOLS)
    assert not wrong_tool.selection_correct and WRONG_TOOL in wrong_tool.error_codes
    wrong_value = score_case(expected, answer(call("get_weather", city="Paris", unit="kelvin")),
                             TOOLS)
    assert wrong_value.selection_correct and not wrong_value.arguments_correct
    assert WRONG_VALUE in wrong_value.error_codes and not wrong_value.schema_valid
    assert wrong_value.argument_errors == ["get_weather.unit: 'celsius' -> 'kelvin'"]


def test_no_call_case():
    expected = Expected(no_call=True)
    good = score_case(expected, answer(), TOOLS)
    assert good.selection_correct and good.no_call_correct and good.arguments_correct is None
    bad = score_case(expected, answer(call("get_weather", city="Paris")), TOOLS)
    assert not bad.no_call_correct and FALSE_CALL in bad.error_codes


def test_false_no_call_and_hallucinated_tool():
    expected = Expected(calls=[weather("Paris")])
    assert FALSE_NO_CALL in score_case(expected, answer(), TOOLS).error_codes
    ghost = score_case(expected, answer(call("get_forecast", city="Paris")), TOOLS)
    assert ghost.hallucinated_tool and HALLUCINATED_TOOL in ghost.error_codes
    assert ghost.schema_valid is False


@pytest.mark.parametrize("no_call", [True, False])
def test_unparseable_answer_fails_everything(no_call):
    expected = Expected(no_call=True) if no_call else Expected(calls=[weather("Paris")])
    score = score_case(expected, ParsedAnswer(error="truncated"), TOOLS)
    assert not score.selection_correct and score.error_codes == [UNPARSEABLE]
    assert score.no_call_correct is (False if no_call else None)
    assert score.arguments_correct is (None if no_call else False)


def test_value_matching_rules():
    assert value_acceptable(1.0, [1])
    assert not value_acceptable(True, [1])
    assert not value_acceptable("1", [1])
    assert value_acceptable("SELECT COUNT(*) FROM orders", [{"$regex": "(?i)count.*orders"}])
    assert not value_acceptable(3, [{"$regex": "3"}])
    assert value_acceptable({"x": [1, 2]}, [{"x": [1, 2.0]}])
    assert value_acceptable("anything", [{"$any": True}])
    assert not value_acceptable("x", [None])


def test_ask_case_is_correct_only_without_a_call_and_asking_for_what_is_missing():
    expected = Expected(ask=True, ask_for=[["order id", "order number", "订单号"]])
    tools = [Tool(name="get_order_status", description="d",
                  input_schema={"type": "object", "properties": {"order_id": {"type": "string"}},
                                "required": ["order_id"]})]
    silent = score_case(expected, ParsedAnswer(calls=[]), tools)
    vague = score_case(expected, ParsedAnswer(calls=[], text="How can I help?"), tools)
    asked = score_case(expected, ParsedAnswer(calls=[], text="请提供您的订单号。"), tools)
    guessed = score_case(expected, ParsedAnswer(calls=[
        ToolCall(id="c0", name="get_order_status", arguments={"order_id": "123"})],
        text="Which order number?"), tools)
    # silence is restraint (ask_no_call), not asking
    assert silent.ask_no_call is True and silent.ask_correct is False
    assert silent.no_call_correct is None
    assert vague.ask_no_call is True and vague.ask_correct is False
    assert asked.ask_correct is True
    assert guessed.ask_correct is False and guessed.ask_no_call is False
    assert guessed.selection_correct is False
    # a label that does not name what is missing: a question is an ask
    unnamed = Expected(ask=True)
    assert score_case(unnamed, ParsedAnswer(calls=[], text="Which order?"), tools).ask_correct
    assert not score_case(unnamed, ParsedAnswer(calls=[], text="Done."), tools).ask_correct
    with pytest.raises(ValueError):
        Expected(ask=True, no_call=True)


SEARCH = Tool(name="search_issues", description="Search issues.", input_schema={
    "type": "object", "additionalProperties": False, "required": ["q"],
    "properties": {"q": {"type": "string"},
                   "per_page": {"type": "integer", "default": 30},
                   "sort": {"type": "string", "enum": ["created", "updated"],
                            "default": "created"}}})


def _search(**arguments):
    return score_case(Expected(calls=[ExpectedCall(name="search_issues", arguments=arguments)]),
                      answer(call("search_issues", q="bug", per_page=30)), [SEARCH])


def test_a_value_equal_to_the_schema_default_counts_as_omitted_where_omitting_is_right():
    # the label expects per_page absent: sending its default is the same call
    absent = _search(q=["bug"], per_page=[None])
    assert absent.arguments_correct and absent.argument_results["0.per_page"] is True
    assert absent.error_codes == []
    # the label does not list per_page at all (it must not be sent): its default is no change
    assert _search(q=["bug"]).arguments_correct
    # "50 or omitted": omitted means 30, so 30 is right too
    assert _search(q=["bug"], per_page=[50, None]).arguments_correct
    # a label that lists the default keeps it right; where it needs another value, 30 is wrong
    assert _search(q=["bug"], per_page=[30]).arguments_correct
    wrong = _search(q=["bug"], per_page=[50])
    assert not wrong.arguments_correct and WRONG_VALUE in wrong.error_codes
    # no coercion: the string "30" is not the default 30 (the lenient score repairs it)
    sent_text = score_case(
        Expected(calls=[ExpectedCall(name="search_issues",
                                     arguments={"q": ["bug"], "per_page": [None]})]),
        answer(call("search_issues", q="bug", per_page="30")), [SEARCH])
    assert not sent_text.arguments_correct and sent_text.arguments_correct_lenient


def test_omitting_a_parameter_whose_default_the_label_lists_without_null_is_still_wrong():
    # BFCL's rule (simple_python_120): a possible answer without "" needs the value sent
    score = score_case(
        Expected(calls=[ExpectedCall(name="search_issues",
                                     arguments={"q": ["bug"], "sort": ["created"]})]),
        answer(call("search_issues", q="bug")), [SEARCH])
    assert not score.arguments_correct and MISSING_ARGUMENT in score.error_codes
