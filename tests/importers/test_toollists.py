"""OpenAI / Anthropic tool lists and a live MCP server become hand-written variants."""

from __future__ import annotations

import pytest
import json
import sys
from pathlib import Path

from bench.descriptions import load_variant
from conftest import REPO
from tests.importers.test_own_tools import bench, error_lines, one_error_line

TESTS = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "description": "Query."}},
          "required": ["q"]}


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_openai_chat_and_responses_shapes(run_bench, project, tmp_path):
    tools = [{"type": "function", "function": {"name": "find.docs", "description": "Find docs.",
                                               "parameters": SCHEMA, "strict": False}},
             {"type": "function", "name": "查找", "description": "中文描述",
              "parameters": SCHEMA},
             {"type": "web_search"}]
    result = run_bench("import", "openai", str(_write(tmp_path / "my-tools.json",
                                                      {"tools": tools})))
    assert result.returncode == 0, result.stderr
    assert "skipped a built-in tool of type 'web_search'" in result.stdout
    variant = load_variant("my-tools", "current")
    assert [t.name for t in variant.tools] == ["find_docs", "__"]
    assert variant.tools[0].input_schema == SCHEMA  # 'strict' is a request option, dropped
    assert variant.tools[1].description == "中文描述"


def test_anthropic_list(run_bench, project, tmp_path):
    tools = [{"name": "get_stock", "description": "Stock level of a product.",
              "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}},
             {"type": "web_search_20250305", "name": "web_search"}]
    result = run_bench("import", "anthropic", str(_write(tmp_path / "t.json", tools)),
                       "--name", "stock", "--variant", "v1")
    assert result.returncode == 0, result.stderr
    variant = load_variant("stock", "v1")
    assert [(t.name, t.description) for t in variant.tools] == [
        ("get_stock", "Stock level of a product.")]


def test_invalid_schema_is_a_one_line_error(run_bench, tmp_path):
    bad = [{"name": "x", "description": "d", "input_schema": {
        "type": "object", "properties": {"n": {"type": "integr"}}}}]
    result = run_bench("import", "anthropic", str(_write(tmp_path / "bad.json", bad)))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "tool 0" in result.stderr and "properties.n.type" in result.stderr


@pytest.mark.slow
def test_mcp_server_tools_become_a_variant(run_bench, project):
    result = run_bench("import", "mcp", "--name", "mcpshop", "--",
                       sys.executable, str(TESTS / "mcp_server.py"), timeout=120)
    assert result.returncode == 0, result.stderr
    variant = load_variant("mcpshop", "current")
    tools = {t.name: t for t in variant.tools}
    assert set(tools) == {"search_orders", "ship_to", "store_hours"}
    sort = tools["search_orders"].input_schema["properties"]["sort"]
    assert sort["enum"] == ["asc", "desc"] and sort["default"] == "desc"
    limit = tools["search_orders"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 50)
    assert tools["search_orders"].description.splitlines()[1].startswith("without")
    assert "$defs" in tools["ship_to"].input_schema  # nested model kept as the server sent it
    assert sys.executable not in (project / "descriptions/mcpshop/variants/current.yaml") \
        .read_text()  # only the program name is recorded


@pytest.mark.slow
def test_mcp_server_that_dies_is_a_one_line_error(run_bench):
    result = run_bench("import", "mcp", "--name", "dead", "--timeout", "20", "--",
                       sys.executable, "-c", "import sys; sys.exit(3)", timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len([l for l in result.stderr.splitlines() if l.strip()]) == 1


# -- hostile tools files and servers of bench init: one error line -----------------------------


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested deeper than the JSON decoder's limit"),
    ('[{"type": "function", "function": {"name": "a", "parameters": {"type": "object", '
     '"maximum": 1' + "0" * 5000 + "}}}]", "4300 digits"),
    ('[{"type": "function", "function": {"name": "a", "parameters": {"type": "object", '
     '"properties": {"n": {"type": "number", "maximum": NaN}}}}}]', "NaN is not a JSON value"),
])
def test_a_hostile_tools_file_is_one_line(tmp_path, text, fragment):
    (tmp_path / "tools.json").write_text(text, encoding="utf-8")
    result = bench(tmp_path, "init", "proj", "--tools", "tools.json", "--format", "openai")
    one_error_line(result, "tools.json", fragment)
    assert not (tmp_path / "proj").exists()


