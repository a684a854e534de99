"""bench variants diff: per-tool changes, and the labels a change breaks ("ASC" -> "asc")."""

from __future__ import annotations

import pytest
import json

import yaml

from bench.descriptions.diff import diff_variants
from bench.models import Tool
from tests.importers.test_own_tools import bench, python_project


def _tool(name="query_sales", description="Query sales.\nUse it for revenue questions.",
          **schema_changes):
    props = {"sort": {"type": "string", "enum": ["ASC", "DESC"]},
             "limit": {"type": "integer", "minimum": 1, "maximum": 100},
             "region": {"type": "string"}}
    schema = {"type": "object", "properties": props, "required": ["sort"]}
    for key, value in schema_changes.items():
        schema[key] = value
    return Tool(name=name, description=description, input_schema=schema)


def _write_toolset(project, variants: dict[str, list[Tool]], cases: list[dict]) -> None:
    for name, tools in variants.items():
        path = project / "descriptions" / "shop" / "variants" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"tools": [t.model_dump() for t in tools]}),
                        encoding="utf-8")
    folder = project / "datasets" / "shop"
    folder.mkdir(parents=True)
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases),
                                        encoding="utf-8")


def _case(case_id, sort):
    return {"id": case_id, "toolset": "shop", "lang": "en",
            "messages": [{"role": "user", "content": "top sales"}],
            "expected": {"calls": [{"name": "query_sales",
                                    "arguments": {"sort": [sort], "limit": [10, None]}}]}}


@pytest.mark.slow
def test_enum_case_change_is_caught_with_the_broken_cases(run_bench, project):
    before = _tool()
    after_props = dict(before.input_schema["properties"],
                       sort={"type": "string", "enum": ["asc", "desc"]})
    after = _tool(properties=after_props)
    _write_toolset(project, {"before": [before], "after": [after]},
                   [_case("s-1", "ASC"), _case("s-2", "DESC")])
    result = run_bench("variants", "diff", "before", "after", "--toolset", "shop")
    assert result.returncode == 1, result.stderr
    assert "enum_removed" in result.stdout and "only the case changed: 'ASC' -> 'asc'" in \
        result.stdout
    assert "s-1" in result.stdout and "s-2" in result.stdout
    assert "2 newly invalid" in result.stdout

    as_json = run_bench("variants", "diff", "before", "after", "--toolset", "shop", "--json")
    data = json.loads(as_json.stdout)
    kinds = {c["kind"] for c in data["tools"][0]["changes"]}
    assert {"enum_removed", "enum_added"} <= kinds
    assert sorted(b["case_id"] for b in data["broken_labels"] if b["new"]) == ["s-1", "s-2"]

    same = run_bench("variants", "diff", "before", "before", "--toolset", "shop")
    assert same.returncode == 0 and "0 tools changed" in same.stdout


def test_parameter_and_tool_level_changes():
    a = _tool()
    props = {"sort": {"type": "string", "enum": ["ASC", "DESC"]},
             "max_rows": {"type": "integer", "minimum": 1, "maximum": 500},  # renamed + bound
             "region": {"type": "integer"},                                    # type changed
             "currency": {"type": "string"}}                                   # added
    b = _tool(description="Query sales totals.\nUse it for revenue questions.",
              properties=props, required=["sort", "region"])
    changes = {(c.kind, c.param) for d in diff_variants([a], [b]) for c in d.changes}
    assert ("description", None) in changes
    assert ("param_added", "currency") in changes and ("param_added", "max_rows") in changes
    assert ("type", "region") in changes and ("required", "region") in changes
    # limit -> max_rows differ in bounds, so they are a removal and an addition, not a rename
    assert ("param_removed", "limit") in changes

    old = a.input_schema["properties"]
    c = _tool(properties={k: v for k, v in old.items() if k != "limit"} | {"n": old["limit"]})
    renamed = [ch for d in diff_variants([a], [c]) for ch in d.changes]
    assert [(ch.kind, ch.before, ch.after) for ch in renamed] == [("param_renamed", "limit", "n")]


def test_tool_rename_addition_and_removal():
    a = [_tool(), _tool(name="old_report", properties={"x": {"type": "string"}})]
    b = [_tool(name="sales_query"), _tool(name="new_tool", properties={"y": {"type": "number"}})]
    diffs = {d.name: [c.kind for c in d.changes] for d in diff_variants(a, b)}
    assert diffs == {"sales_query": ["tool_renamed"], "new_tool": ["tool_added"],
                     "old_report": ["tool_removed"]}


# -- control characters of a drafted description -----------------------------------------------


def test_variants_diff_shows_a_drafted_descriptions_control_characters_escaped(tmp_path):
    project = python_project(tmp_path)
    (project / "drafter.py").write_text(
        'def draft(messages, tools, trial):\n'
        '    return {"tool_calls": [], "text": "Adds \\x1b[2J two \\u202e numbers."}\n')
    drafted = bench(project, "variants", "draft", "--toolset", "proj", "--provider",
                    "function:drafter:draft", "--lengths", "3")
    # a draft with control characters is refused, the spec left as it was
    assert drafted.returncode == 1 and "control characters" in drafted.stdout
    assert "draft:" not in (project / "descriptions/proj/specs/add.yaml").read_text()
    # the same text written into the spec by hand is shown escaped
    spec = project / "descriptions/proj/specs/add.yaml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("summary: Add two numbers.",
                                 'summary: "Adds \\x1b[2J two \\u202e numbers."'),
                    encoding="utf-8")
    shown = bench(project, "variants", "diff", "current", "l3", "--toolset", "proj")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout
    assert "Adds \\x1b[2J two \\u202e numbers." in shown.stdout
