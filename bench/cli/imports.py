"""``bench import``: bring tools (and BFCL cases) from other formats into bench."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from bench.errors import BenchError
from bench.paths import project_root
from bench.plural import count

if TYPE_CHECKING:  # the importers load when a command runs
    from bench.importers.common import ImportedToolset
    from bench.importers.toollists import Format

import_app = typer.Typer(no_args_is_help=True, help="Import toolsets (and BFCL cases) from "
                         "BFCL, OpenAI, Anthropic or Gemini tool lists, or a live MCP server.")
out = Console()

NameOption = Annotated[Optional[str], typer.Option(
    "--name", help="Toolset name (folder under descriptions/); default: the file's stem.")]
VariantOption = Annotated[str, typer.Option(help="Name of the hand-written variant file.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Replace existing files.")]


def _default_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", path.stem).strip("_-")[:64] or "imported"


def _report(imported: ImportedToolset, variant_path: Path) -> None:
    for note in imported.notes:
        out.print(f"note: {note}", soft_wrap=True, markup=False)
    if imported.renamed:
        out.print(f"renamed {count(len(imported.renamed), 'tool')} to valid names (e.g. "
                  f"{next(iter(imported.renamed))} -> {next(iter(imported.renamed.values()))})",
                  markup=False)
    out.print(f"wrote {count(len(imported.tools), 'tool')} -> {variant_path}", markup=False)


@import_app.command("bfcl")
def import_bfcl_cmd(
    questions: Annotated[list[Path], typer.Argument(help="BFCL question files (JSON Lines).")],
    name: Annotated[str, typer.Option("--name", help="Dataset and toolset name.")],
    answers: Annotated[Optional[list[Path]], typer.Option(
        "--answers", help="Possible-answer files (default: possible_answer/<same name> beside "
                          "each question file; irrelevance categories need none).")] = None,
    variant: VariantOption = "bfcl",
    force: ForceOption = False,
) -> None:
    """BFCL questions + possible answers -> datasets/NAME/cases.jsonl and a toolset variant.

    Also writes, beside cases.jsonl, bfcl.jsonl (each case's BFCL entry, for the BFCL
    verdict of `bench run`) and excluded.jsonl (cases left out for conflicting labels); each
    conflicting label is reported on one line (case, parameter, why).
    """
    from bench.importers.bfcl import EXCLUDED_FILE, SOURCE_FILE, import_bfcl
    from bench.importers.common import write_cases, write_dataset_file, write_variant

    result = import_bfcl(questions, answers, toolset=name)
    if not result.cases:
        raise BenchError(f"no case left to import: all {count(len(result.excluded), 'case')} "
                         "have conflicting labels")
    header = (f"Imported by `bench import bfcl` from {', '.join(p.name for p in questions)}.\n"
              "Source: Berkeley Function Calling Leaderboard (gorilla), Apache-2.0; cite the "
              "BFCL authors.")
    cases_path = write_cases(name, result.cases, force=force)
    write_dataset_file(name, SOURCE_FILE, result.sources, force=force)
    excluded_path = write_dataset_file(name, EXCLUDED_FILE, result.excluded, force=force)
    variant_path = write_variant(name, variant, result.toolset, header=header, force=force)
    _report(result.toolset, variant_path)
    for conflict in result.conflicts:
        out.print(f"conflicting label: {conflict.line()}", soft_wrap=True, markup=False)
    out.print(f"wrote {count(len(result.cases), 'case')} -> {cases_path}", markup=False)
    if result.conflicts:
        out.print(f"{count(len(result.conflicts), 'conflicting label')}: "
                  f"{count(len(result.excluded), 'case')} left out (listed in {excluded_path}), "
                  "the other conflicting values dropped", soft_wrap=True, markup=False)
    out.print(f"run it: {_home_prefix()}bench run --dataset {name} --variants {variant}",
              soft_wrap=True, markup=False)


def _home_prefix() -> str:
    """``BENCH_HOME=<root> `` (shell-quoted) when the import wrote to a ``BENCH_HOME`` that is
    not the current directory, else ``""``: the printed command then finds the dataset."""
    root = project_root()
    if not os.environ.get("BENCH_HOME") or root == Path.cwd().resolve():
        return ""
    return f"BENCH_HOME={shlex.quote(str(root))} "


def _import_list(path: Path, fmt: Format, name: str | None, variant: str, force: bool
                 ) -> None:
    from bench.importers.common import write_variant
    from bench.importers.toollists import import_tool_list

    imported = import_tool_list(path, fmt)
    header = f"Imported by `bench import {fmt}` from {path.name}."
    _report(imported, write_variant(name or _default_name(path), variant, imported,
                                    header=header, force=force))


@import_app.command("openai")
def import_openai_cmd(
    file: Annotated[Path, typer.Argument(help="JSON list of OpenAI tools (Chat Completions "
                                              "or Responses shape).")],
    name: NameOption = None, variant: VariantOption = "current", force: ForceOption = False,
) -> None:
    """An OpenAI tools list -> descriptions/NAME/variants/VARIANT.yaml."""
    _import_list(file, "openai", name, variant, force)


@import_app.command("anthropic")
def import_anthropic_cmd(
    file: Annotated[Path, typer.Argument(help="JSON list of Anthropic tools.")],
    name: NameOption = None, variant: VariantOption = "current", force: ForceOption = False,
) -> None:
    """An Anthropic tools list -> descriptions/NAME/variants/VARIANT.yaml."""
    _import_list(file, "anthropic", name, variant, force)


@import_app.command("gemini")
def import_gemini_cmd(
    file: Annotated[Path, typer.Argument(help="JSON Gemini tools ({\"functionDeclarations\": "
                                              "[...]}) or a list of function declarations.")],
    name: NameOption = None, variant: VariantOption = "original", force: ForceOption = False,
) -> None:
    """Gemini function declarations -> descriptions/NAME/variants/VARIANT.yaml."""
    _import_list(file, "gemini", name, variant, force)


@import_app.command("mcp")
def import_mcp_cmd(
    command: Annotated[list[str], typer.Argument(
        help="The server command, after '--' (e.g. -- python server.py).")],
    name: Annotated[str, typer.Option("--name", help="Toolset name.")],
    variant: VariantOption = "current",
    timeout: Annotated[float, typer.Option(min=1, help="Seconds allowed for tools/list.")]
    = 30.0,
    force: ForceOption = False,
) -> None:
    """Start an MCP server over stdio, call tools/list, write its tools as a variant."""
    from bench.importers.common import write_variant
    from bench.importers.mcp_server import import_mcp

    imported = import_mcp(command, timeout=timeout)
    # Only the program name: a command line can carry tokens, and secrets never reach disk.
    header = f"Imported by `bench import mcp` from the tools/list of {Path(command[0]).name}."
    _report(imported, write_variant(name, variant, imported, header=header, force=force))
    if imported.server_log.strip():  # captured: a server's log lines are not bench's output
        out.print(f"note: the server wrote "
                  f"{len(imported.server_log.strip().splitlines())} line(s) to its stderr "
                  "(not shown)", markup=False)
