"""Loading datasets, specs and variants, with one-line errors naming file, line and field."""

import json

import pytest

from bench.datasets import check_against_tools, load_dataset
from bench.descriptions import load_variant
from bench.descriptions.specs import load_spec
from bench.errors import BenchError

CASE = {"id": "c1", "toolset": "ecommerce", "lang": "en",
        "messages": [{"role": "user", "content": "weather in Paris"}],
        "expected": {"calls": [{"name": "get_weather", "arguments": {"city": ["Paris"]}}]},
        "tags": ["simple"]}


def write_cases(path, lines):
    path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n",
                    encoding="utf-8")
    return path


def test_shipped_dataset_loads_and_matches_toolset():
    dataset = load_dataset("ecommerce")
    assert len(dataset.cases) >= 250  # issue 3
    variant = load_variant("ecommerce", "l10")
    check_against_tools(dataset, "ecommerce", variant.tools)  # raises on unknown tools/args
    assert len(variant.tools) >= 12


def test_malformed_line_names_file_and_line(tmp_path):
    path = write_cases(tmp_path / "bad.jsonl", [CASE, '{"id": "c2", oops}'])
    with pytest.raises(BenchError) as info:
        load_dataset(str(path))
    assert info.value.line == 2 and "malformed JSON" in str(info.value)
    assert str(path) in str(info.value)


def test_missing_field_names_the_field(tmp_path):
    broken = {k: v for k, v in CASE.items() if k != "lang"}
    path = write_cases(tmp_path / "bad.jsonl", [broken])
    with pytest.raises(BenchError) as info:
        load_dataset(str(path))
    assert info.value.field == "lang" and info.value.line == 1


def test_bad_enum_in_expected_names_nested_field(tmp_path):
    bad = json.loads(json.dumps(CASE))
    bad["expected"] = {"calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    path = write_cases(tmp_path / "bad.jsonl", [bad])
    with pytest.raises(BenchError) as info:
        load_dataset(str(path))
    assert info.value.field == "expected.calls.0.arguments.city"


def test_duplicate_ids_and_invalid_regex(tmp_path):
    with pytest.raises(BenchError, match="duplicate case id 'c1'"):
        load_dataset(str(write_cases(tmp_path / "dup.jsonl", [CASE, CASE])))
    bad = json.loads(json.dumps(CASE))
    bad["expected"]["calls"][0]["arguments"]["city"] = [{"$regex": "("}]
    with pytest.raises(BenchError, match="invalid \\$regex"):
        load_dataset(str(write_cases(tmp_path / "re.jsonl", [bad])))


def test_unknown_tool_and_argument(tmp_path):
    variant = load_variant("ecommerce", "l3")
    bad = json.loads(json.dumps(CASE))
    bad["id"] = "c2"
    bad["expected"]["calls"][0]["name"] = "get_forecast"
    dataset = load_dataset(str(write_cases(tmp_path / "t.jsonl", [CASE, bad])))
    with pytest.raises(BenchError) as info:
        check_against_tools(dataset, "ecommerce", variant.tools)
    assert info.value.line == 2 and info.value.field == "expected.calls.0.name"
    assert "unknown tool 'get_forecast'" in str(info.value)
    bad["expected"]["calls"][0] = {"name": "get_weather", "arguments": {"town": ["Paris"]}}
    dataset = load_dataset(str(write_cases(tmp_path / "a.jsonl", [bad])))
    with pytest.raises(BenchError, match="has no argument 'town'"):
        check_against_tools(dataset, "ecommerce", variant.tools)


def test_unknown_dataset_and_variant_list_known_names(project):
    with pytest.raises(BenchError, match="known: analytics, analytics-episodes, ecommerce, "
                       "ecommerce-episodes, logistics, logistics-episodes"):
        load_dataset("nope")
    with pytest.raises(BenchError, match="available: l3, l10, l30, l50"):
        load_variant("ecommerce", "l7")


def test_invalid_json_schema_in_spec_names_line_and_field(project):
    spec = project / "descriptions" / "ecommerce" / "specs" / "get_weather.yaml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("type: integer", "type: integr", 1), encoding="utf-8")
    with pytest.raises(BenchError) as info:
        load_spec(spec)
    assert info.value.field == "input_schema.properties.days.type"
    wrong_line = next(i for i, l in enumerate(spec.read_text().splitlines(), 1) if "integr" in l)
    assert info.value.line == wrong_line
    assert "invalid JSON Schema" in str(info.value)


def test_spec_yaml_syntax_error_has_line(tmp_path):
    spec = tmp_path / "x.yaml"
    spec.write_text("name: x\nsummary: [unclosed\n", encoding="utf-8")
    with pytest.raises(BenchError) as info:
        load_spec(spec)
    assert info.value.line is not None and "invalid YAML" in str(info.value)


@pytest.mark.slow
def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path, run_bench):
    # nine levels of nine aliases: 9^9 (387 million) strings from ten short lines
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(BenchError, match="aliases expand to more than 1,000,000 values"):
        load_spec(bomb)
    result = run_bench("run", "--provider", "openai:gpt-4o-mini", "--pricing", str(bomb),
                       "--limit", "1", timeout=60)
    assert result.returncode == 2 and "alias bomb" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    small = tmp_path / "anchors.yaml"  # ordinary anchors still load
    small.write_text("base: &base {type: string}\nother: *base\n", encoding="utf-8")
    from bench.yamlio import load_yaml
    assert load_yaml(small)[0] == {"base": {"type": "string"}, "other": {"type": "string"}}


