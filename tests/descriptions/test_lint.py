"""bench lint: every rule has a failing and a passing example; the command's exit code and
JSON output."""

from __future__ import annotations

import json

import pytest
import yaml

from bench.descriptions.lint import RULES, LintConfig, lint_variant
from bench.descriptions.variants import Variant
from bench.models import Tool

GOOD_DESCRIPTION = "\n".join([
    "Search the customer's orders by product words, status and date; returns up to 20 orders.",
    "Use it when the customer describes an order without its number; do not use it for",
    "delivery tracking (use track_shipment instead).",
    "- keyword: words from the product title.",
    "- status: order status; default: any status.",
    "- page: result page, 1-based; default 1.",
])
GOOD_SCHEMA = {"type": "object", "properties": {
    "keyword": {"type": "string"},
    "status": {"type": "string", "enum": ["paid", "shipped"]},
    "page": {"type": "integer", "minimum": 1, "maximum": 50, "default": 1}},
    "required": ["keyword"]}
LOOSE = LintConfig(min_lines=1, max_lines=100)


def rules_for(*tools: Tool, config: LintConfig = LOOSE) -> set[tuple[str, str | None]]:
    variant = Variant(name="v", toolset="t", tools=tuple(tools), source="test")
    return {(f.rule, f.param) for f in lint_variant(variant, config)}


def tool(name="search_orders", description=GOOD_DESCRIPTION, schema=None) -> Tool:
    return Tool(name=name, description=description, input_schema=schema or GOOD_SCHEMA)


def names(found) -> set[str]:
    return {rule for rule, _ in found}


def test_good_tool_is_clean_of_description_rules():
    assert names(rules_for(tool())) <= {"openai-strict", "gemini-schema"}


@pytest.mark.parametrize("bad, good", [
    ("Orders.", GOOD_DESCRIPTION),
    ("", GOOD_DESCRIPTION),
])
def test_no_purpose(bad, good):
    assert "no-purpose" in names(rules_for(tool(description=bad)))
    assert "no-purpose" not in names(rules_for(tool(description=good)))


def test_repeats_name():
    assert "repeats-name" in names(rules_for(tool(description="Search orders.")))
    assert "repeats-name" in names(rules_for(tool(name="getWeather",
                                                  description="Gets the weather.")))
    assert "repeats-name" not in names(rules_for(tool()))


def test_no_when_to_use():
    bad = "Search the customer's orders by words and status; returns up to 20 orders."
    assert "no-when-to-use" in names(rules_for(tool(description=bad)))
    assert "no-when-to-use" not in names(rules_for(tool()))
    chinese = "按商品关键词搜索客户的订单并返回最多20条。用户描述订单但没有订单号时用于查找。"
    assert "no-when-to-use" not in names(rules_for(tool(description=chinese)))


def test_param_no_description():
    schema = dict(GOOD_SCHEMA, properties=dict(GOOD_SCHEMA["properties"],
                                               channel={"type": "string", "enum": ["web"]}),)
    assert ("param-no-description", "channel") in rules_for(tool(schema=schema))
    described = dict(schema, properties=dict(schema["properties"], channel={
        "type": "string", "enum": ["web"], "description": "Sales channel."}))
    assert ("param-no-description", "channel") not in rules_for(tool(schema=described))


def test_closed_set_without_enum():
    props = dict(GOOD_SCHEMA["properties"], status={"type": "string"})
    schema = dict(GOOD_SCHEMA, properties=props)
    listed = GOOD_DESCRIPTION.replace("order status; default: any status",
                                      "one of 'paid', 'shipped'; default: any status")
    assert ("closed-set-no-enum", "status") in rules_for(tool(description=listed,
                                                              schema=schema))
    example = GOOD_DESCRIPTION.replace("order status; default: any status",
                                       "e.g. 'paid' or 'shipped'; default: any status")
    assert ("closed-set-no-enum", "status") not in rules_for(tool(description=example,
                                                                  schema=schema))
    assert ("closed-set-no-enum", "status") not in rules_for(tool(description=listed))
    choice = GOOD_DESCRIPTION + "\n- Send at least one of status, keyword."
    assert ("closed-set-no-enum", "status") not in rules_for(tool(description=choice,
                                                                  schema=schema))
    other = GOOD_DESCRIPTION + "\n- page: one status page at a time; one of 'a', 'b'."
    assert ("closed-set-no-enum", "status") not in rules_for(tool(description=other,
                                                                  schema=schema))
    examples = GOOD_DESCRIPTION + '\n- "Paid ones" -> {"status": "paid", "keyword": "x"}'
    assert ("closed-set-no-enum", "status") not in rules_for(tool(description=examples,
                                                                  schema=schema))


