"""A run's write lock: an advisory ``flock`` on the run folder, so that two processes never
append to one run, and the probe that tells whether a process holds it (a run that says
``running`` while no one does has crashed)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

from bench.errors import BenchError
from bench.store.files import make_run_dir


class RunLock:
    """The write lock of the run folder ``folder`` (run ``run_id``), re-entrant in one
    object (:meth:`bench.store.RunStore.writing` holds one per store).

    Attributes:
        held: nesting depth of :meth:`hold` in this process (0: not held).
    """

    def __init__(self, folder: Path, run_id: str) -> None:
        self.folder = folder
        self.run_id = run_id
        self.held = 0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the block, making the run folder first if missing
        (:func:`bench.store.files.make_run_dir`). Re-entrant: a nested :meth:`hold` only
        counts.

        Raises:
            BenchError: another process holds the lock (names the run folder), or the run
                folder cannot be made (:func:`bench.store.files.make_run_dir`).
        """
        if self.held:
            self.held += 1
            try:
                yield
            finally:
                self.held -= 1
            return
        make_run_dir(self.folder)
        # The run folder itself is locked, not a file in it: deleting or replacing a lock file
        # would let a second process lock a new one while the first still writes.
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BenchError(f"run '{self.run_id}' is being written by another bench "
                                 "process; wait for it to end (or stop it), then resume",
                                 file=self.folder) from None
            self.held = 1
            try:
                yield
            finally:
                self.held = 0
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def is_being_written(self) -> bool:
        """True while a process (this one included) holds the lock; False when none does or
        the run folder does not exist.

        Probes with a shared, non-blocking ``flock`` that is released at once: it conflicts
        only with a writer's exclusive lock, never with other readers. A writer that starts in
        the same microsecond as the probe is told the run is busy and can simply retry.
        """
        if self.held:
            return True
        try:
            fd = os.open(self.folder, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)
