"""The gate's replay misses: the failure names every missing case, and the printed command,
run as printed, records them all into the gate's cache, after which the gate passes.

The answers come from a ``function:`` provider (a module in the project that answers each
query with its label's call, or with a fixed call for the queries it does not know), recorded
into the gate's response cache by a real ``bench run --cache write`` and replayed by the real
``replay`` provider.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.gate.config import load_gate_config
from bench.gate.core import evaluate
from bench.gate.run import run_gate

REPO = Path(__file__).resolve().parents[2]

GATE = """
[tool.bench.gate]
dataset = "cases.jsonl"
variants = ["l10"]
providers = ["replay:gate/answers.sqlite"]
split = "all"
execute = false
metrics = ["selection_correct"]
floors = {selection_correct = 0.9}
"""

# answers each query with its label's first acceptable arguments (the labels are read from
# the project's cases.jsonl, next to this module)
ANSWERS = '''
import json
from pathlib import Path

_CASES = [json.loads(line) for line in
          (Path(__file__).parent / "cases.jsonl").read_text(encoding="utf-8").splitlines()
          if line.strip()]


def answer(messages, tools, trial):
    query = [m.content for m in messages if m.role == "user"][-1]
    case = next(c for c in _CASES if c["messages"][-1]["content"] == query)
    calls = []
    for call in case["expected"].get("calls", []):
        arguments = {k: next(v for v in values if v is not None)
                     for k, values in call["arguments"].items()
                     if any(v is not None for v in values) and not isinstance(values[0], dict)}
        calls.append({"name": call["name"], "arguments": arguments})
    return {"tool_calls": calls}
'''


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "BENCH_HOME": str(project), "COLUMNS": "200",
            "PYTHONPATH": os.pathsep.join([str(project), str(REPO),
                                           os.environ.get("PYTHONPATH", "")])}


def _bench(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=project,
                          env=_env(project), capture_output=True, text=True, timeout=600)


@pytest.fixture
def gate_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the analytics specs, 6 cases, a gate and recorded answers."""
    root = tmp_path / "team"
    shutil.copytree(REPO / "descriptions/analytics/specs", root / "descriptions/analytics/specs")
    (root / "datasets").mkdir()
    lines = (REPO / "datasets/analytics/cases.jsonl").read_text(encoding="utf-8").splitlines()
    singles = [line for line in lines if line.strip() and
               json.loads(line).get("kind", "single") == "single"]
    (root / "cases.jsonl").write_text("\n".join(singles[:6]) + "\n", encoding="utf-8")
    (root / "all_cases.jsonl").write_text("\n".join(singles[:16]) + "\n", encoding="utf-8")
    (root / "answers_mod.py").write_text(ANSWERS.replace("cases.jsonl", "all_cases.jsonl"),
                                         encoding="utf-8")
    (root / "pyproject.toml").write_text(GATE, encoding="utf-8")
    monkeypatch.setenv("BENCH_HOME", str(root))
    recorded = _bench(root, "run", "--provider", "function:answers_mod:answer", "--dataset",
                      "cases.jsonl", "--variants", "l10", "--split", "all", "--no-execute", "--cache", "write",
                      "--cache-path", "gate/answers.sqlite")
    assert recorded.returncode == 0, recorded.stderr
    return root


def test_every_missing_case_is_named_and_the_printed_command_fixes_the_gate(
        gate_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """10 new cases without recorded answers: the gate's failure names all 10, and its one
    command, run exactly as printed (``bench`` as ``python -m bench``), records them; the
    gate then passes."""
    lines = (gate_project / "all_cases.jsonl").read_text(encoding="utf-8").splitlines()
    (gate_project / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    new_ids = [json.loads(line)["id"] for line in lines[6:16]]
    assert len(new_ids) == 10
    monkeypatch.chdir(gate_project.parent)  # the command must not depend on the cwd
    config = load_gate_config(gate_project / "pyproject.toml")
    with pytest.raises(BenchError) as failure:
        run_gate(config)
    message = str(failure.value)
    assert "no recorded answer for 10 items of variant 'l10'" in message
    commands = re.findall(r"record them with: (BENCH_HOME=[^;]*)(?:; |$)", message)
    assert len(commands) == 1, message
    command = commands[0]
    assert f"--cases {','.join(new_ids)}" in command
    cache = (gate_project / "gate/answers.sqlite").resolve()
    assert f"--cache write --cache-path {cache}" in command
    assert "--provider function:answers_mod:answer" in command  # the one recorded provider

    words = shlex.split(command)
    env = dict(_env(gate_project))
    while "=" in words[0]:  # leading VAR=value assignments, as a shell reads them
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "bench"
    done = subprocess.run([sys.executable, "-m", "bench", *words[1:], "--no-execute"],
                          cwd=gate_project.parent, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr

    run = run_gate(config)
    verdicts = evaluate(config, run.rows, None)
    assert [v.passed for v in verdicts] == [True], [v.message() for v in verdicts]
    assert verdicts[0].n == 16
