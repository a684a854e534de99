"""Tool aliases (descriptions/<toolset>/aliases.yaml) in ``bench variants diff``,
``bench lint`` and ``bench check``: a tool renamed (and changed) is one tool under two names,
and labels naming its old name are read as naming the new one, as a run reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bench.cli import app
from bench.descriptions.diff import diff_variants, label_breaks
from bench.datasets import load_dataset
from bench.errors import BenchError
from bench.models import Tool

SKU = {"type": "string", "description": "The product's SKU."}
OLD = Tool(name="get_inventory", description="Units in stock for one product.\n"
           "Use it when the user asks how many are left.",
           input_schema={"type": "object", "properties": {"sku": SKU}, "required": ["sku"]})
# the rename came with a new optional parameter: the schemas differ, so only the aliases
# can pair the two names
NEW = Tool(name="get_stock", description="Units in stock for one product.\n"
           "Use it when the user asks how many are left.\n"
           "Examples:\n"
           '- "SKU-1 还剩几件？" -> {"sku": "SKU-1"}',
           input_schema={"type": "object", "properties": {
               "sku": SKU, "warehouse": {"type": "string", "description": "A warehouse."}},
               "required": ["sku"]})
FIND = Tool(name="find_product", description="Find products by keyword.\n"
            "Use it when the user names no SKU.",
            input_schema={"type": "object", "properties": {
                "keyword": {"type": "string", "description": "Words to find."}},
                "required": ["keyword"]})


def _case(number: int, tool: str, arguments: dict) -> dict:
    return {"id": f"shop-{number}", "toolset": "shop", "lang": "en",
            "messages": [{"role": "user", "content": f"How many of SKU-{number} are left?"}],
            "expected": {"calls": [{"name": tool, "arguments": {k: [v] for k, v in
                                                                 arguments.items()}}]}}


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose variant ``before`` has get_inventory and ``after`` get_stock (with a
    new parameter); the labels still name get_inventory; no aliases.yaml yet."""
    root = tmp_path / "shop-project"
    for name, tools in (("before", [OLD, FIND]), ("after", [NEW, FIND])):
        path = root / "descriptions" / "shop" / "variants" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"tools": [t.model_dump() for t in tools]},
                                       allow_unicode=True), encoding="utf-8")
    cases = root / "datasets" / "shop" / "cases.jsonl"
    cases.parent.mkdir(parents=True)
    cases.write_text("".join(json.dumps(c) + "\n" for c in [
        _case(1, "get_inventory", {"sku": "SKU-1"}), _case(2, "get_inventory", {"sku": "SKU-2"}),
        _case(3, "find_product", {"keyword": "mug"})]), encoding="utf-8")
    monkeypatch.setenv("BENCH_HOME", str(root))
    return root


def _alias(root: Path) -> None:
    (root / "descriptions" / "shop" / "aliases.yaml").write_text(
        "get_inventory: get_stock\n", encoding="utf-8")


def _bench(*args: str):  # noqa: ANN202
    return CliRunner().invoke(app, list(args))


def test_diff_pairs_a_declared_rename_even_when_the_schema_changed():
    kinds = {d.name: [c.kind for c in d.changes] for d in diff_variants([OLD], [NEW])}
    assert kinds == {"get_stock": ["tool_added"], "get_inventory": ["tool_removed"]}
    diffs = diff_variants([OLD], [NEW], {"get_inventory": "get_stock"})
    assert [d.name for d in diffs] == ["get_stock"]
    changes = {c.kind: c for c in diffs[0].changes}
    assert changes["tool_renamed"].before == "get_inventory"
    assert changes["tool_renamed"].detail == "declared in aliases.yaml"
    assert "param_added" in changes and changes["param_added"].param == "warehouse"
    # the other direction (diffing the new variant against the old one) pairs them too
    back = diff_variants([NEW], [OLD], {"get_inventory": "get_stock"})
    assert [c.kind for c in back[0].changes][0] == "tool_renamed"


def test_label_breaks_read_labels_through_the_aliases(shop: Path):
    dataset = load_dataset("shop")
    new, _ = label_breaks(dataset, "shop", [OLD, FIND], [NEW, FIND])
    assert sorted(p.case_id for p in new) == ["shop-1", "shop-2"]
    new, still = label_breaks(dataset, "shop", [OLD, FIND], [NEW, FIND],
                              {"get_inventory": "get_stock"})
    assert new == [] and still == []


