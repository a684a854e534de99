"""Everything of ``bench init`` that depends on the kind of source (a new kind is added here
and in :mod:`bench.cli.init`): where it reads the tools (:class:`InitSource`), reading them
through the source's importer (:func:`read_source`), the server's command line as
``pyproject.toml`` gets it, secrets replaced by ``${NAME}`` references
(:func:`referenced_server`), and how the toolset's calls execute (:func:`toolset_settings`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

from bench.errors import BenchError
from bench.importers.common import ImportedToolset
from bench.models import Tool
from bench.toolset_config import ToolsetSettings, server_label

SourceKind = Literal["mcp", "tools", "python"]


@dataclass
class InitSource:
    """Where ``bench init`` reads the tools.

    Attributes:
        kind: ``mcp`` (``server``: a command list or a URL), ``tools`` (``path``: a JSON
            file; ``fmt`` its format or None to detect it) or ``python`` (``module``: a file
            or dotted module name).
    """

    kind: SourceKind
    server: list[str] | str | None = None
    path: Path | None = None
    fmt: str | None = None
    module: str | None = None

    def label(self) -> str:
        """A few words naming the source (never a whole command line: it may hold a token)."""
        if self.kind == "mcp":
            assert self.server is not None
            return f"the MCP server {server_label(self.server)}"
        if self.kind == "tools":
            return f"the {self.fmt or 'tools'} file {self.path.name if self.path else '?'}"
        return f"the Python module {self.module}"


def read_source(source: InitSource, base: Path, timeout: float = 30.0) -> ImportedToolset:
    """The tools of ``source`` (through its importer).

    Raises:
        BenchError: whatever the importer raises (one line naming the file or server).
    """
    if source.kind == "mcp":
        from bench.importers.mcp_server import import_mcp
        from bench.toolset_config import expand
        assert source.server is not None
        parts = [source.server] if isinstance(source.server, str) else source.server
        unset = [name for part in parts for name in re.findall(r"\$\{([A-Za-z_]\w*)\}", part)
                 if name not in os.environ]
        if unset:
            raise BenchError(f"--mcp names ${{{unset[0]}}} but the environment variable "
                             f"{unset[0]} is not set: export it, then run bench init again")
        # ${NAME} in the command line, expanded as bench run does
        server = expand(source.server) if isinstance(source.server, str) else \
            [expand(part) for part in source.server]
        return import_mcp(server, timeout=timeout)
    if source.kind == "tools":
        from bench.importers.toollists import detect_format, import_tool_list
        assert source.path is not None
        fmt = source.fmt or detect_format(source.path)
        source.fmt = fmt
        return import_tool_list(source.path, fmt)  # type: ignore[arg-type]
    from bench.importers.python_module import import_python
    assert source.module is not None
    return import_python(source.module, base)[0]


def referenced_server(source: InitSource) -> tuple[list[str] | str | None, dict[str, str]]:
    """The server's command line or URL as ``pyproject.toml`` gets it: each secret replaced
    by a ``${NAME}`` reference (:func:`bench.redact.reference_secrets`: by shape and by
    option, header or variable name, in one argument or split over several), since secrets
    never reach disk.

    Returns:
        (the command line or URL with references, ``{NAME: value}`` of the secrets taken
        out: the user exports them for ``bench run``).

    Raises:
        BenchError: a secret that no rule can name is left in it (refused, with the
            ``${NAME}`` way to pass it).
    """
    from bench.redact import reference_secrets
    if source.server is None:
        return None, {}
    try:
        return reference_secrets(source.server)
    except ValueError:
        raise BenchError("the server's command line or URL holds what looks like a secret, "
                         "and bench init would write it to pyproject.toml: pass it through an "
                         "environment variable and write ${NAME} instead (single-quoted, so "
                         "the shell keeps it), e.g. 'https://host/mcp?token=${MCP_TOKEN}'"
                         ) from None


def toolset_settings(source: InitSource, dest: Path, imported: ImportedToolset,
                     tools: Sequence[Tool], *, read_only: Sequence[str],
                     writes: Sequence[str], execute: bool, timeout_s: float,
                     stored_server: list[str] | str | None) -> ToolsetSettings:
    """The ``[tool.bench.toolsets.<toolset>]`` settings this init writes: no execution for a
    tools file or ``--no-execute``; else the MCP server (its command line as stored, from the
    project's folder; its tools' bench names) or the Python module (relative to ``dest``
    when it is inside it)."""
    if source.kind == "tools" or not execute:
        reason = ("a tools file has no implementation to execute" if source.kind == "tools"
                  else "declared by bench init --no-execute")
        return ToolsetSettings(execute="none", reason=reason, timeout_s=timeout_s)
    if source.kind == "mcp":
        # the server's word on a tool's permission and name is its annotation and its
        # listing: --read-only and the import's renames must reach the run (runhook)
        return ToolsetSettings(execute="mcp", server=from_project(stored_server, dest),
                               timeout_s=timeout_s, writes=list(writes),
                               read_only=[t.name for t in tools if t.name in read_only],
                               server_names=dict(imported.source_names))
    module = source.module or ""
    module_path = Path(module)
    if module.endswith(".py") or module_path.is_file():
        absolute = module_path.resolve()
        try:
            module = str(absolute.relative_to(dest))
        except ValueError:
            module = str(absolute)
    return ToolsetSettings(execute="python", module=module, timeout_s=timeout_s,
                           writes=list(writes))


def from_project(server: list[str] | str | None, dest: Path) -> list[str] | str | None:
    """A stdio command as the project will start it (in its own folder): an argument naming
    an existing file relative to the current directory is made relative to ``dest``."""
    if not isinstance(server, list):
        return server
    here = Path.cwd().resolve()
    if here == dest:
        return server
    return [os.path.relpath(here / part, dest) if i and not Path(part).is_absolute()
            and (here / part).is_file() else part for i, part in enumerate(server)]
