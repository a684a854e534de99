"""The BFCL-compatible checker on the shared BFCL sample (read in place, never copied) with
hand-made model outputs, right and wrong."""

import copy
from pathlib import Path

import pytest

from bench.models import ToolCall
from conftest import bfcl_sample_dir

from bench.parse import ParsedAnswer
from bench.scoring.bfcl import (check_entry, check_simple, load_entries, outputs_from_answer,
                                standardize_string)

SAMPLE = bfcl_sample_dir() or Path("/nonexistent")
pytestmark = pytest.mark.skipif(not SAMPLE.is_dir(),
                                reason="BFCL sample not found beside the checkout (set BFCL_SAMPLE)")


def entries(category):
    return {e.id: e for e in load_entries(SAMPLE, category)}


def first_acceptable(values):
    """The first acceptable value; a dict answer lists acceptable values per key."""
    value = next(v for v in values if v != "")
    if isinstance(value, dict):
        return {k: first_acceptable(v) for k, v in value.items() if any(x != "" for x in v)}
    return value


def right_output(answer):
    """A correct call from a possible answer: the first acceptable value of each parameter."""
    name, params = next(iter(answer.items()))
    return {name: {p: first_acceptable(values)
                   for p, values in params.items() if any(v != "" for v in values)}}


def props(entry, name):
    return next(f for f in entry.function if f["name"] == name)["parameters"]


@pytest.mark.parametrize("category", ["simple_python", "multiple", "parallel"])
def test_right_answers_pass(category):
    for entry in entries(category).values():
        outputs = [right_output(a) for a in entry.ground_truth]
        if category == "parallel":
            outputs.reverse()  # unordered matching
        result = check_entry(category, entry.function, outputs, entry.ground_truth)
        assert result.valid, (entry.id, result)


def test_wrong_count_and_undecodable_fail():
    entry = entries("simple_python")["simple_python_0"]
    good = right_output(entry.ground_truth[0])
    assert check_entry("simple_python", entry.function, [good, good],
                       entry.ground_truth).error_type == "simple_function_checker:wrong_count"
    assert not check_entry("simple_python", entry.function, None, entry.ground_truth).valid
    assert not check_entry("simple_python", entry.function, [], entry.ground_truth).valid


@pytest.mark.parametrize("change, error_type", [
    ({"base": None}, "simple_function_checker:missing_required"),
    ({"colour": "red"}, "simple_function_checker:unexpected_param"),
    ({"base": 11}, "value_error:others"),
    ({"base": "10"}, "type_error:simple"),
    ({"height": True}, "type_error:simple"),  # a bool is not an integer
])
def test_missing_required_unexpected_and_wrong_values(change, error_type):
    entry = entries("simple_python")["simple_python_0"]  # calculate_triangle_area(base, height)
    output = right_output(entry.ground_truth[0])
    params = output["calculate_triangle_area"]
    for param, value in change.items():
        if value is None:
            del params[param]
        else:
            params[param] = value
    assert check_entry("simple_python", entry.function, [output], entry.ground_truth
                       ).error_type == error_type


def test_wrong_function_name():
    entry = entries("simple_python")["simple_python_0"]
    renamed = {"calc_area": right_output(entry.ground_truth[0])["calculate_triangle_area"]}
    assert check_entry("simple_python", entry.function, [renamed], entry.ground_truth
                       ).error_type == "simple_function_checker:wrong_func_name"


def test_empty_string_means_optional():
    entry = entries("simple_python")["simple_python_0"]  # unit: ["units", ""]
    output = right_output(entry.ground_truth[0])
    assert "unit" in output["calculate_triangle_area"]
    del output["calculate_triangle_area"]["unit"]
    assert check_entry("simple_python", entry.function, [output], entry.ground_truth).valid
    output["calculate_triangle_area"]["unit"] = "meters"
    assert check_entry("simple_python", entry.function, [output], entry.ground_truth
                       ).error_type == "value_error:string"


def _find_param(category, declared, need_optional=None):
    """(entry, call name, param) of the first parameter of the given declared type."""
    for entry in entries(category).values():
        for answer in entry.ground_truth:
            name, params = next(iter(answer.items()))
            schema = props(entry, name)
            for param, values in params.items():
                if schema["properties"].get(param, {}).get("type") != declared:
                    continue
                if need_optional is not None and ("" in values) != need_optional:
                    continue
                return entry, name, param
    raise AssertionError(f"no {declared} parameter in the sample")


def test_int_is_accepted_for_float_at_top_level():
    entry, name, param = _find_param("simple_python", "float")
    output = right_output(entry.ground_truth[0])
    value = output[name][param]
    assert isinstance(value, float)
    if value.is_integer():
        output[name][param] = int(value)
        assert check_entry("simple_python", entry.function, [output], entry.ground_truth).valid
    output[name][param] = str(value)
    assert check_entry("simple_python", entry.function, [output], entry.ground_truth
                       ).error_type == "type_error:simple"


