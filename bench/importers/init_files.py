"""How ``bench init`` puts its files into a folder: never over a file bench did not write,
merged into a user's ``pyproject.toml``, and all at once.

Whose file. A file bench init wrote says so in its first lines (:data:`BENCH_MARK`: "made by
`bench init`" or "imported by `bench init`"; :func:`bench_wrote`). ``--force`` replaces only
such files and the ``[tool.bench.toolsets.<name>]`` table of ``pyproject.toml`` (the
``[tool.bench]`` tables are bench's). What else is there stays:

- ``pyproject.toml``: bench's tables are added to it (:func:`merge_pyproject`); every other
  byte of it is kept (tomlkit's round trip). An existing ``[tool.bench.gate]`` is kept unless
  ``--force`` and it gates this dataset.
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
# the comment bench puts above its tables (pyproject_header), found again to replace it
_HEADER = re.compile(r"(?m)^# bench project `[^`\n]*`, made by `bench init`[^\n]*\n"
                     r"(?:# [^\n]*\n){0,2}\n?")


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
    (``[tool.bench.gate]``) appended; every other byte kept (its line ends too). With
    ``force``, bench's table of ``toolset`` (and a gate of that dataset) is removed first
    (tomlkit, keeping the rest as it is).

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
    keep_gate = gate is not None and not (force and isinstance(gate, dict)
                                          and gate.get("dataset") == toolset)
    crlf = "\r\n" in text and "\n" not in text.replace("\r\n", "")
    body = text
    notes = []
    try:
        if has_toolset or (gate is not None and not keep_gate):
            document = tomlkit.parse(text)
            table: Any = document["tool"]["bench"]
            if has_toolset:
                del table["toolsets"][toolset]
            if gate is not None and not keep_gate:
                del table["gate"]
            # the blank line that led to the removed tables goes with them
            body = _HEADER.sub("", tomlkit.dumps(document).replace("\r\n", "\n"))
            body = body.rstrip("\n") + "\n" if body.strip() else ""
            body = body.replace("\n", "\r\n") if crlf else body
    except (TOMLKitError, KeyError, TypeError) as exc:
        raise BenchError(f"cannot replace bench's tables ({exc}): remove "
                         f"[tool.bench.toolsets.{toolset}] by hand, then run bench init "
                         "again", file=path) from None
    added = header + toolset_table + ("" if keep_gate else "\n" + gate_table)
    if crlf:
        added = added.replace("\n", "\r\n")
    newline = "\r\n" if crlf else "\n"
    if body and not body.endswith("\n"):
        body += newline
    merged = body + (newline if body.strip() else "") + added
    try:
        got = tomllib.loads(merged)["tool"]["bench"]
        assert got["toolsets"][toolset] == tomllib.loads(toolset_table)["tool"]["bench"][
            "toolsets"][toolset]
    except (tomllib.TOMLDecodeError, KeyError, TypeError, AssertionError) as exc:
        raise BenchError(f"cannot add bench's tables ({exc}): [tool.bench] is laid out in a "
                         f"way they cannot be appended to; add [tool.bench.toolsets.{toolset}]"
                         " by hand (docs/your-own-tools.md)", file=path) from None
    notes.append(f"pyproject.toml: added [tool.bench.toolsets.{toolset}]"
                 + ("" if keep_gate else " and [tool.bench.gate]")
                 + "; the rest of the file is as it was")
    if keep_gate:
        notes.append("pyproject.toml: its [tool.bench.gate] is kept"
                     + (f" (it gates dataset '{gate.get('dataset')}')"
                        if isinstance(gate, dict) and gate.get("dataset") else ""))
    return merged, notes


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
    files (each by :func:`bench.runstore.atomic_write_text`), rewrite the replaced ones in
    place (the same writer: mode and symbolic links kept), then move the staged ones in.
    On an error the staging folder is removed and nothing is moved.

    Returns:
        the files written or replaced (absolute paths).

    Raises:
        BenchError: ``dest`` is not a folder.
        OSError: a write fails (naming the file).
    """
    from bench.runstore import atomic_write_text

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
