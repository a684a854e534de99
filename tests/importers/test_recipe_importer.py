"""docs/extending.md's "Add an importer" recipe stays true:

- your own importer is one module of yours (no file of bench): it builds an
  ``ImportedToolset`` with ``make_tool`` and ``tool_name``, ``write_variant`` writes it as a
  hand-written variant and ``write_cases`` its labeled cases, and ``bench run`` measures them;
- an importer shipped with bench is two files: its module under bench/importers/ and its
  ``bench import <format>`` command in bench/cli/imports.py (a ``bench init`` source is two
  more: bench/importers/init_source.py and bench/cli/init.py)."""

from __future__ import annotations

import importlib
import json
import sys
import typing

import grimp
import pytest
import typer
from typer.testing import CliRunner

from bench import cli
from bench.importers.init_source import SourceKind

# the recipe as a user writes it: a module of their own (the page's spreadsheet importer)
MY_IMPORTER = '''
import csv
import io

from bench.importers.common import ImportedToolset, make_tool, tool_name


def import_sheet(text, source):
    """A spreadsheet of tools, one argument each, as an imported toolset."""
    imported = ImportedToolset()
    for number, line in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        name = tool_name(line["name"], (t.name for t in imported.tools))
        if name != line["name"]:
            imported.renamed[line["name"]] = name
        schema = {"type": "object", "required": [line["argument"]],
                  "properties": {line["argument"]: {"type": line["type"]}}}
        imported.tools.append(make_tool(name, line["description"], schema,
                                        source=f"{source}: line {number}"))
    return imported
'''

SHEET = """name,description,argument,type
stock.lookup,Return the units in stock of one SKU.,sku,string
stock.reserve,Reserve units of one SKU for the customer.,units,integer
"""

CASES = [
    {"id": "sheet-1", "toolset": "sheet", "lang": "en",
     "messages": [{"role": "user", "content": "How many of SKU-7 are left?"}],
     "expected": {"calls": [{"name": "stock_lookup", "arguments": {"sku": ["SKU-7"]}}]}},
    {"id": "sheet-2", "toolset": "sheet", "lang": "en",
     "messages": [{"role": "user", "content": "Reserve 3 units, please."}],
     "expected": {"calls": [{"name": "stock_reserve", "arguments": {"units": [3]}}]}},
]

# bench/importers/ modules every importer shares, not formats of their own
SHARED = {"bench.importers", "bench.importers.common", "bench.importers.init_files",
          "bench.importers.init_guide", "bench.importers.init_settings",
          "bench.importers.init_source", "bench.importers.init_specs",
          "bench.importers.scaffold"}


@pytest.fixture
def my_importer(tmp_path, monkeypatch):
    """The user's module, written in a temporary folder and imported from there."""
    (tmp_path / "my_importer.py").write_text(MY_IMPORTER, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module("my_importer")
    finally:
        sys.modules.pop("my_importer", None)


@pytest.mark.slow
def test_a_toolset_your_importer_writes_is_measured_by_bench_run(my_importer, project,
                                                                  run_bench):
    """The variant and cases the user's importer writes (into the project BENCH_HOME names)
    run with ``bench run`` (oracle): every row is scored against the imported tools."""
    from bench.importers.common import write_cases, write_variant

    imported = my_importer.import_sheet(SHEET, "tools.csv")
    assert imported.renamed == {"stock.lookup": "stock_lookup",
                                "stock.reserve": "stock_reserve"}
    variant = write_variant("sheet", "imported", imported, header="imported from tools.csv")
    assert variant == project / "descriptions" / "sheet" / "variants" / "imported.yaml"
    write_cases("sheet", CASES)
    made = run_bench("run", "--dataset", "sheet", "--variants", "imported", "--provider",
                     "oracle", "--no-execute", "--run-id", "sheet")
    assert made.returncode == 0, made.stderr
    rows = [json.loads(line) for line in
            (project / "reports" / "runs" / "sheet" / "results.jsonl").read_text().splitlines()]
    assert sorted((r["case_id"], r["metrics"]["selection_correct"],
                   r["metrics"]["schema_valid"]) for r in rows) == \
        [("sheet-1", True, True), ("sheet-2", True, True)]


def test_every_shipped_importer_is_reached_by_a_command():
    """Each format module of bench/importers/ is imported by ``bench import``'s commands
    (bench/cli/imports.py) or by ``bench init`` (bench/importers/init_source.py): a module
    added without its command fails here."""
    graph = grimp.build_graph("bench", cache_dir=None)
    formats = graph.find_children("bench.importers") - SHARED
    assert {"bench.importers.bfcl", "bench.importers.toollists",
            "bench.importers.mcp_server", "bench.importers.python_module"} <= formats
    commands = {"bench.cli.imports", "bench.importers.init_source"}
    unreached = sorted(module for module in formats
                       if not graph.find_modules_that_directly_import(module) & commands)
    assert unreached == []


def test_every_import_command_and_init_source_is_offered():
    """``bench import --help`` lists a command per format, and ``bench init --help`` an
    option per source kind of bench/importers/init_source.py."""
    group = typer.main.get_command(cli.app).commands["import"]  # type: ignore[attr-defined]
    assert set(group.commands) == {"bfcl", "openai", "anthropic", "gemini", "mcp"}
    shown = CliRunner().invoke(cli.app, ["import", "--help"], env={"COLUMNS": "200"}).output
    assert all(name in shown for name in group.commands)
    shown = CliRunner().invoke(cli.app, ["init", "--help"], env={"COLUMNS": "200"}).output
    for kind in typing.get_args(SourceKind):
        assert f"--{kind}" in shown
