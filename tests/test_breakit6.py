"""Hostile input for ``bench run``'s executors, ``bench optimize run``, recursive JSON Schema
references and the project commands (``bench init``, ``synth``, ``review --apply``, ``check``,
``variants draft/accept``): each test reproduces one defect found by feeding bad input and
asserts the fixed behaviour (one ``error:`` line naming the file or field, a non-zero exit,
no traceback, nothing useless or half-written left behind)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.importers.test_own_tools import bench  # the same subprocess runner


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    """Assert ``result`` failed with exit 2, no traceback; its ``error:`` lines."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors


TOOLS_PY = ('def add(a: int, b: int) -> int:\n'
            '    """Add two numbers. Use it when asked to add."""\n'
            '    return a + b\n')

ANSWER_PY = ('def answer(messages, tools, trial):\n'
             '    return [{"name": "add", "arguments": {"a": 1, "b": 2}}]\n')

CASE = {"id": "c1", "toolset": "proj", "lang": "en",
        "messages": [{"role": "user", "content": "add 1 and 2"}],
        "expected": {"calls": [{"name": "add", "arguments": {"a": [1], "b": [2]}}]}}


def python_project(tmp_path: Path) -> Path:
    """``bench init proj --python tools.py`` with one case and a scripted answer."""
    (tmp_path / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    made = bench(tmp_path, "init", "proj", "--python", "tools.py", "--writes", "add")
    assert made.returncode == 0, made.stderr
    project = tmp_path / "proj"
    (project / "datasets" / "proj" / "cases.jsonl").write_text(json.dumps(CASE) + "\n",
                                                                encoding="utf-8")
    (project / "ans.py").write_text(ANSWER_PY, encoding="utf-8")
    return project


def use_mcp_server(project: Path, server: list[str]) -> None:
    """Make the project's toolset execute on the MCP server ``server`` (argv)."""
    pyproject = project / "pyproject.toml"
    lines = []
    for line in pyproject.read_text(encoding="utf-8").splitlines():
        if line.startswith("execute ="):
            line = 'execute = "mcp"'
        elif line.startswith("module ="):
            line = f"server = {json.dumps(server)}"
        lines.append(line)
    pyproject.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(project: Path, run_id: str, *extra: str) -> subprocess.CompletedProcess:
    return bench(project, "run", "--dataset", "proj", "--variants", "current",
                 "--provider", "function:ans:answer", "--run-id", run_id, *extra)


# --- 1. an executor that does not start leaves no empty run folder ----------------------------

def test_a_tools_module_with_a_syntax_error_leaves_no_run_folder(tmp_path):
    project = python_project(tmp_path)
    (tmp_path / "tools.py").write_text(TOOLS_PY + "x = (\n", encoding="utf-8")
    result = run(project, "broken")
    assert "SyntaxError" in error_lines(result)[0]
    assert not (project / "reports" / "runs" / "broken").exists()


def test_an_mcp_command_that_does_not_exist_leaves_no_run_folder(tmp_path):
    project = python_project(tmp_path)
    use_mcp_server(project, [str(tmp_path / "no-such-server")])
    result = run(project, "broken")
    assert "failed to start" in error_lines(result)[0]
    assert not (project / "reports" / "runs" / "broken").exists()


def test_a_server_that_says_why_it_exits_keeps_its_log_and_says_how_to_go_on(tmp_path):
    project = python_project(tmp_path)
    use_mcp_server(project, [sys.executable, "-c",
                             "import sys; print('no licence key', file=sys.stderr); sys.exit(3)"])
    result = run(project, "broken")
    line = error_lines(result)[0]
    log = project / "reports" / "runs" / "broken" / "mcp-server-proj.log"
    assert "no licence key" in line and str(log) in line
    assert "bench run --resume broken" in line
    assert log.read_text(encoding="utf-8").strip() == "no licence key"


def test_a_run_folder_with_a_row_or_another_file_is_never_discarded(tmp_path):
    from bench.store import RunStore

    store = RunStore(tmp_path, "r")
    store.make_dir()
    store.manifest_path.write_text("{}", encoding="utf-8")
    store.results_path.write_text('{"key": "x"}\n', encoding="utf-8")
    assert not store.discard_if_empty() and store.results_path.is_file()
    store.results_path.write_text("", encoding="utf-8")
    (store.dir / "batches.json").write_text("{}", encoding="utf-8")
    assert not store.discard_if_empty() and store.dir.is_dir()
    (store.dir / "batches.json").unlink()
    assert store.discard_if_empty() and not store.dir.exists()


# --- 4. what an MCP server prints does not reach bench's terminal -----------------------------

RAW_SERVER = r'''
import json, sys, traceback
TOOL = {"name": "add", "description": "Add two numbers.", "inputSchema": {"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]}}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        try:
            1 / 0
        except ZeroDivisionError:
            traceback.print_exc()                    # on its stderr
            traceback.print_exc(file=sys.stdout)     # on its stdout: not JSON-RPC
            sys.stdout.flush()
        args = msg["params"]["arguments"]
        result = {"content": [{"type": "text", "text": str(args["a"] + args["b"])}],
                  "isError": False}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


@pytest.mark.parametrize("how", ["declared", "--execute-mcp"])
def test_a_servers_tracebacks_go_to_its_log_named_in_one_line(tmp_path, how):
    project = python_project(tmp_path)
    (project / "raw_server.py").write_text(RAW_SERVER, encoding="utf-8")
    server = [sys.executable, str(project / "raw_server.py")]
    if how == "declared":
        use_mcp_server(project, server)
        result = run(project, "tb")
        log = project / "reports" / "runs" / "tb" / "mcp-server-proj.log"
    else:
        result = run(project, "tb", "--execute-mcp", " ".join(server), "--allow-writes")
        log = project / "reports" / "runs" / "tb" / "mcp-server.log"
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert "ZeroDivisionError" not in result.stderr + result.stdout
    said = [line for line in result.stderr.splitlines() if "MCP server output" in line]
    assert said == [f"MCP server output (its stderr) in {log}"]
    text = log.read_text(encoding="utf-8")
    assert "ZeroDivisionError: division by zero" in text  # its stderr
    assert "input_value='Traceback (most recent call last):'" in text  # its stray stdout
    row = json.loads((project / "reports" / "runs" / "tb" / "results.jsonl").read_text())
    assert row["metrics"]["execution_success"] is True


# --- 2. bench optimize run: a bad provider leaves no optimization folder ----------------------

def split_project(tmp_path: Path) -> Path:
    """:func:`python_project` with four cases, two ``dev`` and two ``test``."""
    project = python_project(tmp_path)
    cases = [{**CASE, "id": f"c{i}", "split": "dev" if i % 2 else "test",
              "messages": [{"role": "user", "content": f"add 1 and 2, request {i}"}]}
             for i in range(4)]
    (project / "datasets" / "proj" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return project


@pytest.mark.parametrize("option, value, fragment", [
    ("--target", "nosuch:model", "target: unknown provider 'nosuch:model'"),
    ("--proposer", "nosuch", "proposer: unknown provider 'nosuch'"),
    ("--also-provider", "bad id", "also_provider: unknown provider 'bad id'"),
    ("--target", "function:no_such_module:answer", "cannot import 'no_such_module'"),
])
def test_optimize_with_a_bad_provider_leaves_no_folder(tmp_path, option, value, fragment):
    project = split_project(tmp_path)
    providers = {"--target": "function:ans:answer", "--proposer": "function:ans:answer",
                 option: value}
    result = bench(project, "optimize", "run", "proj", "--variant", "current",
                   *[arg for pair in providers.items() for arg in pair])
    assert fragment in error_lines(result)[0]
    assert not (project / "reports" / "optimize").exists()


# --- 3. a recursive $ref through a property -----------------------------------------------------

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


def _undefined_rules(gbnf: str) -> set[str]:
    """Rule names a GBNF grammar refers to but does not define."""
    import re
    defined, used = set(), set()
    for line in gbnf.splitlines():
        name, sep, body = line.partition("::=")
        if not sep:
            continue
        defined.add(name.strip())
        body = re.sub(r'"(\\.|[^"\\])*"', " ", body)       # literals
        body = re.sub(r"\[(\\.|[^\]\\])*\]", " ", body)     # character classes
        body = re.sub(r"\{[0-9, ]*\}", " ", body)           # repetition counts
        used.update(re.findall(r"[A-Za-z][A-Za-z0-9_-]*", body))
    return used - defined


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}},
     "required": ["name"]},
    {"type": "object", "$defs": {"tree_node": {
        "type": "object", "properties": {"x": {"type": "integer"},
                                         "kids": {"type": "array",
                                                  "items": {"$ref": "#/$defs/tree_node"}}}}},
     "properties": {"root": {"$ref": "#/$defs/tree_node"}}},
    TREE_SCHEMA,
], ids=["ref-to-root", "underscore-def-name", "property-recursion"])
def test_the_local_models_grammar_of_a_recursive_schema_defines_every_rule(schema):
    from bench.providers.local.prompt import grammar_schema, json_schema_grammar

    gbnf = json_schema_grammar(json.dumps(grammar_schema(schema)))
    assert _undefined_rules(gbnf) == set(), gbnf


# --- 5. bench init, bench review: hostile input ------------------------------------------------

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


SYNTH_ROW = {"id": "synth-proj-0001", "toolset": "proj", "lang": "en", "split": "dev",
             "messages": [{"role": "user", "content": "add 5 and 7 \u202e\x1b[31m please"}],
             "expected": {"calls": [{"name": "add", "arguments": {"a": [5], "b": [7]}}]},
             "tags": ["synth", "simple"],
             "provenance": {"generator": "function:gen:generator", "template": "single.j2",
                            "template_sha256": "0" * 64, "prompt_sha256": "0" * 64,
                            "seed": 1234, "run_id": "synth-gen-x",
                            "verdicts": {"format": "pass", "unsolvable": "pass"}}}


def synth_project(tmp_path: Path) -> tuple[Path, Path]:
    """:func:`python_project` with a generated dataset ``proj-synth`` of one unreviewed case;
    returns the project and the dataset file."""
    project = python_project(tmp_path)
    folder = project / "datasets" / "proj-synth"
    folder.mkdir()
    (folder / "cases.jsonl").write_text(json.dumps(SYNTH_ROW) + "\n", encoding="utf-8")
    return project, folder / "cases.jsonl"


def test_review_shows_a_generated_query_with_its_control_characters_escaped(tmp_path):
    project, _ = synth_project(tmp_path)
    shown = bench(project, "review", "proj-synth", "--decisions-out", "d.json")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout
    assert "add 5 and 7 \\u202e\\x1b[31m please" in shown.stdout


@pytest.mark.parametrize("decision, fragment", [
    ({"decision": "fix", "query": "  "}, "field 'decisions.0.query': the corrected query is "
                                         "empty"),
    ({"decision": "fix", "expected": {"calls": [{"name": "nosuch", "arguments": {}}]}},
     "field 'decisions.0.expected.calls.0.name'"),
    ({"id": "nope", "decision": "accept"}, "field 'decisions.0.id'"),
])
def test_review_apply_names_the_decisions_file_and_entry_and_writes_nothing(
        tmp_path, decision, fragment):
    project, cases = synth_project(tmp_path)
    before = cases.read_bytes()
    (project / "my decisions.json").write_text(json.dumps(
        {"dataset": str(cases), "decisions": [{"id": SYNTH_ROW["id"], **decision}]}))
    result = bench(project, "review", "proj-synth", "--apply", "my decisions.json")
    line = error_lines(result)[0]
    assert line.startswith("error: my decisions.json: ") and fragment in line, line
    assert cases.read_bytes() == before


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


@pytest.mark.parametrize("generator, solver, fragment", [
    ("nosuch", "function:gen:solver", "--generator: unknown provider 'nosuch'"),
    ("function:gen:generator", "nosuch:x", "--solver: unknown provider 'nosuch:x'"),
    ("function:gen:boom", "function:gen:solver", "RuntimeError: generator exploded"),
    ("function:no_such_module:x", "function:gen:solver", "cannot import 'no_such_module'"),
])
def test_synth_with_a_bad_generator_or_solver_leaves_no_folder(tmp_path, generator, solver,
                                                               fragment):
    project = python_project(tmp_path)
    (project / "gen.py").write_text(
        'def boom(messages, tools, trial):\n    raise RuntimeError("generator exploded")\n'
        'def generator(messages, tools, trial):\n    return []\n'
        'def solver(messages, tools, trial):\n    return []\n')
    result = bench(project, "synth", "--toolset", "proj", "--generator", generator,
                   "--solver", solver, "--solver-trials", "2", "--kinds", "single",
                   "--count", "1", "--dataset", "mine")
    assert fragment in error_lines(result)[0]
    assert not (project / "reports" / "synth").exists()
    assert not (project / "datasets" / "mine").exists()


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


@pytest.mark.parametrize("block, fragment", [
    ("variants:\n  l3: just a string\n", "field 'variants.l3'"),
    ("variants: [1, 2]\n", "field 'variants'"),
])
def test_variants_draft_on_a_spec_with_a_malformed_variants_block_is_one_line(
        tmp_path, block, fragment):
    project = python_project(tmp_path)
    (project / "drafter.py").write_text(
        'def draft(messages, tools, trial):\n'
        '    return {"tool_calls": [], "text": "Adds two numbers."}\n')
    spec = project / "descriptions" / "proj" / "specs" / "add.yaml"
    text = spec.read_text(encoding="utf-8") + block
    spec.write_text(text, encoding="utf-8")
    result = bench(project, "variants", "draft", "--toolset", "proj", "--provider",
                   "function:drafter:draft", "--lengths", "3")
    line = error_lines(result)[0]
    assert line.startswith(f"error: {spec}:") and fragment in line, line
    assert spec.read_text(encoding="utf-8") == text  # nothing overwritten


@pytest.mark.parametrize("source, fragment", [
    ("import typing\n\ndef f(x: typing.Callable[[int], int]) -> int:\n    \"\"\"F.\"\"\"\n"
     "    return 1\n", ":3: function 'f': its type hints have no JSON Schema"),
    ("def f(*args) -> int:\n    \"\"\"F.\"\"\"\n    return 1\n",
     ":1: function 'f': parameter 'args' is *args"),
])
def test_a_python_tool_without_a_schema_names_its_file_and_line(tmp_path, source, fragment):
    folder = tmp_path / "my tools"
    folder.mkdir()
    (folder / "mod é.py").write_text(source, encoding="utf-8")
    line = error_lines(bench(tmp_path, "init", "proj", "--python", "my tools/mod é.py"))[0]
    assert line.startswith(f"error: {folder / 'mod é.py'}{fragment}"), line
    assert not (tmp_path / "proj").exists()


def test_init_in_a_folder_whose_name_cannot_name_a_toolset_says_to_give_name(tmp_path):
    (tmp_path / "tools.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "a", "description": "Do a.", "parameters": {"type": "object"}}}]))
    line = error_lines(bench(tmp_path, "init", "my proj é", "--tools", "tools.json"))[0]
    assert "invalid toolset name 'my proj é'" in line and "--name NAME" in line, line
    made = bench(tmp_path, "init", "my proj é", "--tools", "tools.json", "--name", "mine")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "my proj é" / "datasets" / "mine" / "cases.jsonl").is_file()


@pytest.mark.parametrize("args", [
    ["check", "--update", "--toolset", "../.."],
    ["variants", "accept", "--toolset", "../proj"],
    ["variants", "--toolset", "../descriptions/proj"],
])
def test_a_toolset_name_that_is_a_path_writes_nothing_outside_descriptions(tmp_path, args):
    project = python_project(tmp_path)
    before = sorted(p for p in tmp_path.rglob("*") if "__pycache__" not in p.parts)
    line = error_lines(bench(project, *args))[0]
    assert f"unknown toolset '{args[-1]}' (known: proj)" in line, line
    assert sorted(p for p in tmp_path.rglob("*") if "__pycache__" not in p.parts) == before


@pytest.mark.parametrize("old, new, fragment", [
    ("timeout_s = 10.0", "timeout_s = -1", "field 'tool.bench.toolsets.proj.timeout_s'"),
    ("writes = [\"add\"]", "writes = \"add\"", "field 'tool.bench.toolsets.proj.writes'"),
    ("module = ", "module = \"no_such_module_here\"\n# ",
     "field 'tool.bench.toolsets.proj.module': cannot import module"),
])
def test_invalid_toolset_settings_leave_no_run_folder(tmp_path, old, new, fragment):
    project = python_project(tmp_path)
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    assert old in text
    pyproject.write_text(text.replace(old, new, 1), encoding="utf-8")
    line = error_lines(run(project, "broken"))[0]
    assert line.startswith(f"error: {pyproject}: ") and fragment in line, line
    assert not (project / "reports" / "runs" / "broken").exists()
