"""Your own tools: ``bench init`` from an MCP server (stdio and Streamable HTTP), a tools JSON
file (OpenAI, Anthropic, Gemini) and a Python module, then runs that execute the calls on the
real server or functions (per-call timeouts, classified errors, per-tool write allowance), or
declare no-execute mode, and say in the table and the report what was not run or refused.
The model is a ``function:`` provider (a scripted answerer written into the project)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.descriptions import available_variants, load_variant
from bench.errors import BenchError

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
CALENDAR = TESTS / "data" / "own_tools" / "calendar_tools.py"
EXEC_SERVER = TESTS / "mcp_exec_server.py"
SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "description": "Query."}},
          "required": ["q"]}


def flat(text: str) -> str:
    """``text`` with each run of whitespace one space: notes wrap at the terminal's width."""
    return " ".join(text.split())


def bench(cwd: Path, *args: str, timeout: float = 300,
          extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m bench ARGS`` in ``cwd`` (the project), this checkout's code, ``python`` on
    PATH being this interpreter, ``extra_env`` added to the environment."""
    env = {**os.environ, "COLUMNS": "200",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": str(REPO) + os.pathsep + str(cwd), **(extra_env or {})}
    env.pop("BENCH_HOME", None)
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def write_cases(root: Path, toolset: str, cases: list[dict]) -> None:
    lines = [json.dumps({"toolset": toolset, "lang": "en", **case}) for case in cases]
    (root / "datasets" / toolset / "cases.jsonl").write_text("\n".join(lines) + "\n",
                                                              encoding="utf-8")


def write_answers(root: Path, rules: dict[str, list[dict]]) -> None:
    """A scripted answerer: the first rule whose key is in the user's text gives the calls."""
    (root / "answers.py").write_text(
        "import json\n\nRULES = json.loads(" + repr(json.dumps(rules)) + ")\n\n"
        "def answer(messages, tools, trial):\n"
        "    text = messages[-1].content\n"
        "    return next((calls for key, calls in RULES.items() if key in text), [])\n",
        encoding="utf-8")


def rows(root: Path, run_id: str) -> dict[tuple[str, str], dict]:
    found = {}
    for line in (root / "reports" / "runs" / run_id / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        found[(row["case_id"], row["variant"])] = row["metrics"]
    return found


def manifest(root: Path, run_id: str) -> dict:
    return json.loads((root / "reports" / "runs" / run_id / "manifest.json").read_text())


# -- bench init from each source ---------------------------------------------------------


def test_init_from_a_python_module(tmp_path):
    root = tmp_path / "cal"
    result = bench(tmp_path, "init", "cal", "--python", str(CALENDAR),
                   "--read-only", "list_events,get_event,slow_lookup")
    assert result.returncode == 0, result.stderr
    assert "imported 5 tools" in result.stdout
    assert "writes refused for create_event" in result.stdout
    specs = sorted(p.stem for p in (root / "descriptions/cal/specs").glob("*.yaml"))
    assert specs == ["FindRoom", "create_event", "get_event", "list_events", "slow_lookup"]
    current = load_variant("cal", "current", root / "descriptions")
    tools = {t.name: t for t in current.tools}
    # docstring -> description without its Args section; the Args text -> the properties
    assert tools["list_events"].description.startswith("List the events of one day")
    assert "Args:" not in tools["list_events"].description
    day = tools["list_events"].input_schema["properties"]["day"]
    assert day == {"description": "The date, YYYY-MM-DD.", "type": "string"}
    length = tools["create_event"].input_schema["properties"]["length_min"]
    assert (length["minimum"], length["maximum"], length["default"]) == (15, 480, 30)
    assert tools["create_event"].input_schema["$defs"]["Attendee"]["required"] == ["email"]
    # pydantic's generated titles ("title": "Title") removed, the 'title' parameter kept
    dumped = json.dumps(tools["create_event"].input_schema)
    assert '"title": "' not in dumped and '"title": {' in dumped
    assert (tools["list_events"].permission, tools["create_event"].permission) == \
        ("read", "write")
    # the built-in templates render the specs: l3..l50 without a copy of them
    assert available_variants("cal", root / "descriptions") == \
        ["l3", "l10", "l30", "l50", "current"]
    l10 = load_variant("cal", "l10", root / "descriptions").tool("list_events")
    assert "Use it when the user asks what is planned on a date." in l10.description
    assert "Returns: The events, each with id, title, day and room." in l10.description
    # the settings and the gate parse
    from bench.gate.config import load_gate_config
    from bench.toolset_config import load_toolset_settings
    settings = load_toolset_settings(root)["cal"]
    assert (settings.execute, settings.writes) == ("python", [])
    assert load_gate_config(root / "pyproject.toml").dataset == "cal"
    # the dataset skeleton: empty, its datasheet shows a case that fits the tools
    assert (root / "datasets/cal/cases.jsonl").read_text() == ""
    sheet = (root / "datasets/cal/README.md").read_text()
    example = next(line for line in sheet.splitlines() if line.startswith('{"id": "cal-0001"'))
    from bench.models import Case
    Case.model_validate(json.loads(example))


@pytest.mark.parametrize("fmt, data", [
    ("openai", [{"type": "function", "function": {
        "name": "find_docs", "description": "Find documents. Use it when the user asks for a "
        "document.\n\nReturns: matching titles.", "parameters": SCHEMA}}]),
    ("anthropic", [{"name": "find_docs", "description": "Find documents.",
                    "input_schema": SCHEMA}]),
    ("gemini", {"functionDeclarations": [{"name": "find_docs", "description": "Find documents.",
                                          "parameters": {"type": "OBJECT", "properties": {
                                              "q": {"type": "STRING", "description": "Query.",
                                                    "nullable": True}},
                                              "required": ["q"]}}]}),
])
def test_init_from_a_tools_file_detects_its_format(tmp_path, fmt, data):
    source = tmp_path / f"{fmt}.json"
    source.write_text(json.dumps(data), encoding="utf-8")
    result = bench(tmp_path, "init", "proj", "--tools", str(source), "--name", "docs")
    assert result.returncode == 0, result.stderr
    assert f"the {fmt} file {fmt}.json" in result.stdout
    assert "execution: none (a tools file has no implementation to execute)" in result.stdout
    tool = load_variant("docs", "current", tmp_path / "proj" / "descriptions").tools[0]
    assert tool.name == "find_docs" and tool.description.startswith("Find documents.")
    q = tool.input_schema["properties"]["q"]
    assert q["type"] == (["string", "null"] if fmt == "gemini" else "string")
    if fmt == "openai":
        spec = (tmp_path / "proj/descriptions/docs/specs/find_docs.yaml").read_text()
        assert "when_to_use:\n- when the user asks for a document." in spec
        assert "returns: matching titles." in spec


def test_gemini_python_sdk_shape_and_its_schema_subset(tmp_path):
    from bench.importers.toollists import detect_format, import_tool_list
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"tools": [{"function_declarations": [{
        "name": "book", "description": "Book it.",
        "parameters": {"type": "OBJECT", "property_ordering": ["n"], "properties": {
            "n": {"type": "ARRAY", "items": {"type": "INTEGER"}, "min_items": "1"}}}}]},
        {"googleSearch": {}}]}), encoding="utf-8")
    assert detect_format(path) == "gemini"
    imported = import_tool_list(path, "gemini")
    assert imported.tools[0].input_schema == {
        "type": "object", "properties": {"n": {"type": "array", "items": {"type": "integer"},
                                               "minItems": 1}}}
    assert any("googleSearch" in note for note in imported.notes)


GH_TOKEN = "ghp_" + "Zx9Yw8Vu7T" * 3 + "s6R5q4"  # a GitHub token's shape, 36 characters


