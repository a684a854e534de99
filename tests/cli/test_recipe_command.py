"""docs/extending.md's "Add a command" recipe stays true: a command is a typed function in its
own module under bench/cli/ (its docstring is its help, a ``BenchError`` its one-line error)
plus its entry in ``_register`` of bench/cli/__init__.py, which sets the order ``bench
--help`` lists it in: two files.

A command of bench cannot be added without editing bench/cli/__init__.py, so the first test
writes the command's module in a temporary folder and registers it on ``bench.cli.app`` as
``_register`` does, in a child process that then runs bench's own ``main``; the second
checks that every command module of bench/cli/ is registered."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli, evaluate

ROOT = Path(__file__).resolve().parents[2]

# the recipe as a contributor writes it: bench/cli/tally.py
TALLY = '''
"""``bench tally``: rows of a run per variant, and how many chose the right tools."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

import typer

from bench.cli.output import out
from bench.project import Project


def tally(
    run_id: Annotated[str, typer.Argument(help="The run to count.")],
    variant: Annotated[str | None, typer.Option(help="Only this variant.")] = None,
) -> None:
    """Count a run's rows per variant and those whose tool selection
    is right, one line per variant."""
    done, right = Counter(), Counter()
    for row in Project.from_env().rows(run_id):  # an unknown run: bench's one-line error
        if variant is None or row.variant == variant:
            done[row.variant] += 1
            right[row.variant] += bool(row.metrics.selection_correct)
    for name in done:
        out.print(f"{name}: {right[name]} of {done[name]} right", markup=False)
'''

# what bench/cli/__init__.py's _register does with the new module, then bench's console script
MAIN = '''
import sys

sys.path.insert(0, sys.argv.pop(1))
from bench import cli
import tally

cli.app.command()(tally.tally)
cli._unwrap_docstrings(cli.app)
cli.main()
'''

# modules of bench/cli/ that hold no command: what the commands share
HELPERS = {"bench.cli.options", "bench.cli.output", "bench.cli.run_config",
           "bench.cli.summary", "bench.cli.compare_table", "bench.cli.stops",
           "bench.cli.toolspace"}


def _bench(folder: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``bench ARGS`` with the tally command registered, in a child process."""
    env = {**os.environ, "BENCH_HOME": str(project), "COLUMNS": "200",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", MAIN, str(folder), *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_command_module_registered_as_register_does_runs_as_bench_commands_do(
        project, tmp_path):
    """The command answers on a real oracle run; its help is its docstring on one line;
    ``bench --help`` lists it; a run that does not exist is one ``error:`` line, exit 2."""
    folder = tmp_path / "cli"
    folder.mkdir()
    (folder / "tally.py").write_text(TALLY, encoding="utf-8")
    result = evaluate("ecommerce", ["l3", "l10"], ["oracle"], project=project,
                      run_id="counted", limit=5, execute=False)
    assert len(result.rows) == 10

    counted = _bench(folder, project, "tally", "counted", "--variant", "l10")
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.splitlines() == ["l10: 5 of 5 right"]

    helped = _bench(folder, project, "tally", "--help")
    assert helped.returncode == 0, helped.stderr
    # the docstring is the help, one paragraph on one line
    assert any("Count a run's rows per variant and those whose tool selection is right, "
               "one line per variant." in line for line in helped.stdout.splitlines()), \
        helped.stdout
    listed = _bench(folder, project, "--help")
    assert "tally" in listed.stdout

    missing = _bench(folder, project, "tally", "nowhere")
    assert missing.returncode == 2
    lines = missing.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "nowhere" in lines[0], \
        missing.stderr


def _command_modules(app) -> set[str]:
    """Modules of the callbacks registered on ``app`` and its groups."""
    found = {command.callback.__module__ for command in app.registered_commands}
    for group in app.registered_groups:
        found |= _command_modules(group.typer_instance)
    return found


def test_every_command_module_of_bench_cli_is_registered():
    """A module added under bench/cli/ holds a command that ``_register`` lists (or is one
    of the helpers the commands share): a command left out of bench/cli/__init__.py fails
    here."""
    modules = {f"bench.cli.{path.stem}" for path in (ROOT / "bench" / "cli").glob("*.py")
               if path.stem != "__init__"}
    assert HELPERS <= modules
    assert _command_modules(cli.app) == modules - HELPERS
