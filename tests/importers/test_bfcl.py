"""BFCL importer: the shared BFCL sample becomes a loadable dataset and toolset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import bfcl_sample_dir

from bench.datasets import check_against_tools, load_dataset
from bench.descriptions import load_variant
from bench.importers.bfcl import bfcl_schema, import_bfcl

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sample() -> Path:
    """The read-only BFCL sample (never copied into the repo)."""
    path = bfcl_sample_dir()
    if path is None:
        pytest.skip("BFCL sample not found beside the checkout (set BFCL_SAMPLE)")
    return path


def _files(sample: Path) -> list[Path]:
    return sorted(sample.glob("BFCL_v4_*.json"))


@pytest.mark.slow
def test_cli_imports_the_sample_into_a_loadable_dataset_and_toolset(run_bench, project, sample):
    result = run_bench("import", "bfcl", *map(str, _files(sample)), "--name", "bfcl")
    assert result.returncode == 0, result.stderr
    dataset = load_dataset("bfcl")
    variant = load_variant("bfcl", "bfcl")
    check_against_tools(dataset, "bfcl", variant.tools)  # every label fits its schema
    by_tag: dict[str, int] = {}
    for case in dataset.cases:
        by_tag[case.tags[0]] = by_tag.get(case.tags[0], 0) + 1
    assert by_tag == {"no_call": 24, "multiple": 20, "parallel": 20, "simple": 40}
    assert all(c.expected.no_call for c in dataset.cases if c.tags[0] == "no_call")
    assert "Apache-2.0" in (project / "descriptions/bfcl/variants/bfcl.yaml").read_text()
    again = run_bench("import", "bfcl", *map(str, _files(sample)), "--name", "bfcl")
    assert again.returncode == 2 and "--force" in again.stderr


def test_possible_answers_map_to_acceptable_values(sample):
    result = import_bfcl(_files(sample), toolset="bfcl")
    toolset, cases = result.toolset, result.cases
    by_id = {c["id"]: c for c in cases}
    simple = by_id["simple_python_0"]["expected"]["calls"][0]
    assert simple == {"name": "calculate_triangle_area",
                      "arguments": {"base": [10], "height": [5], "unit": ["units", None]}}
    parallel = by_id["parallel_0"]["expected"]["calls"]
    assert [c["arguments"]["artist"] for c in parallel] == [["Taylor Swift"], ["Maroon 5"]]
    nested = by_id["simple_python_260"]["expected"]["calls"][0]["arguments"]
    assert nested["area"] == [{"width": 20, "height": 12}]
    hcf = by_id["simple_python_20"]["expected"]["calls"][0]
    assert hcf["name"] == "math_hcf" and toolset.renamed["math.hcf"] == "math_hcf"
    tools = {t.name: t for t in toolset.tools}
    assert tools["calculate_triangle_area"].input_schema["type"] == "object"
    body_mass = tools["determine_body_mass_index"].input_schema["properties"]
    assert body_mass["weight"]["type"] == "number"  # BFCL 'float'
    # one name, two different definitions: both kept, the case points at its own
    assert "currency_converter" in tools and "currency_converter_2" in tools


def test_bfcl_types_map_to_json_schema():
    schema = bfcl_schema({"type": "dict", "properties": {
        "point": {"type": "tuple", "items": {"type": "float"}},
        "value": {"type": "any", "description": "anything"},
        "flag": {"type": "boolean", "optional": True},
        "table": {"type": "HashMap"}}, "required": ["point"]}, "x")
    assert schema == {"type": "object", "properties": {
        "point": {"type": "array", "items": {"type": "number"}},
        "value": {"description": "anything"}, "flag": {"type": "boolean"},
        "table": {"type": "object"}}, "required": ["point"]}


def _write(path: Path, entries: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


FN = {"name": "a.b", "description": "Do x.", "parameters": {
    "type": "dict", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}


@pytest.mark.slow
def test_missing_answers_are_an_error_naming_file_and_id(run_bench, tmp_path):
    questions = _write(tmp_path / "BFCL_v4_simple.json",
                       [{"id": "simple_1", "question": [[{"role": "user", "content": "x"}]],
                         "function": [FN]}])
    result = run_bench("import", "bfcl", str(questions), "--name", "t")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no possible answer for 'simple_1'" in result.stderr
    assert f"{questions}:1" in result.stderr


def test_multi_turn_entries_are_rejected(tmp_path):
    from bench.errors import BenchError

    questions = _write(tmp_path / "q.json", [{"id": "irrelevance_1", "question": [
        [{"role": "user", "content": "x"}], [{"role": "user", "content": "y"}]],
        "function": [FN]}])
    with pytest.raises(BenchError, match="multi-turn"):
        import_bfcl([questions], toolset="t")


def test_explicit_answers_file_and_nested_expansion(tmp_path):
    fn = {"name": "paint", "description": "Paint.", "parameters": {"type": "dict", "properties": {
        "area": {"type": "dict", "properties": {"w": {"type": "integer"},
                                                "h": {"type": "integer"}}}}}}
    questions = _write(tmp_path / "q.json", [{"id": "simple_7", "question": [[
        {"role": "user", "content": "paint 2 by 3 or 3 by 2"}]], "function": [fn]}])
    answers = _write(tmp_path / "a.json", [{"id": "simple_7", "ground_truth": [
        {"paint": {"area": [{"w": [2, 3], "h": [3, ""]}]}}]}])
    cases = import_bfcl([questions], [answers], toolset="t").cases
    assert cases[0]["expected"]["calls"][0]["arguments"]["area"] == [
        {"w": 2, "h": 3}, {"w": 2}, {"w": 3, "h": 3}, {"w": 3}]


def test_per_key_form_is_one_level_deep_and_unusable_answers_exclude_the_case(tmp_path):
    # Shapes of BFCL v4 live_multiple_121-46-0 (an object inside a per-key object is a literal,
    # as BFCL's dict_checker compares it), live_simple_106-63-0 (`[]`: nothing acceptable) and
    # simple_java_64 (a per-key value that is not a list), gorilla commit 6ea57973.
    point = {"type": "dict", "properties": {"lateral": {"type": "float"},
                                            "longitudinal": {"type": "float"}}}
    fn = {"name": "get_headway", "description": "Headway.", "parameters": {
        "type": "dict", "required": ["ego_info"], "properties": {"ego_info": {
            "type": "dict", "properties": {"position": point, "orientation": {"type": "float"}}},
            "meta": {"type": "dict", "properties": {"format": {"type": "string"}}},
            "note": {"type": "string"}}}}
    ids = ["live_multiple_1-1-0", "live_multiple_2-1-0", "live_multiple_3-1-0"]
    questions = _write(tmp_path / "q.json", [
        {"id": i, "question": [[{"role": "user", "content": "x"}]], "function": [fn]}
        for i in ids])
    ego = [{"position": [{"lateral": 10.5, "longitudinal": 50}], "orientation": [30]}]
    answers = _write(tmp_path / "a.json", [
        {"id": ids[0], "ground_truth": [{"get_headway": {"ego_info": ego}}]},
        {"id": ids[1], "ground_truth": [{"get_headway": {"ego_info": ego, "note": []}}]},
        {"id": ids[2], "ground_truth": [{"get_headway": {
            "ego_info": ego, "meta": [{"format": "epoch_millis"}]}}]}])
    result = import_bfcl([questions], [answers], toolset="t")
    assert [c["id"] for c in result.cases] == ids[:1]
    assert result.cases[0]["expected"]["calls"][0]["arguments"]["ego_info"] == [
        {"position": {"lateral": 10.5, "longitudinal": 50}, "orientation": 30}]
    assert [(c.case_id, c.parameter, c.why, c.action) for c in result.conflicts] == [
        (ids[1], "get_headway.note", "no acceptable value ([])", "case excluded"),
        (ids[2], "get_headway.meta", "the acceptable values of key 'format' are not a list "
         '("epoch_millis")', "case excluded")]
    assert [e["id"] for e in result.excluded] == ids[1:]
    assert result.conflicts[0].line() == (f"{answers}:2: {ids[1]}: get_headway.note: no "
                                          "acceptable value ([]) (case excluded)")


@pytest.mark.parametrize("category", ["simple_java", "simple_javascript", "live_relevance"])
def test_unsupported_categories_are_one_line_errors(tmp_path, category):
    from bench.errors import BenchError

    questions = _write(tmp_path / "q.json", [{"id": f"{category}_0", "question": [[
        {"role": "user", "content": "x"}]], "function": [FN]}])
    with pytest.raises(BenchError, match=f"BFCL category '{category}' is not supported"):
        import_bfcl([questions], toolset="t")


def test_a_literal_null_answer_is_checked_against_the_schema(tmp_path):
    # BFCL v4 live_multiple_1038-265-0 answers "start_date": [null] for a string parameter:
    # in BFCL that demands the value None (type_checker takes None's type from the answer),
    # while "" is what marks "may be omitted"; bench's null means "may be omitted".
    fn = {"name": "detail_project", "description": "Details.", "parameters": {
        "type": "dict", "required": ["name"], "properties": {
            "name": {"type": "string"}, "start_date": {"type": "string"}}}}
    ids = ["live_multiple_1-1-0", "live_multiple_2-1-0"]
    questions = _write(tmp_path / "q.json", [
        {"id": i, "question": [[{"role": "user", "content": "x"}]], "function": [fn]}
        for i in ids])
    answers = _write(tmp_path / "a.json", [
        {"id": ids[0], "ground_truth": [{"detail_project": {"name": ["a"],
                                                            "start_date": [None]}}]},
        {"id": ids[1], "ground_truth": [{"detail_project": {"name": ["a"],
                                                            "start_date": [None, "2024"]}}]}])
    result = import_bfcl([questions], [answers], toolset="t")
    assert [c["id"] for c in result.cases] == ids[1:]
    assert result.cases[0]["expected"]["calls"][0]["arguments"]["start_date"] == ["2024"]
    assert [(c.case_id, c.action) for c in result.conflicts] == [
        (ids[0], "case excluded"), (ids[1], "value dropped")]
    assert "acceptable value null breaks the tool's schema: None is not of type 'string'" \
        in result.conflicts[0].why


def test_omission_of_a_required_parameter_is_a_conflicting_label(tmp_path):
    # BFCL v4 simple_python_200 accepts "" for a parameter its function requires; BFCL's
    # simple_function_checker fails every output that omits a required parameter.
    fn = {"name": "co2", "description": "CO2.", "parameters": {
        "type": "dict", "required": ["miles", "mpg"], "properties": {
            "miles": {"type": "integer"}, "mpg": {"type": "integer"}}}}
    questions = _write(tmp_path / "q.json", [{"id": "simple_python_1", "question": [[
        {"role": "user", "content": "x"}]], "function": [fn]}])
    answers = _write(tmp_path / "a.json", [{"id": "simple_python_1", "ground_truth": [
        {"co2": {"miles": [12], "mpg": ["", 25]}}]}])
    result = import_bfcl([questions], [answers], toolset="t")
    assert result.cases[0]["expected"]["calls"][0]["arguments"]["mpg"] == [25]
    (conflict,) = result.conflicts
    assert (conflict.parameter, conflict.action) == ("co2.mpg", "value dropped")
    assert conflict.why == '"" (may be omitted): the parameter is required, so it cannot be ' \
        "omitted"


QUESTION = {"id": "simple_python_1", "question": [[{"role": "user", "content": "x"}]],
            "function": [FN]}


@pytest.mark.parametrize("answer_line,message", [
    # the decoder's RecursionError was a traceback
    ('{"id": "simple_python_1", "ground_truth": [{"a.b": {"n": [' + "[" * 100_000
     + "]" * 100_000 + "]}}]}", "JSON nested deeper than the decoder's limit"),
    # a lone surrogate escape made writing cases.jsonl fail with UnicodeEncodeError
    ('{"id": "simple_python_1", "ground_truth": [{"a.b": {"n": ["\\udfff"]}}]}',
     "a string holds a lone UTF-16 surrogate escape (\\udfff), which is not text"),
])
def test_unreadable_answer_lines_are_one_line_errors_naming_file_and_line(run_bench, tmp_path,
                                                                        answer_line, message):
    questions = _write(tmp_path / "BFCL_v4_simple_python.json", [QUESTION])
    answers = tmp_path / "a.json"
    answers.write_text('{"id": "other_1", "ground_truth": []}\n' + answer_line + "\n",
                       encoding="utf-8")
    result = run_bench("import", "bfcl", str(questions), "--answers", str(answers),
                       "--name", "t")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == f"error: {answers}:2: {message}"


@pytest.mark.parametrize("entry,where", [
    # these named the case and a bench field, but not the file, line or BFCL's field
    ({**QUESTION, "question": [["hello"]]}, "field 'question.0.0': simple_python_1: "),
    ({**QUESTION, "question": [[{"role": "wizard", "content": "x"}]]},
     "field 'question.0.0.role': simple_python_1: "),
    ({**QUESTION, "function": [{**FN, "name": ""}]},
     "simple_python_1: function 0 needs a non-empty string 'name'"),
])
def test_bad_questions_are_errors_naming_file_line_and_field(tmp_path, entry, where):
    from bench.errors import BenchError

    questions = _write(tmp_path / "q.json", [QUESTION, entry | {"id": "simple_python_2"}])
    answers = _write(tmp_path / "a.json", [
        {"id": f"simple_python_{n}", "ground_truth": [{"a.b": {"n": [1]}}]} for n in (1, 2)])
    with pytest.raises(BenchError) as caught:
        import_bfcl([questions], [answers], toolset="t")
    assert str(caught.value).startswith(f"{questions}:2: ")
    assert where.replace("simple_python_1", "simple_python_2") in str(caught.value)


def test_a_duplicate_answer_id_is_an_error_naming_both_lines(tmp_path):
    # the second answer silently replaced the first
    from bench.errors import BenchError

    questions = _write(tmp_path / "q.json", [QUESTION])
    answers = _write(tmp_path / "a.json", [
        {"id": "simple_python_1", "ground_truth": [{"a.b": {"n": [1]}}]},
        {"id": "simple_python_1", "ground_truth": [{"a.b": {"n": [2]}}]}])
    with pytest.raises(BenchError) as caught:
        import_bfcl([questions], [answers], toolset="t")
    assert str(caught.value) == (f"{answers}:2: field 'id': duplicate id 'simple_python_1' "
                                 f"(first at {answers}:1)")
