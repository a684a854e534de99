"""Run directories: ``reports/runs/<run-id>/manifest.json`` and ``results.jsonl``.

Writes are crash-safe: the manifest is replaced atomically (write a temporary file, fsync,
``os.replace``); each result row is one line appended and fsynced. A last line without its
final newline is a half-written row: it is cut off when the run is reopened, never read as
complete, unless it is a whole, well-formed row (a file edited by hand, or a write cut right
before its newline): that row is kept and its newline added.

:class:`RunStore` is the one seam callers use; its pieces are modules of their own:
``ids`` (run ids, file names), ``files`` (atomic files, run folders), ``lock`` (the run's
write lock), ``records`` (rows and manifests as lines), ``manifest``, ``reader`` (rows
read, repaired and counted; :class:`StoredRows` here reads them again), ``checks`` (what a
read left out, as messages) and ``writer`` (rows appended).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable, Iterator

from bench.errors import BenchError
from bench.results import Manifest, Row
from bench.store import manifest as _manifest
from bench.store.checks import SHOWN_PROBLEMS, RowsRead, plan_check, print_warning
from bench.store.files import check_run_dir, make_run_dir, remove_empty_run_dir
from bench.store.ids import (CRASHED, MANIFEST, RESERVED_NAMES, RESULTS, RUN_ID_PATTERN,
                             check_run_id, new_run_id)
from bench.store.lock import RunLock
from bench.store.reader import RowReader
from bench.store.records import MANIFEST_FIELDS, ROW_FIELDS
from bench.store.writer import RowWriter, append_row

__all__ = ["CRASHED", "MANIFEST", "MANIFEST_FIELDS", "RESERVED_NAMES", "RESULTS",
           "ROW_FIELDS", "RUN_ID_PATTERN", "SHOWN_PROBLEMS", "RowWriter", "RowsRead",
           "RunStore", "StoredRows", "check_run_id", "new_run_id", "plan_check"]


class RunStore:
    """One run directory.

    Args:
        root: the runs folder (``reports/runs``).
        run_id: the run's id; letters, digits, ``.``, ``_`` and ``-`` only, not starting
            with ``.``, and none of bench's own names (:func:`check_run_id`): it becomes a
            folder name, so nothing else may choose a path.

    Raises:
        BenchError: an invalid run id.
    """

    def __init__(self, root: Path, run_id: str) -> None:
        self.run_id = check_run_id(run_id)
        self.dir = root / run_id
        self.manifest_path = self.dir / MANIFEST
        self.results_path = self.dir / RESULTS
        self._lock = RunLock(self.dir, run_id)
        self._reader = RowReader(self.results_path)

    def exists(self) -> bool:
        """True when the run has a manifest."""
        return self.manifest_path.is_file()

    def make_dir(self) -> None:
        """Create the run folder (and ``reports/runs`` above it) if missing.

        Raises:
            BenchError: the run folder, or a folder above it, is a symbolic link to nothing or
                a file (``mkdir`` says only "File exists"): names it and what to do.
            OSError: the folder cannot be made otherwise (e.g. permissions).
        """
        make_run_dir(self.dir)

    def discard_if_empty(self) -> bool:
        """Remove the run folder when it holds nothing but its manifest and empty files (a new
        run that failed before its first row, e.g. its toolset's MCP server did not start);
        return True when removed. A folder with any row, any non-empty file besides the
        manifest (a batch ledger, a server log) or any subfolder is kept. The run's write lock
        (:meth:`writing`) is held while it is checked and removed.

        Raises:
            BenchError: another process holds the run's write lock.
        """
        if not self.dir.is_dir() or self.dir.is_symlink():
            return False
        with self.writing():
            return remove_empty_run_dir(self.dir)

    def check_dir(self) -> None:
        """Check, creating nothing, that the run folder can be made or used: for a new run,
        before its providers start.

        Raises:
            BenchError: as :meth:`make_dir`.
        """
        check_run_dir(self.dir)

    def load_manifest(self) -> Manifest:
        """The manifest as a :class:`bench.results.Manifest` (a manifest without
        ``schema_version``, from the release before the contract, is migrated in memory).

        Raises:
            BenchError: no such run (a run folder that is a dangling symbolic link says
                so), the manifest is not UTF-8 JSON, not an object, lacks a field or has one
                of the wrong type (names file and field), or was written by a newer bench
                (one line: upgrade bench).
        """
        return _manifest.load_manifest(self.manifest_path, self.run_id)

    def writing(self) -> AbstractContextManager[None]:
        """Hold the run's write lock (an advisory ``flock`` on the run folder) for the block,
        so that two processes never append to one run (e.g. two ``bench run --resume`` of the
        same id would both send the pending requests and write every row twice). Re-entrant on
        one store: ``bench run --resume`` takes it before it looks at the rows (cutting a
        half-written last row is only safe while no other process appends), and the run takes
        it again (:meth:`bench.store.lock.RunLock.hold`).

        Raises:
            BenchError: another process holds the lock (names the run folder).
        """
        return self._lock.hold()

    def is_being_written(self) -> bool:
        """True while a process (this one included) holds the run's write lock
        (:meth:`writing`); False when none does or the run folder does not exist
        (:meth:`bench.store.lock.RunLock.is_being_written`)."""
        return self._lock.is_being_written()

    def shown_status(self, manifest: Manifest) -> str:
        """The status to show for ``manifest`` (this run's, as :meth:`load_manifest` returns
        it): ``crashed`` when it says ``running`` but no process holds the run's write lock
        (the process that ran it died without writing its final status: killed, out of
        memory, power cut), else the stored status. Nothing is written: ``bench run
        --resume`` finishes a crashed run like an interrupted one."""
        return _manifest.shown_status(manifest, self.is_being_written)

    def write_manifest(self, manifest: Manifest) -> None:
        """Replace the manifest atomically, stamped and redacted
        (:func:`bench.store.manifest.write_manifest`).

        Raises:
            OSError: the manifest cannot be written; names ``manifest.json`` itself.
            TypeError: ``manifest`` is not a :class:`Manifest`.
        """
        _manifest.write_manifest(self.manifest_path, manifest)

    def set_status_in_place(self, status: str) -> bool:
        """Rewrite the stored manifest's ``"status": "running"`` as ``status`` in place, at
        the same size: the last resort when :meth:`write_manifest` fails because the disk is
        full (:func:`bench.store.manifest.set_status_in_place`). Returns True when done."""
        return _manifest.set_status_in_place(self.manifest_path, status)

    def repair(self) -> int:
        """Cut a half-written last row off ``results.jsonl``; return the bytes removed
        (:meth:`bench.store.reader.RowReader.repair`: a whole row without its newline gets
        the newline instead)."""
        return self._reader.repair()

    def load_rows(self, manifest: Manifest | None = None, *,
                  plan: Callable[[Row], str | None] | None = None,
                  warn: Callable[[str], None] | None = None) -> Iterator[Row]:
        """The complete result rows as :class:`bench.results.Row`; rows without
        ``schema_version`` (the release before the contract) are migrated in memory.

        Without ``manifest`` and ``plan``: every complete line, in file order (a last line
        without newline is skipped). With either: the run's rows as its readers count them
        (:meth:`read_rows`: one per key, rows outside the plan left out), and each line of
        :meth:`RowsRead.report` given to ``warn``.

        Args:
            manifest: this run's manifest (:meth:`load_manifest`): each row must then be in
                its plan (:func:`plan_check`), so rows of another run appended to the file are
                left out, never shown as this run's. None: not checked.
            plan: ``row -> None, or why it is not in the plan`` (e.g. the plan's keys),
                checked as well.
            warn: takes each warning line (default: printed to stderr).

        Raises:
            BenchError: a line that is not a JSON object, a row that does not fit the
                contract (its key included), or a row of a newer schema (file, line, field),
                or ``results.jsonl`` not a file.
        """
        if manifest is None and plan is None:
            yield from self._reader.all_rows()
            return
        read = RowsRead(self.results_path)
        yield from self.iter_read(manifest, plan=plan, into=read)
        for line in read.report(writing=self.is_being_written()):
            (warn or print_warning)(line)

    def read_rows(self, manifest: Manifest | None = None, *,
                  plan: Callable[[Row], str | None] | None = None) -> RowsRead:
        """The run's rows as every reader counts them (:meth:`iter_read`), held in
        :attr:`RowsRead.rows`, and what was left out (:class:`RowsRead`).

        Raises:
            BenchError: as :meth:`load_rows`.
        """
        return self._reader.read_rows(manifest, plan=plan)

    def iter_read(self, manifest: Manifest | None = None, *,
                  plan: Callable[[Row], str | None] | None = None,
                  into: RowsRead | None = None, end: int | None = None) -> Iterator[Row]:
        """The run's rows as every reader counts them (``bench show``, ``report``,
        ``compare``, the gate), streamed: one row per key, the first in the file; rows
        outside the plan (``manifest``'s :func:`plan_check`, then ``plan``) left out and
        noted in ``into``, read no further than byte ``end``
        (:meth:`bench.store.reader.RowReader.iter_read`).

        Raises:
            BenchError: as :meth:`load_rows`.
        """
        return self._reader.iter_read(manifest, plan=plan, into=into, end=end)

    def written_rows(self, plan: Callable[[Row], str | None] | None = None) -> Iterator[Row]:
        """Every complete result row, in file order, copies included, each checked against
        ``plan`` when given: for the run writer (resume, budgets), which must not add rows to
        a file that holds another plan's (:meth:`bench.store.reader.RowReader.written_rows`).

        Raises:
            BenchError: as :meth:`load_rows`, and a row outside ``plan`` (file, line, field
                ``key``).
        """
        return self._reader.written_rows(plan)

    def stored_rows(self, manifest: Manifest,
                    warn: Callable[[str], None] | None = None) -> StoredRows:
        """The run's counted rows as a :class:`StoredRows` (read again on each pass, never
        held), after one pass that counts them and notes their variants; each line of
        :meth:`RowsRead.report` goes to ``warn`` (default: stderr).

        Raises:
            BenchError: as :meth:`load_rows`.
        """
        read = RowsRead(self.results_path)
        variants: dict[str, None] = {}
        for row in self.iter_read(manifest, into=read):
            variants.setdefault(row.variant)
        for line in read.report(writing=self.is_being_written()):
            (warn or print_warning)(line)
        return StoredRows(self, manifest, read.end, read.counted, variants=list(variants))

    def writer(self, sync_interval_s: float = 0.05) -> RowWriter:
        """A :class:`RowWriter` appending to this run's ``results.jsonl``."""
        return RowWriter(self, sync_interval_s)

    def append(self, row: Row) -> None:
        """Append one row as one line (secrets in its free text redacted:
        :func:`bench.store.records.row_line`), flushed and fsynced before returning
        (:func:`bench.store.writer.append_row`).

        Raises:
            OSError: the row cannot be written.
            TypeError: ``row`` is not a :class:`Row`.
        """
        self.make_dir()
        append_row(self.results_path, row)


class StoredRows:
    """A stored run's counted rows (:meth:`RunStore.iter_read`), read again
    from its ``results.jsonl`` on each iteration and never held: a report of a million rows
    keeps a compact frame, not a million :class:`~bench.results.Row` objects
    (``benchmarks/report_memory.py``); :meth:`RunStore.stored_rows` makes one. Every pass
    reads up to the same byte (``end``), so the passes agree while a running run appends.
    ``prefix`` relabels each row's variant and key ``<prefix>/<variant>`` (runs that share a
    variant, :func:`bench.report.data.load_runs`). ``len()`` is the number of rows.

    Raises (on iteration):
        BenchError: the file is gone or shorter than ``end`` (cut or replaced since the first
            pass), or a line is corrupt (as :meth:`RunStore.iter_read`).
    """

    def __init__(self, store: RunStore, manifest: Manifest, end: int, count: int,
                 prefix: str | None = None, variants: list[str] | None = None) -> None:
        self.store, self.manifest, self.end, self.count = store, manifest, end, count
        self.prefix = prefix
        self.variants = variants or []  # as stored, first-seen order (stored_rows)

    def __iter__(self) -> Iterator[Row]:
        path = self.store.results_path
        try:
            size = path.stat().st_size
        except OSError:
            size = -1
        if size < self.end:  # figures from two different files would not agree
            raise BenchError("results.jsonl was removed, cut or replaced while it was being "
                             "read; run the command again", file=path)
        rows = self.store.iter_read(self.manifest, end=self.end)
        if self.prefix is None:
            yield from rows
            return
        for row in rows:
            yield row.model_copy(update={"variant": f"{self.prefix}/{row.variant}",
                                         "key": f"{self.prefix}/{row.key}"})

    def __len__(self) -> int:
        return self.count

    def relabelled(self, prefix: str) -> "StoredRows":
        """The same rows with variants and keys labelled ``<prefix>/...``."""
        return StoredRows(self.store, self.manifest, self.end, self.count, prefix,
                          self.variants)