def test_a_server_printing_on_stdout_is_one_line_within_the_given_timeout(tmp_path):
    (tmp_path / "chatty.py").write_text(
        "import sys, time\nprint('hello this is not json', flush=True)\ntime.sleep(60)\n",
        encoding="utf-8")
    result = bench(tmp_path, "init", "proj", "--mcp", f"{sys.executable} chatty.py",
                   "--timeout", "1", timeout=50)
    one_error_line(result, "did not answer tools/list within 1 s",
                   "not JSON-RPC (first: 'hello this is not json')")
    assert not (tmp_path / "proj").exists()


def test_stray_stdout_lines_before_a_working_server_are_a_note(tmp_path):
    server = REPO / "tests" / "mcp_server.py"
    (tmp_path / "noisy.py").write_text(
        f"import runpy\nprint('starting up', flush=True)\n"
        f"runpy.run_path({str(server)!r}, run_name='__main__')\n", encoding="utf-8")
    result = bench(tmp_path, "init", "proj", "--mcp", f"{sys.executable} noisy.py")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Failed to parse" not in result.stderr
    assert "not JSON-RPC (first: 'starting up')" in " ".join(result.stdout.split())


def test_a_name_equal_to_another_tools_mapped_name_is_renamed_not_a_duplicate(tmp_path):
    (tmp_path / "tools.json").write_text(json.dumps([
        {"type": "function", "function": {"name": n, "description": "x"}}
        for n in ("..", "__", "../../x")]), encoding="utf-8")
    result = bench(tmp_path, "init", "proj", "--tools", "tools.json")
    assert result.returncode == 0, result.stderr
    from bench.yamlio import load_yaml
    data, _ = load_yaml(tmp_path / "proj" / "descriptions" / "proj" / "variants" / "current.yaml")
    assert [t["name"] for t in data["tools"]] == ["__", "___2", "______x"]
    specs = sorted(p.name for p in (tmp_path / "proj" / "descriptions" / "proj" / "specs")
                   .iterdir())
    assert specs == ["__.yaml", "___2.yaml", "______x.yaml"]  # inside the project
    (tmp_path / "dup.json").write_text(json.dumps([
        {"type": "function", "function": {"name": "a"}}] * 2), encoding="utf-8")
    one_error_line(bench(tmp_path, "init", "proj2", "--tools", "dup.json"),
                   "tool 1: duplicate tool name 'a'")


def test_control_characters_of_a_tool_name_are_escaped_in_notes_and_errors(tmp_path):
    evil = "\x1b]0;pwned\x07\x1b[2J"
    (tmp_path / "tools.json").write_text(json.dumps([
        {"type": "function", "function": {"name": evil, "description": "x"}}]),
        encoding="utf-8")
    made = bench(tmp_path, "init", "proj", "--tools", "tools.json")
    assert made.returncode == 0, made.stderr
    assert "\x1b" not in made.stdout and "\\x1b]0;pwned\\x07" in made.stdout
    (tmp_path / "dup.json").write_text(json.dumps([
        {"type": "function", "function": {"name": evil, "description": "x"}}] * 2),
        encoding="utf-8")
    failed = bench(tmp_path, "init", "proj2", "--tools", "dup.json")
    assert "\x1b" not in failed.stderr
    one_error_line(failed, "duplicate tool name '\\x1b]0;pwned")


# -- recursive, boolean and deeply nested schemas ----------------------------------------------

TREE_SCHEMA = {"type": "object",
               "$defs": {"node": {"type": "object",
                                  "properties": {"label": {"type": "string"},
                                                 "child": {"$ref": "#/$defs/node"}},
                                  "required": ["label"]}},
               "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"]}

TREE_ANSWER_PY = '''
def answer(messages, tools, trial):
    node = {"label": "leaf"}
    for i in range(400):  # deeper than the parser keeps: an invalid call, not a crash
        node = {"label": str(i), "child": node}
    if "deep" in messages[-1].content:
        return [{"name": "make_tree", "arguments": {"root": node}}]
    return [{"name": "make_tree", "arguments": {"root": {"label": "a", "child": {"label": 3}}}}]
'''