@pytest.mark.parametrize("name", ["ecommerce", "analytics", "logistics"])
def test_no_test_query_is_a_description_example(name):
    from pathlib import Path

    from bench.descriptions.specs import load_specs

    dataset = load_dataset(name)
    root = Path(__file__).resolve().parents[2] / "descriptions"
    examples = {e.query.strip().casefold() for toolset in dataset.toolsets
                for s in load_specs(root / toolset) for e in s.examples}
    # only dev cases may inform descriptions (an example may quote one: ecom-0140)
    leaked = [c.id for c in dataset.cases
              if c.split == "test" and c.query.strip().casefold() in examples]
    assert leaked == []  # the l50 examples must not hand the model the test answers


def test_jsonl_bytes_bom_crlf_line_separator_and_glob_characters(tmp_path):
    folder = tmp_path / "we[ird]*"  # glob characters must not empty the dataset
    folder.mkdir()
    second = json.loads(json.dumps(CASE))
    second["id"] = "c2"
    second["messages"][0]["content"] = "weather\u2028in Paris"  # U+2028 is not a line break
    path = folder / "cases.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(CASE).encode() + b"\r\n\r\n"
                     + json.dumps(second, ensure_ascii=False).encode("utf-8") + b"\r\n")
    dataset = load_dataset(str(path))
    assert [c.id for c in dataset.cases] == ["c1", "c2"]
    assert dataset.lines == {"c1": 1, "c2": 3}
    assert dataset.cases[1].query == "weather\u2028in Paris"


def test_non_utf8_line_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(CASE).encode() + b'\n{"id": "\xff"}\n')
    with pytest.raises(BenchError, match="not UTF-8") as info:
        load_dataset(str(path))
    assert info.value.line == 2


def _parquet(folder, records, split="test"):
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(records).to_parquet(folder / f"{split}.parquet")
    return folder


def test_hf_spec_with_json_text_columns_gives_the_same_cases(tmp_path):
    shipped = load_dataset("ecommerce")
    records = [{**c.model_dump(exclude_none=True),
                "messages": json.dumps([m.model_dump(exclude_none=True) for m in c.messages],
                                       ensure_ascii=False),
                "expected": json.dumps(c.expected.model_dump(), ensure_ascii=False)}
               for c in shipped.cases]
    folder = _parquet(tmp_path / "hub", records)
    loaded = load_dataset(f"hf:{folder}:test")
    assert loaded.path == f"hf:{folder}:test" and loaded.lines["ecom-0001"] == 1
    assert [c.model_dump() for c in loaded.cases] == [c.model_dump() for c in shipped.cases]


def test_hf_spec_with_nested_columns_drops_arrow_null_fill(tmp_path):
    multi = {"id": "c2", "toolset": "ecommerce", "lang": "en",
             "messages": [{"role": "user", "content": "status of ORD20261108?"},
                          {"role": "assistant", "content": None, "tool_calls": [
                              {"id": "call_1", "name": "get_order_status",
                               "arguments": {"order_id": "ORD20261108"}}]},
                          {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
                          {"role": "user", "content": "thanks, that is all about the order"}],
             "expected": {"no_call": True}, "tags": ["multi-turn"]}
    folder = _parquet(tmp_path / "hub", [CASE, multi])
    loaded = load_dataset(f"hf:{folder}")  # one split: taken without naming it
    first, second = loaded.cases
    # Arrow gives CASE's expected a no_call column and its messages tool_calls: null; dropped.
    assert first.expected.calls[0].arguments == {"city": ["Paris"]} and not first.expected.no_call
    assert second.messages[1].tool_calls[0]["arguments"] == {"order_id": "ORD20261108"}
    assert second.messages[2].tool_call_id == "call_1" and second.expected.no_call


def test_hf_spec_errors_name_spec_row_and_field(tmp_path):
    broken = {**CASE, "id": "c2", "lang": "fr"}
    folder = _parquet(tmp_path / "hub", [CASE, broken])
    with pytest.raises(BenchError) as info:
        load_dataset(f"hf:{folder}:test")
    assert (info.value.file, info.value.line, info.value.field) == (f"hf:{folder}:test", 2, "lang")
    _parquet(folder, [CASE], split="train")
    with pytest.raises(BenchError, match="has splits test, train; name one"):
        load_dataset(f"hf:{folder}")
    with pytest.raises(BenchError, match="cannot load .* FileNotFoundError"):
        load_dataset(f"hf:{tmp_path / 'missing'}")


# -- YAML: a recursive alias, deep nesting, shared aliases -------------------------------------


@pytest.mark.parametrize("text, fragment", [
    ("x: &a [*a]\n", "aliases.yaml:1: invalid YAML: an alias refers to the node that contains"),
    ("x: &a {k: *a}\n", "aliases.yaml:1: invalid YAML: an alias refers to the node that"),
    ("a: [" + "[" * 5000 + "]" * 5000 + "]\n", "aliases.yaml:1: invalid YAML: exceeded maximum "
                                               "nesting depth"),
])
def test_a_recursive_or_deep_yaml_file_is_one_line_not_a_hang(tmp_path, text, fragment):
    from bench.descriptions.aliases import load_aliases

    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "aliases.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(BenchError, match=fragment):
        load_aliases("shop", tmp_path)


def test_shared_aliases_are_still_sized_once():
    import yaml

    from bench.yamlio import expanded_size

    node = yaml.compose("a: &b [1, 2]\nc: *b\nd: [*b, *b]\n")
    assert expanded_size(node) == 1 + 3 + 3 + 3 + (1 + 3 + 3)  # map, keys, a, c, d
