"""The ``[tool.bench.toolsets.<toolset>]`` table ``bench init`` writes: its settings from the
source (:func:`toolset_settings`), and under ``--force`` what it keeps of the earlier table
(:func:`still_there`, :func:`carry_settings`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from bench.errors import BenchError
from bench.importers.common import ImportedToolset
from bench.importers.init_files import INIT_SETTINGS
from bench.importers.init_source import InitSource
from bench.models import Tool
from bench.toolset_config import ToolsetSettings

#: The settings bench init writes whose earlier value a note may quote (never ``server``:
#: a command line written in clear may hold a secret).
_QUOTED = ("execute", "timeout_s", "writes", "read_only")


def still_there(listed: Any, names: set[str]) -> tuple[list[str], list[str]]:
    """(the names of ``listed``, an earlier table's ``writes`` or ``read_only``, that are
    tools of the import; the others). Not a list of strings: ([], [])."""
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        return [], []
    return [n for n in listed if n in names], [n for n in listed if n not in names]


def carry_settings(toolset: str, settings: ToolsetSettings, earlier: dict[str, Any],
                   pyproject: Path, dropped: dict[str, list[str]]
                   ) -> tuple[ToolsetSettings, str | None]:
    """``settings`` (this init's) with every setting of the ``earlier`` table that bench init
    does not write (:data:`~bench.importers.init_files.INIT_SETTINGS`: ``env``, ``reset``,
    ``compare``, ``error_pattern``...) kept, for ``--force``. ``timeout_s``, ``writes`` and
    ``read_only`` were taken from ``earlier`` already unless given (``dropped``: the names
    of each that are no tool of the import).

    Returns:
        (the settings to write, a note naming the settings kept, those this init wrote with
        another value, and the names dropped; None when there is nothing to say).

    Raises:
        BenchError: a kept setting is not valid (names the file and field).
    """
    from pydantic import ValidationError

    from bench.errors import pydantic_error_field

    carried = {key: value for key, value in earlier.items() if key not in INIT_SETTINGS}
    if carried:
        try:
            settings = ToolsetSettings.model_validate(
                {**settings.model_dump(exclude_none=True), **carried})
        except ValidationError as exc:
            where, message = pydantic_error_field(exc)
            raise BenchError(f"{message} (a setting bench init --force keeps: fix it, then run "
                             "bench init again)", file=pyproject,
                             field=f"tool.bench.toolsets.{toolset}"
                             + (f".{where}" if where else "")) from None
    now = settings.model_dump(exclude_none=True)
    same = [key for key in ("timeout_s", "writes", "read_only")
            if earlier.get(key) == now.get(key) and earlier.get(key)]
    gone = {key: names for key, names in dropped.items() if names}
    replaced = [key for key in INIT_SETTINGS
                if key in earlier and earlier[key] != now.get(key) and key not in gone]
    kept = [*carried, *same]
    if not kept and not replaced and not gone:
        return settings, None

    def was(key: str) -> str:  # never the server's command line: it may hold a secret
        return f"{key} (was {json.dumps(earlier[key])})" if key in _QUOTED else key

    parts = ([f"kept {', '.join(kept)}"] if kept else []) + \
        [f"{key}: dropped {', '.join(names)} (no tool of the import)"
         for key, names in gone.items()] + \
        ([f"replaced {', '.join(map(was, replaced))} by this init's"] if replaced else [])
    return settings, f"pyproject.toml [tool.bench.toolsets.{toolset}]: {'; '.join(parts)}"


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