def test_number_without_bounds():
    props = dict(GOOD_SCHEMA["properties"], page={"type": "integer", "default": 1})
    assert ("number-no-bounds", "page") in rules_for(tool(schema=dict(GOOD_SCHEMA,
                                                                      properties=props)))
    assert ("number-no-bounds", "page") not in rules_for(tool())


def test_default_not_stated():
    silent = GOOD_DESCRIPTION.replace("order status; default: any status", "order status")
    assert ("default-not-stated", "status") in rules_for(tool(description=silent))
    assert ("default-not-stated", "status") not in rules_for(tool())
    with_keyword = dict(GOOD_SCHEMA, properties=dict(GOOD_SCHEMA["properties"], status={
        "type": "string", "enum": ["paid", "shipped"], "default": "paid"}))
    assert ("default-not-stated", "status") not in rules_for(tool(description=silent,
                                                                  schema=with_keyword))


@pytest.mark.parametrize("leak", ["Calls https://orders.internal.example/api.",
                                  "Backed by POST /v2/orders/search.",
                                  "Reads /var/lib/shop/orders.db.",
                                  "Implemented in order_search.py.",
                                  "Talks to orders-db.internal on port 5432."])
def test_implementation_leak(leak):
    assert "implementation-leak" in names(rules_for(tool(description=GOOD_DESCRIPTION + "\n"
                                                         + leak)))


def test_no_leak_in_dates_and_and_or():
    text = GOOD_DESCRIPTION + "\nDates as 2026/11/01; status and/or keyword narrow the search."
    assert "implementation-leak" not in names(rules_for(tool(description=text)))


def test_length_budget():
    default = LintConfig()
    assert "length-budget" in names(rules_for(tool(), config=default))  # 6 lines < 15
    long = "\n".join([GOOD_DESCRIPTION] + [f"- note {i}: detail." for i in range(12)])
    assert "length-budget" not in names(rules_for(tool(description=long), config=default))
    assert "length-budget" in names(rules_for(tool(description=long),
                                              config=LintConfig(max_lines=10)))


def test_overlapping_tools():
    twin = tool(name="find_orders", description=GOOD_DESCRIPTION.replace("Search", "Find"))
    assert ("overlapping-tools", None) in rules_for(tool(), twin)
    other = tool(name="get_weather", description="Current weather and a 3-day forecast for a "
                 "city.\nUse it when the customer asks about weather at the delivery address.")
    assert ("overlapping-tools", None) not in rules_for(tool(), other)


def test_openai_strict():
    assert "openai-strict" in names(rules_for(tool()))  # optional params, no additionalProps
    strict = {"type": "object", "additionalProperties": False, "required": ["keyword", "page"],
              "properties": {"keyword": {"type": "string"},
                             "page": {"type": ["integer", "null"], "minimum": 1,
                                      "maximum": 50}}}
    assert "openai-strict" not in names(rules_for(tool(schema=strict)))
    with_allof = dict(strict, allOf=[{"required": ["keyword"]}])
    assert "openai-strict" in names(rules_for(tool(schema=with_allof)))


