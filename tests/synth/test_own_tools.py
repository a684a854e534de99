"""``bench synth`` on a project's own tools (docs/synth.md, docs/your-own-tools.md): without
a declared ``reset`` nothing runs on the user's system (a label's calls are calls no model
made: every ``execution`` verdict is a skip saying so, read-only tools and allowed writes
alike); with one, the ``execution`` check runs each label's calls on the executor the project
declares in ``[tool.bench.toolsets.<name>]`` (an MCP server made by ``bench init --mcp``, a
Python module made by ``bench init --python``), with its ``timeout_s`` and per-tool
``writes``; a refused write is a skip with its reason, not a rejection. Offline: the
generator and the solvers are ``function:`` providers written into the project
(``gen.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.models import Case
from bench.results import ManifestExecution
from bench.synth.verify import USERS_SYSTEM_SKIP, _execution_skip, refused_calls

TESTS = Path(__file__).parents[1]
EXEC_SERVER = TESTS / "mcp_exec_server.py"
CALENDAR = TESTS / "data" / "own_tools" / "calendar_tools.py"

#: gen.py: request N of the kind ``single`` proposes PROPOSALS[N - 1]; the solvers answer
#: with the label's own calls (SOLUTIONS), so only the execution check can reject.
GEN = '''
import json, re
PROPOSALS = json.loads({proposals!r})
HEADER = re.compile(r"Request (\\d+): kind (\\w+)")


def generator(messages, tools, trial):
    n = int(HEADER.search(messages[-1].content).group(1))
    query, calls = PROPOSALS[n - 1]
    return [{{"name": "propose_call_case", "arguments": {{"query": query, "calls": calls}}}}]


def solver(messages, tools, trial):
    text = messages[-1].content
    if "lookup service" in text:
        return []  # the slow tool: only the oracle waits for its timeout
    return next(calls for query, calls in PROPOSALS if query == text)
'''


def bench(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m bench ARGS`` in ``cwd`` with this checkout first on the path (and the
    interpreter's folder on PATH, so ``python server.py`` starts this interpreter)."""
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


#: A reset command for a test project (the tools keep no state worth undoing): declaring
#: it is what lets bench run labels on the project's system.
RESET = 'reset = ["python", "-c", "pass"]'


def declare_reset(root: Path) -> None:
    """Add :data:`RESET` to the project's toolset table (after its ``writes`` line)."""
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("writes = []", "writes = []\n" + RESET),
                         encoding="utf-8")


def synth(root: Path, toolset: str, dataset: str, proposals: list) -> dict[str, dict]:
    """Run ``bench synth`` with gen.py's scripted proposals; query -> its report entry."""
    (root / "gen.py").write_text(GEN.format(proposals=json.dumps(proposals)),
                                 encoding="utf-8")
    done = bench(root, "synth", "--toolset", toolset, "--generator", "function:gen:generator",
                 "--solver", "function:gen:solver", "--solver-trials", "2", "--kinds",
                 "single", "--count", str(len(proposals)), "--dataset", dataset)
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads((root / "datasets" / dataset / "synth-report.json").read_text())
    return {d["query"]: d for d in report["detail"]}


@pytest.mark.slow
def test_synth_runs_no_label_call_on_a_users_mcp_server_without_reset(tmp_path):
    root = tmp_path / "calc"
    root.mkdir()
    shutil.copy(EXEC_SERVER, root / "server.py")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "calc")
    assert init.returncode == 0, init.stderr
    pyproject = root / "pyproject.toml"
    # the user allows the write tool: that is consent for a model's calls, not for labels
    pyproject.write_text(pyproject.read_text().replace("writes = []", 'writes = ["add_item"]'),
                         encoding="utf-8")
    proposals = [
        ["Put milk on my list", [{"name": "add_item", "arguments": {"title": "milk"}}]],
        ["Please add 19 and 23 for me", [{"name": "add", "arguments": {"a": 19, "b": 23}}]],
        ["What is the canonical name of the city Atlantis?",
         [{"name": "lookup_city", "arguments": {"city": "Atlantis"}}]],
    ]
    got = synth(root, "calc", "calc-synth", proposals)
    # neither the label (the oracle) nor the solvers wrote: no writes.log on the server side
    assert not (root / "writes.log").exists()
    for query, _ in proposals:  # read-only calls are not run either: the label is unjudged
        assert got[query]["verdict"] == "kept"
        assert got[query]["verdicts"]["execution"] == USERS_SYSTEM_SKIP
    verify = json.loads((root / "datasets" / "calc-synth" / "synth-report.json")
                        .read_text())["verify_run"]
    manifest = json.loads((root / "reports" / "runs" / verify / "manifest.json").read_text())
    assert manifest["execution"]["calc"]["mode"] == "off"
    assert not (root / "reports" / "runs" / verify / "mcp-server-calc.log").exists()


