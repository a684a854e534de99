"""Static checks: mypy on the package and ruff on the code and tests, configured in
pyproject.toml ([tool.mypy], [tool.ruff]) and pinned in the test extra. Each runs in a
subprocess of this interpreter from the project root; a failure shows the tool's findings.
The import graph's circles are looked for in this process with grimp (import-linter's graph
builder)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
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
    """``lint-imports``: the two contracts of [tool.importlinter]: the layers contract (every
    top-level module of bench placed in a tier; an import from a lower tier to a higher one,
    direct or through a chain, breaks it and names the chain) and the acyclic-siblings contract
    (packages or modules under one parent import each other one way only: no folder-level
    knot, e.g. bench.datasets and bench.descriptions of the same tier)."""
    result = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import "
                             "lint_imports_command; sys.exit(lint_imports_command())",
                             "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def _import_kind(module: str, line: int) -> str:
    """Where the import on ``line`` of ``module``'s file sits: ``module level``, ``in a
    function`` or ``under TYPE_CHECKING`` (the innermost that holds it)."""
    path = ROOT / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    node = next(n for n in ast.walk(tree)
                if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno == line)
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return "in a function"
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return "under TYPE_CHECKING"
    return "module level"


def test_no_module_of_bench_imports_itself_back():
    """grimp's graph of every import of bench (at module level, inside functions and under
    ``TYPE_CHECKING``): for each direct import a -> b, no chain of imports leads from b back
    to a. Before, three circles were left: bench.episodes.state <-> bench.executor.backends,
    bench.providers.local.batching <-> engine, and bench.providers.local <-> doctor <->
    provider. A circle found is reported as its chain, each import with its line and kind."""
    graph = grimp.build_graph("bench", cache_dir=None)
    circles, seen = [], set()
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back and frozenset(back) not in seen:  # each circle once
                seen.add(frozenset(back))
                chain = (importer, *back)
                steps = []
                for a, b in zip(chain, chain[1:]):
                    for detail in graph.get_import_details(importer=a, imported=b):
                        kind = _import_kind(a, detail["line_number"])
                        steps.append(f"    {a}:{detail['line_number']} ({kind}) "
                                     f"{detail['line_contents']}")
                circles.append(" -> ".join(chain) + "\n" + "\n".join(steps))
    assert not circles, "\n".join(circles)
