"""Where ``bench init`` reads the tools (:class:`InitSource`), reading them through the
source's importer (:func:`read_source`), and the server's command line as ``pyproject.toml``
gets it, secrets replaced by ``${NAME}`` references (:func:`referenced_server`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bench.errors import BenchError
from bench.importers.common import ImportedToolset
from bench.toolset_config import server_label

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
