"""The leak checker: description text that mirrors a test case is found (near copies with other
IDs, Chinese with another city, quoted trigger phrases, reviewed translations), unrelated text
is not, and no shipped variant mirrors a shipped test case."""

from __future__ import annotations

import pytest

from bench.datasets import available_datasets, load_dataset
from bench.datasets.splits import select_split
from bench.descriptions import available_variants, load_variant
from bench.descriptions.leaks import find_leaks, jaccard, reviewed_mirrors, tokens
from bench.descriptions.lint import leak_findings
from bench.descriptions.variants import Variant
from bench.models import Case, Tool
from bench.paths import datasets_dir

DESCRIPTION = """Cancel one shipment.

Examples:
- "Cancel SF9876543210, the customer changed their mind" -> {"tracking_no": "SF9876543210"}
- "上海下单次数最多的5位客户" -> {"sql": "SELECT 1"}
- "Refund 50 yuan and I keep it" -> {"amount": 50, "keep_item": true}

Edge cases:
- 'Top spender' means limit 1.
- '上海仓' is the warehouse SH01.
"""


def _variant(description: str = DESCRIPTION) -> Variant:
    tool = Tool(name="cancel_shipment", description=description,
                input_schema={"type": "object", "properties": {}})
    return Variant(name="l50", toolset="t", tools=(tool,), source="test")


def _case(case_id: str, text: str, lang: str = "en", arguments: dict | None = None) -> Case:
    expected = {"calls": [{"name": "cancel_shipment", "arguments": arguments}]} \
        if arguments is not None else {"no_call": True}
    return Case.model_validate({"id": case_id, "toolset": "t", "lang": lang,
                                "messages": [{"role": "user", "content": text}],
                                "expected": expected})


def _signals(case: Case, reviewed=None) -> set[str]:
    return {k.signal for k in find_leaks(_variant(), [case], reviewed)}


def test_another_id_is_still_a_copy():
    assert "near-copy" in _signals(_case("a", "Cancel SF2020202020, the customer changed "
                                              "their mind."))


def test_chinese_with_another_city_is_a_copy():
    assert "near-copy" in _signals(_case("b", "北京下单次数最多的5位客户", "zh"))


def test_a_quoted_trigger_phrase_in_the_query_is_found():
    assert "trigger-phrase" in _signals(_case("c", "Who is our top spender this year?"))


def test_short_vocabulary_and_unrelated_queries_are_not_leaks():
    assert _signals(_case("d", "上海仓还有多少库存？", "zh")) == set()  # 上海仓: a value, 3 chars
    assert _signals(_case("e", "What is the weather in Berlin tomorrow?")) == set()


def test_a_translation_is_a_hint_until_reviewed(tmp_path):
    translated = _case("f", "退我50元，东西我留着", "zh",
                       arguments={"amount": [50], "keep_item": [True]})
    assert _signals(translated) == {"argument-copy"}
    sheet = tmp_path / "README.md"
    sheet.write_text("# data\n\n## Reviewed cross-language mirrors\n\n"
                     "- f | cancel_shipment | Refund 50 yuan\n\n## Next\n- g | x | y\n",
                     encoding="utf-8")
    reviewed = reviewed_mirrors(sheet)
    assert reviewed == {"f": [("cancel_shipment", "Refund 50 yuan")]}
    assert "reviewed" in _signals(translated, reviewed)
    findings = leak_findings(_variant(), [translated], sheet)
    assert {f.code for f in findings} == {"BL013", "BL014"}


def test_masking_keeps_words_and_drops_ids():
    assert tokens("Cancel SF123 now") == tokens("cancel JD999 NOW")
    assert jaccard(tokens("a b"), tokens("c d")) == 0.0


@pytest.mark.parametrize("name", ["ecommerce", "analytics", "logistics", "ecommerce-episodes",
                                  "analytics-episodes", "logistics-episodes"])
