"""The ``function`` provider against user code that misbehaves: a ``BaseException`` that is
not an ``Exception``, ``KeyboardInterrupt``, a call that never returns, an exit of the
process (``os._exit``, a crash, ``sys.exit`` while importing) and ``os.chdir``. Each is a
one-line error or a stop the run reports, never a traceback, a hang or a wrong exit code.
The ``function:<module>:<callable>`` cases run real ``bench`` subprocesses on modules written
to the test's project; registered callables run in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bench.errors import BenchError, RunIncomplete
from bench.providers import make_provider
from bench.providers.function import register_function
from bench.runner import RunConfig, Runner
from conftest import REPO

RUN = ("run", "--variants", "l3", "--limit", "2", "--no-execute")


def _manifest(project: Path, run_id: str) -> dict:
    return json.loads((project / "reports" / "runs" / run_id / "manifest.json")
                      .read_text(encoding="utf-8"))


def _last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


class Boom(BaseException):
    """A user's exception class outside ``Exception``."""


def raises_boom(messages, tools, trial):  # noqa: ANN001, ANN201
    raise Boom("kaboom")


def raises_generator_exit(messages, tools, trial):  # noqa: ANN001, ANN201
    raise GeneratorExit("closed")


@pytest.mark.slow
@pytest.mark.parametrize("raised, shown", [("GeneratorExit('closed')", "GeneratorExit: closed"),
                                           ("Boom('kaboom')", "Boom: kaboom")])
def test_a_function_raising_a_base_exception_fails_the_run_in_one_line(run_bench, project,
                                                                       raised, shown):
    # both were a traceback and exit 1: only Exception, SystemExit and KeyboardInterrupt
    # were caught
    (project / "raiser.py").write_text(
        "class Boom(BaseException):\n    pass\n\n\n"
        f"def answer(messages, tools, trial):\n    raise {raised}\n", encoding="utf-8")
    result = run_bench(*RUN, "--provider", "function:raiser:answer", "--run-id", "raised",
                       timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert _last_line(result.stderr) == \
        f"error: provider 'function:raiser:answer': the function raised {shown}"
    assert _manifest(project, "raised")["status"] == "failed"


@pytest.mark.parametrize("answer, shown", [(raises_boom, "Boom: kaboom"),
                                           (raises_generator_exit, "GeneratorExit: closed")])
def test_a_registered_function_raising_a_base_exception_fails_the_run_in_one_line(
        project, answer, shown):
    register_function(answer.__name__, answer)
    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=1, execute=False,
                              providers=[f"function:{answer.__name__}"]),
                    run_id=answer.__name__, command=["bench", "run"])
    with pytest.raises(BenchError) as raised:
        runner.run()
    assert str(raised.value) == \
        f"provider 'function:{answer.__name__}': the function raised {shown}"
    assert _manifest(project, answer.__name__)["status"] == "failed"