def test_variants_diff_command_shows_the_rename_and_keeps_the_labels(shop: Path):
    before = _bench("variants", "diff", "before", "after", "--toolset", "shop", "--json")
    assert before.exit_code == 1  # without aliases.yaml the labels break
    data = json.loads(before.output)
    assert {d["name"]: d["changes"][0]["kind"] for d in data["tools"]} == {
        "get_stock": "tool_added", "get_inventory": "tool_removed"}
    assert len(data["broken_labels"]) == 2

    _alias(shop)
    after = _bench("variants", "diff", "before", "after", "--toolset", "shop", "--json")
    assert after.exit_code == 0, after.output
    data = json.loads(after.output)
    assert [d["name"] for d in data["tools"]] == ["get_stock"]
    assert [c["kind"] for c in data["tools"][0]["changes"]][:1] == ["tool_renamed"]
    assert data["broken_labels"] == []
    shown = _bench("variants", "diff", "before", "after", "--toolset", "shop")
    assert "get_inventory -> get_stock (declared in aliases.yaml)" in " ".join(
        shown.output.split())
    assert "0 newly invalid" in shown.output


def test_lint_reads_test_labels_through_the_aliases(shop: Path):
    """get_stock's Chinese example has the exact arguments of shop-1 and shop-2 (IDs masked:
    a translation hint, BL014); their labels name get_inventory, so only the alias ties the
    example to them."""
    args = ("lint", "--toolset", "shop", "--variant", "after", "--json")
    plain = json.loads(_bench(*args).output)
    assert not [f for f in plain["findings"] if f["code"] == "BL014"]
    _alias(shop)
    found = json.loads(_bench(*args).output)
    hints = [f for f in found["findings"] if f["code"] == "BL014"]
    assert sorted((f["tool"], f["message"].split("test case ")[1][:6]) for f in hints) == [
        ("get_stock", "shop-1"), ("get_stock", "shop-2")]


def test_check_reports_a_rename_with_a_schema_change_as_one_renamed_tool(shop: Path):
    lock = _bench("check", "--toolset", "shop", "--variants", "before", "--update")
    assert lock.exit_code == 0, lock.output
    path = shop / "descriptions" / "shop" / "variants" / "before.yaml"
    path.write_text(yaml.safe_dump({"tools": [NEW.model_dump(), FIND.model_dump()]},
                                   allow_unicode=True), encoding="utf-8")
    unpaired = _bench("check", "--toolset", "shop", "--variants", "before")
    assert "before: get_stock: new tool" in unpaired.output
    assert "before: get_inventory: removed" in unpaired.output
    _alias(shop)
    checked = _bench("check", "--toolset", "shop", "--variants", "before", "--json")
    assert checked.exit_code == 1
    changes = json.loads(checked.output)["toolsets"][0]["changes"]
    assert [(c["tool"], c["kind"], c["old_name"]) for c in changes] == [
        ("get_stock", "description+schema", "get_inventory")]


def _bad_aliases(root: Path) -> None:
    """A new name that is no tool (a typo) and an old name that still is one."""
    (root / "descriptions" / "shop" / "aliases.yaml").write_text(
        "get_inventory: get_stok\nfind_product: get_stock\n", encoding="utf-8")


def test_check_reports_each_rename_that_does_not_fit_the_tools_on_its_own_line(shop: Path):
    _bad_aliases(shop)
    checked = _bench("check", "--toolset", "shop", "--variants", "after")
    assert checked.exit_code == 1
    lines = checked.output.splitlines()
    typo = [ln for ln in lines if "aliases.yaml:1: field 'get_inventory':" in ln]
    kept = [ln for ln in lines if "aliases.yaml:2: field 'find_product':" in ln]
    assert len(typo) == 1 and "'get_stok', which is not a tool" in typo[0]
    assert len(kept) == 1 and "is still a tool" in kept[0]
    found = json.loads(_bench("check", "--toolset", "shop", "--variants", "after",
                              "--json").output)["toolsets"][0]["alias_problems"]
    assert [(p["line"], p["field"]) for p in found] == [(1, "get_inventory"),
                                                        (2, "find_product")]


def test_run_blames_aliases_yaml_not_the_cases_for_a_rename_to_no_tool(shop: Path):
    _bad_aliases(shop)
    ran = _bench("run", "--dataset", "shop", "--variants", "after", "--provider", "oracle")
    # bench.cli.main prints a BenchError as its one 'error:' line, exit code 2
    assert isinstance(ran.exception, BenchError), ran.output
    said = str(ran.exception)
    assert "aliases.yaml:1: field 'get_inventory': 'get_inventory' is renamed to " \
           "'get_stok', which is not a tool" in said
    assert "cases.jsonl" not in said


# -- aliases.yaml: a duplicate key, a circle ---------------------------------------------------


@pytest.mark.parametrize("text, fragment", [
    ("old: fine\nold: weird\n", "aliases.yaml:2: field 'old': 'old' is renamed twice"),
    ("a: b\nb: a\n", "aliases.yaml:1: field 'a': 'a' -> 'b' -> 'a' renames in a circle"),
])
def test_aliases_a_duplicate_key_or_a_circle_is_refused(tmp_path, text, fragment):
    from bench.descriptions.aliases import load_aliases

    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "aliases.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(BenchError, match=fragment):
        load_aliases("shop", tmp_path)