def test_no_shipped_variant_mirrors_a_shipped_test_case(name):
    assert name in available_datasets()
    dataset = load_dataset(name)
    test = select_split(dataset.cases, "test")
    assert test, "the dataset has a test split"
    sheet = datasets_dir() / name / "README.md"
    problems = []
    for toolset in dataset.toolsets:
        for variant in available_variants(toolset):
            problems += [f"{f.variant} {f.tool}: {f.message}" for f in
                         leak_findings(load_variant(toolset, variant),
                                       [c for c in test if c.toolset == toolset], sheet)
                         if f.code == "BL013"]
    assert problems == []


def _summary_variant(description: str) -> Variant:
    tool = Tool(name="mark_done", description=description,
                input_schema={"type": "object", "properties": {"todo_id": {"type": "string"}}})
    return Variant(name="l3", toolset="todo", tools=(tool,), source="test")


def _todo_case(case_id: str, text: str) -> Case:
    return Case.model_validate({"id": case_id, "toolset": "todo", "lang": "en",
                                "messages": [{"role": "user", "content": text}],
                                "expected": {"calls": [{"name": "mark_done",
                                                        "arguments": {"todo_id": ["T7"]}}]}})


def test_a_generic_summary_is_not_a_copy_of_a_query_about_one_item():
    """The summary a fresh `bench init` renders into l3..l50 shares only the tool's own words
    with a request for one item (Jaccard 0.50 with the ID masked): not a mirror, so lint
    passes right after init."""
    case = _todo_case("todo-01", "Mark T7 as done")
    variant = _summary_variant("Mark a todo item as done.")
    assert jaccard(tokens("Mark T7 as done"), tokens("Mark a todo item as done.")) >= 0.5
    assert find_leaks(variant, [case]) == []
    assert leak_findings(variant, [case]) == []


def test_a_copied_query_is_still_a_copy_in_the_summary_and_in_examples():
    case = _todo_case("todo-02", "Mark T7 as done, I finished it at the gym yesterday")
    # copied into the summary with another ID: the ID slot stays, the line is not generic
    copied = _summary_variant("Mark T3 as done, I finished it at the gym yesterday.")
    assert [(k.signal, k.section) for k in find_leaks(copied, [case])] == [
        ("near-copy", "summary")]
    # a short query copied into an example is found too
    example = _summary_variant('Mark a todo item as done.\n\nExamples:\n'
                               '- "Mark T9 as done" -> {"todo_id": "T9"}')
    short = _todo_case("todo-03", "Mark T7 as done")
    found = leak_findings(example, [short])
    assert [(f.code, f.tool) for f in found] == [("BL013", "mark_done")]
    assert "Examples line 'Mark T9 as done'" in found[0].message


def test_the_id_mask_keeps_chinese_written_right_after_an_id():
    """ecom-0020 and ecom-0186 share only 订单 before their IDs; the mask used to swallow
    the Chinese after the ID and scored them 1.0."""
    paid = tokens("订单ORD20261011付款成功了吗？")
    renamed = tokens("订单ORD20261126的收件人改成王芳")
    assert {"付款", "成功", "收件", "王芳"} <= paid | renamed
    assert jaccard(paid, renamed) < 0.1
    assert tokens("订单ORD20261011付款成功了吗？") == tokens("订单JD99付款成功了吗？")


TODO_TOOLS = '''"""Todo tools."""


def mark_done(todo_id: str) -> dict:
    """Mark a todo item as done.

    Args:
        todo_id: The item's id, T and digits.
    """
    return {"id": todo_id, "done": True}
'''


