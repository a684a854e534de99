"""kill -9 in the middle of an episode run, then ``bench run --resume``: no episode lost or
counted twice. The model is a ``function`` provider (a module in the test's folder) that
logs every step it answers; one episode blocks on its second step while a hold file exists,
so the kill always finds it half-finished. After the resume each planned key is in
``results.jsonl`` exactly once, the finished episodes were not asked again, and the
half-finished ones were redone from their first step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from tests.fakeserver import wait_for

pytestmark = pytest.mark.slow  # two `bench run` subprocesses

HELD = "res-3"
CASES = [f"res-{i}" for i in range(6)]
MODEL = textwrap.dedent('''
    """A scripted agent: look the order up, track its parcel, answer; logs each step."""
    import json
    import os
    import time

    def answer(messages, tools, trial):
        case = messages[0].content.split("]")[0].strip("[")
        step = sum(1 for m in messages if m.role == "assistant")
        with open(os.environ["EPISODE_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"case": case, "step": step, "pid": os.getpid()}) + "\\n")
        while case == "res-3" and step == 1 and os.path.exists(os.environ["EPISODE_HOLD"]):
            time.sleep(0.05)  # held half-finished until the process is killed
        time.sleep(0.1)
        if step == 0:
            return [{"name": "get_order_status", "arguments": {"order_id": "ORD20250002"}}]
        if step == 1:
            return [{"name": "track_shipment",
                     "arguments": {"tracking_number": "EA515077827CN"}}]
        return {"tool_calls": [], "text": "ORD20250002 was delivered."}
''')


def episode(case_id):
    """A three-step episode case (lookup, tracking, answer) tagged with its id."""
    return {"id": case_id, "toolset": "ecommerce", "lang": "en", "kind": "episode",
            "messages": [{"role": "user", "content": f"[{case_id}] Where is ORD20250002?"}],
            "success": {"answer_facts": [["delivered"]]},
            "required_calls": [{"name": "get_order_status",
                                "arguments": {"order_id": ["ORD20250002"]}}],
            "max_steps": 5}


def read_lines(path):
    """Complete JSON lines of ``path`` (a line cut by the kill is left out)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_kill_9_mid_episode_then_resume_counts_each_episode_once(project, tmp_path):
    (tmp_path / "epmodel.py").write_text(MODEL, encoding="utf-8")
    dataset = tmp_path / "episodes.jsonl"
    dataset.write_text("".join(json.dumps(episode(c)) + "\n" for c in CASES), encoding="utf-8")
    log, hold = tmp_path / "steps.log", tmp_path / "hold"
    hold.write_text("", encoding="utf-8")
    env = {**os.environ, "BENCH_HOME": str(project), "EPISODE_LOG": str(log),
           "EPISODE_HOLD": str(hold),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path),
                                          os.environ.get("PYTHONPATH", "")])}
    results = project / "reports" / "runs" / "killed" / "results.jsonl"
    provider = "function:epmodel:answer"
    stderr = tmp_path / "first.err"  # a file, not a pipe nobody reads while waiting
    with stderr.open("wb") as err:
        first = subprocess.Popen(
            [sys.executable, "-m", "bench", "run", "--dataset", str(dataset), "--variants",
             "l3", "--provider", provider, "--concurrency", "3", "--run-id", "killed"],
            cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        # the held episode is at its second step and other episodes have finished
        killed_ok = wait_for(lambda: len(read_lines(results)) >= 2 and any(
            e["case"] == HELD and e["step"] == 1 for e in read_lines(log)), timeout_s=300)
        assert killed_ok, stderr.read_text(encoding="utf-8", errors="replace")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL
    # the processes that answered for the killed run (bench's own, or its function worker's)
    first_pids = {e["pid"] for e in read_lines(log)}
    before = {row["case_id"] for row in read_lines(results)}
    started = {e["case"] for e in read_lines(log)}
    half_finished = started - before
    assert HELD in half_finished and HELD not in before
    assert 2 <= len(before) < len(CASES)

    hold.unlink()
    resumed = subprocess.run([sys.executable, "-m", "bench", "run", "--resume", "killed"],
                             cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr

    lines = results.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]  # every line whole (a cut one is repaired)
    keys = [row["key"] for row in rows]
    assert sorted(keys) == sorted(f"{c}|l3|{provider}|0" for c in CASES)  # each exactly once
    for row in rows:
        assert row["episode"]["stop_reason"] == "final_answer"
        assert [len(s["calls"]) for s in row["episode"]["steps"]] == [1, 1, 0]
        assert row["metrics"]["task_success"] is True and row["metrics"]["steps"] == 3
    manifest = json.loads((results.parent / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "complete" and manifest["rows_done"] == len(CASES)

    # the resume asked nothing for finished episodes; each half-finished one it ran again
    # from its first step to its end
    resume_pid = {e["pid"] for e in read_lines(log)} - first_pids
    (pid,) = resume_pid
    again = [e for e in read_lines(log) if e["pid"] == pid]
    assert not {e["case"] for e in again} & before
    for case in set(CASES) - before:
        assert [e["step"] for e in again if e["case"] == case] == [0, 1, 2], case