@pytest.mark.slow
def test_a_function_raising_keyboard_interrupt_stops_the_run_as_ctrl_c_does(run_bench,
                                                                              project):
    # it was "error: ... the function raised KeyboardInterrupt", exit 2, status failed
    module = project / "quitter.py"
    module.write_text("def answer(messages, tools, trial):\n    raise KeyboardInterrupt\n",
                      encoding="utf-8")
    result = run_bench(*RUN, "--provider", "function:quitter:answer", "--run-id", "quit",
                       timeout=300)
    assert result.returncode == 130 and "Traceback" not in result.stderr, result.stderr
    assert ("function:quitter:answer: the function raised KeyboardInterrupt; stopping the run "
            "as Ctrl-C would") in result.stderr
    assert "finish with: bench run --resume quit" in _last_line(result.stderr)
    assert _manifest(project, "quit")["status"] == "interrupted"

    module.write_text("def answer(messages, tools, trial):\n    return []\n", encoding="utf-8")
    resumed = run_bench("run", "--resume", "quit", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    manifest = _manifest(project, "quit")
    assert manifest["status"] == "complete" and manifest["rows_done"] == 2


@pytest.mark.slow
def test_ctrl_c_while_the_module_imports_stops_the_run_when_sigint_was_inherited_ignored(
        project):
    """A module slow to import (it loads a model, say), run as a script's background job,
    which starts with SIGINT ignored: Ctrl-C stops before anything is sent, as SIGTERM did.
    It was ignored until the run loop began: the import was waited for, the run completed."""
    import signal

    from conftest import stop_once_ready
    (project / "slowimp.py").write_text(
        "import pathlib, time\npathlib.Path('importing').touch()\ntime.sleep(30)\n\n"
        "def answer(messages, tools, trial):\n    return []\n", encoding="utf-8")
    env = {**os.environ, "BENCH_HOME": str(project),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = stop_once_ready(
        [sys.executable, "-m", "bench", *RUN, "--provider", "function:slowimp:answer",
         "--run-id", "s1"], project / "importing", signal.SIGINT, cwd=project, env=env,
        sigint_ignored=True)
    assert result.returncode == 130, result.stderr
    assert _last_line(result.stderr) == \
        "interrupted while starting the providers; nothing was sent"


def raises_keyboard_interrupt(messages, tools, trial):  # noqa: ANN001, ANN201
    raise KeyboardInterrupt


def test_a_registered_function_raising_keyboard_interrupt_stops_the_run_as_ctrl_c_does(
        project):
    register_function("quits", raises_keyboard_interrupt)
    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=2, execute=False,
                              providers=["function:quits"]),
                    run_id="quits", command=["bench", "run"])
    with pytest.raises(KeyboardInterrupt):  # what a stopped run raises (the CLI exits 130)
        runner.run()
    manifest = _manifest(project, "quits")
    assert manifest["status"] == "interrupted" and manifest["rows_done"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("define, stall, left", [
    ("def", "time.sleep(10 ** 6)", "the call is abandoned and runs on"),
    ("async def", "await asyncio.sleep(10 ** 6)", "the call was cancelled")])
def test_a_function_past_the_request_timeout_leaves_its_row_for_the_resume(run_bench,
                                                                           project, define,
                                                                           stall, left):
    # the run hung for good, saying nothing
    module = project / "stalls.py"
    module.write_text(f"import asyncio\nimport time\n\n\n{define} answer(messages, tools, "
                      f"trial):\n    if trial == 1:\n        {stall}\n    return []\n",
                      encoding="utf-8")
    result = run_bench(*RUN, "--trials", "2", "--request-timeout", "1",
                       "--provider", "function:stalls:answer", "--run-id", "stalled",
                       timeout=300)
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    said = [line for line in result.stderr.splitlines() if "left for --resume: timeout: " in line]
    assert len(said) == 2, result.stderr  # one line per row, as it happens
    assert all(line.startswith("function:stalls:answer: case '") and ", trial 1 left" in line
               and "the function gave no answer within 1 s (--request-timeout); not "
               f"retried: {left}" in line for line in said)
    manifest = _manifest(project, "stalled")
    assert manifest["status"] == "partial" and manifest["rows_done"] == 2
    assert sorted(e["key"].rsplit("|", 1)[1] for e in manifest["request_errors"]) == ["1", "1"]

    module.write_text("def answer(messages, tools, trial):\n    return []\n", encoding="utf-8")
    resumed = run_bench("run", "--resume", "stalled", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    manifest = _manifest(project, "stalled")
    assert manifest["status"] == "complete" and manifest["rows_done"] == 4


@pytest.mark.slow
def test_a_registered_function_past_the_request_timeout_leaves_its_row_for_the_resume(
        project):
    release = threading.Event()

    def stalls(messages, tools, trial):  # noqa: ANN001, ANN202
        if trial == 1:
            release.wait(120)  # returns in the end: without a timeout the run completes
        return []

    register_function("stalls", stalls)
    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=1, trials=2,
                              execute=False, request_timeout_s=0.5,
                              providers=["function:stalls"]),
                    run_id="stalls", command=["bench", "run"])
    try:
        with pytest.raises(RunIncomplete, match=r"no answer within 0\.5 s"):
            runner.run()
    finally:
        release.set()
    manifest = _manifest(project, "stalls")
    assert manifest["status"] == "partial" and manifest["rows_done"] == 1
    assert [e["key"].rsplit("|", 1)[1] for e in manifest["request_errors"]] == ["1"]


@pytest.mark.slow
@pytest.mark.parametrize("ending, how", [("os._exit(0)", "exit code 0"),
                                         ("ctypes.string_at(0)", "SIGSEGV")])
def test_a_function_that_ends_its_process_fails_the_run_in_one_line(run_bench, project,
                                                                     ending, how):
    # os._exit(0) ended bench itself: exit 0, the manifest left "running"
    (project / "ender.py").write_text(
        f"import ctypes\nimport os\n\n\ndef answer(messages, tools, trial):\n    {ending}\n",
        encoding="utf-8")
    result = run_bench(*RUN, "--provider", "function:ender:answer", "--run-id", "ended",
                       timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert _last_line(result.stderr) == (
        f"error: provider 'function:ender:answer': the function's process ended ({how}); a "
        "function must return or raise, not end its process (os._exit, a crash in native "
        "code)")
    assert _manifest(project, "ended")["status"] == "failed"


@pytest.mark.slow
@pytest.mark.parametrize("code, why", [
    ("import sys\nsys.exit(7)\n", "SystemExit: 7"),
    ("import os\nos._exit(3)\n", "its process ended (exit code 3) while importing it")])
def test_a_function_module_that_exits_while_importing_is_one_line(run_bench, project, code,
                                                                  why):
    # sys.exit(7) at import was bench's own exit 7, with no message
    (project / "quits_early.py").write_text(code, encoding="utf-8")
    result = run_bench(*RUN, "--provider", "function:quits_early:answer", timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == \
        f"error: provider 'function:quits_early:answer': cannot import 'quits_early': {why}"


@pytest.mark.slow
def test_making_the_provider_of_a_module_that_exits_while_importing_raises(tmp_path,
                                                                          monkeypatch):
    (tmp_path / "exits_on_import.py").write_text("raise SystemExit(7)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BenchError, match=r"cannot import 'exits_on_import': SystemExit: 7$"):
        make_provider("function:exits_on_import:answer")


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