def test_a_recursive_ref_through_a_property_imports_lints_runs_and_reports(tmp_path):
    (tmp_path / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "make_tree", "description": "Make a tree of nodes. Use it to build a tree.",
        "parameters": TREE_SCHEMA}}]), encoding="utf-8")
    made = bench(tmp_path, "init", "proj", "--tools", "tools.json")
    assert made.returncode == 0, made.stderr
    project = tmp_path / "proj"
    cases = [{"id": f"t{i}", "toolset": "proj", "lang": "en",
              "messages": [{"role": "user", "content": text}],
              "expected": {"calls": [{"name": "make_tree", "arguments": {
                  "root": [{"label": "a", "child": {"label": "b"}}]}}]}}
             for i, text in enumerate(["build a tree a > b", "build a deep tree"])]
    (project / "datasets" / "proj" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    (project / "ans.py").write_text(TREE_ANSWER_PY, encoding="utf-8")
    for args in (["lint", "--toolset", "proj"], ["variants", "--toolset", "proj"],
                 ["check", "--update"],
                 ["run", "--dataset", "proj", "--variants", "current,l10,l50", "--provider",
                  "function:ans:answer", "--run-id", "tree"],
                 ["report", "tree"]):
        result = bench(project, *args)
        assert "Traceback" not in result.stderr + result.stdout, (args, result.stderr)
        assert "RecursionError" not in result.stderr + result.stdout, (args, result.stderr)
        assert result.returncode in (0, 1), (args, result.returncode, result.stderr)
    rows = [json.loads(line) for line in
            (project / "reports" / "runs" / "tree" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and not any(r["metrics"]["schema_valid"] for r in rows)
    assert (project / "reports" / "tree" / "index.html").stat().st_size > 0


def test_init_with_a_boolean_property_schema_scaffolds_renders_and_runs(tmp_path):
    # JSON Schema 2020-12 section 4.3.2: true and false are schemas ("anything", "nothing")
    (tmp_path / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "a", "description": "Do a. Use it when asked.",
        "parameters": {"type": "object", "properties": {"x": True, "y": False,
                                                        "z": {"type": "string"}},
                       "required": ["x"]}}}]), encoding="utf-8")
    made = bench(tmp_path, "init", "proj", "--tools", "tools.json")
    assert made.returncode == 0 and "Traceback" not in made.stderr, made.stderr
    project = tmp_path / "proj"
    assert '"x": ["..."]' in (project / "datasets" / "proj" / "README.md").read_text()
    (project / "datasets" / "proj" / "cases.jsonl").write_text(json.dumps(
        {"id": "t1", "toolset": "proj", "lang": "en",
         "messages": [{"role": "user", "content": "do a"}],
         "expected": {"calls": [{"name": "a", "arguments": {"x": [1]}}]}}) + "\n")
    (project / "ans.py").write_text('def answer(messages, tools, trial):\n'
                                    '    return [{"name": "a", "arguments": {"x": 1}}]\n')
    for args in (["variants", "--toolset", "proj"], ["check", "--update"],
                 ["variants", "diff", "current", "l50", "--toolset", "proj"],
                 ["run", "--dataset", "proj", "--variants", "current,l50", "--provider",
                  "function:ans:answer", "--run-id", "r"]):
        result = bench(project, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)


def _nested_schema(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_schema_nested_too_deep_is_one_line_in_init_and_in_a_variant(tmp_path):
    (tmp_path / "deep.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "deep", "description": "Deep.", "parameters": _nested_schema(300)}}]))
    line = error_lines(bench(tmp_path, "init", "proj", "--tools", "deep.json"))[0]
    assert "tool 'deep': the input schema is nested deeper than 64 levels" in line
    assert not (tmp_path / "proj").exists()
    # 31 levels (63 containers) is within the limit and goes through
    (tmp_path / "ok.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "deep", "description": "Deep. Use it when deep.",
        "parameters": _nested_schema(31)}}]))
    made = bench(tmp_path, "init", "proj", "--tools", "ok.json")
    assert made.returncode == 0, made.stderr
    variant = tmp_path / "proj" / "descriptions" / "proj" / "variants" / "deep.yaml"
    variant.write_text(json.dumps({"tools": [{"name": "deep", "description": "Deep.",
                                              "input_schema": _nested_schema(300)}]}))
    for args in (["variants", "--toolset", "proj"], ["check"],
                 ["variants", "diff", "current", "deep", "--toolset", "proj"]):
        line = error_lines(bench(tmp_path / "proj", *args))[0]
        assert f"{variant}:1: field 'tools.0.input_schema': the input schema is nested " \
               "deeper than 64 levels" in line, (args, line)


# -- bench init in a folder whose name cannot name a toolset -----------------------------------


def test_init_in_a_folder_whose_name_cannot_name_a_toolset_says_to_give_name(tmp_path):
    (tmp_path / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "a", "description": "Do a.", "parameters": {"type": "object"}}}]))
    line = error_lines(bench(tmp_path, "init", "my proj é", "--tools", "tools.json"))[0]
    assert "invalid toolset name 'my proj é'" in line and "--name NAME" in line, line
    made = bench(tmp_path, "init", "my proj é", "--tools", "tools.json", "--name", "mine")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "my proj é" / "datasets" / "mine" / "cases.jsonl").is_file()