def test_gemini_schema():
    assert "gemini-schema" not in names(rules_for(tool()))
    ref = {"type": "object", "$defs": {"A": {"type": "string"}},
           "properties": {"a": {"$ref": "#/$defs/A"}}}
    assert "gemini-schema" in names(rules_for(tool(schema=ref)))
    nullable_list = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
    assert "gemini-schema" in names(rules_for(tool(schema=nullable_list)))
    numeric_enum = {"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 2]}}}
    assert "gemini-schema" in names(rules_for(tool(schema=numeric_enum)))


def test_rule_codes_are_stable_and_unique():
    codes = [r.code for r in RULES.values()]
    assert codes == [f"BL{i:03d}" for i in range(1, 19)]


@pytest.mark.slow
def test_lint_command_exit_code_and_json(run_bench, project):
    folder = project / "descriptions" / "linted" / "variants"
    folder.mkdir(parents=True)
    (folder / "ok.yaml").write_text(yaml.safe_dump({"tools": [tool().model_dump()]}))
    result = run_bench("lint", "--toolset", "linted", "--min-lines", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "findings per variant and rule" in result.stdout and "linted/ok" in result.stdout
    (folder / "bad.yaml").write_text(yaml.safe_dump({"tools": [
        tool(description="Search orders.").model_dump()]}))
    result = run_bench("lint", "--toolset", "linted", "--variant", "bad", "--json")
    assert result.returncode == 1
    findings = json.loads(result.stdout)["findings"]
    repeated = next(f for f in findings if f["rule"] == "repeats-name")
    assert repeated["code"] == "BL008" and repeated["severity"] == "error"
    assert repeated["tool"] == "search_orders" and repeated["hint"]


@pytest.fixture
def own_rules(monkeypatch):
    """register_rule's changes stay inside the test."""
    from bench.descriptions import lint
    monkeypatch.setattr(lint, "RULES", dict(lint.RULES))
    monkeypatch.setattr(lint, "_ADDED_CHECKS", {})


def test_a_registered_rule_runs_on_every_tool_after_the_built_in_ones(own_rules):
    from bench.descriptions.lint import WARNING, Rule, register_rule
    seen = []

    def shouting(tool, config):
        seen.append((tool.name, config.max_lines))
        if tool.description.isupper():
            yield None, "all capitals", "write in sentence case"

    register_rule(Rule("BL900", "shouting", WARNING, "all capitals"), shouting)
    tools = (Tool(name="a", description="SEARCH ORDERS", input_schema={"type": "object"}),
             Tool(name="b", description=GOOD_DESCRIPTION, input_schema=GOOD_SCHEMA))
    findings = lint_variant(Variant(name="v", toolset="t", tools=tools, source="x"), LOOSE)
    assert seen == [("a", 100), ("b", 100)]
    assert [(f.code, f.rule, f.severity, f.tool) for f in findings if f.code == "BL900"] == [
        ("BL900", "shouting", "warning", "a")]


@pytest.mark.parametrize("rule, message", [
    (("BL001", "new-name", "warning", "x"), "already used by BL001 no-purpose"),
    (("BL901", "no-purpose", "warning", "x"), "already used by BL001 no-purpose"),
    (("BL902", "fine", "info", "x"), "severity must be"),
])
def test_register_rule_refuses_taken_codes_names_and_unknown_severities(own_rules, rule, message):
    from bench.descriptions.lint import Rule, register_rule
    with pytest.raises(ValueError, match=message):
        register_rule(Rule(*rule), lambda tool, config: ())


def test_bl013_names_the_parameter_whose_description_holds_a_test_query():
    from bench.descriptions.lint import leak_findings
    from bench.models import Case

    case = Case.model_validate({"id": "t-1", "toolset": "shop", "split": "test", "lang": "en",
                                "messages": [{"role": "user",
                                              "content": "where did my parcel go"}],
                                "expected": {"no_call": True}})
    schema = {"type": "object", "properties": {"address": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City, as in 'where did my parcel go'."}}}}}
    variant = Variant(name="v", toolset="shop", source="test", tools=(
        tool(description=GOOD_DESCRIPTION, schema=schema),))
    found = leak_findings(variant, [case])
    assert {(f.code, f.severity, f.param) for f in found} == {("BL013", "error",
                                                                "address.city")}
    assert any("test case t-1: contains the query (100% of its n-grams" in f.message
               for f in found)


@pytest.mark.slow
def test_lint_checks_every_variant_against_every_datasets_test_split(run_bench, project):
    # a toolset no dataset uses: before, nothing was checked against it
    folder = project / "descriptions" / "linted" / "variants"
    folder.mkdir(parents=True)
    copied = tool(description=GOOD_DESCRIPTION.rstrip() + " Typical: what's the weather in "
                  "New York today, or my order status.")
    (folder / "copied.yaml").write_text(yaml.safe_dump({"tools": [copied.model_dump()]}))
    result = run_bench("lint", "--toolset", "linted", "--min-lines", "1", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "BL013"]
    assert "ecom-0073 (ecommerce)" in finding["message"]  # a test case of another toolset
    none = run_bench("lint", "--toolset", "linted", "--min-lines", "1", "--dataset", "none",
                     "--json")
    assert not [f for f in json.loads(none.stdout)["findings"] if f["code"] == "BL013"]