@pytest.mark.slow
def test_synth_executes_labels_on_an_mcp_server_with_a_declared_reset(tmp_path):
    root = tmp_path / "calc"
    root.mkdir()
    shutil.copy(EXEC_SERVER, root / "server.py")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "calc")
    assert init.returncode == 0, init.stderr
    declare_reset(root)
    proposals = [
        ["Please add 19 and 23 for me", [{"name": "add", "arguments": {"a": 19, "b": 23}}]],
        ["What is the canonical name of the city Atlantis?",
         [{"name": "lookup_city", "arguments": {"city": "Atlantis"}}]],
        ["Wipe all my data now, I confirm it",
         [{"name": "delete_everything", "arguments": {"confirm": True}}]],
    ]
    got = synth(root, "calc", "calc-synth", proposals)
    add, atlantis, wipe = (got[p[0]] for p in proposals)
    assert add["verdict"] == "kept" and add["verdicts"]["execution"] == "pass"
    # the server's own ToolError for an unknown city: a real execution on the server
    assert atlantis["verdict"] == "execution"
    assert "permanent 1" in atlantis["verdicts"]["execution"]
    # a write the project does not allow: skipped with the reason, not rejected
    assert wipe["verdict"] == "kept"
    assert wipe["verdicts"]["execution"].startswith("skipped: write refused: "
                                                    "delete_everything is not in writes")
    verify = json.loads((root / "datasets" / "calc-synth" / "synth-report.json")
                        .read_text())["verify_run"]
    manifest = json.loads((root / "reports" / "runs" / verify / "manifest.json").read_text())
    assert manifest["execution"]["calc"]["mode"] == "mcp"
    traces = (root / "reports" / "runs" / verify / "traces.jsonl").read_text()
    assert '"tool":"lookup_city"' in traces and '"error_code":"tool_error"' in traces

    # the spec says the tool only reads, the server does not (no readOnlyHint): the
    # executor's own permission check refuses it, which is a skip, not a rejection
    spec = root / "descriptions" / "calc" / "specs" / "delete_everything.yaml"
    spec.write_text(spec.read_text().replace("permission: write", "permission: read"))
    marked = synth(root, "calc", "calc-synth-read", proposals[2:])[proposals[2][0]]
    assert marked["verdict"] == "kept"
    assert marked["verdicts"]["execution"] == ("skipped: write refused: delete_everything "
                                               "(the executor's permission check)")

    # the project allows that write (its per-tool writes list): now it runs on the server
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("writes = []",
                                                       'writes = ["delete_everything"]'))
    again = synth(root, "calc", "calc-synth-2", proposals[2:])
    assert again[proposals[2][0]]["verdicts"]["execution"] == "pass"


@pytest.mark.slow
def test_synth_executes_labels_on_a_python_module_with_a_reset_and_its_timeout(tmp_path):
    init = bench(tmp_path, "init", "cal", "--python", str(CALENDAR), "--timeout", "1",
                 "--read-only", "list_events,get_event,slow_lookup")
    assert init.returncode == 0, init.stderr
    root = tmp_path / "cal"
    declare_reset(root)
    proposals = [
        ["What is planned on 2026-03-02?",
         [{"name": "list_events", "arguments": {"day": "2026-03-02"}}]],
        ["Open event EV404", [{"name": "get_event", "arguments": {"event_id": "EV404"}}]],
        ["Put a Retro on 2026-03-09 in my calendar",
         [{"name": "create_event", "arguments": {"title": "Retro", "day": "2026-03-09"}}]],
        ["Fetch EV1 through the old lookup service",
         [{"name": "slow_lookup", "arguments": {"event_id": "EV1"}}]],
        ["I need a free room with 6 seats", [{"name": "FindRoom", "arguments": {"seats": 6}}]],
    ]
    got = synth(root, "cal", "cal-synth", proposals)
    listed, missing, create, slow, room = (got[p[0]] for p in proposals)
    assert listed["verdict"] == "kept" and listed["verdicts"]["execution"] == "pass"
    assert missing["verdict"] == "execution"  # KeyError in the function: not_found
    assert create["verdict"] == "kept"
    assert create["verdicts"]["execution"].startswith("skipped: write refused: create_event")
    # the toolset's timeout_s (1 s) stopped the 30 s function: the label's call (run first,
    # after the reset) timed out, which opens the tool's circuit for the oracle's call
    assert slow["verdict"] == "execution"
    assert "timeout" in slow["verdicts"]["execution"] \
        or "transient" in slow["verdicts"]["execution"]
    assert room["verdicts"]["execution"] == ("skipped: a called tool has nothing to run "
                                             "(a schema-only tool)")


def test_refused_calls_follow_the_executor_rule():
    case = Case.model_validate({
        "id": "c", "toolset": "t", "lang": "en", "messages": [{"role": "user",
                                                                "content": "x"}],
        "expected": {"calls": [{"name": "w", "arguments": {}}, {"name": "s", "arguments": {}},
                               {"name": "r", "arguments": {}}]}})
    permission = {"w": "write", "s": "sensitive", "r": "read"}
    both = refused_calls(case, permission, allow_writes=False, allow_sensitive=False)
    assert [line.split(":")[0] for line in both] == ["sensitive call refused",
                                                     "write refused"]
    assert refused_calls(case, permission, allow_writes=False, allow_sensitive=True,
                         write_tools={"w"}) == []
    assert refused_calls(case, permission, allow_writes=True, allow_sensitive=True) == []


def test_an_unexecuted_label_says_why_from_the_run_plan():
    assert _execution_skip(ManifestExecution(mode="none", detail="the CRM has no sandbox"), "crm") == \
        "skipped: toolset 'crm' is not executed (the CRM has no sandbox)"
    assert _execution_skip(ManifestExecution(mode="no_backend"), "x") == \
        "skipped: toolset 'x' has no executor"
    assert _execution_skip(None, "x") == "skipped: toolset 'x' has no executor"
