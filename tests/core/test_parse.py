"""Parsing answers into tool calls (strict decoding, truncation never becomes 'no call')."""

import json

import pytest

from bench.parse import decode_arguments, parse_json_tool_calls


def test_parses_calls_in_order_with_ids():
    text = json.dumps({"tool_calls": [
        {"name": "get_weather", "arguments": {"city": "上海"}},
        {"name": "get_weather", "arguments": {"city": "Berlin", "unit": "fahrenheit"}}]},
        ensure_ascii=False)
    answer = parse_json_tool_calls(text, "stop")
    assert answer.error is None and not answer.declined
    assert [c.id for c in answer.calls] == ["call_0", "call_1"]
    assert answer.calls[0].arguments == {"city": "上海"}
    assert answer.calls[1].arguments["unit"] == "fahrenheit"


def test_empty_list_is_an_explicit_decline():
    answer = parse_json_tool_calls('{"tool_calls": []}', "stop")
    assert answer.error is None and answer.declined and answer.calls == []


def test_truncated_answer_is_invalid_not_empty():
    answer = parse_json_tool_calls('{"tool_calls": [{"name": "get_weather", "argu', "length")
    assert answer.error is not None and "truncated" in answer.error
    assert not answer.declined


def test_length_finish_is_invalid_even_if_text_parses():
    answer = parse_json_tool_calls('{"tool_calls": []}', "length")
    assert answer.error is not None


def test_malformed_json_is_an_error():
    assert parse_json_tool_calls("{not json", "stop").error.startswith("malformed JSON")
    assert parse_json_tool_calls('{"calls": []}', "stop").error == "answer has no 'tool_calls' list"


def test_decline_pseudo_tool_becomes_declined_and_is_dropped():
    text = '{"tool_calls": [{"name": "no_tool_fits", "arguments": {}}]}'
    answer = parse_json_tool_calls(text, "stop", decline_tool="no_tool_fits")
    assert answer.declined and answer.calls == []


def test_decline_next_to_real_call_keeps_the_call():
    text = ('{"tool_calls": [{"name": "no_tool_fits", "arguments": {}}, '
            '{"name": "get_weather", "arguments": {"city": "Paris"}}]}')
    answer = parse_json_tool_calls(text, "stop", decline_tool="no_tool_fits")
    assert not answer.declined and [c.name for c in answer.calls] == ["get_weather"]


def test_decode_arguments_variants():
    assert decode_arguments({"a": 1}) == ({"a": 1}, [], True)
    assert decode_arguments('{"a": 1}') == ({"a": 1}, [], True)
    assert decode_arguments(json.dumps(json.dumps({"a": 1}))) == ({"a": 1}, ["double_encoded"], True)
    assert decode_arguments("") == ({}, ["empty"], True)
    assert decode_arguments('{"a": ') == ({}, ["malformed_json"], False)
    assert decode_arguments("[1, 2]") == ({}, ["not_an_object"], False)


def test_pathological_json_is_an_error_not_a_crash():
    deep = '{"tool_calls": ' + "[" * 100000 + "]" * 100000 + "}"
    assert parse_json_tool_calls(deep, "stop").error is not None
    huge = '{"tool_calls": [{"name": "x", "arguments": {"n": ' + "9" * 5000 + "}}]}"
    assert parse_json_tool_calls(huge, "stop").error is not None


@pytest.mark.parametrize("raw", ['{"max_price": NaN}', '{"n": -Infinity}', '"{\\"n\\": Infinity}"'])
def test_nan_and_infinity_are_not_json_arguments(raw):
    """Python's json reads them, but they are not JSON: the call is malformed (and a result
    row could not store the value faithfully)."""
    assert decode_arguments(raw) == ({}, ["malformed_json"], False)


def test_arguments_nested_absurdly_deep_are_an_invalid_call_not_a_crash():
    from bench.parse import MAX_ARGUMENT_DEPTH, decode_arguments
    as_text = '{"q": ' + "[" * 500 + "]" * 500 + "}"
    assert decode_arguments(as_text) == ({}, ["too_deep"], False)
    nested: dict = {}
    inner = nested
    for _ in range(600):
        inner["a"] = {}
        inner = inner["a"]
    assert decode_arguments(nested)[1:] == (["too_deep"], False)
    fine = '{"q": ' + "[" * (MAX_ARGUMENT_DEPTH - 1) + "]" * (MAX_ARGUMENT_DEPTH - 1) + "}"
    assert decode_arguments(fine)[2]