@pytest.mark.slow
def test_secrets_of_an_mcp_command_line_reach_pyproject_as_environment_references(
        tmp_path, monkeypatch):
    for name in ("GITHUB_TOKEN", "MCP_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "mcp"
    root.mkdir()
    # the server starts only with its secrets, as a real one would
    (root / "server.py").write_text(
        "import os, sys\n"
        f"if os.environ.get('GITHUB_TOKEN') != {GH_TOKEN!r} or sys.argv[2] != {GH_TOKEN!r} \\\n"
        f"        or sys.argv[-2:] != ['Bearer', {GH_TOKEN!r}] or sys.argv[4] != 'hunter2hunter2xyz':\n"
        "    sys.exit(f'wrong secrets: {sys.argv}')\n" + EXEC_SERVER.read_text(),
        encoding="utf-8")
    # the header unquoted: shlex splits it into '--header=Authorization:' 'Bearer' 'ghp_...'
    command = (f"env GITHUB_TOKEN={GH_TOKEN} python server.py --token {GH_TOKEN} --password "
               f"hunter2hunter2xyz --header=Authorization: Bearer {GH_TOKEN}")
    init = bench(root, "init", ".", "--mcp", command, "--name", "mcp")
    assert init.returncode == 0, init.stderr
    from bench.toolset_config import load_toolset_settings
    assert load_toolset_settings(root)["mcp"].server == [
        "env", "GITHUB_TOKEN=${GITHUB_TOKEN}", "python", "server.py", "--token",
        "${GITHUB_TOKEN}", "--password", "${MCP_PASSWORD}", "--header=Authorization:",
        "Bearer", "${GITHUB_TOKEN}"]
    assert "export GITHUB_TOKEN, MCP_PASSWORD (their values) before bench run" in \
        flat(init.stdout)
    for path in root.rglob("*"):
        if path.is_file() and path.name != "server.py":
            data = path.read_bytes()
            assert GH_TOKEN.encode() not in data and b"hunter2hunter2xyz" not in data, path
    _mcp_cases(root)
    args = ("run", "--dataset", "mcp", "--variants", "current", "--cases", "m1", "--provider",
            "function:answers:answer")
    unset = bench(root, *args, "--run-id", "r0")
    assert unset.returncode == 2 and "Traceback" not in unset.stderr, unset.stderr
    assert "the environment variable GITHUB_TOKEN is not set" in flat(unset.stderr)
    run = bench(root, *args, "--run-id", "r1",
                extra_env={"GITHUB_TOKEN": GH_TOKEN, "MCP_PASSWORD": "hunter2hunter2xyz"})
    assert run.returncode == 0, run.stderr
    assert rows(root, "r1")[("m1", "current")]["execution_success"] is True


def test_an_unset_variable_named_by_the_mcp_command_line_is_one_line(tmp_path):
    result = bench(tmp_path, "init", "p", "--mcp", "python server.py --token ${NOT_SET_TOKEN}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--mcp names ${NOT_SET_TOKEN} but the environment variable NOT_SET_TOKEN is not " \
           "set" in flat(result.stderr)
    assert not (tmp_path / "p").exists()


def test_init_needs_exactly_one_source_and_keeps_existing_files(tmp_path):
    none = bench(tmp_path, "init", "p")
    assert none.returncode == 2 and "give one source" in none.stderr
    assert bench(tmp_path, "init", "p", "--python", str(CALENDAR)).returncode == 0
    again = bench(tmp_path, "init", "p", "--python", str(CALENDAR))
    assert again.returncode == 2 and "already exist" in again.stderr and "--force" in again.stderr


USER_PYPROJECT = """\
[project]
name = "mine"          # the user's comment
version = "0.1"

[tool.ruff]
line-length = 88
"""


def _tools_file(folder: Path, n: int = 1) -> Path:
    source = folder / "tools.json"
    source.write_text(json.dumps([{"name": f"find_docs_{i}", "description": "Find documents.",
                                   "input_schema": SCHEMA} for i in range(n)]),
                      encoding="utf-8")
    return source


def test_init_adds_its_tables_to_the_users_pyproject_and_keeps_their_readme(tmp_path):
    from bench.gate.config import load_gate_config
    from bench.toolset_config import load_toolset_settings
    source = _tools_file(tmp_path)
    root = tmp_path / "mine"
    root.mkdir()
    (root / "pyproject.toml").write_text(USER_PYPROJECT, encoding="utf-8")
    (root / "README.md").write_text("# Mine\n\nMy own words.\n", encoding="utf-8")
    for args in ((), ("--force",)):  # a second init replaces bench's tables, nothing else
        init = bench(root, "init", ".", "--tools", str(source), "--name", "docs", *args)
        assert init.returncode == 0, init.stderr
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
        assert text.startswith(USER_PYPROJECT + "\n# bench project `docs`")
        assert text.count("\n[tool.bench.toolsets.docs]\n") == 1 == \
            text.count("\n[tool.bench.gate]\n") == text.count("made by `bench init`")
        assert load_toolset_settings(root)["docs"].execute == "none"
        assert load_gate_config(root / "pyproject.toml").dataset == "docs"
        assert (root / "README.md").read_text(encoding="utf-8") == "# Mine\n\nMy own words.\n"
        guide = (root / "BENCH.md").read_text(encoding="utf-8")
        assert guide.startswith("# bench project")
        assert ": 1 tool\n(find_docs_0)" in guide  # not "1 tools"
        assert "README.md is yours (kept): bench's guide is BENCH.md" in flat(init.stdout)
        assert "follow BENCH.md" in flat(init.stdout)


def test_init_refuses_bench_files_without_force_and_force_replaces_only_those(tmp_path):
    source = _tools_file(tmp_path)
    root = tmp_path / "p"
    assert bench(tmp_path, "init", "p", "--tools", str(source)).returncode == 0
    again = bench(tmp_path, "init", "p", "--tools", str(source))
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "of an earlier bench init already exist here" in flat(again.stderr)
    assert "--force replaces bench's files (your own files, your cases" in flat(again.stderr)
    # the user's cases and their own datasheet survive --force
    case = json.dumps({"id": "p-1", "toolset": "p", "lang": "en", "messages": [
        {"role": "user", "content": "docs?"}], "expected": {"no_call": True}}) + "\n"
    (root / "datasets/p/cases.jsonl").write_text(case, encoding="utf-8")
    (root / "datasets/p/README.md").write_text("# Our labels\n", encoding="utf-8")
    forced = bench(tmp_path, "init", "p", "--tools", str(source), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (root / "datasets/p/cases.jsonl").read_text(encoding="utf-8") == case
    assert (root / "datasets/p/README.md").read_text(encoding="utf-8") == "# Our labels\n"
    assert "datasets/p/cases.jsonl: kept (it holds your cases)" in flat(forced.stdout)
    # a variant bench did not write is never replaced, --force or not
    current = root / "descriptions/p/variants/current.yaml"
    current.write_text("tools: []\n", encoding="utf-8")
    refused = bench(tmp_path, "init", "p", "--tools", str(source), "--force")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "exists and bench init did not write it" in flat(refused.stderr)
    assert current.read_text(encoding="utf-8") == "tools: []\n"


DRAFTED = {"l10": {"description": "Find documents by words; a reviewed text.", "draft": False,
                   "drafted_by": "oracle", "drafted_from": "current sha256:0123456789ab",
                   "reviewed_at": "2026-01-02T03:04:05Z"},
           "l30": {"description": "Find documents; a draft not yet reviewed.", "draft": True,
                   "drafted_by": "oracle", "drafted_from": "current sha256:0123456789ab"}}


def test_init_force_keeps_reviewed_variant_texts_the_gate_and_the_users_settings(tmp_path):
    import tomllib

    import yaml

    from bench.descriptions.specs import load_spec
    source = _tools_file(tmp_path)
    root = tmp_path / "p"
    assert bench(tmp_path, "init", "p", "--tools", str(source)).returncode == 0
    spec = root / "descriptions/p/specs/find_docs_0.yaml"
    spec.write_text(spec.read_text(encoding="utf-8")
                    + yaml.safe_dump({"variants": DRAFTED}, sort_keys=False), encoding="utf-8")
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    # what bench baseline update and the user wrote: floors, a metric, a setting of their own
    text = text.replace('metrics = ["selection_correct", "arguments_correct"]',
                        'metrics = ["selection_correct"]\nfloors = {selection_correct = 0.8}')
    text = text.replace("timeout_s = 10.0", 'timeout_s = 30.0\nerror_pattern = "^Error"')
    pyproject.write_text(text, encoding="utf-8")
    gate = tomllib.loads(text)["tool"]["bench"]["gate"]
    # the server's description changed: that is why one imports again
    source.write_text(source.read_text().replace("Find documents.", "Find documents fast."))
    forced = bench(tmp_path, "init", "p", "--tools", str(source), "--force")
    assert forced.returncode == 0, forced.stderr
    assert yaml.safe_load(spec.read_text())["variants"] == DRAFTED
    assert load_spec(spec).summary == "Find documents fast."
    after = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["bench"]
    assert after["gate"] == gate
    assert (after["toolsets"]["p"]["error_pattern"], after["toolsets"]["p"]["timeout_s"]) == \
        ("^Error", 30.0)
    notes = flat(forced.stdout)
    assert ("note: pyproject.toml: replaced [tool.bench.toolsets.p]; its [tool.bench.gate] is "
            "kept as it was (it gates dataset 'p'); the rest of the file is as it was") in notes
    assert "note: pyproject.toml [tool.bench.toolsets.p]: kept error_pattern, timeout_s" in notes
    assert ("note: descriptions/p/specs/find_docs_0.yaml: rewritten from the import; its "
            "variants l10 (accepted), l30 (draft) kept; summary replaced by the import's (the "
            "earlier text is not kept)") in notes


def test_init_force_refuses_a_spec_whose_variants_it_cannot_keep(tmp_path):
    source = _tools_file(tmp_path)
    root = tmp_path / "p"
    assert bench(tmp_path, "init", "p", "--tools", str(source)).returncode == 0
    spec = root / "descriptions/p/specs/find_docs_0.yaml"
    broken = spec.read_text(encoding="utf-8") + "variants:\n  l10:\n    text: mine\n"
    spec.write_text(broken, encoding="utf-8")
    forced = bench(tmp_path, "init", "p", "--tools", str(source), "--force")
    assert forced.returncode == 2 and "Traceback" not in forced.stderr, forced.stderr
    assert flat(forced.stderr).startswith(
        f"error: {spec}: field 'variants.l10': not a valid variant")
    assert spec.read_text(encoding="utf-8") == broken


def test_every_file_init_writes_says_bench_wrote_it(tmp_path):
    # --force finds its own files by this mark: a file without it would be refused
    from bench.importers.init_files import bench_wrote
    assert bench(tmp_path, "init", "p", "--python", str(CALENDAR)).returncode == 0
    written = [p for p in (tmp_path / "p").rglob("*") if p.is_file() and p.stat().st_size]
    assert len(written) == 9 and all(bench_wrote(p) for p in written), written


@pytest.mark.parametrize("existing", [False, True])
def test_a_killed_init_leaves_no_half_project(tmp_path, existing):
    import signal
    source = _tools_file(tmp_path, 60)
    root = tmp_path / "p"
    if existing:
        root.mkdir()
        (root / "pyproject.toml").write_text(USER_PYPROJECT, encoding="utf-8")
    # SIGKILL by the init itself after 20 of its 64 files: kill -9 at a known point
    killed = bench(tmp_path, "init", "p", "--tools", str(source),
                   extra_env={"BENCH_INIT_KILL_AFTER": "20"})
    assert killed.returncode == -signal.SIGKILL
    if existing:
        assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == \
            ["pyproject.toml"]
        assert (root / "pyproject.toml").read_text(encoding="utf-8") == USER_PYPROJECT
    else:
        assert not root.exists()
    assert [p for p in tmp_path.rglob("*.tmp")] == []
    # the next init needs no --force and removes what the killed one staged
    again = bench(tmp_path, "init", "p", "--tools", str(source))
    assert again.returncode == 0, again.stderr
    assert len(list((root / "descriptions/p/specs").iterdir())) == 60
    assert [p.name for p in [*tmp_path.iterdir(), *root.iterdir()]
            if "bench-init" in p.name] == []


def test_python_docstring_styles():
    from bench.importers.python_module import split_docstring
    google = "Do it.\n\nArgs:\n    a (int): First\n        line two.\n    b: Second.\n\n" \
             "Returns:\n    Done."
    assert split_docstring(google) == ("Do it.\n\nReturns:\n    Done.",
                                       {"a": "First line two.", "b": "Second."})
    numpy = "Do it.\n\nParameters\n----------\na : int\n    First.\n\nReturns\n-------\nx"
    text, params = split_docstring(numpy)
    assert params == {"a": "First."} and text.startswith("Do it.") and "Returns" in text
    sphinx = "Do it.\n:param a: First.\n:type a: int\n:returns: x"
    assert split_docstring(sphinx)[1] == {"a": "First."}


# -- execution on the user's own tools -----------------------------------------------------

CAL_CASES = [
    {"id": "c1", "messages": [{"role": "user", "content": "What is planned on 2026-03-02?"}],
     "expected": {"calls": [{"name": "list_events", "arguments": {"day": ["2026-03-02"],
                                                                  "room": [None]}}]}},
    {"id": "c2", "messages": [{"role": "user", "content": "Please create Lunch on 2026-03-04"}],
     "expected": {"calls": [{"name": "create_event", "arguments": {
         "title": ["Lunch"], "day": ["2026-03-04"]}}]}},
    {"id": "c3", "messages": [{"role": "user", "content": "slow lookup of EV1"}],
     "expected": {"calls": [{"name": "slow_lookup", "arguments": {"event_id": ["EV1"]}}]}},
    {"id": "c4", "messages": [{"role": "user", "content": "Show EV404"}],
     "expected": {"calls": [{"name": "get_event", "arguments": {"event_id": ["EV404"]}}]}},
    {"id": "c5", "messages": [{"role": "user", "content": "Find a room for 4"}],
     "expected": {"calls": [{"name": "FindRoom", "arguments": {"seats": [4]}}]}},
    {"id": "c6", "messages": [{"role": "user", "content": "Tell me a joke"}],
     "expected": {"no_call": True}},
]
CAL_ANSWERS = {
    "planned": [{"name": "list_events", "arguments": {"day": "2026-03-02"}}],
    "create": [{"name": "create_event", "arguments": {"title": "Lunch", "day": "2026-03-04"}}],
    "slow": [{"name": "slow_lookup", "arguments": {"event_id": "EV1"}}],
    "EV404": [{"name": "get_event", "arguments": {"event_id": "EV404"}}],
    "room": [{"name": "FindRoom", "arguments": {"seats": 4}}],
}


@pytest.mark.slow
def test_python_functions_execute_with_timeouts_classified_errors_and_refused_writes(tmp_path):
    root = tmp_path / "cal"
    assert bench(tmp_path, "init", "cal", "--python", str(CALENDAR), "--timeout", "1",
                 "--read-only", "list_events,get_event,slow_lookup").returncode == 0
    write_cases(root, "cal", CAL_CASES)
    write_answers(root, CAL_ANSWERS)
    run = bench(root, "run", "--dataset", "cal", "--variants", "current", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    got = rows(root, "r1")
    assert got[("c1", "current")]["execution_success"] is True
    # the user's functions never run a label: no recording, no reset, no exec match
    assert got[("c1", "current")]["execution_match"] is None
    # a refused write is the run's policy, not an execution failure: left out, counted apart
    assert got[("c2", "current")]["execution_success"] is None
    assert got[("c2", "current")]["write_refused"] is True
    assert got[("c1", "current")]["write_refused"] is False
    assert got[("c3", "current")]["execution_success"] is False  # timed out (see traces)
    assert got[("c4", "current")]["execution_errors"] == {"permanent": 1}  # KeyError: not_found
    assert got[("c5", "current")]["execution_success"] is None  # schema-only: not run
    assert manifest(root, "r1")["execution"]["cal"]["mode"] == "python"
    # the table says which write was refused and how to allow it
    assert "write calls refused" in flat(run.stdout) and "create_event 1" in flat(run.stdout)
    assert 'writes = ["create_event"] under [tool.bench.toolsets.cal]' in flat(run.stdout)
    from bench.executor.traces import read_traces
    traces = read_traces(root / "reports/runs/r1/traces.jsonl")
    codes = {r.tool: r.error_code for r in traces if r.final}
    assert codes["get_event"] == "not_found" and codes["create_event"] == "permission_denied"
    # the 1 s per-call timeout stopped the 30 s function (then its circuit breaker opened)
    slow = [r for r in traces if r.tool == "slow_lookup"]
    assert slow[0].error_code == "timeout" and slow[0].duration_ms < 20_000
    # the HTML report says it too
    assert bench(root, "report", "r1").returncode == 0
    page = (root / "reports" / "r1" / "index.html").read_text(encoding="utf-8")
    assert "Execution:</strong> write calls refused" in page
    # the user allows that one write: it runs
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("writes = []",
                                                       'writes = ["create_event"]'))
    again = bench(root, "run", "--dataset", "cal", "--variants", "current", "--cases", "c2",
                  "--provider", "function:answers:answer", "--run-id", "r2")
    assert again.returncode == 0, again.stderr
    assert rows(root, "r2")[("c2", "current")]["execution_success"] is True
    assert "write calls refused" not in flat(again.stdout)
    assert manifest(root, "r2")["execution"]["cal"]["writes"] == ["create_event"]


@pytest.mark.slow
def test_a_tools_file_runs_in_declared_no_execute_mode_and_says_so(tmp_path):
    source = tmp_path / "t.json"
    source.write_text(json.dumps([{"name": "find_docs", "description": "Find documents.",
                                   "input_schema": SCHEMA}]), encoding="utf-8")
    assert bench(tmp_path, "init", "docs", "--tools", str(source)).returncode == 0
    root = tmp_path / "docs"
    write_cases(root, "docs", [{"id": "d1", "messages": [{"role": "user", "content": "docs?"}],
                                "expected": {"calls": [{"name": "find_docs",
                                                        "arguments": {"q": ["x"]}}]}}])
    write_answers(root, {"docs": [{"name": "find_docs", "arguments": {"q": "x"}}]})
    run = bench(root, "run", "--dataset", "docs", "--variants", "current,l3", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    assert rows(root, "r1")[("d1", "current")]["execution_success"] is None
    assert rows(root, "r1")[("d1", "current")]["selection_correct"] is True
    assert "calls of toolset 'docs' were not executed (no-execute mode: a tools file has no " \
           "implementation to execute)" in flat(run.stdout)
    # a project with one dataset: bench run takes it without --dataset; its README says how
    # to label free text
    default = bench(root, "run", "--variants", "current", "--provider",
                    "function:answers:answer", "--run-id", "r-default")
    assert default.returncode == 0, default.stderr
    assert manifest(root, "r-default")["config"]["dataset"] == "docs"
    assert '"$regex"' in (root / "datasets" / "docs" / "README.md").read_text(encoding="utf-8")
    assert bench(root, "report", "r1").returncode == 0
    page = (root / "reports" / "r1" / "index.html").read_text(encoding="utf-8")
    assert "calls of toolset &#39;docs&#39; were not executed" in page


def _mcp_cases(root: Path) -> None:
    write_cases(root, "mcp", [
        {"id": "m1", "messages": [{"role": "user", "content": "add 2 and 40"}],
         "expected": {"calls": [{"name": "add", "arguments": {"a": [2], "b": [40]}}]}},
        {"id": "m2", "messages": [{"role": "user", "content": "where is Atlantis"}],
         "expected": {"calls": [{"name": "lookup_city", "arguments": {"city": ["Atlantis"]}}]}},
        {"id": "m3", "messages": [{"role": "user", "content": "wipe it all"}],
         "expected": {"calls": [{"name": "delete_everything",
                                 "arguments": {"confirm": [True]}}]}}])
    write_answers(root, {"add": [{"name": "add", "arguments": {"a": 2, "b": 40}}],
                         "Atlantis": [{"name": "lookup_city", "arguments": {"city": "Atlantis"}}],
                         "wipe": [{"name": "delete_everything", "arguments": {"confirm": True}}]})


@pytest.mark.slow
def test_init_and_run_on_a_stdio_mcp_server(tmp_path):
    root = tmp_path / "mcp"
    root.mkdir()
    (root / "server.py").write_text(EXEC_SERVER.read_text(), encoding="utf-8")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "mcp")
    assert init.returncode == 0, init.stderr
    tools = {t.name: t for t in load_variant("mcp", "current", root / "descriptions").tools}
    assert (tools["add"].permission, tools["delete_everything"].permission) == ("read", "write")
    _mcp_cases(root)
    run = bench(root, "run", "--dataset", "mcp", "--variants", "current", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    got = rows(root, "r1")
    assert got[("m1", "current")]["execution_success"] is True
    assert got[("m1", "current")]["execution_match_skipped"] == "not_recorded"
    assert got[("m2", "current")]["execution_errors"] == {"permanent": 1}  # the tool's error
    assert got[("m3", "current")]["execution_success"] is None  # refused: not a failure
    assert got[("m3", "current")]["write_refused"] is True
    assert "delete_everything 1" in flat(run.stdout)
    assert manifest(root, "r1")["execution"]["mcp"]["detail"].startswith("MCP server python")


@pytest.mark.slow
def test_a_server_that_exits_during_a_call_is_restarted_and_only_that_call_fails(tmp_path):
    """crash ends the MCP server (os._exit(3)): its rows fail with server_exited, echo and
    with_default run on the restarted server in both variants, and the table says the
    server exited twice during calls of crash; with max_restarts = 1 the second exit stops
    the run with one line naming the toolset and the server's log."""
    root = tmp_path / "crashy"
    root.mkdir()
    (root / "server.py").write_text((TESTS / "mcp_crash_server.py").read_text(),
                                    encoding="utf-8")
    assert bench(root, "init", ".", "--mcp", "python server.py", "--name", "crashy"
                 ).returncode == 0
    write_cases(root, "crashy", [
        {"id": name, "messages": [{"role": "user", "content": f"{name} hi"}],
         "expected": {"calls": [{"name": name, "arguments": {"x": ["hi"]}}]}}
        for name in ("crash", "echo", "with_default")])
    write_answers(root, {name: [{"name": name, "arguments": {"x": "hi"}}]
                         for name in ("crash", "echo", "with_default")})
    run = bench(root, "run", "--dataset", "crashy", "--variants", "current,l10",
                "--provider", "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    got = rows(root, "r1")
    assert {key: (m["execution_success"], m["execution_errors"]) for key, m in got.items()} \
        == {(case, variant): (False, {"server_exited": 1}) if case == "crash" else (True, {})
            for case in ("crash", "echo", "with_default") for variant in ("current", "l10")}
    log = root / "reports" / "runs" / "r1" / "mcp-server-crashy.log"
    assert ("note: the MCP server of toolset 'crashy' exited 2 times (during calls of "
            "crash); restarted") in flat(run.stdout)
    assert f"its stderr: {log}" in flat(run.stdout)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("writes = []",
                                                       "writes = []\nmax_restarts = 1"))
    stopped = bench(root, "run", "--dataset", "crashy", "--variants", "current,l10",
                    "--provider", "function:answers:answer", "--run-id", "r2")
    assert stopped.returncode == 2
    log = root / "reports" / "runs" / "r2" / "mcp-server-crashy.log"
    assert (f"error: the MCP server of toolset 'crashy' exited 2 times (during calls of "
            f"crash); bench restarted it 1 time, its limit for one run (max_restarts), and "
            f"stopped: fix what ends it (its stderr: {log})") in flat(stopped.stderr)
    assert "Traceback" not in stopped.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def http_server():
    """tests/mcp_exec_server.py over Streamable HTTP on a loopback port."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, str(EXEC_SERVER), "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    else:
        process.kill()
        pytest.fail("the MCP HTTP server did not start")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


@pytest.mark.slow
def test_init_and_run_on_a_streamable_http_mcp_server(tmp_path, http_server):
    init = bench(tmp_path, "init", "mcp", "--mcp", http_server, "--writes",
                 "delete_everything")
    assert init.returncode == 0, init.stderr
    root = tmp_path / "mcp"
    assert f'server = "{http_server}"' in (root / "pyproject.toml").read_text()
    _mcp_cases(root)
    run = bench(root, "run", "--dataset", "mcp", "--variants", "current", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    got = rows(root, "r1")
    assert got[("m1", "current")]["execution_match_skipped"] == "not_recorded"
    assert got[("m3", "current")]["execution_success"] is True  # allowed by --writes
    assert "write calls refused" not in flat(run.stdout)


def test_an_unreachable_http_server_is_one_line(tmp_path):
    result = bench(tmp_path, "init", "p", "--mcp", f"http://127.0.0.1:{_free_port()}/mcp",
                   "--timeout", "5")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "MCP server 'http://127.0.0.1" in result.stderr


def test_toolset_settings_errors_name_the_field(tmp_path):
    from bench.toolset_config import load_toolset_settings
    (tmp_path / "pyproject.toml").write_text('[tool.bench.toolsets.x]\nexecute = "mcp"\n')
    with pytest.raises(BenchError, match=r"tool\.bench\.toolsets\.x.*needs server"):
        load_toolset_settings(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.bench.toolsets.x]\nexecute = "python"\nmodule = "m.py"\nwrites = "a"\n')
    with pytest.raises(BenchError, match=r"tool\.bench\.toolsets\.x\.writes"):
        load_toolset_settings(tmp_path)


@pytest.mark.parametrize("value", ['"shapes"', '3', '{ignore = "x"}', '{ignor = ["x"]}',
                                   '{ignore = []}'])
def test_a_bad_compare_entry_is_one_line_naming_the_tool(tmp_path, value):
    from bench.toolset_config import load_toolset_settings
    (tmp_path / "pyproject.toml").write_text(
        '[tool.bench.toolsets.x]\nexecute = "python"\nmodule = "m.py"\n'
        f'compare = {{now = "shape", list_items = {value}}}\n')
    with pytest.raises(BenchError) as raised:
        load_toolset_settings(tmp_path)
    said = str(raised.value)
    # the tool's field, without pydantic's union branch (literal[...]) in it
    assert "field 'tool.bench.toolsets.x.compare.list_items'" in said
    assert "literal" not in said and '{ignore = ["field", ...]}' in said


def test_compare_naming_an_unknown_tool_is_refused_naming_the_field(tmp_path):
    root = tmp_path / "items"
    root.mkdir()
    (root / "tools.py").write_text(ITEM_TOOLS, encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--name", "items").returncode == 0
    write_cases(root, "items", ITEM_CASES[:1])
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        "writes = []", 'writes = []\ncompare = {add_items = "shape"}'), encoding="utf-8")
    result = bench(root, "run", "--dataset", "items", "--variants", "current",
                   "--provider", "oracle", "--run-id", "typo")
    assert result.returncode == 2
    assert ("field 'tool.bench.toolsets.items.compare': compare names 'add_items', not a tool "
            "of this toolset (tools: add_item)") in flat(result.stderr)
    assert writes(root) == 0


def test_a_reset_whose_program_is_missing_names_it(tmp_path):
    from bench.executor.runhook import ResetCommand
    from bench.toolset_config import ToolsetSettings
    settings = ToolsetSettings(execute="python", module="m.py", reset=["no-such-reset-xyz"])
    reset = ResetCommand("x", settings, tmp_path, tmp_path / "reset.log")
    with pytest.raises(BenchError, match=r"^\[tool\.bench\.toolsets\.x\] reset could not "
                                         r"start 'no-such-reset-xyz': No such file"):
        reset()


def test_a_resets_log_never_keeps_the_token_its_command_was_given(tmp_path, monkeypatch):
    from bench.executor.runhook import ResetCommand
    from bench.toolset_config import ToolsetSettings
    token = "rst-tok-9f3k2q7x1"
    monkeypatch.setenv("RESET_TOKEN", token)
    settings = ToolsetSettings(execute="python", module="m.py", reset=[
        sys.executable, "-c", "import sys; print('seeding with', sys.argv[1])",
        "${RESET_TOKEN}"])
    log = tmp_path / "reset.log"
    ResetCommand("x", settings, tmp_path, log)()
    text = log.read_text()
    assert "seeding with" in text
    assert token not in text


def test_python_errors_are_classed_like_the_reference_executor():
    from bench.executor.backends.python import classify_exception

    class Http(Exception):
        def __init__(self, status: int) -> None:
            self.status_code = status

    cases = {TimeoutError("t"): ("timeout", "timeout"),
             ConnectionResetError("r"): ("transient", "connection_error"),
             Http(429): ("rate_limited", "http_429"), Http(503): ("transient", "http_503"),
             Http(404): ("permanent", "http_404"), KeyError("k"): ("permanent", "not_found"),
             ValueError("v"): ("validation", "invalid_argument"),
             PermissionError("p"): ("permanent", "permission_denied"),
             RuntimeError("x"): ("permanent", "tool_error")}
    for exc, expected in cases.items():
        error = classify_exception(exc, "t")
        assert (error.error_class, error.code) == expected, exc


INTERRUPTING_TOOLS = '''\
import asyncio
import sys
import time


def interrupt(q: str) -> str:
    """Raise KeyboardInterrupt, as a tool that re-raises a caught Ctrl-C does.

    Args:
        q: Anything.
    """
    raise KeyboardInterrupt


async def cancel(q: str) -> str:
    """Raise CancelledError from a coroutine, as a tool whose task was cancelled does.

    Args:
        q: Anything.
    """
    raise asyncio.CancelledError("its task was cancelled")


def wait(q: str) -> str:
    """Say it started, then wait a minute.

    Args:
        q: Anything.
    """
    print("started", flush=True)
    time.sleep(60)
    return q
'''


def _interrupting_tools(tmp_path: Path):
    from bench.executor.backends.python import PythonBackend
    from bench.importers.python_module import import_python
    (tmp_path / "interrupting_tools.py").write_text(INTERRUPTING_TOOLS, encoding="utf-8")
    imported, tools = import_python(str(tmp_path / "interrupting_tools.py"))
    return imported.tools, PythonBackend(tools).handlers()


# an exception escaping a thread is a traceback on the terminal (pytest turns it into this
# warning): an error here
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("tool, raised", [("interrupt", "KeyboardInterrupt"),
                                          ("cancel", "CancelledError")])
def test_a_python_tool_raising_keyboardinterrupt_or_cancellederror_is_a_failed_call_in_one_line(
        tmp_path, tool, raised):
    from bench.executor.outcome import RunContext
    from bench.executor.pipeline import Executor
    from bench.models import ToolCall
    tools, handlers = _interrupting_tools(tmp_path)
    executor = Executor(lambda _toolset: handlers)
    try:
        outcome = executor.execute(ToolCall(id="c1", name=tool, arguments={"q": "x"}), tools,
                                   "own", RunContext(allow_writes=True))
    finally:
        executor.close()
    assert outcome.success is False
    assert (outcome.error_class, outcome.error_code) == ("permanent", "tool_error")
    assert raised in outcome.error and "\n" not in outcome.error


@pytest.mark.slow
def test_ctrl_c_of_the_user_still_stops_a_call_waiting_on_a_python_tool(tmp_path):
    (tmp_path / "interrupting_tools.py").write_text(INTERRUPTING_TOOLS, encoding="utf-8")
    script = (
        "import time\n"
        "from bench.executor.backends.python import PythonBackend\n"
        "from bench.executor.outcome import CallContext, RunContext\n"
        "from bench.importers.python_module import import_python\n"
        "_, tools = import_python('interrupting_tools.py')\n"
        "ctx = CallContext(call_id='c1', tool='wait', attempt=0, run=RunContext(),\n"
        "                  deadline=time.monotonic() + 600)\n"
        "PythonBackend(tools).call('wait', {'q': 'x'}, ctx)\n"
        "print('returned', flush=True)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "started"  # the tool runs in its thread
        child.send_signal(signal.SIGINT)  # the user's Ctrl-C reaches the main thread
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode != 0 and "returned" not in out
    assert err.strip().splitlines()[-1] == "KeyboardInterrupt"


# -- a toolset that answers its errors as text (error_pattern) -----------------------------

TEXT_ERROR_SERVER = TESTS / "mcp_text_errors_server.py"
TEXT_ERRORS = '^(Database error|Error):'
SHOP_CASES = [
    {"id": "s1", "messages": [{"role": "user", "content": "total of all orders"}],
     "expected": {"calls": [{"name": "read_query",
                             "arguments": {"query": ["SELECT SUM(total) FROM orders"]}}]}},
    {"id": "s2", "messages": [{"role": "user", "content": "how many orders"}],
     "expected": {"calls": [{"name": "read_query",
                             "arguments": {"query": ["SELECT COUNT(*) FROM orders"]}}]}}]


def _shop_db(root: Path) -> None:
    import sqlite3
    with sqlite3.connect(root / "shop.db") as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        db.executemany("INSERT INTO orders (total) VALUES (?)", [(10.0,), (32.0,)])


def _declare(root: Path, toolset: str, line: str) -> None:
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    assert f"[tool.bench.toolsets.{toolset}]\n" in text
    pyproject.write_text(text.replace(f"[tool.bench.toolsets.{toolset}]\n",
                                      f"[tool.bench.toolsets.{toolset}]\n{line}\n"),
                         encoding="utf-8")


@pytest.mark.slow
def test_an_mcp_servers_error_answered_as_text_fails_the_call_with_the_toolsets_error_pattern(
        tmp_path):
    root = tmp_path / "shop"
    root.mkdir()
    (root / "server.py").write_text(TEXT_ERROR_SERVER.read_text(), encoding="utf-8")
    _shop_db(root)
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "shop")
    assert init.returncode == 0, init.stderr
    write_cases(root, "shop", SHOP_CASES)
    # wrong SQL for s1 (no such column), right SQL for s2
    write_answers(root, {"total": [{"name": "read_query",
                                    "arguments": {"query": "SELECT SUM(amount) FROM orders"}}],
                         "how many": [{"name": "read_query",
                                       "arguments": {"query": "SELECT COUNT(*) FROM orders"}}]})
    trusted = bench(root, "run", "--dataset", "shop", "--variants", "current", "--provider",
                    "function:answers:answer", "--run-id", "trusted")
    assert trusted.returncode == 0, trusted.stderr
    # without error_pattern, exec success trusts isError: the text error is a success
    assert rows(root, "trusted")[("s1", "current")]["execution_success"] is True
    _declare(root, "shop", f"error_pattern = {json.dumps(TEXT_ERRORS)}")
    run = bench(root, "run", "--dataset", "shop", "--variants", "current", "--provider",
                "function:answers:answer", "--run-id", "declared")
    assert run.returncode == 0, run.stderr
    got = rows(root, "declared")
    assert got[("s1", "current")]["execution_success"] is False
    assert got[("s1", "current")]["execution_errors"] == {"permanent": 1}
    assert got[("s2", "current")]["execution_success"] is True
    from bench.executor.traces import read_traces
    final = {r.case_id: r for r in read_traces(root / "reports/runs/declared/traces.jsonl")
             if r.final}
    assert final["s1"].error_code == "tool_error" and final["s2"].error_code is None


PYTHON_TEXT_ERROR_TOOLS = '''\
def order_total(column: str) -> str:
    """Sum one column of the orders.

    Args:
        column: The column to sum.
    """
    if column != "total":
        return f"Error: no such column: {column}"
    return "42.0"
'''


def test_a_python_tools_error_returned_as_text_fails_the_call_with_the_toolsets_error_pattern(
        tmp_path):
    from bench.executor.outcome import RunContext
    from bench.executor.runhook import RunExecution
    from bench.importers.python_module import import_python
    from bench.models import ToolCall
    (tmp_path / "shop_tools.py").write_text(PYTHON_TEXT_ERROR_TOOLS, encoding="utf-8")
    imported, _ = import_python("shop_tools.py", base=tmp_path)
    table = '[tool.bench.toolsets.shop]\nexecute = "python"\nmodule = "shop_tools.py"\n'

    def outcome(column: str):
        execution = RunExecution(tmp_path / "run", "r", project_root=tmp_path,
                                 toolsets=["shop"])
        try:
            return execution.executor.execute(
                ToolCall(id="c1", name="order_total", arguments={"column": column}),
                imported.tools, "shop", RunContext(allow_writes=True))
        finally:
            execution.close()

    (tmp_path / "pyproject.toml").write_text(table, encoding="utf-8")
    assert outcome("amount").success is True  # no pattern: only an exception fails a call
    (tmp_path / "pyproject.toml").write_text(
        table + f"error_pattern = {json.dumps(TEXT_ERRORS)}\n", encoding="utf-8")
    failed = outcome("amount")
    assert failed.success is False
    assert (failed.error_class, failed.error_code) == ("permanent", "tool_error")
    assert failed.error == "Error: no such column: amount"
    right = outcome("total")
    assert right.success is True and right.data == "42.0"


ECHO_TOOLS = '''\
def echo(text: str) -> str:
    """Answer the text it is given.

    Args:
        text: The text.
    """
    return text
'''


def test_an_error_pattern_that_backtracks_on_a_result_fails_that_call_instead_of_hanging(
        tmp_path):
    """^(a|a)+$ backtracks exponentially on 'aaa...a!': searched without a time limit
    (Python re) the call ran on for seconds, minutes at 30 characters, and counted as a
    success when it ended. With error_pattern's 0.1 s limit per result, the call fails at
    once as a permanent error_pattern_timeout that says why; other results still match."""
    from bench.executor.outcome import RunContext
    from bench.executor.runhook import RunExecution
    from bench.importers.python_module import import_python
    from bench.models import ToolCall
    (tmp_path / "echo_tools.py").write_text(ECHO_TOOLS, encoding="utf-8")
    imported, _ = import_python("echo_tools.py", base=tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.bench.toolsets.echo]\nexecute = "python"\nmodule = "echo_tools.py"\n'
        "error_pattern = '^(a|a)+$'\n", encoding="utf-8")
    execution = RunExecution(tmp_path / "run", "r", project_root=tmp_path, toolsets=["echo"])
    try:
        slow, matched = (execution.executor.execute(
            ToolCall(id=text, name="echo", arguments={"text": text}), imported.tools, "echo",
            RunContext(allow_writes=True)) for text in ("a" * 24 + "!", "aaa"))
    finally:
        execution.close()
    assert (slow.success, slow.error_class, slow.error_code) == \
        (False, "permanent", "error_pattern_timeout")
    assert slow.error == ("error_pattern '^(a|a)+$' took longer than 0.1 s on this result (a "
                          "pattern that backtracks: simplify it); the call counts as failed")
    assert len(slow.attempts) == 1  # never retried: the same text would be searched again
    assert (matched.success, matched.error_code) == (False, "tool_error")


@pytest.mark.parametrize("pattern, said", [
    ('"^(Database error"', "is not a regular expression: missing ) at position 16"),
    ('""', "at least 1 character")])
def test_an_error_pattern_that_is_not_a_regular_expression_is_one_line_naming_the_field(
        tmp_path, pattern, said):
    from bench.toolset_config import load_toolset_settings
    (tmp_path / "pyproject.toml").write_text(
        '[tool.bench.toolsets.shop]\nexecute = "python"\nmodule = "m.py"\n'
        f'error_pattern = {pattern}\n', encoding="utf-8")
    with pytest.raises(BenchError) as raised:
        load_toolset_settings(tmp_path)
    message = str(raised.value)
    assert "field 'tool.bench.toolsets.shop.error_pattern'" in message and said in message
    assert "\n" not in message


# -- a label's calls never run on the user's system (docs/executor.md) ---------------------

ITEM_TOOLS = """\
from pathlib import Path


def add_item(title: str) -> dict:
    \"\"\"Add an item to the shopping list.

    Args:
        title: The item's title.
    \"\"\"
    with (Path(__file__).parent / "writes.log").open("a") as log:
        log.write(title + "\\n")
    return {"added": title}
"""
ITEM_CASES = [
    {"id": f"c{i}", "messages": [{"role": "user", "content": f"add {title} to my list"}],
     "expected": {"calls": [{"name": "add_item", "arguments": {"title": [title]}}]}}
    for i, title in enumerate(["milk", "eggs"], start=1)]


def writes(root: Path) -> int:
    log = root / "writes.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


#: add_item, but its first call for "eggs" kills bench (SIGKILL) once the item is written:
#: a kill -9 of ``bench labels record`` in the middle of a case, after its write ran.
KILLING_ITEM_TOOLS = ITEM_TOOLS.replace('    return {"added": title}', """\
    flag = Path(__file__).parent / "killed.flag"
    if title == "eggs" and not flag.exists():
        flag.write_text("once")
        import os
        import signal
        os.kill(os.getpid(), signal.SIGKILL)
    return {"added": title}""")


@pytest.mark.slow
def test_a_killed_labels_record_keeps_the_cases_recorded_and_never_runs_their_writes_again(
        tmp_path):
    """bench labels record killed (SIGKILL) while the second case's write runs: the first
    case's recording is in cases.jsonl already, so the next recording runs only the cases
    not recorded (milk is written once in all), saying the stopped case's write may have
    run; cases.jsonl stays whole throughout."""
    root = tmp_path / "items"
    root.mkdir()
    (root / "tools.py").write_text(KILLING_ITEM_TOOLS, encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--writes", "add_item",
                 "--name", "items").returncode == 0
    write_cases(root, "items", [
        {"id": f"c{i}", "messages": [{"role": "user", "content": f"add {title}"}],
         "expected": {"calls": [{"name": "add_item", "arguments": {"title": [title]}}]}}
        for i, title in enumerate(["milk", "eggs", "bread"], start=1)])
    cases = root / "datasets" / "items" / "cases.jsonl"

    def recorded() -> dict[str, list]:
        found = {}
        for line in cases.read_text(encoding="utf-8").splitlines():
            case = json.loads(line)  # every line whole: the file was never half written
            if case["expected"].get("recorded"):
                found[case["id"]] = [r["data"] for r in case["expected"]["recorded"]["results"]]
        return found
    killed = bench(root, "labels", "record", "items", "--yes")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (root / "writes.log").read_text().splitlines() == ["milk", "eggs"]
    assert recorded() == {"c1": [{"added": "milk"}]}
    again = bench(root, "labels", "record", "items", "--yes")
    assert again.returncode == 0, again.stderr
    said = flat(again.stdout)
    assert "skipped 1 case (c1): already recorded" in said
    assert ("note: the last bench labels record of this dataset stopped while case c2's "
            "label calls ran (add_item(title=\"eggs\")): they may have run once on your "
            "system already") in said
    assert (root / "writes.log").read_text().splitlines() == ["milk", "eggs", "eggs", "bread"]
    assert recorded() == {"c1": [{"added": "milk"}], "c2": [{"added": "eggs"}],
                          "c3": [{"added": "bread"}]}
    assert list((root / "reports" / "labels").glob("in-progress-*")) == []


COUNT_TOOLS = """\
def count_items(title: str) -> dict:
    \"\"\"Count the items of one title on the shopping list.

    Args:
        title: The item's title.
    \"\"\"
    return {"title": title, "count": 2}
"""


@pytest.mark.slow
def test_labels_record_of_calls_that_only_read_runs_without_asking(tmp_path):
    """No label calls a write tool: nothing to agree to, so no list, no question and no
    --yes needed where bench cannot ask (stdin is no terminal here)."""
    root = tmp_path / "items"
    root.mkdir()
    (root / "tools.py").write_text(COUNT_TOOLS, encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--read-only", "count_items",
                 "--name", "items").returncode == 0
    write_cases(root, "items", [
        {"id": "c1", "messages": [{"role": "user", "content": "how many milk?"}],
         "expected": {"calls": [{"name": "count_items", "arguments": {"title": ["milk"]}}]}}])
    recorded = bench(root, "labels", "record", "items")
    assert recorded.returncode == 0, recorded.stderr
    said = flat(recorded.stdout + recorded.stderr)
    assert "write call" not in said and "--yes" not in said and "Run them now" not in said
    case = json.loads((root / "datasets" / "items" / "cases.jsonl").read_text())
    assert [r["data"] for r in case["expected"]["recorded"]["results"]] == \
        [{"title": "milk", "count": 2}]


@pytest.mark.slow
def test_a_python_project_never_runs_a_labels_write_and_records_with_consent(tmp_path):
    root = tmp_path / "items"
    root.mkdir()
    (root / "tools.py").write_text(ITEM_TOOLS, encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--writes", "add_item",
                 "--name", "items").returncode == 0
    write_cases(root, "items", ITEM_CASES)
    write_answers(root, {})  # a silent model: no call at all
    silent = bench(root, "run", "--dataset", "items", "--variants", "current,l10",
                   "--provider", "function:answers:answer", "--run-id", "silent")
    assert silent.returncode == 0, silent.stderr
    assert writes(root) == 0  # bench made no call the model did not make
    oracle = bench(root, "run", "--dataset", "items", "--variants", "current,l10",
                   "--provider", "oracle", "--run-id", "oracle")
    assert oracle.returncode == 0, oracle.stderr
    assert writes(root) == 4  # the oracle's own calls: 2 cases x 2 variants, no label's
    got = rows(root, "oracle")
    assert all(m["execution_match"] is None and m["execution_match_skipped"] == "not_recorded"
               for m in got.values())
    said = flat(oracle.stdout)
    assert "state carried over between cases and variants: toolset 'items'" in said
    assert "exec match empty for 4 rows of toolset 'items'" in said
    assert "bench labels record" in said
    # recording needs consent: no terminal and no --yes is a refusal, nothing runs
    refused = bench(root, "labels", "record", "items")
    assert refused.returncode != 0 and "--yes" in refused.stderr
    assert "add_item(title=\"milk\")" in refused.stdout  # the write calls were listed
    assert writes(root) == 4
    recorded = bench(root, "labels", "record", "items", "--yes")
    assert recorded.returncode == 0, recorded.stderr
    assert writes(root) == 6  # each label once, on purpose
    again = bench(root, "run", "--dataset", "items", "--variants", "current,l10",
                  "--provider", "oracle", "--run-id", "oracle2")
    assert again.returncode == 0, again.stderr
    assert all(m["execution_match"] is True for m in rows(root, "oracle2").values())
    assert writes(root) == 10


@pytest.mark.slow
def test_a_recording_goes_stale_when_the_tools_input_schema_changes(tmp_path):
    root = tmp_path / "items"
    root.mkdir()
    (root / "tools.py").write_text(ITEM_TOOLS, encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--writes", "add_item",
                 "--name", "items").returncode == 0
    write_cases(root, "items", ITEM_CASES)
    recorded = bench(root, "labels", "record", "items", "--yes")
    assert recorded.returncode == 0, recorded.stderr
    assert "\"schema_sha256\"" in (root / "datasets" / "items" / "cases.jsonl").read_text()
    # the tool as the variant `current` shows it gains an argument; l10 (from the spec) not
    current = root / "descriptions" / "items" / "variants" / "current.yaml"
    current.write_text(current.read_text().replace(
        "    properties:\n", "    properties:\n      quantity:\n        type: integer\n"),
        encoding="utf-8")
    run = bench(root, "run", "--dataset", "items", "--variants", "current,l10",
                "--provider", "oracle", "--run-id", "changed")
    assert run.returncode == 0, run.stderr
    got = rows(root, "changed")
    assert all(got[(c, "current")]["execution_match_skipped"] == "recording_stale"
               for c in ("c1", "c2"))
    assert all(got[(c, "l10")]["execution_match"] is True for c in ("c1", "c2"))
    assert "input schema changed since its results were recorded" in flat(run.stdout)


@pytest.mark.slow
def test_a_run_from_before_labels_stopped_running_on_your_system_says_it_is_not_comparable(
        tmp_path):
    root = tmp_path / "items"
    root.mkdir()
    (root / "tools.py").write_text(ITEM_TOOLS, encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--writes", "add_item",
                 "--name", "items").returncode == 0
    write_cases(root, "items", ITEM_CASES)
    assert bench(root, "run", "--dataset", "items", "--variants", "current", "--provider",
                 "oracle", "--run-id", "new").returncode == 0
    fresh = bench(root, "show", "new")
    assert fresh.returncode == 0, fresh.stderr
    assert "not comparable" not in flat(fresh.stdout)
    # the manifest as the release before made it: no "labels" in its execution entry
    manifest = root / "reports" / "runs" / "new" / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["execution"]["items"]["labels"]
    manifest.write_text(json.dumps(data), encoding="utf-8")
    shown = bench(root, "show", "new")
    assert shown.returncode == 0, shown.stderr
    assert flat(shown.stdout).count("exec match of toolset 'items' is not comparable") == 1
    reported = bench(root, "report", "new")
    assert reported.returncode == 0, reported.stderr
    page = "".join(p.read_text() for p in (root / "reports" / "new").glob("*.html"))
    assert page.count("is not comparable with later runs") == 1


@pytest.mark.slow
def test_a_recorded_result_keeps_no_secret_and_still_matches(tmp_path):
    """A tool whose result holds a key and a password: bench labels record stores it
    redacted (cases.jsonl is committed), and the model's same result still matches it."""
    root = tmp_path / "keys"
    root.mkdir()
    key = "sk-proj-" + "Ab1" * 10
    (root / "tools.py").write_text(
        "def get_config(name: str) -> dict:\n"
        "    \"\"\"Read a service's configuration.\n\n    Args:\n"
        "        name: The service.\n    \"\"\"\n"
        f"    return {{\"service\": name, \"api\": {{\"token\": \"{key}\", "
        "\"password\": \"hunter2hunter2\"}, \"auth\": [\"Bearer abc.DEF-123_xyz\"]}\n",
        encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--read-only", "get_config",
                 "--name", "keys").returncode == 0
    write_cases(root, "keys", [{"id": "k1", "messages": [{"role": "user",
                                                           "content": "show the mail config"}],
                                "expected": {"calls": [{"name": "get_config",
                                                        "arguments": {"name": ["mail"]}}]}}])
    recorded = bench(root, "labels", "record", "keys", "--yes")
    assert recorded.returncode == 0, recorded.stderr
    text = (root / "datasets" / "keys" / "cases.jsonl").read_text()
    assert "\"recorded\"" in text
    for secret in (key, "hunter2hunter2", "abc.DEF-123_xyz"):
        assert secret not in text
    run = bench(root, "run", "--dataset", "keys", "--variants", "current",
                "--provider", "oracle", "--run-id", "keys")
    assert run.returncode == 0, run.stderr
    assert rows(root, "keys")[("k1", "current")]["execution_match"] is True


@pytest.mark.slow
def test_labels_record_keeps_the_files_mode_line_ends_and_symlink(tmp_path):
    """cases.jsonl may be private (0600), CRLF with a BOM, or a link into another folder:
    recording rewrites only the recorded lines, where the link points, with the same mode."""
    root = tmp_path / "items"
    root.mkdir()
    (root / "tools.py").write_text(ITEM_TOOLS, encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--writes", "add_item",
                 "--name", "items").returncode == 0
    lines = [json.dumps({"toolset": "items", "lang": "en", **case}) for case in ITEM_CASES]
    real = tmp_path / "elsewhere" / "cases.jsonl"
    real.parent.mkdir()
    real.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    real.chmod(0o600)
    link = root / "datasets" / "items" / "cases.jsonl"
    link.unlink(missing_ok=True)
    link.symlink_to(real)
    recorded = bench(root, "labels", "record", "items", "--yes")
    assert recorded.returncode == 0, recorded.stderr
    assert link.is_symlink() and link.resolve() == real
    assert real.stat().st_mode & 0o777 == 0o600
    data = real.read_bytes().decode("utf-8")
    assert data.startswith("\ufeff") and data.count("\r\n") == 2 and "\n" not in \
        data.replace("\r\n", "")
    assert data.count('"recorded"') == 2


@pytest.mark.slow
def test_a_declared_reset_lets_labels_run_and_compare_settles_clock_results(tmp_path):
    root = tmp_path / "clock"
    root.mkdir()
    (root / "tools.py").write_text(
        "import itertools\n\n_TICK = itertools.count()\n\n\n"
        "def now() -> dict:\n    \"\"\"The current time.\"\"\"\n"
        "    return {\"datetime\": f\"2026-01-01T00:00:{next(_TICK):02d}\", \"tz\": \"UTC\"}\n",
        encoding="utf-8")
    assert bench(root, "init", ".", "--python", "tools.py", "--read-only", "now",
                 "--name", "clock").returncode == 0
    write_cases(root, "clock", [{"id": "t1", "messages": [{"role": "user",
                                                            "content": "what time is it"}],
                                 "expected": {"calls": [{"name": "now", "arguments": {}}]}}])
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'writes = []', 'writes = []\nreset = ["python", "-c", "open(\'resets.log\', \'a\')'
        '.write(\'r\\\\n\')"]'), encoding="utf-8")
    plain = bench(root, "run", "--dataset", "clock", "--variants", "current",
                  "--provider", "oracle", "--run-id", "plain")
    assert plain.returncode == 0, plain.stderr
    assert rows(root, "plain")[("t1", "current")]["execution_match"] is False  # the clock
    said = flat(plain.stdout)
    assert "the oracle's exec match on toolset 'clock' is 0%, not 100%" in said
    assert "now 1" in said
    assert len((root / "resets.log").read_text().splitlines()) == 2  # label, then the row
    pyproject.write_text(pyproject.read_text().replace(
        'writes = []', 'writes = []\ncompare = {now = {ignore = ["datetime"]}}'),
        encoding="utf-8")
    settled = bench(root, "run", "--dataset", "clock", "--variants", "current",
                    "--provider", "oracle", "--run-id", "settled")
    assert settled.returncode == 0, settled.stderr
    assert rows(root, "settled")[("t1", "current")]["execution_match"] is True
    assert "oracle's exec match" not in flat(settled.stdout)


# -- what bench init shows and writes --------------------------------------------------------

RENAMED_SERVER = TESTS / "mcp_renamed_server.py"


def _cli_parses(line: str) -> None:
    """Parse ``line`` (``bench ...``; ``<placeholder>`` read as a value) with bench's real
    command tree, down to its last subcommand, without running it. A bare command name (a
    mention, ``bench run``) only needs to name a command.

    Raises:
        AssertionError or the CLI's usage error: it does not parse.
    """
    import re
    import shlex

    import typer
    from typer.core import TyperGroup

    from bench.cli import app
    args = shlex.split(re.sub(r"<[^>]+>", "x", line))
    assert args[0] == "bench", line
    command = typer.main.get_command(app)
    ctx = command.make_context("bench", args[1:])
    rest = ctx._protected_args + ctx.args
    while isinstance(ctx.command, TyperGroup) and rest:
        name, sub, rest = ctx.command.resolve_command(ctx, rest)
        assert sub is not None, line
        if not rest and not isinstance(sub, TyperGroup):
            return  # a mention of a command: it exists
        ctx = sub.make_context(name, rest, parent=ctx)
        rest = ctx._protected_args + ctx.args
    assert not rest, f"{line}: {rest} left over"
    assert not isinstance(ctx.command, TyperGroup) or ctx.command.invoke_without_command, \
        f"{line}: names no command"


@pytest.mark.slow
def test_the_commands_init_writes_parse_with_benchs_cli(tmp_path):
    import re

    root = tmp_path / "ren"
    root.mkdir()
    (root / "server.py").write_text(RENAMED_SERVER.read_text(), encoding="utf-8")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "ren")
    assert init.returncode == 0, init.stderr
    commands = {}
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".toml", ".yaml"):
            for line in re.findall(r"`(bench [^`]+)`", path.read_text(encoding="utf-8")):
                commands.setdefault(line, path.relative_to(root))
    assert "bench split ren" in commands and "bench labels record <dataset>" in commands
    for line, path in commands.items():
        try:
            _cli_parses(line)
        except Exception as exc:  # noqa: BLE001 - reported with the file that holds it
            pytest.fail(f"{path}: `{line}` does not parse: {type(exc).__name__}: {exc}")


