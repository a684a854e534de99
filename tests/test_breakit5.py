"""Hostile input for the features of ``bench init``, project toolsets, ``bench optimize``,
``bench check`` and per-tool figures: each test reproduces one defect found by feeding bad
input and asserts the fixed behaviour (one ``error:`` line naming the file or field, a
non-zero exit, no traceback; nothing written outside the project; a hung or exiting user
function does not take bench down with it)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.importers.test_own_tools import bench  # the same subprocess runner

from bench.errors import BenchError

REPO = Path(__file__).resolve().parents[1]


def one_error_line(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """Assert ``result`` failed with exit 2 and one ``error:`` line holding ``fragments``."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# --- Python tool functions: a hung function, sys.exit() --------------------------------------

def _python_backend(tmp_path: Path, source: str):
    from bench.executor.backends.python import PythonBackend
    from bench.importers.python_module import import_python

    (tmp_path / "hostile_tools.py").write_text(source, encoding="utf-8")
    _, tools = import_python("hostile_tools.py", base=tmp_path)
    return PythonBackend(tools)


def _context(timeout_s: float):
    from bench.executor.outcome import CallContext, RunContext

    return CallContext(call_id="c0", tool="t", attempt=0, run=RunContext(),
                       deadline=time.monotonic() + timeout_s)


def test_a_function_that_never_returns_times_out_on_a_daemon_thread(tmp_path):
    from bench.executor.outcome import ToolError

    backend = _python_backend(tmp_path, (
        "import threading\n\nSTOP = threading.Event()\n\n"
        "def forever(x: int) -> int:\n    \"\"\"Never returns.\"\"\"\n"
        "    STOP.wait()\n    return x\n"))
    handler = backend.handlers()["forever"]
    assert handler.cooperative  # the pipeline does not hand it to its (joined-at-exit) pool
    with pytest.raises(ToolError) as caught:
        handler.run({"x": 1}, _context(0.2))
    assert caught.value.error_class == "timeout"
    hung = [t for t in threading.enumerate() if t.name == "tool-forever"]
    assert hung and all(t.daemon for t in hung)  # it cannot keep the interpreter alive
    sys.modules["bench_tools_hostile_tools"].STOP.set()


def test_a_function_calling_sys_exit_fails_its_call_not_bench(tmp_path):
    from bench.executor.outcome import ToolError

    backend = _python_backend(tmp_path, (
        "import sys\n\ndef leave(x: int) -> int:\n    \"\"\"Exits.\"\"\"\n    sys.exit(3)\n"))
    with pytest.raises(ToolError) as caught:
        backend.call("leave", {"x": 1}, _context(5))
    assert (caught.value.error_class, caught.value.code) == ("permanent", "tool_error")
    assert "SystemExit" in str(caught.value)


# --- JSON documents: deep nesting, huge integers, NaN ----------------------------------------

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


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[1" + "0" * 5000 + "]"])
def test_a_hostile_manifest_baseline_and_lock_are_one_line(tmp_path, text):
    from bench.descriptions.lock import read_lock
    from bench.gate.core import load_baseline
    from bench.store import RunStore

    (tmp_path / "lock.json").write_text(text, encoding="utf-8")
    with pytest.raises(BenchError, match="lock.json"):
        read_lock(tmp_path / "lock.json")
    (tmp_path / "baseline.json").write_text(text, encoding="utf-8")
    with pytest.raises(BenchError, match="baseline.json"):
        load_baseline(tmp_path / "baseline.json")
    store = RunStore(tmp_path / "runs", "r1")
    store.dir.mkdir(parents=True)
    store.manifest_path.write_text(text, encoding="utf-8")
    with pytest.raises(BenchError, match="manifest.json"):
        store.load_manifest()


# --- bench check: a corrupt lock ---------------------------------------------------------------

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


# --- bench init --python: a module that exits, a bad __all__, a model without a schema ---------

@pytest.mark.parametrize("source, fragment", [
    ("import sys\nsys.exit(0)\n", "importing it failed: SystemExit: 0"),
    ("raise SystemExit('bye')\n", "importing it failed: SystemExit: bye"),
    ("__all__ = 5\n", "__all__ must be a list of names"),
    ("__all__ = [1]\n", "__all__ must be a list of names"),
    ("from pydantic import BaseModel, ConfigDict\n\nclass Thing:\n    pass\n\n"
     "class M(BaseModel):\n    \"\"\"A model.\"\"\"\n"
     "    model_config = ConfigDict(arbitrary_types_allowed=True)\n    t: Thing\n",
     "model 'M': it has no JSON Schema"),
])
def test_a_hostile_python_module_is_one_line(tmp_path, source, fragment):
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    result = bench(tmp_path, "init", "proj", "--python", "mod.py")
    one_error_line(result, fragment)
    assert not (tmp_path / "proj").exists()