def test_string_normalisation():
    assert standardize_string("April 1, 2024") == standardize_string("april 1 2024")
    assert standardize_string("New-York_City.") == "newyorkcity"
    assert standardize_string("it's") == 'it"s'
    entry, name, param = _find_param("simple_python", "string", need_optional=False)
    output = right_output(entry.ground_truth[0])
    value = output[name][param]
    output[name][param] = " " + value.upper().replace(" ", " - ") + "."
    assert check_entry("simple_python", entry.function, [output], entry.ground_truth).valid
    output[name][param] = value + "x"
    assert not check_entry("simple_python", entry.function, [output], entry.ground_truth).valid


def test_parallel_is_unordered_but_counts_and_values_matter():
    entry = entries("parallel")["parallel_0"]  # spotify.play x2
    outputs = [right_output(a) for a in entry.ground_truth]
    assert check_entry("parallel", entry.function, outputs[::-1], entry.ground_truth).valid
    assert check_entry("parallel", entry.function, outputs[:1], entry.ground_truth
                       ).error_type == "parallel_function_checker_no_order:wrong_count"
    twice = [outputs[0], copy.deepcopy(outputs[0])]
    assert check_entry("parallel", entry.function, twice, entry.ground_truth
                       ).error_type == "parallel_function_checker_no_order:cannot_find_match"


def test_parallel_matching_is_greedy_first_fit_like_bfcl():
    # Expected 0 accepts x in {1, 2}, expected 1 only x = 1. Output order [1, 2]: BFCL gives
    # output 0 (x=1) to expected 0 and then fails expected 1; bench's optimal assignment passes.
    function = {"name": "f", "parameters": {"type": "dict", "required": ["x"],
                                            "properties": {"x": {"type": "integer"}}}}
    answers = [{"f": {"x": [1, 2]}}, {"f": {"x": [1]}}]
    assert not check_entry("parallel", [function], [{"f": {"x": 1}}, {"f": {"x": 2}}],
                           answers).valid
    assert check_entry("parallel", [function], [{"f": {"x": 2}}, {"f": {"x": 1}}], answers).valid


def test_multiple_checks_the_expected_function():
    entry = entries("multiple")["multiple_0"]
    good = right_output(entry.ground_truth[0])
    assert check_entry("multiple", entry.function, [good], entry.ground_truth).valid
    other = next(f["name"] for f in entry.function if f["name"] not in good)
    assert check_entry("multiple", entry.function, [{other: {}}], entry.ground_truth
                       ).error_type == "simple_function_checker:wrong_func_name"


def test_array_values_and_nested_types():
    entry = entries("multiple")["multiple_10"]  # columns: ["email", "ssn"] or variants
    good = right_output(entry.ground_truth[0])
    name = next(iter(good))
    good[name]["columns"] = ["Email", "S.S.N"]  # strings inside lists are normalised too
    assert check_entry("multiple", entry.function, [good], entry.ground_truth).valid
    good[name]["columns"] = ["email"]
    assert check_entry("multiple", entry.function, [good], entry.ground_truth
                       ).error_type == "value_error:list/tuple"
    good[name]["columns"] = ["email", 7]
    assert check_entry("multiple", entry.function, [good], entry.ground_truth
                       ).error_type == "type_error:nested"


def test_irrelevance_means_no_decodable_call():
    entry = next(iter(entries("irrelevance").values()))
    assert entry.ground_truth is None
    assert check_entry("irrelevance", entry.function, []).valid
    assert check_entry("irrelevance", entry.function, None).valid
    name = entry.function[0]["name"]
    assert not check_entry("irrelevance", entry.function, [{name: {}}]).valid


def test_bench_answers_convert_and_dotted_names_map_to_underscores():
    entry = entries("simple_python")["simple_python_20"]  # math.hcf
    function = entry.function[0]
    args = right_output(entry.ground_truth[0])["math.hcf"]
    answer = ParsedAnswer(calls=[ToolCall(id="c0", name="math_hcf", arguments=args)])
    outputs = outputs_from_answer(answer)
    assert not check_simple(function, outputs[0], entry.ground_truth[0]).valid
    assert check_simple(function, outputs[0], entry.ground_truth[0],
                        underscore_to_dot=True).valid
    assert outputs_from_answer(ParsedAnswer(error="truncated")) is None


def test_a_hand_edited_answer_call_without_a_name_is_a_checker_error_not_a_crash():
    # A StopIteration escaped run_verdict and would end a run.
    from bench.scoring.bfcl import BfclSource, run_verdict

    function = {"name": "f", "parameters": {"type": "dict", "properties": {
        "a": {"type": "integer"}}, "required": ["a"]}}
    answer = ParsedAnswer(calls=[ToolCall(id="c", name="f", arguments={"a": 1})])
    for category in ("simple_python", "multiple", "parallel", "parallel_multiple"):
        source = BfclSource(id="x", category=category, function=[function], ground_truth=[{}])
        verdict = run_verdict(source, answer)
        assert not verdict.valid and verdict.error_type == "bfcl_checker_error", category


def test_a_bfcl_jsonl_line_nested_too_deep_is_an_error_naming_file_and_line(tmp_path):
    from bench.errors import BenchError
    from bench.scoring.bfcl import load_sources

    path = tmp_path / "bfcl.jsonl"
    path.write_text('{"id": "a", "category": "irrelevance", "function": []}\n'
                    + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(BenchError) as caught:
        load_sources(path)
    assert str(caught.value) == f"{path}:2: JSON nested deeper than the decoder's limit"
