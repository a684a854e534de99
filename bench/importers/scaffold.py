"""``bench init``: a new project folder from a user's own tools.

Sources (each through its importer): an MCP server (a stdio command, or a Streamable HTTP
URL: :mod:`bench.importers.mcp_server`), an OpenAI, Anthropic or Gemini tools JSON file
(:mod:`bench.importers.toollists`), or a Python module of typed functions or pydantic models
(:mod:`bench.importers.python_module`).

What it writes (all at once, never over a file bench did not write:
:mod:`bench.importers.init_files`)::

    <dest>/
      pyproject.toml                       [tool.bench.gate] and [tool.bench.toolsets.<t>]
                                           (added to an existing one, its tables kept)
      README.md                            what to do next, step by step (BENCH.md beside
                                           a README of the user's)
      descriptions/<t>/variants/current.yaml   the imported tools, word for word
      descriptions/<t>/specs/<tool>.yaml   one spec per tool: the l3..l50 variants render it
      datasets/<t>/cases.jsonl             empty: one labeled case per line goes here
      datasets/<t>/README.md               the datasheet, with the case format and an example
      gate/                                the gate's baseline and recorded answers go here

A spec's sections come from the imported description
(:func:`bench.importers.init_specs.spec_sections`): its first
paragraph is the summary; sentences that start "Use it/this ..." and "Do not use ..." become
``when_to_use`` / ``when_not_to_use``; ``Returns:``, ``Raises:``/``Errors:`` and
``Examples:`` sections become ``returns``, ``errors`` and (as text) ``edge_cases``; every
other sentence is ``business_context``. Its ``input_schema`` is the tool's, parameter
descriptions included (the rendered variants move them into the prose).

This module decides and writes. What depends on the kind of source (reading it, how its
calls execute) is :mod:`bench.importers.init_source`; the specs are made by
:mod:`bench.importers.init_specs`, what ``--force`` keeps of the toolset's table by
:mod:`bench.importers.init_settings`, the guide, datasheet and ``pyproject.toml`` texts by
:mod:`bench.importers.init_guide`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from bench.errors import BenchError
from bench.importers.common import ImportedToolset, check_name, variant_yaml, write_file
from bench.importers.init_files import (InitPlan, ProjectFile, bench_wrote, earlier_toolset,
                                        guide_name, keep_spec_variants, merge_pyproject,
                                        plan_files, write_project)
from bench.importers.init_guide import (ERRORS_TOML, LABELS_TOML, datasheet, gate_toml,
                                        project_readme, pyproject_header, suggested_variants)
from bench.importers.init_settings import carry_settings, still_there
from bench.importers.init_source import (InitSource, read_source, referenced_server,
                                         toolset_settings)
from bench.importers.init_specs import spec_yaml
from bench.models import Tool
from bench.plural import count
from bench.toolset_config import PYPROJECT, ToolsetSettings, settings_toml

#: Where a stdio MCP server's stderr during ``bench init`` is kept, under ``reports/``.
INIT_SERVER_LOG = "mcp-server-init.log"


@dataclass
class InitResult:
    """What :func:`init_project` did: the files written, the import's notes, and the tools
    (with their permissions).

    Attributes:
        guide: the project guide's file name (``README.md``, ``BENCH.md`` beside a user's
            README, None when both are the user's).
        exports: the environment variables ``pyproject.toml`` names (``${NAME}``) in place
            of the secrets of the server's command line; each must be set for bench run.
    """

    root: Path
    toolset: str
    tools: list[Tool]
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    settings: ToolsetSettings | None = None
    guide: str | None = "README.md"
    exports: list[str] = field(default_factory=list)


#: Seconds per call (and for the import) when ``--timeout`` is not given.
DEFAULT_TIMEOUT_S = 10.0


def init_project(dest: Path, source: InitSource, toolset: str, *, read_only: Sequence[str] = (),
                 writes: Sequence[str] = (), execute: bool = True,
                 timeout_s: float | None = None, force: bool = False) -> InitResult:
    """Write a new project folder for the tools of ``source`` (see the module docstring).

    Args:
        dest: the project folder (created; may exist, but its files are not replaced unless
            ``force``).
        source: where the tools come from.
        toolset: the toolset (and dataset) name.
        read_only: tools that only read (permission ``read``; they always run).
        writes: write tools whose calls may run (``writes`` of the toolset's settings).
        execute: False declares no-execute mode (``execute = "none"``); a tools JSON file
            has nothing to execute and is always no-execute.
        timeout_s: per-call timeout written to the settings, in seconds; also the seconds
            an MCP server has to answer the import (``bench init --timeout``). None:
            :data:`DEFAULT_TIMEOUT_S`, or under ``force`` the earlier table's.
        force: replace bench's existing files and ``[tool.bench.toolsets.<toolset>]``,
            keeping each spec's ``variants:`` texts, ``[tool.bench.gate]``, the toolset's
            settings bench init does not write, and its ``timeout_s``, ``writes`` and
            ``read_only`` unless given (names of tools no longer imported dropped); the
            notes name what was kept and replaced.

    Returns:
        The files written and the import's notes.

    Raises:
        BenchError: a bad name, a source that fails or has no tools (nothing is written),
            an unknown tool in ``read_only`` or ``writes``, a secret in a server command
            line, or a file that exists (without ``force``).
    """
    check_name("toolset", toolset)
    dest = Path(dest).resolve()
    stored_server, secrets = referenced_server(source) if source.kind == "mcp" else (None, {})
    pyproject = dest / PYPROJECT
    earlier = earlier_toolset(pyproject, toolset) if force else None
    if timeout_s is None:
        old = (earlier or {}).get("timeout_s")
        timeout_s = float(old) if isinstance(old, (int, float)) and not isinstance(old, bool) \
            and 0 < old <= 600 else DEFAULT_TIMEOUT_S
    from bench.importers.mcp_server import ServerImportError
    try:
        imported = read_source(source, Path.cwd(), timeout=timeout_s)
    except ServerImportError as exc:
        raise kept_server_log(dest, exc.server_log, exc) from None
    try:
        return _init_imported(dest, source, toolset, imported, read_only=read_only,
                              writes=writes, execute=execute, timeout_s=timeout_s,
                              force=force, stored_server=stored_server, secrets=secrets,
                              earlier=earlier)
    except BenchError as exc:
        raise kept_server_log(dest, imported.server_log, exc) from None


def kept_server_log(dest: Path, log: str, error: BenchError) -> BenchError:
    """``error`` of a failed ``bench init`` naming the server's stderr ``log`` (redacted), kept
    in ``reports/`` :data:`INIT_SERVER_LOG` of ``dest`` (written atomically, replacing an
    earlier one); ``error`` itself when the server wrote nothing or the log cannot be
    written."""
    if not log.strip():
        return error
    path = dest / "reports" / INIT_SERVER_LOG
    try:
        write_file(path, log, force=True)
    except (BenchError, OSError):
        return error
    kept = BenchError(f"{error.message}; the server's stderr is kept in {path}", file=error.file,
                      line=error.line, field=error.field)
    kept.exit_code = error.exit_code
    return kept


def _init_imported(dest: Path, source: InitSource, toolset: str, imported: ImportedToolset,
                   *, read_only: Sequence[str], writes: Sequence[str], execute: bool,
                   timeout_s: float, force: bool, stored_server: list[str] | str | None,
                   secrets: dict[str, str], earlier: dict[str, Any] | None) -> InitResult:
    """:func:`init_project` once the tools of ``source`` are ``imported`` (its arguments,
    and what it computed before the import: the server's command line as stored,
    ``secrets`` it holds, the earlier toolset table under ``force``).

    Raises:
        BenchError: as :func:`init_project`, after the import.
    """
    pyproject = dest / PYPROJECT
    names = _check_imported(source, imported, read_only, writes)
    dropped: dict[str, list[str]] = {}  # setting -> its names no tool of the import has
    if earlier is not None:  # not given: the earlier table's, for the tools still there
        if not read_only:
            read_only, dropped["read_only"] = still_there(earlier.get("read_only"), names)
        if not writes:
            writes, dropped["writes"] = still_there(earlier.get("writes"), names)
    tools = [t.model_copy(update={"permission": "read"}) if t.name in read_only else t
             for t in imported.tools]
    label = source.label()
    settings = toolset_settings(source, dest, imported, tools, read_only=read_only,
                                 writes=writes, execute=execute, timeout_s=timeout_s,
                                 stored_server=stored_server)
    settings_note = None
    if earlier is not None:
        settings, settings_note = carry_settings(toolset, settings, earlier, pyproject,
                                                  dropped)
    result = InitResult(root=dest, toolset=toolset, tools=tools, notes=list(imported.notes),
                        settings=settings, exports=list(secrets))
    guide, guide_note = guide_name(dest)
    result.guide = guide
    if guide_note:
        result.notes.append(guide_note)
    tables = _pyproject_tables(toolset, label, settings, guide)
    files, kept_work = _project_files(dest, toolset, tools, label, settings, guide, force)
    plan = _plan(dest, toolset, files, tables, force)
    result.written += write_project(dest, plan)
    result.notes += plan.notes + ([settings_note] if settings_note else []) + kept_work
    if imported.server_log.strip():  # the server's stderr: kept, not on the terminal
        log = dest / "reports" / INIT_SERVER_LOG
        write_file(log, imported.server_log, force=True)
        lines = len(imported.server_log.strip().splitlines())
        result.notes.append(f"the server wrote {lines} line(s) to its stderr during the "
                            f"import: kept, redacted, in {log.relative_to(dest)}")
    return result


def _check_imported(source: InitSource, imported: ImportedToolset, read_only: Sequence[str],
                    writes: Sequence[str]) -> set[str]:
    """The names of the imported tools, once the import has a tool and ``--read-only`` and
    ``--writes`` name only imported tools.

    Raises:
        BenchError: no tool (names the tools file or the source), or an unknown tool name
            (names the option and lists the tools).
    """
    if not imported.tools:  # a project needs a tool: its guide and datasheet name one
        why = f" ({'; '.join(imported.notes)})" if imported.notes else ""
        if source.kind == "tools":
            raise BenchError(f"no tools{why}: bench init wrote nothing", file=source.path)
        raise BenchError(f"{source.label()} lists no tools{why}: bench init wrote nothing")
    names = {t.name for t in imported.tools}
    for option, listed in (("--read-only", read_only), ("--writes", writes)):
        unknown = [n for n in listed if n not in names]
        if unknown:
            raise BenchError(f"{option}: no tool named {', '.join(unknown)} (tools: "
                             f"{', '.join(sorted(names))})")
    return names


@dataclass(frozen=True)
class _Tables:
    """What bench init puts in ``pyproject.toml``: the comment above its tables (``top``),
    the toolset's table and the gate's table, as TOML text."""

    top: str
    toolset: str
    gate: str


def _pyproject_tables(toolset: str, label: str, settings: ToolsetSettings,
                      guide: str | None) -> _Tables:
    """The :class:`_Tables` of a new project (``label``: the source in a few words)."""
    toolset_table = settings_toml(toolset, settings, {
        "execute": "mcp | python | none (selection and arguments only)",
        "timeout_s": "seconds per call",
        "writes": "write tools whose calls may run",
        "read_only": "tools that only read: their calls always run",
        "server_names": "bench name -> the server's own name",
        "reason": "shown in the table and report"}) \
        + ("" if settings.execute == "none" else LABELS_TOML + ERRORS_TOML)
    return _Tables(pyproject_header(toolset, label, guide), toolset_table,
                   gate_toml(toolset, guide or "README.md"))


def _project_files(dest: Path, toolset: str, tools: list[Tool], label: str,
                   settings: ToolsetSettings, guide: str | None, force: bool
                   ) -> tuple[list[ProjectFile], list[str]]:
    """The files of the project but ``pyproject.toml``: the variant ``current``, a spec per
    tool, the empty dataset and its datasheet, ``gate/`` and the guide (its first run
    comparing only variants that differ), and the notes on the specs' reviewed texts
    kept under ``force``."""
    header = f"Imported by `bench init` from {label}: variant `current`, word for word."
    files = [
        ProjectFile(Path("descriptions", toolset, "variants", "current.yaml"),
                    variant_yaml(tools, header), "bench"),
        *[ProjectFile(Path("descriptions", toolset, "specs", f"{t.name}.yaml"),
                      spec_yaml(t, label, toolset), "bench") for t in tools],
        ProjectFile(Path("datasets", toolset, "cases.jsonl"), "", "data"),
        ProjectFile(Path("datasets", toolset, "README.md"), datasheet(toolset, tools, label),
                    "doc"),
        ProjectFile(Path("gate", ".gitkeep"), "", "keep"),
    ]
    kept_work = []
    for item in files:  # a spec's drafted and accepted texts are reviewed work: kept
        if force and item.rel.parent.name == "specs" and (dest / item.rel).is_file() \
                and bench_wrote(dest / item.rel):
            item.text, note = keep_spec_variants(dest / item.rel, item.rel, item.text)
            if note:
                kept_work.append(note)
    if guide:  # its first run compares only variants that differ (specs as written)
        suggested = suggested_variants(toolset, tools, [item.text for item in files
                                                        if item.rel.parent.name == "specs"],
                                       dest / "descriptions")
        files.insert(0, ProjectFile(Path(guide), project_readme(toolset, tools, label,
                                                                settings, suggested), "guide"))
    return files, kept_work


def _plan(dest: Path, toolset: str, files: list[ProjectFile], tables: _Tables,
          force: bool) -> InitPlan:
    """What :func:`~bench.importers.init_files.write_project` writes: ``files`` and
    ``pyproject.toml`` (new, or bench's tables merged into the user's).

    Raises:
        BenchError: a file of an earlier bench init exists and ``force`` is not given.
    """
    pyproject = dest / PYPROJECT
    plan, existing = plan_files(dest, files, force)
    if not pyproject.exists():
        plan.new.insert(0, (Path(PYPROJECT), tables.top + tables.toolset + "\n" + tables.gate))
    else:
        merged, merge_notes = merge_pyproject(pyproject, toolset, tables.top, tables.toolset,
                                              tables.gate, force)
        if merged is None:
            existing.insert(0, f"{PYPROJECT} [tool.bench.toolsets.{toolset}]")
        else:
            plan.replace.insert(0, (Path(PYPROJECT), merged))
            plan.notes += merge_notes
    if existing:
        raise BenchError(f"{count(len(existing), 'file')} of an earlier bench init already "
                         f"exist here, e.g. {existing[0]}: --force replaces bench's files "
                         "(your own files, your cases, the specs' variant texts, "
                         "[tool.bench.gate] and the other tables of pyproject.toml are kept)",
                         file=dest)
    return plan
