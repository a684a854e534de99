"""Scratch folders owned by a live process: a locked ``.owner`` file in each.

A process that makes a scratch folder (the episodes' database copies, a merge's unfinished
run) claims it (:func:`claim`): an ``.owner`` file in it stays locked (``flock``) while the
process lives. The kernel releases a flock when its process dies, however it dies (kill -9,
out of memory), so a folder whose ``.owner`` can be locked by someone else was abandoned, and
the next process removes it (:func:`sweep_abandoned`). A folder without an ``.owner`` (being
made, or made by another tool) is left alone.

On a system without ``fcntl`` (Windows) nothing is claimed or swept: abandoned folders are
left to the user or the system's temp cleanup.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]  # the module or None: callers check

OWNER = ".owner"


def claim(folder: Path) -> IO[str] | None:
    """Mark ``folder`` (an existing, empty scratch folder) as owned by this process.

    Returns:
        The open, locked ``.owner`` file: keep it open as long as the folder is in use (it is
        released when closed or when the process dies). None without ``fcntl``.

    Raises:
        OSError: the file cannot be made in ``folder``.
    """
    if fcntl is None:
        return None
    # locked before it gets its name: an .owner is never seen unlocked while its process
    # lives (the lock goes with the file through the rename)
    tmp = folder / f"{OWNER}.tmp"
    handle = open(tmp, "w")  # noqa: SIM115 - held open by the caller
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        tmp.rename(folder / OWNER)
    except BaseException:
        handle.close()
        tmp.unlink(missing_ok=True)
        raise
    return handle


def sweep_abandoned(parent: Path, pattern: str) -> list[Path]:
    """Remove the folders matching ``pattern`` (a glob, e.g. ``.merge-*``) in ``parent``
    whose ``.owner`` file can be locked: their process is gone (see the module docstring).

    Returns:
        The folders removed.
    """
    if fcntl is None:
        return []
    removed = []
    for folder in parent.glob(pattern):
        try:
            with open(folder / OWNER) as owner:
                fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        except OSError:  # no .owner, another user's, or its process lives
            continue
    return removed
