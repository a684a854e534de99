"""docs/optimize.md's worked example is what benchmarks/optimize_example.py prints."""

from __future__ import annotations

import re

from tests.optimize.test_optimize import REPO, example


def documented() -> str:
    """The text between the example markers of docs/optimize.md, fences removed, nested
    ``~~~`` fences given back as the script prints them."""
    page = (REPO / "docs" / "optimize.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- optimize-example:start -->\n```text\n(.*?)```\n"
                      r"<!-- optimize-example:end -->", page, re.DOTALL)
    assert block is not None, "the worked example's markers are missing"
    return block.group(1).replace("~~~", "```")


def test_the_worked_example_is_the_scripts_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "not-this-one"))
    root = example.write_project(tmp_path / "proj")
    assert example.worked_example(root) == documented()
