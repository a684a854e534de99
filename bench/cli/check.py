"""``bench check``: which tools' descriptions or schemas changed since the description lock
(:mod:`bench.descriptions.lock`); ``--update`` rewrites the lock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bench.cli.options import split_list
from bench.errors import BenchError
from bench.plural import count

if TYPE_CHECKING:
    from bench.descriptions.lock import ToolChange


def check(
    toolset: Annotated[Optional[list[str]], typer.Option(
        help="Toolsets under descriptions/ (default: every one).")] = None,
    variants: Annotated[Optional[list[str]], typer.Option(
        "--variants", "-v", help="Variants to check (default: every variant of the "
                                 "toolset).")] = None,
    update: Annotated[bool, typer.Option(
        "--update", help="Write the lock from the descriptions as they are now (atomically), "
                         "after listing what changed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the tools whose description or schema changed since the lock
    (descriptions/<toolset>/descriptions.lock.json: a SHA-256 per tool and variant over its
    name, description and schema), renames declared in aliases.yaml included.

    Also checks each rename of descriptions/<toolset>/aliases.yaml against the variants:
    its new name must be a tool, its old name must no longer be one (a run refuses either).

    Exit code 0: nothing changed (or --update wrote the lock); 1: a tool changed, a
    toolset has no lock yet (bench check --update writes one), or a rename in aliases.yaml
    does not fit a variant.
    """
    from bench.descriptions.aliases import check_aliases
    from bench.descriptions.lock import (LockError, current_hashes, lock_changes,
                                         lock_path, write_lock)
    from bench.paths import descriptions_dir

    root = descriptions_dir()
    names = split_list(toolset) or sorted(
        p.name for p in root.iterdir() if p.is_dir() and p.name != "templates"
        and ((p / "specs").is_dir() or (p / "variants").is_dir())) if root.is_dir() else []
    if not names:
        raise BenchError("no toolset to check (no folder under descriptions/ with specs/ or "
                         "variants/)", file=root)
    chosen = split_list(variants) or None
    report = []
    failed = False
    for name in names:
        # a rename that does not fit a variant fails that variant's runs (bench.descriptions.
        # aliases.alias_problems): one line each, naming aliases.yaml, line and field
        problems = check_aliases(name, chosen, root)
        failed = failed or bool(problems)
        if not as_json:
            for problem in problems:
                typer.echo(str(problem))
        unreadable = None
        try:
            changes, path = lock_changes(name, chosen, root)
        except LockError as exc:
            if not update or chosen is not None:  # nothing to compare with, or to merge into
                raise
            unreadable, changes, path = exc.message, None, lock_path(name, root)
        entry = {"toolset": name, "lock": str(path), "locked": changes is not None,
                 "changes": [c.__dict__ for c in changes or []],
                 "alias_problems": [{"file": p.file, "line": p.line, "field": p.field,
                                     "message": p.message} for p in problems]}
        if update:
            write_lock(name, current_hashes(name, chosen, root), root, replace=chosen is None)
            entry["updated"] = True
        elif changes is None or changes:
            failed = True
        report.append(entry)
        if not as_json:
            _print_lock_state(name, path, changes, unreadable, update)
    if as_json:
        print(json.dumps({"toolsets": report}, ensure_ascii=False, indent=2))
    if failed:
        raise typer.Exit(1)


def _print_lock_state(name: str, path: Path, changes: list[ToolChange] | None,
                      unreadable: str | None, update: bool) -> None:
    """What ``bench check`` says of toolset ``name``'s lock at ``path``: replaced when it was
    ``unreadable`` (its message), missing (``changes`` None), unchanged, or the tools and
    variants that changed; then ``lock updated`` when ``update`` wrote it."""
    from bench.descriptions.lock import LOCK_FILE

    if unreadable:
        typer.echo(f"{name}: the lock ({path.name}) was unreadable ("
                   f"{unreadable.split('; rewrite it')[0]}): replaced")
        return
    if changes is None:
        typer.echo(f"{name}: no lock yet ({path.name})"
                   + (": written" if update else "; write one with: bench check "
                      f"--update --toolset {name}"))
        return
    if not changes:
        typer.echo(f"{name}: no tool changed since the lock ({LOCK_FILE})")
    else:
        tools = {c.tool for c in changes if c.tool}
        where = {c.variant for c in changes if c.kind != "new_variant"}
        new = [c.variant for c in changes if c.kind == "new_variant"]
        if tools:
            typer.echo(f"{name}: {count(len(tools), 'tool')} changed since the lock "
                       f"({LOCK_FILE}), in {count(len(where), 'variant')}:")
            for change in changes:
                if change.kind != "new_variant":
                    typer.echo(f"  {change.line()}")
        if new:  # e.g. bench baseline update locks only the gate's variants
            typer.echo(f"{name}: {count(len(new), 'variant')} not in the lock "
                       f"({LOCK_FILE}): {', '.join(new)}; lock them with: bench check "
                       f"--update --toolset {name}")
    if update:
        typer.echo(f"{name}: lock updated: {path}")
