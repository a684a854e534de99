"""The description lock (bench check), tool aliases (a renamed tool keeps its labels), and
the gate's require_reevaluation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.descriptions.aliases import load_aliases
from bench.descriptions.lock import (ToolChange, compare_hashes, lock_path, read_lock,
                                     tool_hashes)
from bench.errors import BenchError
from bench.gate.config import GateConfig
from bench.gate.core import evaluate
from bench.models import Tool
from bench.providers.function import register_function
from bench.report.data import load_runs
from bench.report.html import render_html
from bench.runner import RunConfig, Runner
from tests.importers.test_own_tools import bench, one_error_line

SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}


def _tool(name: str, description: str = "Units in stock.", schema: dict | None = None) -> Tool:
    return Tool(name=name, description=description, input_schema=schema or SCHEMA)


def _hashes(*tools: Tool) -> dict[str, dict[str, str]]:
    return {t.name: tool_hashes(t) for t in tools}


def test_hashes_tell_description_schema_added_removed_and_renamed_apart():
    locked = {"v1": _hashes(_tool("a"), _tool("b"), _tool("old"), _tool("gone"))}
    now = {"v1": _hashes(_tool("a", "Units in stock, per warehouse."),
                         _tool("b", schema={"type": "object", "properties": {}}),
                         _tool("new"), _tool("fresh")),
           "v2": _hashes(_tool("a"))}
    changes = compare_hashes(locked, now, aliases={"old": "new"})
    assert set(changes) == {ToolChange("v1", "a", "description"),
                            ToolChange("v1", "b", "schema"),
                            ToolChange("v1", "new", "renamed", "old"),
                            ToolChange("v1", "fresh", "added"),
                            ToolChange("v1", "gone", "removed"),
                            ToolChange("v2", "", "new_variant")}
    # without the alias, a rename is a removal and an addition
    plain = compare_hashes(locked, {"v1": _hashes(_tool("new"))})
    assert ToolChange("v1", "new", "added") in plain and \
        ToolChange("v1", "old", "removed") in plain
    assert compare_hashes(locked, {"v1": locked["v1"]}) == []


def test_the_name_is_part_of_the_tool_hash():
    assert tool_hashes(_tool("a"))["sha256"] != tool_hashes(_tool("b"))["sha256"]
    assert tool_hashes(_tool("a"))["description_sha256"] == \
        tool_hashes(_tool("b"))["description_sha256"]


def _check(*args: str):  # noqa: ANN202
    return CliRunner().invoke(app, ["check", *args])


def test_bench_check_catches_a_changed_description_and_update_accepts_it(project: Path):
    """The production story: sort_order's enum goes from ASC/DESC to asc/desc in the spec;
    bench check names query_metrics in every variant (schema and text) and exits 1."""
    first = _check("--toolset", "analytics")
    assert first.exit_code == 1 and "no lock yet" in first.output
    written = _check("--toolset", "analytics", "--update")
    assert written.exit_code == 0, written.output
    lock = read_lock(lock_path("analytics", project / "descriptions"))
    assert lock is not None and set(lock["variants"]) == {"l3", "l10", "l30", "l50"}
    assert _check("--toolset", "analytics").exit_code == 0

    spec = project / "descriptions/analytics/specs/query_metrics.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("enum: [ASC, DESC]",
                                                             "enum: [asc, desc]"),
                    encoding="utf-8")
    changed = _check("--toolset", "analytics")
    assert changed.exit_code == 1
    assert "analytics: 1 tool changed since the lock (descriptions.lock.json), in 4 " \
           "variants:" in changed.output
    assert "l3: query_metrics: schema changed" in changed.output  # l3 shows no enum prose
    assert "l10: query_metrics: description and schema changed" in changed.output
    assert "list_tables" not in changed.output

    as_json = json.loads(_check("--toolset", "analytics", "--json").output)
    kinds = {(c["variant"], c["tool"], c["kind"]) for c in as_json["toolsets"][0]["changes"]}
    assert ("l50", "query_metrics", "description+schema") in kinds

    assert _check("--toolset", "analytics", "--update").exit_code == 0
    assert _check("--toolset", "analytics").exit_code == 0


def test_variants_missing_from_the_lock_are_named_with_the_command_that_adds_them(
        project: Path):
    """A lock of some variants (as bench baseline update writes for the gate's): the others
    are not "0 tools changed" but variants not in the lock, with the command to lock them."""
    assert _check("--toolset", "analytics", "--update", "--variants", "l3").exit_code == 0
    checked = _check("--toolset", "analytics")
    assert checked.exit_code == 1
    assert "tools changed" not in checked.output and "tool changed" not in checked.output
    assert "analytics: 3 variants not in the lock (descriptions.lock.json): l10, l30, l50; " \
           "lock them with: bench check --update --toolset analytics" in checked.output
    assert _check("--toolset", "analytics", "--update").exit_code == 0
    assert _check("--toolset", "analytics").exit_code == 0


def test_a_corrupt_lock_is_a_one_line_error(project: Path, run_bench):
    lock_path("analytics", project / "descriptions").write_text("{}", encoding="utf-8")
    result = run_bench("check", "--toolset", "analytics")
    assert result.returncode == 2
    assert "descriptions.lock.json" in result.stderr
    assert "not a bench description lock" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


VARIANT = """tools:
  - name: {stock}
    description: |
      Return how many units of one product are in stock, by SKU.
    input_schema:
      type: object
      properties:
        sku: {{type: string}}
      required: [sku]
  - name: find_product
    description: |
      Find products by keyword.
    input_schema:
      type: object
      properties:
        keyword: {{type: string}}
      required: [keyword]
"""


def _case(number: int, tool: str, arguments: dict) -> str:
    return json.dumps({"id": f"shop-{number}", "toolset": "shop", "lang": "en",
                       "messages": [{"role": "user", "content": f"question {number}"}],
                       "expected": {"calls": [{"name": tool, "arguments": {
                           k: [v] for k, v in arguments.items()}}]}})


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose toolset once called its stock tool get_inventory; the labels still
    do. The scripted model calls get_stock for questions 1-3 and find_product for 4."""
    root = tmp_path / "shop-project"
    variant = root / "descriptions/shop/variants/v1.yaml"
    variant.parent.mkdir(parents=True)
    variant.write_text(VARIANT.format(stock="get_inventory"), encoding="utf-8")
    cases = root / "datasets/shop/cases.jsonl"
    cases.parent.mkdir(parents=True)
    cases.write_text("\n".join([_case(1, "get_inventory", {"sku": "SKU-1"}),
                                _case(2, "get_inventory", {"sku": "SKU-2"}),
                                _case(3, "get_inventory", {"sku": "SKU-3"}),
                                _case(4, "find_product", {"keyword": "mug"})]) + "\n",
                     encoding="utf-8")
    monkeypatch.setenv("BENCH_HOME", str(root))

    def answer(messages, tools, trial):  # noqa: ANN001, ANN202
        number = int(messages[-1].content.split()[-1])
        if number == 4:
            return [{"name": "find_product", "arguments": {"keyword": "mug"}}]
        return [{"name": "get_stock", "arguments": {"sku": f"SKU-{number}"}}]

    register_function("shop-model", answer)
    return root


def _run(run_id: str) -> Runner:
    runner = Runner(RunConfig(dataset="shop", variants=["v1"], providers=["function:shop-model"],
                              execute=False), run_id=run_id, command=["bench", "run"])
    runner.run()
    return runner


def test_a_renamed_tool_keeps_its_labels_and_the_report_shows_the_rename(shop: Path):
    """get_inventory -> get_stock: before aliases.yaml the labels are refused; with it they
    score against get_stock (3 of 3 right), the manifest records the rename, the report,
    the table and bench check show it."""
    assert _check("--toolset", "shop", "--update").exit_code == 0
    variant = shop / "descriptions/shop/variants/v1.yaml"
    variant.write_text(VARIANT.format(stock="get_stock"), encoding="utf-8")
    with pytest.raises(BenchError, match="get_inventory"):
        _run("before")

    (shop / "descriptions/shop/aliases.yaml").write_text(
        "# renamed in v2 of the API\nget_inventory: get_stock\n", encoding="utf-8")
    runner = _run("after")
    rows = list(runner.store.load_rows())
    assert all(r.metrics.selection_correct for r in rows)
    assert {c["name"] for r in rows for c in r.expected.calls} == {"get_stock", "find_product"}
    manifest = runner.store.load_manifest()
    assert manifest.variants[0].aliases == {"get_inventory": "get_stock"}

    page = render_html(load_runs(["after"]), "renamed")
    assert "get_inventory &rarr; get_stock" in page
    assert "get_stock (was get_inventory)" in page

    shown = CliRunner().invoke(app, ["show", "after", "--per-tool"])
    assert shown.exit_code == 0, shown.output
    assert "renamed tools (labels naming the old name score against the new): " \
           "get_inventory -> get_stock" in shown.output
    assert "get_stock (was get_inventory)" in shown.output

    checked = _check("--toolset", "shop")
    assert checked.exit_code == 1
    assert "v1: get_stock: renamed from get_inventory (description and schema unchanged)" \
        in checked.output


@pytest.mark.parametrize("text, message", [
    ("a: b\nb: c\n", "chains renames"),
    ("get_inventory: nope\n", "not a tool of toolset"),
    ("[1, 2]\n", "must map old tool names"),
    ("find_product: get_stock\n", "still a tool"),
])
def test_bad_aliases_are_one_line_errors(shop: Path, text: str, message: str):
    (shop / "descriptions/shop/variants/v1.yaml").write_text(
        VARIANT.format(stock="get_stock"), encoding="utf-8")
    (shop / "descriptions/shop/aliases.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(BenchError, match=message) as info:
        load_aliases("shop", tools=["get_stock", "find_product"])
    assert "aliases.yaml" in str(info.value)


def _gate(shop: Path, strict: bool) -> GateConfig:
    return GateConfig(dataset="shop", variants=["v1"], providers=["function:shop-model"],
                      metrics=["selection_correct"], require_reevaluation=strict, root=shop,
                      execute=False)


def test_the_gate_requires_changed_tools_to_be_reevaluated(shop: Path):
    """A description change to a tool some case expects is re-evaluated by the gate run (a
    note); a change to a tool no case expects fails with require_reevaluation."""
    variant = shop / "descriptions/shop/variants/v1.yaml"
    variant.write_text(VARIANT.format(stock="get_inventory") + """  - name: cancel_order
    description: |
      Cancel an order.
    input_schema:
      type: object
      properties:
        order_id: {type: string}
""", encoding="utf-8")
    rows = list(_run("base").store.load_rows())
    assert all(v.passed for v in evaluate(_gate(shop, True), rows, None)) is False  # no lock
    assert _check("--toolset", "shop", "--update").exit_code == 0
    assert all(v.passed for v in evaluate(_gate(shop, True), rows, None))

    text = variant.read_text(encoding="utf-8")
    variant.write_text(text.replace("Cancel an order.", "Cancel an order that has not "
                                    "shipped.").replace("Find products by keyword.",
                                                        "Find products by keyword or SKU."),
                       encoding="utf-8")
    rows = list(_run("changed").store.load_rows())
    (strict,) = evaluate(_gate(shop, True), rows, None)
    assert not strict.passed
    assert any("expected by no case of this gate: cancel_order" in r for r in strict.reasons)
    assert any("re-evaluated here: find_product" in n for n in strict.notes)
    (lenient,) = evaluate(_gate(shop, False), rows, None)
    assert lenient.passed and any("cancel_order" in n for n in lenient.notes)


def test_the_oracle_answers_a_renamed_tool_by_its_new_name(shop: Path):
    """The oracle reads the labels through aliases.yaml, as the run does: its answers call
    get_stock, the tool that is sent, so it scores 100% selection across a rename."""
    (shop / "descriptions/shop/variants/v1.yaml").write_text(VARIANT.format(stock="get_stock"),
                                                             encoding="utf-8")
    (shop / "descriptions/shop/aliases.yaml").write_text("get_inventory: get_stock\n",
                                                         encoding="utf-8")
    runner = Runner(RunConfig(dataset="shop", variants=["v1"], providers=["oracle"],
                              execute=False), run_id="oracle", command=["bench", "run"])
    runner.run()
    rows = list(runner.store.load_rows())
    assert len(rows) == 4 and all(r.metrics.selection_correct for r in rows)
    assert {c.name for r in rows for c in r.parsed.calls} == {"get_stock", "find_product"}


# -- bench check with a corrupt lock -----------------------------------------------------------


def _tools_project(tmp_path: Path) -> Path:
    (tmp_path / "tools.json").write_text(json.dumps([
        {"type": "function", "function": {"name": "get_note", "description": "Read a note.",
                                          "parameters": {"type": "object", "properties": {
                                              "id": {"type": "string"}}}}}]), encoding="utf-8")
    result = bench(tmp_path, "init", "proj", "--tools", "tools.json")
    assert result.returncode == 0, result.stderr
    return tmp_path / "proj"


@pytest.mark.parametrize("corrupt", ["{", "[]", '{"format": "bench-description-lock/1", '
                                                 '"variants": []}'])
def test_bench_check_update_replaces_the_corrupt_lock_its_error_points_to(tmp_path, corrupt):
    root = _tools_project(tmp_path)
    lock = root / "descriptions" / "proj" / "descriptions.lock.json"
    lock.write_text(corrupt, encoding="utf-8")
    line = one_error_line(bench(root, "check"), "descriptions.lock.json",
                          "bench check --update --toolset proj")
    assert "rewrite it with" in line
    one_error_line(bench(root, "check", "--update", "-v", "current"), "descriptions.lock.json")
    assert lock.read_text(encoding="utf-8") == corrupt  # merging into it is refused
    updated = bench(root, "check", "--update")
    assert updated.returncode == 0, updated.stderr
    assert "was unreadable" in updated.stdout and "replaced" in updated.stdout
    assert bench(root, "check").returncode == 0
