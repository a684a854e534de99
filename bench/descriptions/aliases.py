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
from typing import Iterable, Mapping, Sequence

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
            them and no old name may still be one (:func:`alias_problems`).

    Raises:
        BenchError: the file is not a mapping of tool names to tool names, a name is renamed
            twice (a duplicate key), two names rename to each other, a rename chains
            (``a: b`` and ``b: c``: write ``a: c``), or (with ``tools``) a new name is not a
            tool of the toolset or an old name still is (file, line, field).
    """
    found, _ = _read_aliases(toolset, root)
    if tools is not None:
        problems = alias_problems(toolset, {"": tools}, root)
        if problems:
            raise problems[0]
    return found


def _read_aliases(toolset: str, root: Path | None) -> tuple[dict[str, str], dict[str, int]]:
    """(old name -> new name, old name -> its line in ``aliases.yaml``); see
    :func:`load_aliases` for what is checked and raised."""
    path = aliases_path(toolset, root)
    if not path.is_file():
        return {}, {}
    data, node = load_yaml(path)
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise BenchError("aliases.yaml must map old tool names to new ones "
                         "(old_name: new_name)", file=path, line=1)
    seen: set[object] = set()
    for key, _ in getattr(node, "value", ()):  # YAML keeps the last of duplicate keys
        if getattr(key, "value", None) in seen:
            raise BenchError(f"'{key.value}' is renamed twice (a duplicate key): keep one",
                             file=path, line=key.start_mark.line + 1, field=str(key.value))
        seen.add(getattr(key, "value", None))
    found: dict[str, str] = {}
    lines: dict[str, int] = {}
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
        if line is not None:
            lines[old] = line
    for old, new in found.items():
        if new in found and found[new] == old:
            raise BenchError(f"'{old}' -> '{new}' -> '{old}' renames in a circle: a rename "
                             "goes from the old name to the current one; keep one of the two",
                             file=path, line=lines.get(old), field=old)
        if new in found:
            raise BenchError(f"'{old}' -> '{new}' -> '{found[new]}' chains renames: write "
                             f"'{old}: {found[new]}'", file=path,
                             line=lines.get(old), field=old)
    return found, lines


def alias_problems(toolset: str, tools: Mapping[str, Iterable[str]],
                   root: Path | None = None) -> list[BenchError]:
    """The renames of ``toolset``'s ``aliases.yaml`` that do not fit its tools: a new name
    that is not a tool, an old name that still is one (labels naming it would be ambiguous).
    A run applies the renames to every variant it runs, so each rule must hold in each.

    Args:
        toolset: the toolset's folder name.
        tools: variant name -> its tool names (``""`` as the name: no variant is named in
            the messages).
        root: the ``descriptions/`` folder (default: the project's).

    Returns:
        One error per rename and rule broken, in the file's order, each naming
        ``aliases.yaml``, the line, the field (the old name) and the variants where it fails;
        ``[]`` without ``aliases.yaml``.

    Raises:
        BenchError: an ``aliases.yaml`` that does not load (see :func:`load_aliases`).
    """
    found, lines = _read_aliases(toolset, root)
    path = aliases_path(toolset, root)
    known = {variant: set(names) for variant, names in tools.items()}
    problems: list[BenchError] = []
    for old, new in found.items():
        missing = [v for v, names in known.items() if new not in names]
        kept = [v for v, names in known.items() if old in names]
        for broken, message in (
                (missing, f"'{old}' is renamed to '{new}', which is not a tool of toolset "
                          f"'{toolset}'"),
                (kept, f"'{old}' is renamed to '{new}' but is still a tool of toolset "
                       f"'{toolset}': labels naming it would be ambiguous")):
            if not broken:
                continue
            named = [v for v in broken if v]
            if named:
                message += f" (variant{'s' if len(named) > 1 else ''} {', '.join(named)})"
            elif broken is missing:
                message += f" (tools: {', '.join(sorted(known[broken[0]]))})"
            problems.append(BenchError(message, file=path, line=lines.get(old), field=old))
    return problems


def check_aliases(toolset: str, variants: Iterable[str] | None = None,
                  root: Path | None = None) -> list[BenchError]:
    """:func:`alias_problems` of ``toolset`` against ``variants`` as they render now
    (default: every variant it has, :func:`bench.descriptions.variants.available_variants`);
    ``[]`` without ``aliases.yaml`` (no variant is loaded then).

    Raises:
        BenchError: an ``aliases.yaml`` that does not load, or a variant that does not.
    """
    from bench.descriptions.variants import available_variants, load_variant

    if not aliases_path(toolset, root).is_file():
        return []
    names = list(variants) if variants is not None else available_variants(toolset, root)
    return alias_problems(toolset, {name: [t.name for t in load_variant(toolset, name,
                                                                        root).tools]
                                    for name in names}, root)


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


def apply_aliases(dataset: Dataset, root: Path | None = None,
                  variants: Sequence[str] | None = None
                  ) -> tuple[Dataset, dict[str, dict[str, str]]]:
    """The dataset with every label read through its toolset's aliases.

    Args:
        dataset: the loaded dataset.
        root: the ``descriptions/`` folder (default: the project's).
        variants: the variants about to run; when given, each rename must fit each of them
            (:func:`alias_problems`), checked here, before the labels are checked against the
            tools, so that a wrong rename is blamed on ``aliases.yaml`` and not on the case
            whose label it renamed.

    Returns:
        (the dataset, with renamed labels; the same object when no toolset has aliases),
        ({toolset: {old name: new name}} for each toolset that has aliases).

    Raises:
        BenchError: an invalid ``aliases.yaml`` (see :func:`load_aliases`), or a rename that
            does not fit one of ``variants`` (as :func:`alias_problems`), or a variant that
            does not load (as :func:`bench.descriptions.variants.load_variant`).
    """
    from dataclasses import replace

    renames = {toolset: found for toolset in dataset.toolsets
               if (found := load_aliases(toolset, root))}
    if not renames:
        return dataset, {}
    for toolset in renames if variants is not None else ():
        problems = check_aliases(toolset, variants, root)
        if problems:
            raise problems[0]
    cases = tuple(rename_case(c, renames.get(c.toolset, {})) for c in dataset.cases)
    return replace(dataset, cases=cases), renames
