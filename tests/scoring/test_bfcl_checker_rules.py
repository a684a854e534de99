"""The BFCL-compatible checker against verdicts read from BFCL's own code.

Each expected verdict below was derived by reading the public gorilla repository at commit
6ea57973c7a6097fd7c5915698c54c17c5b1b6c8, files
``berkeley-function-call-leaderboard/bfcl_eval/eval_checker/ast_eval/ast_checker.py`` (AST),
``bfcl_eval/eval_checker/eval_runner.py`` and ``bfcl_eval/utils.py`` (output format,
irrelevance); the function each rule comes from is named in the test. No BFCL code runs here
(``benchmarks/bfcl_agreement.py`` runs BFCL's checker itself).
"""

from __future__ import annotations

import pytest

from bench.scoring.bfcl import check_entry, check_simple, is_empty_output


def function(**properties):
    """A BFCL function doc ``f`` with the given parameter schemas, none required."""
    return {"name": "f", "description": "f", "parameters": {
        "type": "dict", "properties": properties, "required": []}}


def test_empty_list_passes_an_array_parameter_that_may_be_omitted():
    # list_checker builds each acceptable value with `for j in range(len(possible_answer[i]))`,
    # so "" becomes [] and an empty list output is found among them.
    doc = function(tags={"type": "array", "items": {"type": "string"}})
    answer = {"f": {"tags": ["", ["a", "b"]]}}
    assert check_simple(doc, {"f": {"tags": []}}, answer).valid
    assert check_simple(doc, {"f": {"tags": ["A", "b"]}}, answer).valid
    assert check_simple(doc, {"f": {"tags": ["a"]}}, answer).error_type == \
        "value_error:list/tuple"


def test_empty_list_passes_an_array_of_dicts_whose_acceptable_value_is_empty():
    # list_dict_checker compares len(model_output) with len(possible_answers[i]): len("") == 0,
    # so [] matches "" and the per-dict loop never runs.
    doc = function(rows={"type": "array", "items": {"type": "dict"}})
    answer = {"f": {"rows": ["", [{"k": ["v"]}]]}}
    assert check_simple(doc, {"f": {"rows": []}}, answer).valid
    assert check_simple(doc, {"f": {"rows": [{"k": "V"}]}}, answer).valid
    assert check_simple(doc, {"f": {"rows": [{"k": "w"}]}}, answer).error_type == \
        "value_error:dict_value"


def test_a_tuple_for_a_tuple_parameter_is_converted_to_a_list_first():
    # simple_function_checker: `if expected_type_description == "tuple" and type(value) ==
    # tuple: value = list(value)` before type_checker; an "array" parameter gets no such
    # conversion, so a tuple there is a type error.
    doc = function(point={"type": "tuple", "items": {"type": "float"}},
                   pair={"type": "array", "items": {"type": "integer"}})
    assert check_simple(doc, {"f": {"point": (1.5, 2.5)}},
                        {"f": {"point": [[1.5, 2.5]], "pair": [""]}}).valid
    assert check_simple(doc, {"f": {"pair": (1, 2)}},
                        {"f": {"point": [""], "pair": [[1, 2]]}}).error_type == \
        "type_error:simple"


def test_a_wrong_dict_value_and_a_missing_key_report_the_missing_key():
    # dict_checker: the value loop breaks on "a", then the missing-key loop still runs and
    # sets error_type "value_error:dict_key" (it is not guarded by the flag).
    doc = function(box={"type": "dict", "properties": {"a": {"type": "integer"},
                                                        "b": {"type": "integer"}}})
    answer = {"f": {"box": [{"a": [1], "b": [2]}]}}
    assert check_simple(doc, {"f": {"box": {"a": 5}}}, answer).error_type == \
        "value_error:dict_key"
    assert check_simple(doc, {"f": {"box": {"a": 5, "b": 2}}}, answer).error_type == \
        "value_error:dict_value"
    assert check_simple(doc, {"f": {"box": {"a": 1, "b": 2}}}, answer).valid


@pytest.mark.parametrize("outputs, passes", [
    ([], True),                                   # is_empty_output: len 0
    ([{}], True),                                 # is_empty_output: one empty dict
    ([{"f": "text"}], True),                      # not call format: value is not a dict
    ([{"f": {}, "g": {}}], True),                 # not call format: two keys in one item
    (["f(x=1)"], True),                           # not call format: item is not a dict
    ({"f": {}}, True),                            # not call format: not a list
    (None, True),                                 # decode_ast raised
    ([{"f": {}}], False),                         # a call, even without arguments
    ([{"f": {"x": 1}}, {"g": {}}], False),
])
def test_irrelevance_follows_the_runner_and_is_empty_output(outputs, passes):
    # eval_runner._evaluate_single_relevance_entry: contain_func_call is False when decoding
    # fails or utils.is_empty_output(decoded) holds; irrelevance passes when it is False.
    result = check_entry("irrelevance", [function()], outputs)
    assert result.valid is passes
    if not passes:
        assert result.error_type == "irrelevance_error:decoder_success"
    assert is_empty_output(outputs) is passes or outputs is None


@pytest.mark.parametrize("category", ["simple_python", "multiple", "parallel"])
def test_outputs_not_in_call_format_fail_the_ast_categories(category):
    # eval_runner._evaluate_single_ast_entry: is_function_calling_format_output(decoded) False
    # -> "ast_decoder:decoder_wrong_output_format" before ast_checker runs.
    doc = function(x={"type": "integer"})
    answers = [{"f": {"x": [1]}}]
    result = check_entry(category, [doc], [{"f": "x=1"}], answers)
    assert result.error_type == "ast_decoder:decoder_wrong_output_format"
    assert check_entry(category, [doc], [{"f": {"x": 1}}], answers).valid
