"""Tool aliases: a renamed tool keeps its dataset labels valid.

A toolset declares its renames in ``descriptions/<toolset>/aliases.yaml``, one ``old_name:
new_name`` per line::

    # get_inventory was renamed get_stock in v2 of the API
    get_inventory: get_stock

Labels (``expected.calls``, an episode's ``required_calls`` and ``forbidden_calls``) that name
``old_name`` are read as naming ``new_name`` when a run loads the dataset
(:func:`apply_aliases`), so they score against the tool the model is shown; the run's manifest
records the renames (``variants[].aliases``) and the table, ``bench show --per-tool`` and the
report show ``new_name (was old_name)``. A model that calls ``old_name`` still calls a tool
that does not exist: the alias is for labels, not for answers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from bench.datasets import Dataset
from bench.errors import BenchError
from bench.models import Case
from bench.paths import descriptions_dir
from bench.yamlio import line_of, load_yaml

ALIASES_FILE = "aliases.yaml"
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # bench.models.Tool's rule


def aliases_path(toolset: str, root: Path | None = None) -> Path:
    """``<root>/<toolset>/aliases.yaml`` (root: the project's ``descriptions/``)."""
    return (root or descriptions_dir()) / toolset / ALIASES_FILE


def load_aliases(toolset: str, root: Path | None = None,
                 tools: Iterable[str] | None = None) -> dict[str, str]:
    """The renames of ``toolset``: old name -> new name; ``{}`` without ``aliases.yaml``.

    Args:
        toolset: the toolset's folder name.
        root: the ``descriptions/`` folder (default: the project's).
        tools: the toolset's current tool names; when given, every new name must be one of
            them and no old name may still be one.

    Raises:
        BenchError: the file is not a mapping of tool names to tool names, a name is renamed
            twice (a duplicate key), two names rename to each other, a rename chains
            (``a: b`` and ``b: c``: write ``a: c``), or (with ``tools``) a new name is not a
            tool of the toolset or an old name still is (file, line, field).
    """
    path = aliases_path(toolset, root)
    if not path.is_file():
        return {}
    data, node = load_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BenchError("aliases.yaml must map old tool names to new ones "
                         "(old_name: new_name)", file=path, line=1)
    seen: set[object] = set()
    for key, _ in getattr(node, "value", ()):  # YAML keeps the last of duplicate keys
        if getattr(key, "value", None) in seen:
            raise BenchError(f"'{key.value}' is renamed twice (a duplicate key): keep one",
                             file=path, line=key.start_mark.line + 1, field=str(key.value))
        seen.add(getattr(key, "value", None))
    known = set(tools) if tools is not None else None
    found: dict[str, str] = {}
    for old, new in data.items():
        line = line_of(node, [old])
        for kind, name in (("old", old), ("new", new)):
            if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
                raise BenchError(f"the {kind} name {name!r} is not a tool name "
                                 "(letters, digits, '_' and '-', at most 64)", file=path,
                                 line=line, field=str(old))
        if old == new:
            raise BenchError(f"'{old}' is renamed to itself", file=path, line=line,
                             field=old)
        found[old] = new
    for old, new in found.items():
        if new in found and found[new] == old:
            raise BenchError(f"'{old}' -> '{new}' -> '{old}' renames in a circle: a rename "
                             "goes from the old name to the current one; keep one of the two",
                             file=path, line=line_of(node, [old]), field=old)
        if new in found:
            raise BenchError(f"'{old}' -> '{new}' -> '{found[new]}' chains renames: write "
                             f"'{old}: {found[new]}'", file=path,
                             line=line_of(node, [old]), field=old)
    for old, new in found.items():
        line = line_of(node, [old])
        if known is not None and new not in known:
            raise BenchError(f"'{old}' is renamed to '{new}', which is not a tool of "
                             f"toolset '{toolset}' (tools: {', '.join(sorted(known))})",
                             file=path, line=line, field=old)
        if known is not None and old in known:
            raise BenchError(f"'{old}' is renamed to '{new}' but is still a tool of toolset "
                             f"'{toolset}': labels naming it would be ambiguous", file=path,
                             line=line, field=old)
    return found


def rename_case(case: Case, renamed: dict[str, str]) -> Case:
    """``case`` with every label naming an old tool name naming the new one instead
    (expected calls, required and forbidden calls); the same object when none does."""
    if not renamed:
        return case
    data = case.model_dump(exclude_unset=True)
    changed = False
    expected = data.get("expected") or {}
    groups = [expected.get("calls") or [], data.get("required_calls") or [],
              data.get("forbidden_calls") or []]
    for group in groups:
        for call in group:
            if isinstance(call, dict) and call.get("name") in renamed:
                call["name"] = renamed[call["name"]]
                changed = True
    if not changed:
        return case
    if data.get("kind") == "episode":  # derived from required_calls; must not be given
        data.pop("expected", None)
    return Case.model_validate(data)


def apply_aliases(dataset: Dataset, root: Path | None = None) -> tuple[Dataset,
                                                                       dict[str, dict[str, str]]]:
    """The dataset with every label read through its toolset's aliases.

    Returns:
        (the dataset, with renamed labels; the same object when no toolset has aliases),
        ({toolset: {old name: new name}} for each toolset that has aliases).

    Raises:
        BenchError: an invalid ``aliases.yaml`` (see :func:`load_aliases`).
    """
    from dataclasses import replace

    renames = {toolset: found for toolset in dataset.toolsets
               if (found := load_aliases(toolset, root))}
    if not renames:
        return dataset, {}
    cases = tuple(rename_case(c, renames.get(c.toolset, {})) for c in dataset.cases)
    return replace(dataset, cases=cases), renames
