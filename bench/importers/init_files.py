"""How ``bench init`` puts its files into a folder: never over a file bench did not write,
merged into a user's ``pyproject.toml``, and all at once.

Whose file. A file bench init wrote says so in its first lines (:data:`BENCH_MARK`: "made by
`bench init`" or "imported by `bench init`"; :func:`bench_wrote`). ``--force`` replaces only
such files and the ``[tool.bench.toolsets.<name>]`` table of ``pyproject.toml`` (the
``[tool.bench]`` tables are bench's). What else is there stays:

- ``pyproject.toml``: bench's tables are added to it (:func:`merge_pyproject`); every other
  byte of it is kept (tomlkit's round trip). An existing ``[tool.bench.gate]`` is always kept
  as it is (its floors come from ``bench baseline update``, its metrics and margin are the
  user's), ``--force`` or not. ``--force`` rewrites ``[tool.bench.toolsets.<name>]`` from the
  import, keeping the settings bench init does not write (``env``, ``reset``, ``compare``,
  ``error_pattern``...); the notes name each setting kept and each one replaced.
- a spec bench wrote (``descriptions/<name>/specs/<tool>.yaml``), under ``--force``:
  rewritten from the import, its ``variants:`` (texts drafted by ``bench variants draft``,
  accepted or not) kept (:func:`keep_spec_variants`); the notes name the variants kept and
  the sections the import replaced.
- ``README.md`` that bench did not write: kept; bench's guide goes to ``BENCH.md``
  (:func:`guide_name`).
- ``datasets/<name>/cases.jsonl``: kept (it holds the user's cases); a datasheet
  (``datasets/<name>/README.md``) bench did not write: kept.
- a variant or spec bench did not write at bench's path: the init is refused (they would
  clash with the import).

All at once. The new files are written into a staging folder and moved into place at the end
(:func:`write_project`): a new project folder by one ``rename`` (an interrupted init, even by
SIGKILL, leaves no project, only a hidden ``.<folder>.bench-init-<pid>`` beside it), files in
an existing folder by a rename each, after a staging folder inside it
(``.bench-init-<pid>``). The next ``bench init`` removes a staging folder whose process is
gone.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.errors import BenchError

#: What a file bench init wrote says in its first :data:`MARK_LINES` lines.
BENCH_MARK = re.compile(r"(?i)\b(?:made|imported) by `bench init`")
MARK_LINES = 5
#: The guide's file when ``README.md`` is the user's own.
OTHER_GUIDE = "BENCH.md"
#: Tests only: SIGKILL the init itself after this many files are staged (a deterministic
#: ``kill -9`` for the test that an interrupted init leaves no half project).
KILL_HOOK = "BENCH_INIT_KILL_AFTER"
_STAGE = ".bench-init-"
FileKind = Literal["bench", "guide", "doc", "data", "keep"]


def _header(toolset: str) -> re.Pattern[str]:
    """The comment bench puts above the tables of ``toolset`` (``pyproject_header`` of
    :mod:`bench.importers.scaffold`), found again to replace it."""
    return re.compile(r"(?m)^# bench project `" + re.escape(toolset)
                      + r"`, made by `bench init`[^\n]*\n(?:# [^\n]*\n){0,2}\n?")


@dataclass
class ProjectFile:
    """One file of a new project.

    Attributes:
        rel: its path relative to the project folder.
        text: its content.
        kind: ``bench`` (a variant or spec: a user's file there refuses the init), ``guide``
            (the project's README, see :func:`guide_name`), ``doc`` (the datasheet: a user's
            one is kept), ``data`` (``cases.jsonl``: an existing one is kept) or ``keep``
            (``gate/.gitkeep``: kept when there).
    """

    rel: Path
    text: str
    kind: FileKind


@dataclass
class InitPlan:
    """What :func:`write_project` does.

    Attributes:
        new: (path relative to the project, text) of the files that do not exist yet:
            staged, then moved into place.
        replace: (relative path, text) of existing files rewritten in place (the merged
            ``pyproject.toml``, bench's own files under ``--force``).
        notes: one line per file kept or merged, for the user.
    """

    new: list[tuple[Path, str]] = field(default_factory=list)
    replace: list[tuple[Path, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def bench_wrote(path: Path) -> bool:
    """True when ``path`` is a text file whose first :data:`MARK_LINES` lines carry
    :data:`BENCH_MARK`; False for any other file (or one that cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = [handle.readline() for _ in range(MARK_LINES)]
    except OSError:
        return False
    return any(BENCH_MARK.search(line) for line in head)


def _there(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def guide_name(dest: Path) -> tuple[str | None, str | None]:
    """Where the project's guide goes: ``README.md`` unless the user has their own, then
    :data:`OTHER_GUIDE`; None when both are the user's.

    Returns:
        (the file name or None, a note for the user or None).
    """
    if not _there(dest / "README.md") or bench_wrote(dest / "README.md"):
        return "README.md", None
    if not _there(dest / OTHER_GUIDE) or bench_wrote(dest / OTHER_GUIDE):
        return OTHER_GUIDE, f"README.md is yours (kept): bench's guide is {OTHER_GUIDE}"
    return None, (f"README.md and {OTHER_GUIDE} are yours (kept): bench's guide is not "
                  "written (docs/your-own-tools.md of bench says the same)")


def merge_pyproject(path: Path, toolset: str, header: str, toolset_table: str,
                    gate_table: str, force: bool) -> tuple[str | None, list[str]]:
    """The text of an existing ``pyproject.toml`` with bench's tables added: ``header`` (a
    comment), ``toolset_table`` (``[tool.bench.toolsets.<toolset>]``) and ``gate_table``
    (``[tool.bench.gate]``, only when the file has none) appended; every other byte kept
    (its line ends too). With ``force``, bench's table of ``toolset`` is removed first
    (tomlkit, keeping the rest as it is); an existing gate is never replaced.

    Returns:
        (the new text, notes); (None, []) when the file already has
        ``[tool.bench.toolsets.<toolset>]`` and not ``force`` (the caller refuses).

    Raises:
        BenchError: the file cannot be read, is not valid TOML, or lays ``[tool.bench]`` out
            so that the tables cannot be added (names the file and what to add by hand).
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        text = path.read_bytes().decode("utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise BenchError(f"cannot read: {exc.strerror}", file=path) from None
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text ({exc.reason})", file=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"invalid TOML ({exc}): fix it, then run bench init again",
                         file=path) from None
    bench: Any = data.get("tool", {}).get("bench", {}) if isinstance(
        data.get("tool"), dict) else {}
    bench = bench if isinstance(bench, dict) else {}
    toolsets = bench.get("toolsets") if isinstance(bench.get("toolsets"), dict) else {}
    has_toolset = toolset in toolsets
    if has_toolset and not force:
        return None, []
    gate = bench.get("gate")
    keep_gate = gate is not None  # its floors and metrics are the user's (baseline update)
    crlf = "\r\n" in text and "\n" not in text.replace("\r\n", "")
    body = text
    notes = []
    try:
        if has_toolset:  # replaced where it stands, with its header: the file keeps its order
            document = tomlkit.parse(text)
            document["tool"]["bench"]["toolsets"][toolset] = \
                tomlkit.parse(toolset_table)["tool"]["bench"]["toolsets"][toolset]
            body = tomlkit.dumps(document).replace("\r\n", "\n")
            body = _header(toolset).sub(lambda _: header, body, count=1)
            body = body.replace("\n", "\r\n") if crlf else body
    except (TOMLKitError, KeyError, TypeError) as exc:
        raise BenchError(f"cannot replace bench's tables ({exc}): remove "
                         f"[tool.bench.toolsets.{toolset}] by hand, then run bench init "
                         "again", file=path) from None
    gate_added = "" if keep_gate else gate_table
    added = gate_added if has_toolset else \
        header + toolset_table + ("\n" + gate_added if gate_added else "")
    if crlf:
        added = added.replace("\n", "\r\n")
    newline = "\r\n" if crlf else "\n"
    if body and not body.endswith("\n"):
        body += newline
    merged = body + (newline if body.strip() and added else "") + added
    try:
        got = tomllib.loads(merged)["tool"]["bench"]
        assert got["toolsets"][toolset] == tomllib.loads(toolset_table)["tool"]["bench"][
            "toolsets"][toolset]
    except (tomllib.TOMLDecodeError, KeyError, TypeError, AssertionError) as exc:
        raise BenchError(f"cannot add bench's tables ({exc}): [tool.bench] is laid out in a "
                         f"way they cannot be appended to; add [tool.bench.toolsets.{toolset}]"
                         " by hand (docs/your-own-tools.md)", file=path) from None
    notes.append(f"pyproject.toml: {'replaced' if has_toolset else 'added'} "
                 f"[tool.bench.toolsets.{toolset}]"
                 + ("" if keep_gate else " and [tool.bench.gate]")
                 + ("; its [tool.bench.gate] is kept as it was"
                    + (f" (it gates dataset '{gate.get('dataset')}')"
                       if isinstance(gate, dict) and gate.get("dataset") else "")
                    if keep_gate else "")
                 + "; the rest of the file is as it was")
    return merged, notes


#: The settings of ``[tool.bench.toolsets.<name>]`` that bench init writes (from the source
#: and its options); ``--force`` writes them again and keeps every other one.
INIT_SETTINGS = ("execute", "server", "module", "timeout_s", "writes", "read_only",
                 "server_names", "reason")


def earlier_toolset(path: Path, toolset: str) -> dict[str, Any] | None:
    """The ``[tool.bench.toolsets.<toolset>]`` table of the ``pyproject.toml`` at ``path``
    as a dict, or None (no file, no such table, or a file that is not TOML:
    :func:`merge_pyproject` says so)."""
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    tool = data.get("tool")
    bench = tool.get("bench") if isinstance(tool, dict) else None
    toolsets = bench.get("toolsets") if isinstance(bench, dict) else None
    table = toolsets.get(toolset) if isinstance(toolsets, dict) else None
    return dict(table) if isinstance(table, dict) else None


def _variant_state(entry: dict[str, Any]) -> str:
    """How a spec's variant came to be, in a word: a ``draft``, ``accepted`` (reviewed) or
    ``written`` (by a person: neither)."""
    return "draft" if entry.get("draft") else "accepted" if entry.get("reviewed_at") \
        else "written"


def keep_spec_variants(path: Path, rel: Path, text: str) -> tuple[str, str | None]:
    """A spec bench init rewrites under ``--force``: ``text`` (the new import's spec) with
    the ``variants:`` of the spec at ``path`` kept (drafted and accepted texts, with their
    ``draft``, ``drafted_by``, ``drafted_from`` and ``reviewed_at``); ``rel`` is its path in
    the project, for the note.

    Returns:
        (the text to write, a note naming the variants kept and the sections of the earlier
        spec the import replaced; None when the earlier spec has no variant and no section
        differs).

    Raises:
        BenchError: the earlier spec cannot be read, or its ``variants:`` are not valid
            (names the file: its texts would be lost; fix or move it).
    """
    import yaml

    from bench.descriptions.spec_files import replace_variants_block
    from bench.descriptions.specs import SpecVariant
    from bench.yamlio import load_yaml

    try:
        old = load_yaml(path)[0]
    except BenchError as exc:
        raise BenchError(f"cannot read its variants to keep them ({exc.message}): fix or move "
                         "it, then run bench init --force again", file=path) from None
    old = old if isinstance(old, dict) else {}
    variants = old.get("variants") or {}
    if not isinstance(variants, dict):
        raise BenchError("variants is not a mapping: fix or move it, then run bench init "
                         "--force again (its texts would be lost)", file=path,
                         field="variants")
    for name, entry in variants.items():
        try:
            SpecVariant.model_validate(entry)
        except ValueError as exc:
            raise BenchError(f"not a valid variant ({str(exc).splitlines()[-1].strip()}): "
                             "fix or move it, then run bench init --force again (its text "
                             "would be lost)", file=path, field=f"variants.{name}") from None
    new = yaml.safe_load(text) or {}
    replaced = [key for key in dict.fromkeys([*old, *new]) if key != "variants"
                and old.get(key) != new.get(key)]
    if variants:
        text = replace_variants_block(text, variants)
    if not variants and not replaced:
        return text, None
    kept = ", ".join(f"{name} ({_variant_state(entry)})" for name, entry in variants.items())
    return text, (f"{rel}: rewritten from the import"
                  + (f"; its variants {kept} kept" if variants else "")
                  + (f"; {', '.join(replaced)} replaced by the import's (the earlier text is "
                     "not kept)" if replaced else ""))


def plan_files(dest: Path, files: list[ProjectFile], force: bool) -> tuple[InitPlan, list[str]]:
    """Decide, for each of ``files``, whether it is written, replaced or kept (the module
    docstring's rules; ``pyproject.toml`` is planned by the caller, :func:`merge_pyproject`).

    Returns:
        (the plan, bench's files that exist and need ``force``: paths relative to ``dest``).

    Raises:
        BenchError: a file bench did not write stands where a variant or spec goes.
    """
    plan = InitPlan()
    existing: list[str] = []
    for item in files:
        path = dest / item.rel
        if not _there(path):
            plan.new.append((item.rel, item.text))
        elif item.kind == "keep":
            continue
        elif item.kind == "data":
            if path.is_file() and path.stat().st_size:
                plan.notes.append(f"{item.rel}: kept (it holds your cases)")
        elif bench_wrote(path):
            if force:
                plan.replace.append((item.rel, item.text))
            else:
                existing.append(str(item.rel))
        elif item.kind == "doc":
            plan.notes.append(f"{item.rel} is yours (kept): bench's datasheet is not written")
        else:  # a variant or spec of the user's at bench's path: the import would clash
            raise BenchError("exists and bench init did not write it: move it away or give "
                             "the toolset another --name (--force never replaces a file bench "
                             "did not write)", file=path)
    return plan, existing


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove_stale(folder: Path, prefix: str) -> None:
    """Remove the staging folders ``<folder>/<prefix><pid>`` of inits that are gone (killed)."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        pid = entry.name[len(prefix):]
        if entry.name.startswith(prefix) and pid.isdigit() and entry.is_dir() \
                and not entry.is_symlink() and (int(pid) == os.getpid() or not _alive(int(pid))):
            shutil.rmtree(entry, ignore_errors=True)


def _move_into(source: Path, target: Path, skipped: list[Path]) -> None:
    """Move every entry of ``source`` into ``target``: a folder ``target`` lacks by one
    rename, the others entry by entry; a file that appeared at its place meanwhile is kept
    (listed in ``skipped``)."""
    for entry in sorted(source.iterdir()):
        there = target / entry.name
        if entry.is_dir() and there.is_dir():
            _move_into(entry, there, skipped)
        elif _there(there):
            skipped.append(there)
        else:
            os.rename(entry, there)


def write_project(dest: Path, plan: InitPlan) -> list[Path]:
    """Carry out ``plan`` in ``dest`` (the module docstring's "all at once"): stage the new
    files (each by :func:`bench.store.files.atomic_write_text`), rewrite the replaced ones in
    place (the same writer: mode and symbolic links kept), then move the staged ones in.
    On an error the staging folder is removed and nothing is moved.

    Returns:
        the files written or replaced (absolute paths).

    Raises:
        BenchError: ``dest`` is not a folder.
        OSError: a write fails (naming the file).
    """
    from bench.store.files import atomic_write_text

    if _there(dest) and not dest.is_dir():
        raise BenchError("is not a folder: bench init makes a project folder here",
                         file=dest)
    fresh = not _there(dest)
    if fresh:
        dest.parent.mkdir(parents=True, exist_ok=True)
        prefix, home = f".{dest.name}{_STAGE}", dest.parent
    else:
        prefix, home = _STAGE, dest
    _remove_stale(home, prefix)
    stage = home / f"{prefix}{os.getpid()}"
    kill_after = int(os.environ.get(KILL_HOOK, "0") or 0)
    stage.mkdir()
    try:
        for number, (rel, text) in enumerate(plan.new, 1):
            atomic_write_text(stage / rel, text)
            if number == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
        for rel, text in plan.replace:
            atomic_write_text(dest / rel, text)
        skipped: list[Path] = []
        if fresh:
            os.rename(stage, dest)
        else:
            _move_into(stage, dest, skipped)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if not fresh:
        shutil.rmtree(stage, ignore_errors=True)
    if skipped:
        plan.notes.extend(f"{path.relative_to(dest)} appeared while bench init ran: kept"
                          for path in skipped)
    return [dest / rel for rel, _ in plan.replace] + \
        [dest / rel for rel, _ in plan.new if dest / rel not in skipped]
