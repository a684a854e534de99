"""Counts read singular at 1: "1 row", "1 description line", never "1 rows"."""

import pytest
from bench.descriptions.diff import diff_tool
from bench.descriptions.lint import LintConfig, lint_variant
from bench.descriptions.variants import Variant
from bench.models import Tool
from bench.plural import count, noun

SCHEMA = {"type": "object", "properties": {}}


def test_count_and_noun():
    assert [count(n, "row") for n in (0, 1, 2)] == ["0 rows", "1 row", "2 rows"]
    assert count(1, "description line") == "1 description line"
    assert noun(3, "match", "matches") == "matches" and noun(1, "match", "matches") == "match"


def test_lint_length_budget_of_a_one_line_description():
    tool = Tool(name="get_weather", description="Weather forecast for a city.",
                input_schema=SCHEMA)
    variant = Variant(name="v", toolset="t", tools=(tool,), source="test")
    (budget,) = [f for f in lint_variant(variant, LintConfig()) if f.rule == "length-budget"]
    assert budget.message.startswith("1 description line (budget 15-30)"), budget.message


def test_variants_diff_of_one_changed_line():
    a = Tool(name="t", description="one\ntwo", input_schema=SCHEMA)
    b = Tool(name="t", description="one\nthree", input_schema=SCHEMA)
    (change,) = [c for c in diff_tool(a, b).changes if c.kind == "description"]
    assert change.detail == "1 line removed, 1 added"


@pytest.mark.slow
def test_a_one_row_run_says_1_row(run_bench):
    from tests.report_runs import expected_answer, make_run

    make_run("rec", expected_answer, variants=("l3",), limit=1, first=False)
    result = run_bench("run", "--limit", "1", "--variants", "l3", "--provider", "replay:rec",
                       "--run-id", "one")
    assert result.returncode == 0, result.stderr
    assert "run one: 1 case x 1 variant x 1 provider x 1 trial" in result.stderr
    assert "\n1 row in " in result.stderr and "1 rows" not in result.stderr
    again = run_bench("run", "--resume", "one")
    assert "run one is already complete (1 row); nothing to do" in again.stderr


def test_a_run_with_factors_counts_conditions_and_suggests_comparing_two(run_bench):
    """Variants crossed with --tools: the header counts the conditions (not the 1 variant
    name), and the closing hint compares two conditions by the names `bench compare` takes."""
    result = run_bench("run", "--provider", "oracle", "--variants", "l3", "--tools", "13,20",
                       "--limit", "1", "--no-execute", "--run-id", "factors")
    assert result.returncode == 0, result.stderr
    assert "run factors: 1 case x 2 conditions x 1 provider x 1 trial" in result.stderr
    assert "bench compare l3~tools=13 l3~tools=20 --run factors" in result.stderr
    compared = run_bench("compare", "l3~tools=13", "l3~tools=20", "--run", "factors")
    assert compared.returncode == 0, compared.stderr
