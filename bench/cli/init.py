"""``bench init``: a new project folder from your own tools (:mod:`bench.importers.scaffold`)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from bench.cli.options import split_list
from bench.errors import BenchError, terminal_safe
from bench.plural import count

if TYPE_CHECKING:
    from bench.importers.init_source import InitSource
    from bench.importers.scaffold import InitResult

out = Console(soft_wrap=True)


def init(
    folder: Annotated[Path, typer.Argument(help="The new project folder (created).")],
    mcp: Annotated[Optional[str], typer.Option(
        "--mcp", help="An MCP server: a command line started over stdio ('python server.py') "
                      "or a Streamable HTTP URL (http://127.0.0.1:8000/mcp).")] = None,
    tools: Annotated[Optional[Path], typer.Option(
        "--tools", help="An OpenAI, Anthropic or Gemini tools JSON file.")] = None,
    tools_format: Annotated[Optional[str], typer.Option(
        "--format", help="The tools file's format: openai, anthropic or gemini (default: "
                         "told by its keys).")] = None,
    python: Annotated[Optional[str], typer.Option(
        "--python", help="A Python module of typed functions or pydantic models: a .py file "
                         "or a dotted module name.")] = None,
    name: Annotated[Optional[str], typer.Option(
        "--name", help="Toolset and dataset name (default: the folder's name).")] = None,
    read_only: Annotated[Optional[list[str]], typer.Option(
        "--read-only", help="Tools that only read (comma-separated): they always run.")]
    = None,
    writes: Annotated[Optional[list[str]], typer.Option(
        "--writes", help="Write tools whose calls may run (comma-separated); the others are "
                         "refused, and the table says so.")] = None,
    no_execute: Annotated[bool, typer.Option(
        "--no-execute", help="Declare that calls are never executed: selection and arguments "
                             "only (a tools file always is).")] = False,
    timeout: Annotated[Optional[float], typer.Option(
        min=0.1, max=600, help="Seconds per executed call; also the import's limit "
                               "(default: 10, or with --force the earlier table's).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace the files and tables an earlier bench init wrote (never a file "
                        "bench did not write, your cases, a spec's variant texts, the gate or "
                        "the toolset's settings bench init does not write; the notes say what "
                        "was kept and replaced).")] = False,
) -> None:
    """A new project from an MCP server, a tools JSON file or a Python module: a spec per
    tool (the imported text is variant `current`; l3..l50 render the specs), how calls
    execute and a gate in pyproject.toml (added to yours), an empty dataset with its format,
    and a README (BENCH.md beside yours). Secrets in --mcp become ${NAME} references."""
    from bench.importers.common import check_name
    from bench.importers.scaffold import init_project

    source = _source(mcp, tools, tools_format, python)
    toolset = name or folder.resolve().name
    try:
        check_name("toolset", toolset)
    except BenchError as exc:
        if name:
            raise
        raise BenchError(f"{exc.message}: the folder's name is the toolset's unless "
                         "--name NAME gives one") from None
    result = init_project(folder, source, toolset, read_only=split_list(read_only),
                          writes=split_list(writes), execute=not no_execute, timeout_s=timeout,
                          force=force)
    _print_result(folder, toolset, source, result)


def _source(mcp: str | None, tools: Path | None, tools_format: str | None,
            python: str | None) -> InitSource:
    """The one source ``bench init`` was given: ``--mcp`` (a command line, split as a shell
    does, or a URL), ``--tools`` with its ``--format``, or ``--python``.

    Raises:
        BenchError: none or several sources, ``--format`` without ``--tools`` or not a known
            format, or an ``--mcp`` command line that cannot be split.
    """
    from bench.importers.init_source import InitSource

    given = [option for option, value in (("--mcp", mcp), ("--tools", tools),
                                          ("--python", python)) if value]
    if len(given) != 1:
        raise BenchError("give one source: --mcp 'COMMAND' or --mcp URL, --tools FILE.json, "
                         "or --python FILE.py" + (f" (got {', '.join(given)})" if given else ""))
    if tools_format and not tools:
        raise BenchError("--format applies to --tools only")
    if tools_format and tools_format not in ("openai", "anthropic", "gemini"):
        raise BenchError(f"--format must be openai, anthropic or gemini, not '{tools_format}'")
    if mcp:
        if mcp.startswith(("http://", "https://")):
            server: list[str] | str = mcp
        else:
            try:
                server = shlex.split(mcp)
            except ValueError as exc:
                raise BenchError(f"--mcp: {exc} in '{mcp}'") from None
        return InitSource("mcp", server=server)
    if tools:
        return InitSource("tools", path=tools, fmt=tools_format)
    return InitSource("python", module=python)


def _print_result(folder: Path, toolset: str, source: InitSource, result: InitResult) -> None:
    """What ``bench init`` made (stdout): its notes, the tools imported, the files written,
    the secrets to export, how calls execute, and what to do next."""
    from bench.descriptions.variants import same_text_notes
    from bench.toolset_config import read_only_fix

    for note in result.notes:
        out.print(f"note: {terminal_safe(note)}", markup=False)
    for note in same_text_notes(toolset, result.root / "descriptions"):
        out.print(f"note: {terminal_safe(note)}", markup=False)
    out.print(f"imported {count(len(result.tools), 'tool')} from {source.label()} into "
              f"{result.root} (toolset '{toolset}')", markup=False)
    for path in result.written:
        out.print(f"  wrote {path.relative_to(result.root)}", markup=False)
    if result.exports:
        names = ", ".join(result.exports)
        out.print(f"secrets: pyproject.toml names ${{{result.exports[0]}}}"
                  + (f" and {len(result.exports) - 1} more" if len(result.exports) > 1 else "")
                  + f" instead of the values on the command line: export {names} (their "
                  "values) before bench run", markup=False)
    settings = result.settings
    assert settings is not None
    if settings.execute == "none":
        out.print(f"execution: none ({settings.reason}); runs score selection and arguments "
                  "only, and say so", markup=False)
    else:
        refused = [t.name for t in result.tools
                   if t.permission != "read" and t.name not in settings.writes]
        out.print(f"execution: {settings.execute}, {settings.timeout_s:g} s per call"
                  + (f"; writes refused for {', '.join(refused)} until listed in writes = "
                     f"[...] of pyproject.toml; {read_only_fix(refused)}" if refused else ""),
                  markup=False)
    go = "" if folder.resolve() == Path.cwd().resolve() else f"cd {shlex.quote(str(folder))} and "
    follow = f"follow {result.guide} (add" if result.guide else "add"
    out.print(f"next: {go}{follow} cases to datasets/{toolset}/cases.jsonl, then bench run"
              + (")" if result.guide else ""), markup=False)
