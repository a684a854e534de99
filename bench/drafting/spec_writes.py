"""Drafts written into a toolset's spec files (:mod:`bench.drafting`): each spec is rewritten
atomically under a lock of the toolset's folder (:func:`specs_lock`), after checking that it
loads, and only its top-level ``variants:`` block changes
(:func:`bench.descriptions.spec_files.replace_variants_block`); ``bench variants accept``
(:func:`accept_drafts`) marks drafts reviewed the same way."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import yaml

from bench.descriptions.lock import tool_hashes
from bench.descriptions.spec_files import read_spec_text, replace_variants_block
from bench.descriptions.specs import load_spec
from bench.descriptions.variants import Variant, check_toolset
from bench.drafting.outcomes import Draft
from bench.errors import BenchError
from bench.models import Tool
from bench.paths import descriptions_dir
from bench.store.files import atomic_write_text
from bench.yamlio import load_yaml


def spec_path(toolset_dir: Path, tool: str) -> Path:
    """The spec file of ``tool`` in the toolset folder ``toolset_dir``."""
    return toolset_dir / "specs" / f"{tool}.yaml"


def new_spec_data(tool: Tool) -> dict[str, Any]:
    """A minimal spec of an imported tool: name, permission, summary (the first line of its
    description) and input schema."""
    summary = next((line.strip() for line in tool.description.splitlines() if line.strip()),
                   tool.name)
    data: dict[str, Any] = {"name": tool.name}
    if tool.permission != "read":
        data["permission"] = tool.permission
    data["summary"] = summary
    data["input_schema"] = tool.input_schema
    return data


def new_spec_text(tool: Tool) -> str:
    """The text of a minimal spec for an imported tool (:func:`new_spec_data`)."""
    body: str = yaml.safe_dump(new_spec_data(tool), allow_unicode=True, sort_keys=False,
                               width=100)
    return ("# Written by `bench variants draft` from the imported description; "
            "the variants below are\n# the tool's own texts (draft: true until "
            "`bench variants accept`).\n" + body)


def write_spec(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, after checking that it loads as a spec (a copy
    of the same name in a temporary folder beside it is loaded first).

    Raises:
        BenchError: the new text is not a valid spec (the file is left unchanged).
    """
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".check-") as folder:
        check = Path(folder) / path.name
        check.write_text(text, encoding="utf-8")
        try:
            load_spec(check)
        except BenchError as exc:
            raise BenchError(f"the updated spec would not load: {exc.message}", file=path,
                             field=exc.field) from None
    atomic_write_text(path, text)


def variants_of(path: Path) -> dict[str, Any]:
    """The ``variants:`` block of the spec at ``path`` ({} without the file or the block).

    Raises:
        BenchError: the file is not UTF-8 YAML (names the file and line).
    """
    data = load_yaml(path)[0] if path.is_file() else None
    found = data.get("variants") if isinstance(data, dict) else None
    return dict(found) if isinstance(found, dict) else {}


@contextlib.contextmanager
def specs_lock(toolset_dir: Path) -> Iterator[None]:
    """Hold an exclusive advisory ``flock`` on the toolset's folder for a read-modify-write
    of its spec files, waiting for another holder (two ``bench variants draft`` on one
    toolset, or an accept): without it, each rewrote a spec from what it had read, and the
    later write dropped the other's drafts. The folder itself is locked, not a file in it,
    as :meth:`bench.store.RunStore.writing` does: nothing is left behind."""
    fd = os.open(toolset_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def store_drafts(toolset_dir: Path, base: Variant, name: str, drafts: Sequence[Draft],
                 before: dict[str, Any], provider_id: str, source: str
                 ) -> tuple[list[Draft], list[str]]:
    """Write ``drafts`` of tool ``name`` into its spec under :func:`specs_lock`, re-reading
    the spec there, and give every tool of ``base`` without a spec a minimal one (so that a
    length renders every tool, its drafts or its template's text).

    A length whose text changed since the command read it (``before``: the spec's
    ``variants`` then), i.e. another process drafted or accepted it meanwhile, is kept as it
    is and named.

    Returns:
        The drafts written, and one ``"l<N>: why"`` per draft not written.
    """
    tool = base.tool(name)
    assert tool is not None
    origin = f"{source} sha256:{tool_hashes(tool)['sha256'][:12]}"
    written: list[Draft] = []
    problems: list[str] = []
    with specs_lock(toolset_dir):
        (toolset_dir / "specs").mkdir(exist_ok=True)
        for other in base.tools:
            if not spec_path(toolset_dir, other.name).exists():
                write_spec(spec_path(toolset_dir, other.name), new_spec_text(other))
        path = spec_path(toolset_dir, name)
        variants = variants_of(path)
        for draft in drafts:
            if variants.get(draft.variant) != before.get(draft.variant):
                problems.append(f"{draft.variant}: written meanwhile by another process, "
                                "kept as it is")
                continue
            variants[draft.variant] = {"description": draft.text, "draft": True,
                                       "drafted_by": provider_id, "drafted_from": origin}
            written.append(draft)
        if written:
            try:
                write_spec(path, replace_variants_block(read_spec_text(path), variants))
            except BenchError as exc:  # the drafts would make the spec invalid: unchanged
                return [], [f"{d.variant}: {exc.message}" for d in written] + problems
    return written, problems


def accept_drafts(toolset: str, variants: Iterable[str] | None = None,
                  tools: Iterable[str] | None = None, root: Path | None = None
                  ) -> list[tuple[str, str]]:
    """Mark drafts reviewed: ``draft: true`` becomes false with ``reviewed_at`` set.

    Args:
        toolset: the toolset's folder name.
        variants: only these variants (default: every drafted one).
        tools: only these tools (default: all).
        root: the ``descriptions/`` folder (default: the project's).

    Returns:
        ``(tool, variant)`` of each draft accepted.

    Raises:
        BenchError: an unknown toolset
            (:func:`~bench.descriptions.variants.check_toolset`), the toolset has no specs,
            or nothing matched (names what was asked).
    """
    root = root or descriptions_dir()
    paths = sorted((check_toolset(toolset, root) / "specs").glob("*.yaml"))
    if not paths:
        raise BenchError(f"toolset '{toolset}' has no specs: nothing was drafted (bench "
                         f"variants draft --toolset {toolset} --provider <id>)",
                         file=root / toolset)
    only_variants = set(variants) if variants else None
    only_tools = set(tools) if tools else None
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    accepted = []
    for path in paths:
        if only_tools is not None and path.stem not in only_tools:
            continue
        with specs_lock(path.parent.parent):  # read-modify-write, as a draft's
            found = variants_of(path)
            changed = False
            for name, entry in found.items():
                if not isinstance(entry, dict) or not entry.get("draft"):
                    continue
                if only_variants is not None and name not in only_variants:
                    continue
                entry["draft"] = False
                entry["reviewed_at"] = now
                accepted.append((path.stem, name))
                changed = True
            if changed:
                write_spec(path, replace_variants_block(read_spec_text(path), found))
    if not accepted:
        asked = ", ".join(sorted(only_variants or [])) or "any variant"
        raise BenchError(f"no draft to accept in toolset '{toolset}' for {asked}")
    return accepted