@pytest.mark.slow
def test_init_keeps_the_servers_stderr_off_the_terminal(tmp_path):
    root = tmp_path / "ren"
    root.mkdir()
    (root / "server.py").write_text(RENAMED_SERVER.read_text(), encoding="utf-8")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "ren")
    assert init.returncode == 0, init.stderr
    assert "renamed-test server starting" not in init.stdout + init.stderr
    assert "renamed-test server starting" in \
        (root / "reports" / "mcp-server-init.log").read_text()
    assert "1 line(s) to its stderr during the import" in flat(init.stdout)


@pytest.mark.slow
def test_init_keeps_secrets_given_by_option_name_out_of_the_servers_log(tmp_path):
    """The server prints its argv on stderr; values only an option's name calls secret
    (no token shape) reach neither pyproject.toml nor reports/mcp-server-init.log."""
    root = tmp_path / "ren"
    root.mkdir()
    (root / "server.py").write_text(RENAMED_SERVER.read_text(), encoding="utf-8")
    secrets = ["plainsecret12345", "pw-init-67890", "client-sec-4242", "sfc55555xyz"]
    command = (f"python server.py --plain --api-key {secrets[0]} --password={secrets[1]} "
               f"--client-secret {secrets[2]} --secret-file-contents {secrets[3]}")
    init = bench(root, "init", ".", "--mcp", command, "--name", "ren")
    assert init.returncode == 0, init.stderr
    log = (root / "reports" / "mcp-server-init.log").read_text()
    assert 'argv=["--plain", "--api-key", "***", "--password=***", "--client-secret", ' \
           '"***", "--secret-file-contents", "***"]' in log, log
    text = (root / "pyproject.toml").read_text()
    assert "--secret-file-contents\", \"${MCP_SECRET_FILE_CONTENTS}" in text
    leaked = [(path.name, s) for path in root.rglob("*") if path.is_file()
              and path.name != "server.py" for s in secrets if s.encode() in path.read_bytes()]
    assert leaked == []


