"""Atomic files and run folders: the one writer bench's text files go through
(:func:`atomic_writer`: temporary file, fsync, ``os.replace``), what to say when a write
fails (:func:`named_os_error`, :func:`write_fix`), and the checks that a run folder can be
made (a dangling symbolic link or a file in its place is named, never "File exists")."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

from bench.errors import BenchError
from bench.jsonl import dumps as _dumps
from bench.store.ids import MANIFEST, RESULTS


def named_os_error(exc: OSError, path: Path | str) -> OSError:
    """``exc`` with ``path`` as its file name when it has none (a failed ``write`` or
    ``fsync`` on an open file says only "No space left on device")."""
    if exc.filename:
        return exc
    named = type(exc)(exc.errno, exc.strerror or str(exc), str(path)) if exc.errno \
        else OSError(exc.errno, str(exc), str(path))
    return named


# What to do about a file that cannot be written, by errno (:func:`write_fix`).
_WRITE_FIXES = {
    errno.ENOSPC: "free some space", errno.EDQUOT: "free some space (the disk quota is full)",
    errno.EFBIG: "free some space or raise the file-size limit (ulimit -f)",
    errno.EACCES: "make it and its folder writable (their permissions)",
    errno.EPERM: "make it and its folder writable (their permissions, or an immutable "
                 "attribute: lsattr, chattr -i)",
    errno.EROFS: "the file system is read-only: remount it read-write or move the run",
    errno.EISDIR: "a folder has its name: move the folder away",
    errno.ENOTDIR: "a file stands where a folder of its path should be: move it away",
}


def write_fix(exc: OSError) -> str:
    """What to do about ``exc``, an error writing a run's file, as a short clause (e.g.
    ``free some space``, ``make it writable (...)``); ``fix that`` for an errno without
    advice."""
    return _WRITE_FIXES.get(exc.errno or 0, "fix that")


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented UTF-8 JSON to ``path`` atomically."""
    atomic_write_text(path, _dumps(data, indent=2) + "\n")


#: Permission bits of a file the atomic writer creates (it keeps an existing file's own):
#: results, reports and project files are shared alike (the usual ``umask 022`` result).
NEW_FILE_MODE = 0o644


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (temporary file, fsync, ``os.replace``),
    as it is: manifests (redacted by :meth:`bench.store.RunStore.write_manifest`), reports,
    baselines and project files. The one writer bench's text files go through
    (:func:`atomic_writer`: an existing file keeps its permission bits, a symbolic link
    stays a link)."""
    with atomic_writer(path, mode) as handle:
        handle.write(text)


def write_target(path: Path) -> Path:
    """The file a write of ``path`` changes: ``path`` itself, or for a symbolic link (a chain
    of them, or a link in a folder of its path) the file it points to, so that a write keeps
    the link a link (``os.replace`` onto the link would replace the link by a regular file).
    A dangling link's target is created."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def atomic_writer(path: Path, mode: int | None = None) -> Iterator[IO[str]]:
    """A UTF-8 text stream whose content replaces ``path`` atomically when the ``with``
    block ends without error: a temporary file in the target's folder, fsynced, its
    permission bits set, then ``os.replace``; on an error the temporary file is removed and
    ``path`` is left as it was. For text written in pieces (a large report) as for
    :func:`atomic_write_text`. Text is written as given (no newline translation).

    Args:
        path: the file; a symbolic link is written through (:func:`write_target`).
        mode: permission bits of the result; None keeps the existing file's own (a user's
            0600 ``cases.jsonl`` stays 0600), :data:`NEW_FILE_MODE` for a new file. Set
            before the replace: a 0600 file is never readable by others in between.

    Raises:
        OSError: naming ``path`` (never the temporary file), e.g. a read-only folder or a
            full disk.
    """
    target = write_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = NEW_FILE_MODE
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                   suffix=".tmp")
    except OSError as exc:  # e.g. a read-only folder: name the file to write, not the temp
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600
        os.replace(tmp, target)
    except OSError as exc:  # e.g. the disk is full: say which file
        Path(tmp).unlink(missing_ok=True)
        # the file being replaced, never the temporary one (which the reader never saw)
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_if_no_rows(folder: Path) -> bool:
    """Remove ``folder``, a command's work folder of runs (an optimization's, a synthesis's),
    when no run under it holds a row (no non-empty ``results.jsonl``): a new one that failed
    at its start leaves nothing behind. Its parent is removed too when that leaves it empty
    (``reports/optimize``). Returns True when removed; a folder that cannot be read or
    removed is left as it is."""
    import shutil

    try:
        if not folder.is_dir() or folder.is_symlink() or any(
                path.stat().st_size for path in folder.rglob(RESULTS)):
            return False
        shutil.rmtree(folder)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        folder.parent.rmdir()
    return True


def refuse_dangling(path: Path) -> None:
    """Raise when ``path`` (a run folder or one above it) is a symbolic link to nothing.

    Raises:
        BenchError: names the link, its missing target and what to do.
    """
    if path.is_symlink() and not path.exists():
        raise BenchError(f"the run folder cannot be made or read: this is a symbolic link to "
                         f"'{os.readlink(path)}', which does not exist; remove the link or "
                         "create its target, then run again", file=path)


def refuse_taken(path: Path) -> None:
    """Raise when ``path`` (a run folder or one above it) is a dangling symbolic link or
    something other than a folder (``mkdir`` would say only "File exists").

    Raises:
        BenchError: names ``path`` and what to do.
    """
    refuse_dangling(path)
    if path.exists() and not path.is_dir():
        raise BenchError("the run folder cannot be made: this is a file, not a folder; move "
                         "it away, then run again", file=path)


def check_run_dir(folder: Path) -> None:
    """Check, creating nothing, that the run folder ``folder`` can be made or used
    (:meth:`bench.store.RunStore.check_dir`).

    Raises:
        BenchError: ``folder``, or a folder above it, is a symbolic link to nothing or a
            file (:func:`refuse_taken`).
    """
    for path in (folder, *folder.parents):
        if path.is_dir():
            return
        refuse_taken(path)


def make_run_dir(folder: Path) -> None:
    """Create the run folder ``folder`` (and the folders above it) if missing
    (:meth:`bench.store.RunStore.make_dir`).

    Raises:
        BenchError: as :func:`check_run_dir` (``mkdir`` says only "File exists").
        OSError: the folder cannot be made otherwise (e.g. permissions).
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        check_run_dir(folder)  # says which path is in the way
        raise


def remove_empty_run_dir(folder: Path) -> bool:
    """Remove the run folder ``folder`` when it holds nothing but its manifest and empty
    files; return True when removed (:meth:`bench.store.RunStore.discard_if_empty`, which
    holds the run's write lock around it). A folder with any non-empty file besides the
    manifest, any symbolic link or any subfolder is kept.

    Raises:
        OSError: a file or the folder cannot be removed.
    """
    for path in folder.iterdir():
        if path.name == MANIFEST and path.is_file() and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_file() or path.stat().st_size:
            return False
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    return True
