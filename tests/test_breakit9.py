"""Defects found by feeding the run start-up changes (the ported assignment solver, the shop
database generated ahead in a child process, the BM25 signal computed in a thread) hostile
shapes and stops: each test reproduces one and asserts the fixed behaviour."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.executor.backends import shopcache, shopdb
from bench.executor.backends.shopcache import shop_db_path
from bench.project import Project
from bench.runner import RunConfig, RunSession

REPO = Path(__file__).resolve().parents[1]


def python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (its own ``sys.modules``) importing this checkout."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={"PYTHONPATH": str(REPO),
                                                           "PATH": "/usr/bin:/bin"})


# -- 1. the ported solver is cubic in pure Python: a 1,000-call label by a 1,000-call episode
# took 38 s to score (0.4 s in scipy), stalling the run's event loop ---------------------------

TRAJECTORY = """
import sys
from bench.models import RequiredCall
from bench.scoring.episodes import MadeCall, trajectory_match

def match(n):
    # every required call accepts any arguments: each matches every call made (distinct calls,
    # so the loop guard does not stop them), the shape whose augmenting paths are longest
    required = [RequiredCall(name="search_orders", arguments={}) for _ in range(n)]
    made = [MadeCall(step=0, name="search_orders", arguments={"keyword": str(j)}, success=True)
            for j in range(n)]
    pairs = trajectory_match(required, made)
    assert sorted(i for i, _ in pairs) == sorted(j for _, j in pairs) == list(range(n))
    return "scipy.optimize" in sys.modules

print(match(20), match(150))
"""


def test_hundreds_of_required_calls_matching_hundreds_made_are_solved_by_scipy():
    """A label and an episode of 150 alike calls each: the port's 3.4 million interpreted
    steps are handed to scipy's compiled solver (same pairs); 20 by 20 stays in the port."""
    result = python(TRAJECTORY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]


# -- 2. SIGTERM to bench's process group while the child writes the shop database left its
# temporary file (~3.6 MB) in the cache folder, every time ------------------------------------

def test_a_terminated_generation_ahead_leaves_no_temporary_file(tmp_path):
    """``timeout`` or a cancelled CI job sends SIGTERM to the whole group: the child removes
    its temporary file, and the parent generates the database itself."""
    for attempt in range(20):  # until the signal lands while the file is being written
        folder = tmp_path / str(attempt)
        shopcache.generate_ahead(seed=17, folder=folder)
        path = shopcache._db_file(17, folder)
        child = shopcache._AHEAD[path]
        while child.poll() is None and not list(folder.glob(".shop-*.tmp")):
            time.sleep(0.001)
        child.send_signal(signal.SIGTERM)
        child.wait()
        if path.exists():  # the child finished first: try again
            shop_db_path(seed=17, folder=folder)
            continue
        assert not list(folder.glob(".shop-*")), list(folder.iterdir())
        assert child.returncode == 128 + signal.SIGTERM  # it exited through its cleanup
        made = shop_db_path(seed=17, folder=folder)  # generated here instead
        assert [p.name for p in folder.iterdir()] == [made.name]
        return
    pytest.skip("the child always finished before the signal")


# -- 3. a project of its own tools got the 3.6 MB shop database written into its cache by
# every first run, though nothing of it ever reads that database ------------------------------

def own_toolset_project(root: Path, episode: bool = False) -> Project:
    """A project with one toolset of its own (``mine``), one case, one variant."""
    (root / "descriptions" / "mine" / "variants").mkdir(parents=True)
    (root / "descriptions" / "mine" / "variants" / "current.yaml").write_text(
        "tools:\n- name: add\n  description: Add two numbers.\n"
        "  input_schema: {type: object, properties: {a: {type: integer}}}\n",
        encoding="utf-8")
    case: dict[str, object] = {"id": "c1", "toolset": "mine", "lang": "en",
                               "messages": [{"role": "user", "content": "add 1"}]}
    if episode:
        case.update(kind="episode", required_calls=[{"name": "add", "arguments": {}}],
                    success={"answer_facts": [["1"]]})
    else:
        case["expected"] = {"calls": [{"name": "add", "arguments": {"a": [1]}}]}
    (root / "datasets" / "mine").mkdir(parents=True)
    (root / "datasets" / "mine" / "cases.jsonl").write_text(json.dumps(case) + "\n",
                                                          encoding="utf-8")
    return Project(root, root / "cache")


def test_a_run_of_a_projects_own_tools_does_not_generate_the_shop_database(tmp_path):
    project = own_toolset_project(tmp_path / "own")
    RunSession(RunConfig(dataset="mine", variants=["current"], providers=["oracle"]),
               run_id="own", command=[], project=project, will_run=True)
    cached = project.cache_dir / "executor"
    ahead = shopcache._db_file(shopdb.DEFAULT_SEED, cached)
    started = shopcache._AHEAD.pop(ahead, None)
    if started is not None:
        started.wait()
    assert started is None and not cached.exists()
    # an episode's label checks read the shop database, whatever its toolset
    project = own_toolset_project(tmp_path / "episode", episode=True)
    RunSession(RunConfig(dataset="mine", variants=["current"], providers=["oracle"]),
               run_id="ep", command=[], project=project, will_run=True)
    ahead = shopcache._db_file(shopdb.DEFAULT_SEED, project.cache_dir / "executor")
    started = shopcache._AHEAD.pop(ahead, None)  # still running when the checks were cached
    if started is not None:
        started.wait()
    assert ahead.is_file()


# -- 4. the BM25 signal's thread held up the exit of a run stopped or failed mid-way until the
# whole signal was computed (2.8 s instead of 0.4 s after Ctrl-C on 20,000 cases by 4 variants)

STOPPED = """
import threading
from types import SimpleNamespace
from bench.cli.toolspace import SignalAhead
from bench.datasets import load_dataset

class Unfinished:
    '''A variant whose toolset never comes: stands for a signal still being computed.'''
    name = "l3"

    @property
    def toolset(self):
        threading.Event().wait()

runner = SimpleNamespace(cases=load_dataset("ecommerce").cases[:3], variants=[Unfinished()])
seen = []
hook = SignalAhead(runner, lambda done, total, item=None: seen.append(done))
hook(1, 10, object())  # the first row written: the signal starts
assert hook.future is not None and not hook.future.done() and seen == [1]
print("stopping", flush=True)
raise SystemExit(130)  # the run stopped: nothing waits for the signal
"""


def test_a_stopped_run_exits_without_waiting_for_its_retrieval_signal():
    try:
        result = python(STOPPED, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the process waited for the unfinished signal thread at exit")
    assert result.returncode == 130, result.stderr
    assert result.stdout == "stopping\n" and "Traceback" not in result.stderr