@pytest.mark.slow
def test_init_from_a_source_without_tools_is_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "server.py").write_text(RENAMED_SERVER.read_text(), encoding="utf-8")
    (tmp_path / "g.json").write_text('{"functionDeclarations": []}', encoding="utf-8")
    (tmp_path / "o.json").write_text("[]", encoding="utf-8")
    for args, said in ((("--mcp", "python server.py --empty"),
                        "error: the MCP server python server.py lists no tools"),
                       (("--tools", "g.json"), "error: g.json: no tools"),
                       (("--tools", "o.json", "--format", "openai"), "error: o.json: no tools")):
        shutil.rmtree(tmp_path / "p", ignore_errors=True)
        init = bench(tmp_path, "init", "p", *args)
        assert init.returncode == 2 and "Traceback" not in init.stderr, init.stderr
        assert init.stderr.startswith(said) and len(init.stderr.strip().splitlines()) == 1, \
            init.stderr
        if args[0] == "--mcp":  # only the server's stderr is kept, and the line names it
            log = tmp_path / "p" / "reports" / "mcp-server-init.log"
            assert [p for p in (tmp_path / "p").rglob("*") if p.is_file()] == [log]
            assert f"the server's stderr is kept in {log}" in flat(init.stderr)
        else:
            assert not (tmp_path / "p").exists()


