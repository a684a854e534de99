"""Static checks: mypy on the package and ruff on the code and tests, configured in
pyproject.toml ([tool.mypy], [tool.ruff]) and pinned in the test extra. Each runs in a
subprocess of this interpreter from the project root; a failure shows the tool's findings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_mypy_finds_no_error():
    """``python -m mypy``: the packages and settings of [tool.mypy]."""
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_ruff_finds_nothing():
    """``python -m ruff check``: the rules of [tool.ruff.lint] on the package, the tests, the
    benchmarks and the root conftest."""
    result = _run("ruff", "check", "--no-cache", "bench", "tests", "benchmarks", "conftest.py")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_imports_run_only_down_bench_s_tiers():
    """``lint-imports``: the layers contract of [tool.importlinter] (every top-level module
    of bench placed in a tier; an import from a lower tier to a higher one, direct or through
    a chain, breaks it and names the chain)."""
    result = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import "
                             "lint_imports_command; sys.exit(lint_imports_command())",
                             "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout
