"""The examples of docs/extending.md run as written.

A block after ``<!-- example-file: PATH -->`` is written to PATH in a temporary project folder
(``BENCH_HOME``); a Python block after ``<!-- example: NAME -->`` is then run there, in its own
namespace. The examples assert what they show, so a change that breaks one fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
_BLOCK = re.compile(r"<!-- (example|example-file): ([^ ]+) -->\n```[a-z]*\n(.*?)\n```", re.DOTALL)
#: The examples the page must keep (a missing one fails instead of silently running nothing).
REQUIRED = ("lint-rule", "backend-tool", "provider", "metric", "evaluate", "layer", "importer",
            "factor")


def _blocks() -> tuple[dict[str, str], dict[str, str]]:
    """(files by path, Python examples by name) of docs/extending.md."""
    files, examples = {}, {}
    for kind, name, body in _BLOCK.findall(PAGE.read_text(encoding="utf-8")):
        (files if kind == "example-file" else examples)[name] = body + "\n"
    return files, examples


def test_the_page_has_its_examples():
    files, examples = _blocks()
    assert set(REQUIRED) <= set(examples), sorted(examples)
    assert files, "no example-file block"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder holding the page's example files, as BENCH_HOME and the cwd."""
    files, _ = _blocks()
    for rel, text in files.items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (tmp_path / "datasets").mkdir(exist_ok=True)
    monkeypatch.setenv("BENCH_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def fresh_lint_rules(monkeypatch):
    """Rules registered by an example stay inside the test."""
    from bench.descriptions import lint
    monkeypatch.setattr(lint, "RULES", dict(lint.RULES))
    monkeypatch.setattr(lint, "_ADDED_CHECKS", {})


@pytest.fixture
def fresh_registries(monkeypatch):
    """Metrics and providers registered by an example stay inside the test."""
    import bench.providers.function  # noqa: F401 - registered before the copy, kept after it
    import bench.providers.oracle  # noqa: F401
    from bench.providers import registry as providers
    from bench.scoring import registry as metrics
    monkeypatch.setattr(metrics, "_REGISTRY", dict(metrics._REGISTRY))
    monkeypatch.setattr(providers, "_REGISTRY", dict(providers._REGISTRY))


@pytest.mark.parametrize("name", REQUIRED)
def test_example_runs(name, project, fresh_lint_rules, fresh_registries, capsys):
    _, examples = _blocks()
    code = compile(examples[name], f"{PAGE}:<example {name}>", "exec")
    exec(code, {"__name__": f"docs_example_{name.replace('-', '_')}"})  # noqa: S102 - our own docs


def test_a_registered_rule_reaches_bench_lint(project, fresh_lint_rules):
    """``bench lint`` (the command, in this process) reports a rule added with register_rule."""
    from typer.testing import CliRunner

    from bench.cli import app
    _, examples = _blocks()
    exec(compile(examples["lint-rule"], "lint-rule", "exec"), {})  # noqa: S102
    result = CliRunner().invoke(app, ["lint", "--toolset", "shop", "--json"])
    assert result.exit_code == 0, result.output
    assert '"BL013"' in result.output and "reserve_stock" in result.output
