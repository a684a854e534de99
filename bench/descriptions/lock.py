"""The description lock: one SHA-256 per tool and variant, so that a changed description or
schema is noticed (the practice of pinning tool-description hashes against silent changes,
as MCP security scanners such as mcp-scan do with their tool pins).

``descriptions/<toolset>/descriptions.lock.json`` (meant to be committed beside the specs)::

    {"format": "bench-description-lock/1", "toolset": "shop", "updated_at": "...",
     "variants": {"l10": {"get_stock": {"sha256": "...", "description_sha256": "...",
                                        "schema_sha256": "..."}}}}

``sha256`` covers the tool's name, description and input schema (canonical JSON: keys sorted,
no spaces, UTF-8 kept: the same canonical form as :attr:`bench.descriptions.Variant.sha256`);
``description_sha256`` and ``schema_sha256`` cover one part each, which says *what* changed.
``bench check`` compares the toolset's variants as they render now with the lock
(:func:`lock_changes`), ``bench check --update`` rewrites it atomically, ``bench baseline
update`` refreshes the gate's variants, and the gate can require every changed tool to be
re-evaluated (``require_reevaluation``, :mod:`bench.gate.config`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from bench.errors import BenchError, json_document, read_text_file
from bench.models import Tool

LOCK_FORMAT = "bench-description-lock/1"
LOCK_FILE = "descriptions.lock.json"


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tool_hashes(tool: Tool) -> dict[str, str]:
    """``{"sha256", "description_sha256", "schema_sha256"}`` of one tool (hex digests; see
    the module docstring for what each covers)."""
    return {"sha256": _digest({"name": tool.name, "description": tool.description,
                               "input_schema": tool.input_schema}),
            "description_sha256": _digest(tool.description),
            "schema_sha256": _digest(tool.input_schema)}


def lock_path(toolset: str, root: Path | None = None) -> Path:
    """``<root>/<toolset>/descriptions.lock.json`` (root: the project's ``descriptions/``).

    Raises:
        BenchError: an unknown toolset, or a name that is not one folder's
            (:func:`bench.descriptions.variants.check_toolset`).
    """
    from bench.descriptions.variants import check_toolset
    return check_toolset(toolset, root) / LOCK_FILE


def current_hashes(toolset: str, variants: Iterable[str] | None = None,
                   root: Path | None = None) -> dict[str, dict[str, dict[str, str]]]:
    """``{variant: {tool: hashes}}`` of the toolset's variants as they render now.

    Args:
        toolset: the toolset's folder name.
        variants: the variants to hash (default: every variant the toolset has,
            :func:`bench.descriptions.available_variants`).
        root: the ``descriptions/`` folder (default: the project's).

    Raises:
        BenchError: an unknown toolset or variant, or a spec/template/variant file that does
            not load.
    """
    from bench.descriptions.variants import available_variants, check_toolset, load_variant

    check_toolset(toolset, root)
    names = list(variants) if variants is not None else available_variants(toolset, root)
    return {name: {tool.name: tool_hashes(tool)
                   for tool in load_variant(toolset, name, root).tools} for name in names}


class LockError(BenchError):
    """The lock file exists but is not a readable bench description lock (corrupt JSON, not
    UTF-8, another format, ``variants`` of the wrong shape). ``bench check --update`` (every
    variant) replaces such a lock; merging into it is refused."""


def read_lock(path: Path) -> dict[str, Any] | None:
    """The lock document at ``path``; None when the file does not exist.

    Raises:
        LockError: not UTF-8 JSON, or not a bench description lock (names the file and field,
            and the command that rewrites it).
    """
    if not path.is_file():
        return None
    fix = f"; rewrite it with: bench check --update --toolset {path.parent.name}"
    try:
        data = json_document(read_text_file(path), file=path, what="description lock")
    except BenchError as exc:
        raise LockError(exc.message + fix, file=exc.file, line=exc.line) from None
    if not isinstance(data, dict) or data.get("format") != LOCK_FORMAT:
        raise LockError(f"not a bench description lock (want format '{LOCK_FORMAT}'){fix}",
                        file=path, field="format")
    variants = data.get("variants")
    if not isinstance(variants, dict) or not all(
            isinstance(tools, dict) and all(isinstance(h, dict) for h in tools.values())
            for tools in variants.values()):
        raise LockError("'variants' must map each variant to {tool: hashes}" + fix, file=path,
                        field="variants")
    return data


def write_lock(toolset: str, hashes: Mapping[str, Mapping[str, Mapping[str, str]]],
               root: Path | None = None, *, replace: bool = False) -> Path:
    """Write the lock of ``toolset`` atomically: the variants of ``hashes`` replace theirs in
    the lock; the lock's other variants are kept unless ``replace`` (then ``hashes`` is the
    whole lock).

    Returns:
        the written path.

    Raises:
        BenchError: the existing lock is unreadable (and ``replace`` is False).
    """
    from bench.store.files import atomic_write_json

    path = lock_path(toolset, root)
    old = {} if replace else ((read_lock(path) or {}).get("variants") or {})
    variants = {**old, **{name: dict(tools) for name, tools in hashes.items()}}
    atomic_write_json(path, {
        "format": LOCK_FORMAT, "toolset": toolset,
        "updated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "variants": {name: {tool: dict(h) for tool, h in sorted(tools.items())}
                     for name, tools in sorted(variants.items())}})
    return path


@dataclass(frozen=True)
class ToolChange:
    """One difference between the lock and the descriptions as they render now.

    Attributes:
        variant: the variant.
        tool: the tool's current name (for ``removed``, its locked name).
        kind: ``description`` (text changed), ``schema`` (input schema changed),
            ``description+schema``, ``added`` (a tool the lock does not have), ``removed``
            (a locked tool that is gone), ``renamed`` (only the name changed, as the toolset's
            aliases say), or ``new_variant`` (a variant the lock does not have; ``tool`` is
            ``""``).
        old_name: the locked name of a renamed tool (``renamed``, or a renamed tool whose
            text or schema changed too), else None.
    """

    variant: str
    tool: str
    kind: str
    old_name: str | None = None

    def line(self) -> str:
        """The change in a few words, e.g. ``l10: get_stock: description changed``."""
        if self.kind == "new_variant":
            return f"{self.variant}: variant not in the lock"
        if self.kind == "renamed":
            return (f"{self.variant}: {self.tool}: renamed from {self.old_name} (description "
                    "and schema unchanged)")
        was = f" (renamed from {self.old_name})" if self.old_name else ""
        what = {"description": "description changed", "schema": "schema changed",
                "description+schema": "description and schema changed",
                "added": "new tool", "removed": "removed"}[self.kind]
        return f"{self.variant}: {self.tool}: {what}{was}"


def compare_hashes(locked: Mapping[str, Mapping[str, Mapping[str, str]]],
                   current: Mapping[str, Mapping[str, Mapping[str, str]]],
                   aliases: Mapping[str, str] | None = None) -> list[ToolChange]:
    """The differences between locked and current hashes, per variant of ``current``
    (variants only in the lock are not compared: ``bench check`` may be asked for a few).

    ``aliases`` (old name -> new name) pairs a locked old name with its current new name: a
    tool renamed without other change is ``renamed``; with another change its kind says what
    changed and ``old_name`` says it was renamed.
    """
    aliases = dict(aliases or {})
    changes: list[ToolChange] = []
    for variant, tools in current.items():
        before = locked.get(variant)
        if before is None:
            changes.append(ToolChange(variant, "", "new_variant"))
            continue
        matched: set[str] = set()
        for name, now in tools.items():
            old_name = name if name in before else next(
                (old for old, new in aliases.items() if new == name and old in before), None)
            if old_name is None:
                changes.append(ToolChange(variant, name, "added"))
                continue
            matched.add(old_name)
            was = before[old_name]
            renamed = old_name if old_name != name else None
            text = was.get("description_sha256") != now["description_sha256"]
            schema = was.get("schema_sha256") != now["schema_sha256"]
            if text or schema:
                kind = "description+schema" if text and schema else \
                    "description" if text else "schema"
                changes.append(ToolChange(variant, name, kind, renamed))
            elif renamed:
                changes.append(ToolChange(variant, name, "renamed", renamed))
        changes += [ToolChange(variant, name, "removed") for name in sorted(before)
                    if name not in matched]
    return changes


def lock_changes(toolset: str, variants: Iterable[str] | None = None,
                 root: Path | None = None) -> tuple[list[ToolChange] | None, Path]:
    """What changed in ``toolset``'s variants since its lock was written.

    Returns:
        (the changes, or None when the toolset has no lock yet; the lock's path).

    Raises:
        BenchError: an unreadable lock, aliases file, or description.
    """
    from bench.descriptions.aliases import load_aliases

    path = lock_path(toolset, root)
    lock = read_lock(path)
    current = current_hashes(toolset, variants, root)
    if lock is None:
        return None, path
    return compare_hashes(lock["variants"], current, load_aliases(toolset, root)), path


def changed_tools(changes: Iterable[ToolChange]) -> dict[str, set[str]]:
    """``{variant: {tool, ...}}`` of the tools whose text or schema changed, or that are new
    (what a gate must see re-evaluated; a pure rename and a removal are not)."""
    found: dict[str, set[str]] = {}
    for change in changes:
        if change.kind in ("description", "schema", "description+schema", "added"):
            found.setdefault(change.variant, set()).add(change.tool)
    return found
