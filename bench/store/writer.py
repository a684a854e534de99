"""Appending rows to a run's ``results.jsonl``: one row at a time, fsynced before returning
(:func:`append_row`), or through one open file whose fsyncs a background thread groups
(:class:`RowWriter`). Each row is one line, stamped and redacted
(:func:`bench.store.records.row_line`)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Protocol

from bench.results import Row
from bench.store.files import named_os_error
from bench.store.records import row_line


class RunFolder(Protocol):
    """What :class:`RowWriter` writes into: a :class:`bench.store.RunStore`."""

    @property
    def results_path(self) -> Path:
        """The run's ``results.jsonl``."""

    def make_dir(self) -> None:
        """Create the run folder if missing (:meth:`bench.store.RunStore.make_dir`)."""


def append_row(path: Path, row: Row) -> None:
    """Append one row to ``path``, whose folder exists, as one line (secrets in its free
    text redacted: :func:`bench.store.records.row_line`), flushed and fsynced before
    returning.

    Raises:
        OSError: ``path`` cannot be opened or written (e.g. the disk is full).
        TypeError: ``row`` is not a :class:`Row`.
    """
    line = row_line(row)
    with path.open("ab") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


class RowWriter:
    """Appends rows through one open file: each row is written and flushed to the OS at once
    (a killed process loses nothing), and fsynced by a background thread at most every
    ``sync_interval_s`` seconds and on :meth:`close` (group commit: a power cut loses at most
    that window, and a row is never half-read: see :meth:`bench.store.RunStore.repair`). One
    fsync per row would cap a run at the disk's fsync rate; the thread keeps the fsync's few
    milliseconds off the caller's thread.

    Args:
        store: the run.
        sync_interval_s: the longest time (seconds) a written row waits for its fsync.

    Raises:
        BenchError: the run folder cannot be made (:meth:`bench.store.RunStore.make_dir`).
        OSError: ``results.jsonl`` cannot be opened for appending; from
            :meth:`append` or :meth:`close` when writing or an earlier background fsync
            failed (e.g. the disk is full).
    """

    def __init__(self, store: RunFolder, sync_interval_s: float = 0.05) -> None:
        store.make_dir()
        self.path = store.results_path
        self._handle = store.results_path.open("ab")
        self._interval = sync_interval_s
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._error: OSError | None = None
        self._syncer = threading.Thread(target=self._sync_loop, name="bench-rows-fsync",
                                        daemon=True)
        self._syncer.start()

    def append(self, row: Row) -> None:
        """Write one row as one line (secrets in its free text redacted:
        :func:`bench.store.records.row_line`) and flush it; the background thread fsyncs
        it.

        Raises:
            OSError: as the class says.
            TypeError: ``row`` is not a :class:`Row`.
        """
        if self._error is not None:
            raise self._error
        try:
            self._handle.write(row_line(row))
            self._handle.flush()
        except OSError as exc:  # e.g. the disk is full: name the file
            self._error = named_os_error(exc, self.path)
            raise self._error from None
        self._dirty.set()

    def _sync_loop(self) -> None:
        while True:
            self._dirty.wait()
            if self._closing.is_set():
                return
            self._dirty.clear()
            try:
                os.fsync(self._handle.fileno())
            except (OSError, ValueError) as exc:  # ValueError: closed under us
                self._error = named_os_error(exc if isinstance(exc, OSError)
                                             else OSError(str(exc)), self.path)
                return
            if self._closing.wait(self._interval):  # group commit window
                return

    def sync(self) -> None:
        """fsync what was written, now, in the caller's thread."""
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Stop the background thread, fsync and close."""
        if not self._handle.closed:
            self._closing.set()
            self._dirty.set()
            self._syncer.join()
            try:
                self.sync()
            except OSError as exc:
                raise named_os_error(exc, self.path) from None
            finally:
                try:
                    self._handle.close()  # flushes: fails again on a full disk
                except OSError:
                    pass
            if self._error is not None:
                raise self._error