# --- bench init --mcp: a server that prints on stdout; the import's --timeout -----------------

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


# --- tool names: a mapped name is not a duplicate; control characters never reach a terminal ---

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


# --- bench optimize: a corrupt config.json or result.json -------------------------------------

@pytest.mark.parametrize("text, fragment", [('{"x":', "config.json:1: the optimization's "
                                                      "config is not valid JSON"),
                                            ("[1]", "must be a JSON object")])
def test_a_corrupt_optimization_config_is_one_error_not_a_traceback(tmp_path, text, fragment):
    from bench.optimize.config import OptimizeConfig
    from bench.optimize.workspace import Workspace
    from bench.project import Project

    workspace = Workspace(Project(tmp_path), "o1", "shop")
    workspace.root.mkdir(parents=True)
    (workspace.root / "config.json").write_text(text, encoding="utf-8")
    config = OptimizeConfig(dataset="shop", variant="l3", target="oracle", proposer="oracle")
    with pytest.raises(BenchError, match=fragment):
        workspace.prepare(config)
    assert (workspace.root / "config.json").read_text(encoding="utf-8") == text  # kept


def test_a_result_json_missing_a_field_names_it(tmp_path):
    from bench.optimize.output import load_result

    (tmp_path / "result.json").write_text("{}", encoding="utf-8")
    with pytest.raises(BenchError, match="field 'opt_id': not an optimization result"):
        load_result(tmp_path)


# --- [tool.bench.toolsets.<name>]: writes naming a tool the toolset does not have -------------

def test_writes_naming_an_unknown_tool_is_refused_naming_the_field(tmp_path):
    (tmp_path / "tools.py").write_text(
        "def add_note(title: str) -> str:\n    \"\"\"Add a note.\"\"\"\n    return title\n",
        encoding="utf-8")
    made = bench(tmp_path, "init", "proj", "--python", "tools.py", "--writes", "add_note")
    assert made.returncode == 0, made.stderr
    root = tmp_path / "proj"
    (root / "datasets" / "proj" / "cases.jsonl").write_text(json.dumps({
        "id": "c1", "toolset": "proj", "lang": "en",
        "messages": [{"role": "user", "content": "note milk"}],
        "expected": {"calls": [{"name": "add_note", "arguments": {"title": ["milk"]}}]}}) + "\n",
        encoding="utf-8")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8").replace(
        'writes = ["add_note"]', 'writes = ["add_notes"]'), encoding="utf-8")
    result = bench(root, "run", "--dataset", "proj", "--variants", "current", "--split", "all",
                   "--provider", "oracle", "--run-id", "r1")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert ("pyproject.toml: field 'tool.bench.toolsets.proj.writes': writes names "
            "'add_notes', not a tool of this toolset (tools: add_note)") in result.stderr


# --- YAML: a recursive alias, deep nesting ---------------------------------------------------

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


# --- aliases.yaml: a duplicate key, a circle ---------------------------------------------------

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


# --- bench show --per-tool: a model's tool name with control characters ------------------------

def test_per_tool_tables_escape_control_characters_of_a_called_name():
    import io

    import pandas as pd
    from rich.console import Console

    from bench.report.pertool import per_tool_rich_tables

    evil = "\x1b]0;pwned\x07[/x]evil"
    frame = pd.DataFrame({"case_id": ["c1", "c2"], "provider": "p", "variant": "l10",
                          "expected_tools": [("a",), ("a",)],
                          "predicted_tools": [(evil,), ("a",)],
                          "expected_kind": ["calls", "calls"]})
    buffer = io.StringIO()
    console = Console(file=buffer, width=300, force_terminal=False)
    for table in per_tool_rich_tables(frame, ["l10"], {}, set()):
        console.print(table)
    text = buffer.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07[/x]evil" in text  # shown, escaped, not read as markup


# --- bench variants draft / accept: a spec that is not YAML -----------------------------------

def test_variants_draft_and_accept_with_a_broken_spec_are_one_line(tmp_path):
    root = _tools_project(tmp_path)
    (root / "drafter.py").write_text(
        "def draft(messages, tools, trial):\n"
        "    return {'tool_calls': [], 'text': 'Read one note by its id.'}\n", encoding="utf-8")
    spec = root / "descriptions" / "proj" / "specs" / "get_note.yaml"
    spec.write_text("name: get_note\n  bad: [\n", encoding="utf-8")
    drafted = bench(root, "variants", "draft", "-p", "function:drafter:draft", "--toolset",
                    "proj", "--lengths", "3")
    one_error_line(drafted, "get_note.yaml:2: invalid YAML")
    one_error_line(bench(root, "variants", "accept", "--toolset", "proj"),
                   "get_note.yaml:2: invalid YAML")
    assert spec.read_text(encoding="utf-8") == "name: get_note\n  bad: [\n"  # kept
