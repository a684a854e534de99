"""Fixtures of bench.optimize's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The worked example's project (``benchmarks/optimize_example.py``, its scripted
    providers registered), the cwd and BENCH_HOME elsewhere."""
    from tests.optimize.test_optimize import example

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "not-this-one"))
    return example.write_project(tmp_path / "proj")
