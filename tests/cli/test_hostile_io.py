"""Messages and writes under hostile conditions (issue 19, items 8 and 9), through the CLI in
subprocesses: usage errors in one line, a full disk, no write outside the project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakeserver import FakeServer
from tests.importers.test_own_tools import bench, error_lines, python_project

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, option", [
    (("run", "--trials", "0"), "--trials"), (("run", "--seed", "abc"), "--seed"),
    (("run", "--concurrency", "100000"), "--concurrency"),
    (("report", "x", "-f", "pdf"), "--format"), (("run", "--bogus"), "--bogus"),
    (("frobnicate",), "frobnicate")])
def test_usage_errors_are_one_line_naming_the_option(run_bench, args, option):
    """typer's standalone mode drew a multi-line box for these."""
    result = run_bench(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert option in lines[0] and "--help" in lines[0]


@pytest.mark.slow
def test_help_and_no_arguments_still_work(run_bench):
    assert run_bench("run", "--help").returncode == 0
    bare = run_bench()
    assert bare.returncode == 2 and "Usage" in bare.stdout + bare.stderr


@pytest.mark.slow
def test_a_local_dataset_path_writes_nothing_in_the_home_cache(run_bench, project, tmp_path):
    """``datasets`` took a 0-byte lock file in ~/.cache/huggingface/datasets per path."""
    home = tmp_path / "home"
    home.mkdir()
    dataset = project / "mine.jsonl"
    shutil.copy(project / "datasets" / "ecommerce" / "cases.jsonl", dataset)
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HOME", "HF_DATASETS_CACHE", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), BENCH_HOME=str(project), COLUMNS="200",
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    # the dataset loads, then the only provider is skipped for its missing key
    env.pop("OPENAI_API_KEY", None)
    result = subprocess.run([sys.executable, "-m", "bench", "run", "--dataset", str(dataset),
                             "--provider", "openai:gpt-x", "--limit", "1", "--variants", "l3"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert "every provider was skipped" in result.stderr, result.stderr
    assert [str(p) for p in home.rglob("*")] == []


def _mount_tmpfs(folder: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` on ``folder`` (root only); True when mounted."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


FSIZE_RUN = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.argv = ["bench", *sys.argv[2:]]
from bench.cli import main
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["tmpfs", "fsize"])
def test_a_full_disk_names_the_file_and_the_resume_and_fails_the_manifest(project, how):
    """A run folder on a 64 KiB tmpfs (ENOSPC; skipped unless this process may mount one),
    and a 32 KiB file-size limit (RLIMIT_FSIZE: EFBIG). Before: 'error: No space left on
    device' named no file, gave no resume command, and the manifest stayed 'running'."""
    runs = project / "reports" / "runs"
    mounted = how == "tmpfs" and _mount_tmpfs(runs, "64k")
    if how == "tmpfs" and not mounted:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        with FakeServer() as server:
            env = {**os.environ, "BENCH_HOME": str(project), "COLUMNS": "200",
                   "OPENAI_COMPAT_API_KEY": "sk-test-0000",
                   "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            args = ["run", "--limit", "60", "--variants", "l3", "--provider",
                    f"openai-compat:m@{server.url}/v1", "--run-id", "full"]
            command = [sys.executable, "-m", "bench", *args] if mounted else \
                [sys.executable, "-c", FSIZE_RUN, str(32 * 1024), *args]
            result = subprocess.run(command, cwd=project, env=env, capture_output=True,
                                    text=True, timeout=600)
        print("simulated with", "a 64 KiB tmpfs (ENOSPC)" if mounted else "RLIMIT_FSIZE (EFBIG)")
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("error: ") and str(runs / "full") in last, last
        assert "bench run --resume full" in last
        manifest = json.loads((runs / "full" / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["status"] == "failed"
    finally:
        if mounted:
            subprocess.run(["umount", str(runs)], check=False)


@pytest.mark.slow
def test_a_function_that_never_returns_does_not_keep_a_stopped_run_alive(project):
    """A plain answer function runs in a thread; a stopped run must still exit. In the
    default executor's thread a hung function kept the process alive after two SIGINTs
    (asyncio.run and the interpreter's exit join those threads)."""
    import signal
    import time
    (project / "hangs.py").write_text(
        "import time\n\ndef answer(messages, tools, trial):\n    time.sleep(10**6)\n",
        encoding="utf-8")
    manifest_path = project / "reports" / "runs" / "hung" / "manifest.json"
    env = {**os.environ, "BENCH_HOME": str(project),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--provider", "function:hangs:answer",
         "--variants", "l3", "--limit", "2", "--no-execute", "--run-id", "hung"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (manifest_path.is_file() and '"running"' in manifest_path.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, \
                process.communicate()[1]
            time.sleep(0.2)
        time.sleep(1.0)  # the requests are in flight (the function has been called)
        process.send_signal(signal.SIGINT)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "finish with: bench run --resume hung" in stderr and "Traceback" not in stderr
    assert json.loads(manifest_path.read_text())["status"] == "interrupted"


def test_a_bench_home_that_is_a_file_is_named(tmp_path):
    """BENCH_HOME set to a file read as a project without datasets: "unknown dataset
    'ecommerce' (known: none ...)" sent the user looking in the wrong place."""
    home = tmp_path / "not-a-folder"
    home.write_text("", encoding="utf-8")
    env = {**os.environ, "BENCH_HOME": str(home),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for args in (("show", "x"), ("run", "--limit", "1", "--provider", "oracle")):
        result = subprocess.run([sys.executable, "-m", "bench", *args], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip() == \
            f"error: {home}: $BENCH_HOME is not a folder (the project holding datasets/ and " \
            "descriptions/)", result.stderr


# -- a toolset name that is a path -------------------------------------------------------------


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