def test_lint_passes_right_after_bench_init_with_a_case_per_tool(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from bench.cli import app

    (tmp_path / "todo_tools.py").write_text(TODO_TOOLS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    init = CliRunner().invoke(app, ["init", "todo", "--python", "todo_tools.py"])
    assert init.exit_code == 0, init.output
    root = tmp_path / "todo"
    (root / "datasets" / "todo" / "cases.jsonl").write_text(
        _todo_case("todo-01", "Mark T7 as done").model_dump_json() + "\n", encoding="utf-8")
    monkeypatch.setenv("BENCH_HOME", str(root))
    linted = CliRunner().invoke(app, ["lint", "--toolset", "todo", "--json"])
    import json
    errors = [f for f in json.loads(linted.output)["findings"] if f["severity"] == "error"]
    assert errors == [] and linted.exit_code == 0


def test_lint_right_after_bench_init_with_no_cases_lints_the_descriptions(tmp_path,
                                                                         monkeypatch):
    """A new project's cases.jsonl is empty: lint checks the descriptions and says the leak
    check had no cases, instead of failing on "dataset has no cases"."""
    from typer.testing import CliRunner

    from bench.cli import app

    (tmp_path / "todo_tools.py").write_text(TODO_TOOLS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(app, ["init", "todo", "--python", "todo_tools.py"]).exit_code == 0
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "todo"))
    linted = CliRunner().invoke(app, ["lint", "--toolset", "todo", "--json"])
    import json
    assert linted.exit_code == 0, linted.output
    assert {f["tool"] for f in json.loads(linted.stdout)["findings"]} == {"mark_done"}
    assert "dataset 'todo' has no cases yet" in linted.stderr


# ---------------------------------------------------------------- containment (any text)

PARCEL = "Where did my parcel go"  # 5 words: long enough to count


def _tool_variant(description: str, schema: dict | None = None) -> Variant:
    tool = Tool(name="track_shipment", description=description,
                input_schema=schema or {"type": "object", "properties": {}})
    return Variant(name="cand", toolset="shop", tools=(tool,), source="test")


def _contained(variant: Variant, *cases: Case) -> list:
    return [k for k in find_leaks(variant, list(cases)) if k.signal == "containment"]


def test_test_queries_appended_to_a_description_line_are_contained():
    line = "Show where an order is: its shipment status. Where did my parcel go, is my parcel lost."
    case = _case("t1", PARCEL)
    assert {k.signal for k in find_leaks(_tool_variant(line), [case])} == {"containment"}
    (leak,) = _contained(_tool_variant(line), case)
    assert (leak.case_id, leak.section, leak.score) == ("t1", "summary", 1.0)
    assert leak.evidence == "where did my parcel go"


def test_a_query_split_across_description_lines_is_found_in_the_whole_description():
    (leak,) = _contained(_tool_variant("Track parcels.\nWhere did my\nparcel go? Ask them."),
                         _case("t2", PARCEL))
    assert leak.section == "description (across lines)"


@pytest.mark.parametrize("schema, where", [
    ({"type": "object", "properties": {"q": {"type": "string",
                                              "description": f"e.g. '{PARCEL}'"}}},
     "input_schema.properties.q.description"),
    ({"type": "object", "properties": {"address": {"type": "object", "properties": {
        "city": {"type": "string", "description": f"As in: {PARCEL}?"}}}}},
     "input_schema.properties.address.properties.city.description"),
    ({"type": "object", "properties": {"ids": {"type": "array", "items": {
        "anyOf": [{"type": "string", "title": f"{PARCEL} now"}, {"type": "integer"}]}}}},
     "input_schema.properties.ids.items.anyOf[0].title"),
    ({"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"],
                                                 "x-enum-descriptions": ["plain", PARCEL]}}},
     "input_schema.properties.mode.x-enum-descriptions[1]"),
    ({"type": "object", "properties": {"q": {"type": "string", "examples": [PARCEL]}}},
     "input_schema.properties.q.examples[0]"),
])
def test_a_query_anywhere_in_the_schema_is_found(schema, where):
    variant = _tool_variant("Track a parcel by its tracking number.", schema)
    leaks = find_leaks(variant, [_case("t3", PARCEL)])
    assert where in {k.section for k in leaks if k.signal == "containment"}
    assert all(k.section == where for k in leaks)


def test_spaced_cjk_and_full_width_letters_are_normalised():
    spaced = _case("z1", "我的包裹三天没有更新了", "zh")  # 11 CJK characters
    line = "查询物流。例如：我 的 包 裹 三 天 没 有 更 新 了，就查一下。"
    assert [k.case_id for k in _contained(_tool_variant(line), spaced)] == ["z1"]
    whole = _case("z2", "我的包裹丢了", "zh")  # 6 characters: a near copy, not containment
    assert {k.signal for k in find_leaks(_tool_variant("我 的 包 裹 丢 了"), [whole])} == \
        {"near-copy"}
    wide = "Track parcels. Ｗｈｅｒｅ ｄｉｄ ｍｙ ｐａｒｃｅｌ ｇｏ？"
    assert [k.case_id for k in _contained(_tool_variant(wide), _case("w1", PARCEL))] == ["w1"]
    zero_width = "Track parcels. Where\u200b did my par\u200bcel go"
    assert _contained(_tool_variant(zero_width), _case("w2", PARCEL))


