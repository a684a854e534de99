"""What ``bench init --force`` keeps of the earlier ``[tool.bench.toolsets.<toolset>]`` table:
the names of ``writes`` and ``read_only`` still tools of the import (:func:`still_there`)
and the settings bench init does not write (:func:`carry_settings`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.importers.init_files import INIT_SETTINGS
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