def test_a_server_failing_at_import_is_one_line_quoting_its_stderr(tmp_path):
    (tmp_path / "bad.py").write_text(
        "import sys\nprint('loading config', file=sys.stderr)\n"
        "print('fatal: DATABASE_URL is not set', file=sys.stderr)\nsys.exit(3)\n")
    init = bench(tmp_path, "init", "p", "--mcp", "python bad.py", "--timeout", "20")
    assert init.returncode == 2 and "Traceback" not in init.stderr, init.stderr
    assert "loading config" not in init.stdout + init.stderr
    assert "its stderr ends with: fatal: DATABASE_URL is not set" in flat(init.stderr)
    assert len(init.stderr.strip().splitlines()) == 1, init.stderr


@pytest.mark.slow
def test_a_call_without_an_implementation_is_told_under_the_table(tmp_path):
    """FindRoom is a pydantic model (a schema-only tool): its call does not run. The row has
    no exec success, and the table says why instead of showing 100% (1/1) alone."""
    root = tmp_path / "cal"
    assert bench(tmp_path, "init", "cal", "--python", str(CALENDAR),
                 "--read-only", "list_events").returncode == 0
    write_cases(root, "cal", [c for c in CAL_CASES if c["id"] in ("c1", "c5")])
    write_answers(root, CAL_ANSWERS)
    run = bench(root, "run", "--dataset", "cal", "--variants", "current", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    got = rows(root, "r1")
    assert got[("c5", "current")]["execution_success"] is None
    assert "calls not executed (their tool has no implementation in the toolset's backend)," \
           " counted per tool: FindRoom 1" in flat(run.stdout)


SKY_TOOLS = '''"""Two tools with one-line docstrings: nothing for the longer templates to add."""


def get_time(timezone: str) -> str:
    """Current time in a time zone.

    Args:
        timezone: An IANA zone such as Europe/Oslo.
    """
    return "12:00"


def get_date(timezone: str) -> str:
    """Today's date in a time zone.

    Args:
        timezone: An IANA zone such as Europe/Oslo.
    """
    return "2026-01-01"
'''


def test_a_failed_init_keeps_the_servers_stderr_redacted_and_names_its_file(tmp_path):
    """The server prints its argv and a config error, then exits before answering: the
    whole stderr is kept in reports/mcp-server-init.log (its secret as ***), and the one
    error line names that file."""
    (tmp_path / "bad.py").write_text(
        "import sys\nprint('loading config', sys.argv[1:], file=sys.stderr)\n"
        "print('fatal: DATABASE_URL is not set', file=sys.stderr)\nsys.exit(3)\n")
    secret = "pw-init-failed-4711"
    init = bench(tmp_path, "init", "p", "--mcp", f"python bad.py --password {secret}",
                 "--timeout", "20")
    assert init.returncode == 2 and "Traceback" not in init.stderr, init.stderr
    assert len(init.stderr.strip().splitlines()) == 1, init.stderr
    log = tmp_path / "p" / "reports" / "mcp-server-init.log"
    assert f"the server's stderr is kept in {log}" in flat(init.stderr)
    kept = log.read_text(encoding="utf-8")
    assert "loading config ['--password', '***']" in kept and \
        "fatal: DATABASE_URL is not set" in kept
    assert secret not in kept + init.stderr
    assert [p.name for p in log.parent.iterdir()] == [log.name]  # no temporary file left


@pytest.mark.slow
def test_init_and_run_name_the_variants_that_render_the_same_text(tmp_path):
    (tmp_path / "sky_tools.py").write_text(SKY_TOOLS, encoding="utf-8")
    init = bench(tmp_path, "init", "sky", "--python", "sky_tools.py",
                 "--read-only", "get_time,get_date")
    assert init.returncode == 0, init.stderr
    said = "note: variants l10, l30 and l50 of toolset 'sky' render the same text, so " \
           "comparing them measures nothing;"
    notes = [line for line in init.stdout.splitlines() if "render the same text" in line]
    assert len(notes) == 1 and notes[0].startswith(said), init.stdout
    assert "bench variants draft --toolset sky --provider local" in notes[0]
    root = tmp_path / "sky"
    write_cases(root, "sky", [{"id": "s1", "messages": [
        {"role": "user", "content": "time in Europe/Oslo?"}],
        "expected": {"calls": [{"name": "get_time",
                                "arguments": {"timezone": ["Europe/Oslo"]}}]}}])
    write_answers(root, {"time": [{"name": "get_time", "arguments": {"timezone": "Europe/Oslo"}}]})
    run = bench(root, "run", "--dataset", "sky", "--variants", "l3,l30,l50", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    notes = [line for line in flat(run.stderr).split("note: ")
             if "render the same text" in line]
    assert len(notes) == 1 and notes[0].startswith(
        "variants l30 and l50 of toolset 'sky' render the same text"), run.stderr


@pytest.mark.slow
def test_bench_variants_marks_the_variants_that_render_the_same_text(tmp_path):
    (tmp_path / "sky_tools.py").write_text(SKY_TOOLS, encoding="utf-8")
    assert bench(tmp_path, "init", "sky", "--python", "sky_tools.py",
                 "--read-only", "get_time,get_date").returncode == 0
    root = tmp_path / "sky"
    listed = bench(root, "variants", "--toolset", "sky")
    assert listed.returncode == 0, listed.stderr
    said = flat(listed.stdout)
    assert "l30 (same text as l10)" in said and "l50 (same text as l10)" in said
    assert "l3 (same" not in said and "current (same" not in said
    assert "note: variants l10, l30 and l50 of toolset 'sky' render the same text, so " \
           "comparing them measures nothing;" in said
    as_json = bench(root, "variants", "--toolset", "sky", "--json")
    assert as_json.returncode == 0, as_json.stderr
    same = {row["variant"]: row["same_text_as"] for row in json.loads(as_json.stdout)["variants"]}
    assert same == {"l3": None, "l10": None, "l30": "l10", "l50": "l10", "current": None}
    # variants of different text are not marked
    apart = bench(root, "variants", "--toolset", "sky", "--variants", "l3,l10")
    assert apart.returncode == 0 and "same text" not in apart.stdout, apart.stdout


@pytest.mark.slow
def test_the_guide_suggests_comparing_only_variants_that_render_different_text(tmp_path):
    (tmp_path / "sky_tools.py").write_text(SKY_TOOLS, encoding="utf-8")
    assert bench(tmp_path, "init", "sky", "--python", "sky_tools.py",
                 "--read-only", "get_time,get_date").returncode == 0
    guide = flat((tmp_path / "sky" / "README.md").read_text(encoding="utf-8"))
    assert "`bench run --dataset sky --variants current,l10 --provider local`" in guide
    assert "`l30` and `l50` are left out: they render the same text as `l10`, until the " \
           "sections the longer templates add are filled in `descriptions/sky/specs/`, or " \
           "drafted: `bench variants draft --toolset sky --provider local`" in guide
    # the calendar's docstrings fill l30's sections: all three differ, none is left out
    assert bench(tmp_path, "init", "cal", "--python", str(CALENDAR),
                 "--read-only", "list_events,get_event,slow_lookup").returncode == 0
    guide = flat((tmp_path / "cal" / "README.md").read_text(encoding="utf-8"))
    assert "`bench run --dataset cal --variants current,l10,l30 --provider local`" in guide
    assert not any(f"`{name}` is left out" in guide for name in ("current", "l10", "l30"))
    assert len({load_variant("cal", name, tmp_path / "cal" / "descriptions").sha256
                for name in ("current", "l10", "l30")}) == 3


def test_init_shows_how_to_declare_errors_answered_as_text(tmp_path):
    """The toolset table bench init writes carries a commented error_pattern that works
    once uncommented, and the guide says when it is needed."""
    from bench.toolset_config import load_toolset_settings
    (tmp_path / "sky_tools.py").write_text(SKY_TOOLS, encoding="utf-8")
    assert bench(tmp_path, "init", "sky", "--python", "sky_tools.py",
                 "--read-only", "get_time,get_date").returncode == 0
    root = tmp_path / "sky"
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    example = '# error_pattern = "^(Error|Database error):"'
    assert example in text
    assert load_toolset_settings(root)["sky"].error_pattern is None  # only an example
    pyproject.write_text(text.replace(example, example[2:]), encoding="utf-8")
    pattern = load_toolset_settings(root)["sky"].error_regex()
    assert pattern is not None and pattern.search("Database error: no such column: amount")
    guide = flat((root / "README.md").read_text(encoding="utf-8"))
    assert "If your tools answer their errors as ordinary text (`Error: no such note`), " \
           "those calls count as successes until `error_pattern`" in guide


@pytest.mark.slow
def test_a_refused_write_of_a_tool_that_only_reads_names_read_only_and_that_fix_works(
        tmp_path):
    """list_events only reads but was not marked so at init: its call is refused, and the
    note under the table names writes and the read-only marking in one sentence; doing what
    it says (bench init --force --read-only) lets the call run."""
    root = tmp_path / "cal"
    assert bench(tmp_path, "init", "cal", "--python", str(CALENDAR)).returncode == 0
    write_cases(root, "cal", [c for c in CAL_CASES if c["id"] == "c1"])
    write_answers(root, CAL_ANSWERS)
    run = bench(root, "run", "--dataset", "cal", "--variants", "current", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    assert rows(root, "r1")[("c1", "current")]["write_refused"] is True
    assert ('Allow one with writes = ["list_events"] under [tool.bench.toolsets.cal] in '
            "pyproject.toml, or all with bench run --allow-writes; if it only reads, mark it "
            'read-only instead: read_only = ["list_events"] and permission: read in its spec '
            "and variants/current.yaml (bench init --force --read-only list_events writes "
            "them)") in flat(run.stdout)
    assert bench(tmp_path, "init", "cal", "--python", str(CALENDAR), "--force",
                 "--read-only", "list_events").returncode == 0
    again = bench(root, "run", "--dataset", "cal", "--variants", "current", "--provider",
                  "function:answers:answer", "--run-id", "r2")
    assert again.returncode == 0, again.stderr
    got = rows(root, "r2")[("c1", "current")]
    assert got["write_refused"] is False and got["execution_success"] is True


# -- a new user's findings on real MCP servers (bench init, variants, labels record) -----


def _shop(tmp_path: Path, *init_args: str) -> Path:
    """A project made by ``bench init`` from tests/mcp_server.py (search_orders, ship_to,
    store_hours) over stdio, as toolset ``shop``."""
    root = tmp_path / "shop"
    root.mkdir()
    (root / "server.py").write_text((TESTS / "mcp_server.py").read_text(), encoding="utf-8")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "shop", *init_args)
    assert init.returncode == 0, init.stderr
    return root


@pytest.mark.slow
def test_variants_commands_take_the_projects_only_toolset_without_toolset(tmp_path):
    """A bench init project has one toolset: bench variants and bench variants diff use it
    without --toolset; with two, the one error line names both and asks for --toolset."""
    root = _shop(tmp_path)
    listed = bench(root, "variants")
    assert listed.returncode == 0, listed.stderr
    assert "toolset shop" in listed.stdout and "current" in listed.stdout
    diff = bench(root, "variants", "diff", "current", "l3")
    assert diff.returncode == 0, diff.stderr
    assert "search_orders" in diff.stdout
    shutil.copytree(root / "descriptions" / "shop", root / "descriptions" / "mall")
    for args in (("variants",), ("variants", "diff", "current", "l3")):
        both = bench(root, *args)
        assert both.returncode == 2 and "Traceback" not in both.stderr, both.stderr
        assert len(both.stderr.strip().splitlines()) == 1, both.stderr
        assert "2 toolsets here (mall, shop): name one with --toolset" in flat(both.stderr)


@pytest.mark.slow
def test_labels_record_builds_a_patterns_call_from_its_example_and_names_the_skipped_cases(
        tmp_path):
    """A $regex with "$example" gives the call its example (as the oracle sends it), so the
    label is recorded; labels whose argument is only a bare pattern are skipped, and the
    skip line names them: the first five, then "and N more"."""
    root = _shop(tmp_path, "--read-only", "search_orders")
    example = {"id": "ex", "messages": [{"role": "user", "content": "where is my lamp order?"}],
               "expected": {"calls": [{"name": "search_orders", "arguments": {
                   "keyword": [{"$regex": "(?i)lamp", "$example": "desk lamp"}]}}]}}
    bare = [{"id": f"bare{i}", "messages": [{"role": "user", "content": f"order {i}?"}],
             "expected": {"calls": [{"name": "search_orders",
                                     "arguments": {"keyword": [{"$regex": "lamp"}]}}]}}
            for i in range(1, 8)]
    write_cases(root, "shop", [example, *bare])
    recorded = bench(root, "labels", "record", "shop")
    assert recorded.returncode == 0, recorded.stderr
    said = flat(recorded.stdout)
    assert "skipped 7 cases (bare1, bare2, bare3, bare4, bare5 and 2 more): an argument " \
           "offers only patterns without \"$example\"" in said
    cases = [json.loads(line) for line in
             (root / "datasets" / "shop" / "cases.jsonl").read_text().splitlines()]
    got = {case["id"]: case["expected"].get("recorded") for case in cases}
    assert [r["data"] for r in got["ex"]["results"]] == ["desk lamp desc 10"]
    assert all(got[case["id"]] is None for case in bare)


@pytest.mark.slow
def test_init_names_a_server_started_by_a_package_runner_or_module_by_its_package(tmp_path):
    """``npx -y <package>`` (here an npx on PATH that starts tests/mcp_server.py, a real MCP
    server over stdio; behind ``env NAME=value``) and ``python -m <module>`` are named by the
    package or module, not by ``env`` or the runner alone; an argument after the package (a
    token) is never named."""
    shims = tmp_path / "bin"
    shims.mkdir()
    npx = shims / "npx"
    npx.write_text(f"#!/bin/sh\nexec {sys.executable} {TESTS / 'mcp_server.py'}\n")
    npx.chmod(0o755)
    path = os.pathsep.join([str(shims), str(Path(sys.executable).parent),
                            os.environ.get("PATH", "")])
    token = "tok-4711-never-shown"
    init = bench(tmp_path, "init", "mem", "--mcp",
                 f"env MEMORY_FILE_PATH=mem.json npx -y @modelcontextprotocol/server-memory "
                 f"--api-key {token}",
                 extra_env={"PATH": path})
    assert init.returncode == 0, init.stderr
    assert "imported 3 tools from the MCP server npx @modelcontextprotocol/server-memory " \
           "into" in flat(init.stdout)
    assert token not in init.stdout + init.stderr
    (tmp_path / "shop_server.py").write_text((TESTS / "mcp_server.py").read_text(),
                                             encoding="utf-8")
    module = bench(tmp_path, "init", "mod", "--mcp", "python -m shop_server")
    assert module.returncode == 0, module.stderr
    assert "from the MCP server python -m shop_server into" in flat(module.stdout)


def test_init_from_a_server_that_exits_silently_names_its_exit_status(tmp_path):
    """A server that exits (status 3) before answering and writes nothing to stderr: the one
    error line says so, not only the client's "Connection closed"."""
    init = bench(tmp_path, "init", "p", "--mcp", "python -c 'import sys; sys.exit(3)'",
                 "--timeout", "20")
    assert init.returncode == 2 and "Traceback" not in init.stderr, init.stderr
    assert len(init.stderr.strip().splitlines()) == 1, init.stderr
    assert flat(init.stderr) == ("error: MCP server 'python' exited with status 3 before "
                                 "answering; it wrote nothing to stderr")


@pytest.mark.slow
def test_the_guide_names_every_variant_it_leaves_out_and_why(tmp_path):
    """The guide's first run compares current, l10 and l30 when they differ; every other
    variant is named with why: l50 renders l30's text (tests/mcp_server.py's descriptions
    fill l30's sections, not l50's), l3 is left out to keep the first run short."""
    root = _shop(tmp_path)
    guide = flat((root / "README.md").read_text(encoding="utf-8"))
    assert "`bench run --dataset shop --variants current,l10,l30 --provider local`" in guide
    assert "`l50` is left out: it renders the same text as `l30`, until the sections" in guide
    assert "`l3` is left out to keep this first run short: add it to `--variants` to " \
           "compare every length" in guide


# -- Python tool functions that never return or call sys.exit() --------------------------------


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


# -- hostile input of bench init --python and [tool.bench.toolsets.<name>]: one error line -----


def one_error_line(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """Assert ``result`` failed with exit 2 and one ``error:`` line holding ``fragments``."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


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


# -- a project of one Python tool, fed hostile input (used by other folders' tests too) --------


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
    """``bench run`` of :func:`python_project`'s dataset with its scripted answer."""
    return bench(project, "run", "--dataset", "proj", "--variants", "current",
                 "--provider", "function:ans:answer", "--run-id", run_id, *extra)


def test_a_tools_module_with_a_syntax_error_leaves_no_run_folder(tmp_path):
    project = python_project(tmp_path)
    (tmp_path / "tools.py").write_text(TOOLS_PY + "x = (\n", encoding="utf-8")
    result = run(project, "broken")
    assert "SyntaxError" in error_lines(result)[0]
    assert not (project / "reports" / "runs" / "broken").exists()


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
