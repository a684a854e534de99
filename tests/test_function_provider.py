"""The ``function`` provider against user code that misbehaves. A function that changes the
working directory (``os.chdir``) moves nothing of the run. The ``function:<module>:<callable>``
cases run real ``bench`` subprocesses on modules written to the test's project; registered
callables run in a script around ``bench.cli``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

RUN = ("run", "--variants", "l3", "--limit", "2", "--no-execute")


def _manifest(project: Path, run_id: str) -> dict:
    return json.loads((project / "reports" / "runs" / run_id / "manifest.json")
                      .read_text(encoding="utf-8"))


def _without_bench_home(project: Path, cache: str) -> dict[str, str]:
    """The environment of a run whose project is found from the working directory, its
    cache folder ``cache`` relative to it."""
    env = {k: v for k, v in os.environ.items() if k != "BENCH_HOME"}
    return {**env, "BENCH_CACHE_DIR": cache, "COLUMNS": "200",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.slow
def test_a_function_that_changes_the_working_directory_does_not_move_the_run(project,
                                                                             tmp_path):
    # the project is the cwd (no BENCH_HOME): bench looked for the finished run in its own
    # checkout, "error: no run 'wandered'", exit 2
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / "wanderer.py").write_text(
        f"import os\n\n\ndef answer(messages, tools, trial):\n    os.chdir({str(elsewhere)!r})"
        "\n    return []\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "bench", *RUN, "--provider",
                             "function:wanderer:answer", "--run-id", "wandered"],
                            cwd=project, env=_without_bench_home(project, "cache"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "run wandered" in result.stdout
    assert _manifest(project, "wandered")["status"] == "complete"
    assert not any(elsewhere.iterdir())


WANDERING_RUN = """
import os
import sys

from bench.cli import main
from bench.providers.function import register_function


def wander(messages, tools, trial):
    os.chdir(os.environ["WANDER_TO"])
    return {"tool_calls": [], "text": "done"}


register_function("wanderer", wander)
sys.argv = ["bench", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_a_registered_function_that_changes_the_working_directory_does_not_move_the_run(
        project, tmp_path):
    """A callable registered in bench's own process (a user's script around ``bench.cli``)
    that changes the cwd: the table is still read from the project found at the start, and
    each episode's copy of the shop database still comes from the cache folder named at the
    start (a relative ``$BENCH_CACHE_DIR`` was read against the new cwd: the database was
    built again there)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**_without_bench_home(project, "cache"), "WANDER_TO": str(elsewhere)}
    result = subprocess.run([sys.executable, "-c", WANDERING_RUN, "run", "--provider",
                             "function:wanderer", "--dataset", "ecommerce-episodes",
                             "--variants", "l3", "--limit", "2", "--concurrency", "1",
                             "--run-id", "wandered"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "run wandered" in result.stdout
    assert _manifest(project, "wandered")["status"] == "complete"
    assert (project / "cache" / "executor").is_dir()
    assert not any(elsewhere.iterdir())