@pytest.mark.parametrize("line", [
    "Track parcels. Wh\u0435re did my p\u0430rcel go",  # Cyrillic е and а inside Latin words
    "Track parcels. Where did my &#112;arcel go",  # an HTML entity
    "Track parcels. Where did my parcel go, it hasn&#39;t moved",
    "Track parcels. Where did my pa\u0301rcel go",  # a combining accent
    "Track parcels. Where did my par-\ncel go",  # hyphenated across a line break
    "Track parcels. **Where** did _my_ `parcel` go",  # Markdown emphasis
    "Track parcels. Where%20did%20my%20parcel%20go",  # URL percent-escapes
    "Track parcels. Where did my p%C3%A1rcel go",  # a percent-escaped UTF-8 letter
    "Track parcels. Where did my p\\u0061rcel go",  # a JSON \\u escape, as text
    "Track parcels. Where did my\\u0020parcel go",  # an escaped space
])
def test_look_alikes_entities_accents_and_line_hyphens_do_not_hide_a_copy(line):
    assert [k.case_id for k in _contained(_tool_variant(line), _case("h1", PARCEL))] == ["h1"]


def test_only_well_formed_escapes_are_decoded():
    from bench.descriptions.containment import fold
    assert fold("100% sure, 50%zz, %FF%FE stays") == "100% sure, 50%zz, %FF%FE stays"
    assert fold("it hasn\\u0027t, \\ud83d\\ude00, \\ud83d alone") == \
        "it hasn't, \U0001F600, \\ud83d alone"
    assert fold("a%20b%2Fc") == "a b/c"


def test_words_of_one_script_keep_their_letters():
    from bench.descriptions.containment import normalise
    # a Russian word is not read as Latin, and й keeps its breve; CJK is untouched
    assert normalise("Где мой заказ? 我 的 包 裹 が café") == "где мой заказ 我的包裹が cafe"


def test_short_generic_queries_are_not_containment():
    line = "Cancel my order when the customer asks and the order is not shipped."
    assert find_leaks(_tool_variant(line), [_case("s1", "Cancel my order"),
                                            _case("s2", "退款进度", "zh")]) == []


def test_containment_names_another_datasets_test_case():
    from bench.descriptions.containment import TestIndex

    index = TestIndex([("ecommerce", _case("ecom-x", PARCEL))])
    leaks = find_leaks(_tool_variant(f"Track parcels. {PARCEL}?"), [], everywhere=index)
    assert [(k.case_id, k.dataset, k.signal) for k in leaks] == [
        ("ecom-x", "ecommerce", "containment")]


def test_the_containment_threshold_needs_most_of_the_query():
    from bench.descriptions.containment import CONTAINMENT_THRESHOLD

    query = "please tell me where my blue parcel from the Berlin shop went yesterday evening"
    case = _case("p1", query)
    # one word changed in the middle: 4 of the 10 word 5-grams survive
    edited = query.replace("Berlin", "Munich")
    assert not _contained(_tool_variant(f"Track parcels. {edited}."), case)
    # the last word dropped: 9 of 10
    (leak,) = _contained(_tool_variant(f"Track parcels. {query.rsplit(' ', 1)[0]}."), case)
    assert leak.score == 0.9 >= CONTAINMENT_THRESHOLD


@pytest.mark.slow
def test_no_shipped_variant_contains_a_test_query_of_any_dataset():
    from bench.descriptions.containment import TestIndex, project_test_cases

    index = TestIndex(project_test_cases(datasets_dir()))
    assert len({q.dataset for q in index.queries}) == len(available_datasets())
    found = [f"{toolset}/{name} {k.tool} {k.section}: {k.case_id}"
             for toolset in ("ecommerce", "analytics", "logistics")
             for name in available_variants(toolset)
             for k in find_leaks(load_variant(toolset, name), [], everywhere=index)]
    assert found == []
