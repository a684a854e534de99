"""Run directories: ``reports/runs/<run-id>/manifest.json`` and ``results.jsonl``.

Writes are crash-safe: the manifest is replaced atomically (write a temporary file, fsync,
``os.replace``); each result row is one line appended and fsynced. A last line without its
final newline is a half-written row: it is cut off when the run is reopened, never read as
complete, unless it is a whole, well-formed row (a file edited by hand, or a write cut right
before its newline): that row is kept and its newline added.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import sys
import tempfile
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping

from pydantic import ValidationError

from bench.errors import BenchError, json_document, read_text_file
from bench.models import condition_variant
from bench.jsonl import dumps as _dumps
from bench.jsonl import line_bytes, loads
from bench.redact import MANIFEST_FREE_TEXT, ROW_FREE_TEXT, redact_fields
from bench.results import SCHEMA_VERSION, Manifest, Row, validation_problem

# Names bench itself uses in ``reports/`` (a run id also names its report folder,
# ``reports/<run-id>/``): the runs folder, the default response cache's folder
# (``reports/cache/responses.sqlite``) and the gate's JUnit file (docs/gate.md). The cache
# folder ``reports/.cache`` and merge's temporary ``reports/runs/.merge-*`` start with a dot,
# which no run id may. Compared case-insensitively: "Runs" is "runs" on macOS and Windows.
RESERVED_NAMES = ("runs", "cache", "gate-junit.xml")
RUN_ID_PATTERN = re.compile(r"(?!(?i:%s)\Z)[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
                            % "|".join(re.escape(name) for name in RESERVED_NAMES))
MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
# The fields every result row and manifest must have (present, possibly null): the
# required fields of bench.results.Row and bench.results.Manifest.
ROW_FIELDS = tuple(name for name, info in Row.model_fields.items() if info.is_required())
MANIFEST_FIELDS = tuple(name for name, info in Manifest.model_fields.items()
                        if info.is_required())


def _problem(exc: ValidationError, what: str) -> tuple[str | None, str]:
    """(field, message) of a failed validation of a stored ``what`` (``result row``,
    ``manifest``): a record of a newer schema says so, anything else is corrupt."""
    field, problem = validation_problem(exc)
    if problem.startswith("written by a newer bench"):
        return field, f"{what} {problem}"
    return field, f"corrupt {what}: {problem}"


def _whole_row(line: bytes) -> bool:
    """True when ``line`` (a last line without its newline) is a whole result row that fits
    the contract (:class:`bench.results.Row`) rather than one cut by an interrupted write."""
    try:
        data = loads(line)
        if not isinstance(data, dict):
            return False
        Row.model_validate(data)
    except (ValueError, RecursionError):  # JSON, UTF-8 and validation errors included
        return False
    return True


# Shown (never stored) for a run whose manifest says "running" while no process writes it.
CRASHED = "crashed"


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` when it can name a run (:data:`RUN_ID_PATTERN`).

    Raises:
        BenchError: one line: a reserved name (:data:`RESERVED_NAMES`, any case), or not
            1-100 letters, digits, ``.``, ``_``, ``-`` starting with a letter or digit
            (so that it chooses no path and no hidden folder).
    """
    if run_id.casefold() in RESERVED_NAMES:
        raise BenchError(f"invalid run id '{run_id}': bench uses reports/{run_id.casefold()} "
                         f"itself (reserved: {', '.join(RESERVED_NAMES)}); choose another "
                         "--run-id")
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise BenchError(f"invalid run id '{run_id}' (1-100 letters, digits, '.', '_', '-', "
                         "starting with a letter or digit)")
    return run_id


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` (UTC time and 4 random hex digits)."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


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
    as it is: manifests (redacted by :meth:`RunStore.write_manifest`), reports, baselines
    and project files. The one writer bench's text files go through (:func:`atomic_writer`:
    an existing file keeps its permission bits, a symbolic link stays a link)."""
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
        self._held = 0  # nesting depth of writing() in this process

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
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            self.check_dir()  # says which path is in the way
            raise

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
            for path in self.dir.iterdir():
                if path.name == MANIFEST and path.is_file() and not path.is_symlink():
                    continue
                if path.is_symlink() or not path.is_file() or path.stat().st_size:
                    return False
            for path in self.dir.iterdir():
                path.unlink()
            self.dir.rmdir()
        return True

    def check_dir(self) -> None:
        """Check, creating nothing, that the run folder can be made or used: for a new run,
        before its providers start.

        Raises:
            BenchError: as :meth:`make_dir`.
        """
        for path in (self.dir, *self.dir.parents):
            if path.is_dir():
                return
            _refuse_taken(path)

    def load_manifest(self) -> Manifest:
        """The manifest as a :class:`bench.results.Manifest` (a manifest without
        ``schema_version``, from the release before the contract, is migrated in memory).

        Raises:
            BenchError: no such run (a run folder that is a dangling symbolic link says
                so), the manifest is not UTF-8 JSON, not an object, lacks a field or has one
                of the wrong type (names file and field), or was written by a newer bench
                (one line: upgrade bench).
        """
        if not self.exists():
            _refuse_dangling(self.dir)
            raise BenchError(f"no run '{self.run_id}' (looked for {self.manifest_path})")
        data = json_document(read_text_file(self.manifest_path), file=self.manifest_path,
                             what="manifest")
        if not isinstance(data, dict):
            raise BenchError("manifest must be a JSON object", file=self.manifest_path)
        try:
            return Manifest.model_validate(data)
        except ValidationError as exc:
            field, message = _problem(exc, "manifest")
            if message.endswith("missing field"):
                message = "manifest lacks this field"
            raise BenchError(message, file=self.manifest_path,
                             field=field) from None

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the run's write lock (an advisory ``flock`` on the run folder) for the block,
        so that two processes never append to one run (e.g. two ``bench run --resume`` of the
        same id would both send the pending requests and write every row twice). Re-entrant on
        one store: ``bench run --resume`` takes it before it looks at the rows (cutting a
        half-written last row is only safe while no other process appends), and the run takes
        it again.

        Raises:
            BenchError: another process holds the lock (names the run folder).
        """
        if self._held:
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
            return
        self.make_dir()
        # The run folder itself is locked, not a file in it: deleting or replacing a lock file
        # would let a second process lock a new one while the first still writes.
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BenchError(f"run '{self.run_id}' is being written by another bench "
                                 "process; wait for it to end (or stop it), then resume",
                                 file=self.dir) from None
            self._held = 1
            try:
                yield
            finally:
                self._held = 0
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def is_being_written(self) -> bool:
        """True while a process (this one included) holds the run's write lock
        (:meth:`writing`); False when none does or the run folder does not exist.

        Probes with a shared, non-blocking ``flock`` that is released at once: it conflicts
        only with a writer's exclusive lock, never with other readers. A writer that starts in
        the same microsecond as the probe is told the run is busy and can simply retry.
        """
        if self._held:
            return True
        try:
            fd = os.open(self.dir, os.O_RDONLY)
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

    def shown_status(self, manifest: Manifest | Mapping[str, Any]) -> str:
        """The status to show for ``manifest`` (this run's, as :meth:`load_manifest` or
        :meth:`load_manifest` returns it): ``crashed`` when it says ``running`` but no process holds the run's write lock
        (the process that ran it died without writing its final status: killed, out of
        memory, power cut), else the stored status. Nothing is written: ``bench run
        --resume`` finishes a crashed run like an interrupted one."""
        status = str(manifest.status if isinstance(manifest, Manifest)
                     else manifest.get("status"))
        if status == "running" and not self.is_being_written():
            return CRASHED
        return status

    def write_manifest(self, manifest: Manifest | Mapping[str, Any]) -> None:
        """Replace the manifest atomically; a dict without ``schema_version`` is stamped with
        :data:`bench.results.SCHEMA_VERSION` (the writer writes the current shape). Secrets
        in its free text (command line, errors, reasons) are redacted; identifiers and the
        config are written as they are (:data:`bench.redact.MANIFEST_FREE_TEXT`).

        Raises:
            OSError: the manifest cannot be written; names ``manifest.json`` itself.
        """
        atomic_write_json(self.manifest_path,
                          redact_fields(_stamped(manifest), MANIFEST_FREE_TEXT))

    def set_status_in_place(self, status: str) -> bool:
        """Rewrite the stored manifest's ``"status": "running"`` as ``status`` in place, at
        the same size (padded with JSON whitespace), so that it needs no new disk space: the
        last resort when :meth:`write_manifest` fails because the disk is full. Returns
        True when done; False when the stored status is not ``running``, ``status`` is
        longer than it, or the file cannot be written."""
        old = b'"status": "running"'
        new = f'"status": "{status}"'.encode("utf-8")
        if len(new) > len(old):
            return False
        try:
            with self.manifest_path.open("r+b") as handle:
                data = handle.read()
                at = data.find(old)
                if at < 0:
                    return False
                handle.seek(at)
                handle.write(new + b" " * (len(old) - len(new)))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            return False
        return True

    def repair(self) -> int:
        """Cut a half-written last row off ``results.jsonl``; return the bytes removed. A last
        line that is a whole row without its newline (:func:`_whole_row`) gets the newline
        instead: it is a finished row."""
        if not self.results_path.is_file():
            return 0
        data = self.results_path.read_bytes()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        with self.results_path.open("r+b") as handle:
            if _whole_row(data[keep:]):
                handle.seek(0, os.SEEK_END)
                handle.write(b"\n")
                keep = len(data)
            else:
                handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
        return len(data) - keep

    def _raw_lines(self, on_cut: Callable[[int], None] | None = None, end: int | None = None
                   ) -> Iterator[tuple[int, int, bytes]]:
        """(line number, byte offset, bytes) of each complete, non-blank line of
        ``results.jsonl`` (a last line without newline is skipped, and its number given to
        ``on_cut``), up to byte ``end`` (None: the whole file).

        Raises:
            BenchError: ``results.jsonl`` is not a file.
        """
        if not self.results_path.is_file():
            if self.results_path.exists():  # a folder, a device: never "no rows yet"
                raise BenchError("results.jsonl is not a file", file=self.results_path)
            return
        offset = 0
        with self.results_path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if end is not None and offset >= end:
                    return
                if not line.endswith(b"\n") and not _whole_row(line):
                    if on_cut is not None:
                        on_cut(number)
                    return  # half-written by an interrupted run
                at, offset = offset, offset + len(line)
                if line.isspace():  # no copy of the line, unlike strip()
                    continue
                yield number, at, line

    def _decode(self, number: int, line: bytes) -> dict[str, Any]:
        """Line ``number`` of ``results.jsonl`` as a JSON object.

        Raises:
            BenchError: not UTF-8 JSON, or not an object (file and line).
        """
        try:
            data = loads(line)
        except UnicodeDecodeError as exc:
            raise BenchError(f"corrupt result row: not UTF-8 ({exc.reason})",
                             file=self.results_path, line=number) from None
        except json.JSONDecodeError as exc:
            raise BenchError(f"corrupt result row: {exc.msg}", file=self.results_path,
                             line=number) from None
        except RecursionError:
            raise BenchError("corrupt result row: nested too deeply",
                             file=self.results_path, line=number) from None
        except ValueError as exc:  # an integer longer than Python converts
            raise BenchError(f"corrupt result row: {str(exc).split(';')[0]}",
                             file=self.results_path, line=number) from None
        if not isinstance(data, dict):
            raise BenchError("corrupt result row: not a JSON object",
                             file=self.results_path, line=number)
        return data

    def _lines(self, on_cut: Callable[[int], None] | None = None
               ) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, decoded JSON object) of each complete line of ``results.jsonl``
        (a last line without newline is skipped, and its number given to ``on_cut``; blank
        lines are skipped too).

        Raises:
            BenchError: a complete line that is not UTF-8 JSON or not an object (file and
                line), or ``results.jsonl`` not a file.
        """
        for number, _, line in self._raw_lines(on_cut):
            yield number, self._decode(number, line)

    def _row(self, number: int, data: dict[str, Any]) -> Row:
        """``data`` (line ``number``) validated and migrated as a :class:`Row`.

        Raises:
            BenchError: it does not fit the contract (file, line, field), or was written by
                a newer bench.
        """
        try:
            return Row.model_validate(data)
        except RecursionError:
            raise BenchError("corrupt result row: nested too deeply", file=self.results_path,
                             line=number) from None
        except ValidationError as exc:
            field, message = _problem(exc, "result row")
            raise BenchError(message, file=self.results_path,
                             line=number, field=field) from None

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
            for number, data in self._lines():
                yield self._row(number, data)
            return
        read = RowsRead(self.results_path)
        yield from self.iter_read(manifest, plan=plan, into=read)
        for line in read.report(writing=self.is_being_written()):
            (warn or _print_warning)(line)

    def read_rows(self, manifest: Manifest | None = None, *,
                  plan: Callable[[Row], str | None] | None = None) -> "RowsRead":
        """The run's rows as every reader counts them (:meth:`iter_read`), held in
        :attr:`RowsRead.rows`, and what was left out (:class:`RowsRead`).

        Raises:
            BenchError: as :meth:`load_rows`.
        """
        read = RowsRead(self.results_path)
        read.rows = list(self.iter_read(manifest, plan=plan, into=read))
        return read

    def iter_read(self, manifest: Manifest | None = None, *,
                  plan: Callable[[Row], str | None] | None = None,
                  into: "RowsRead | None" = None, end: int | None = None) -> Iterator[Row]:
        """The run's rows as every reader counts them (``bench show``, ``report``,
        ``compare``, the gate), streamed: each row is given as it is read and not kept.

        A key is counted once, with its first row in the file: as ``bench run --resume``,
        which never sends a key again once it is in the file, and ``bench merge`` keep it.
        Later copies identical to it are dropped (counted in
        :attr:`RowsRead.identical_copies`); copies that differ are dropped with a warning
        naming their lines and the key. A row outside the plan (``manifest``'s
        :func:`plan_check`, then ``plan``) is left out with a warning naming its line, and a
        last line cut mid-way (a half-written row) is reported in
        :attr:`RowsRead.cut_line`. Only a digest of each counted line is kept (about 200
        bytes per key): a later copy whose bytes differ is compared with the first row read
        again from its offset.

        Args:
            manifest: this run's manifest; None: rows are not checked against it.
            plan: ``row -> None, or why it is not in the plan``.
            into: filled with what was left out (and :attr:`RowsRead.end`, the bytes read)
                once the iteration ends; its ``rows`` stay empty.
            end: read no further than this byte offset (a previous read's
                :attr:`RowsRead.end`: a second pass sees the rows the first saw, while a
                running run appends).

        Raises:
            BenchError: as :meth:`load_rows`.
        """
        checks = [c for c in (plan_check(manifest) if manifest is not None else None, plan)
                  if c is not None]
        path = self.results_path
        read = into if into is not None else RowsRead(path)
        first: dict[str, tuple[int, int, bytes]] = {}  # key -> (line, offset, digest)
        differing: dict[str, list[int]] = {}  # key -> lines of copies unlike the first
        cut: list[int] = []
        read_to = 0
        for number, offset, line in self._raw_lines(on_cut=cut.append, end=end):
            read_to = offset + len(line)
            row = self._row(number, self._decode(number, line))
            if row.key != _key_of(row):  # the row contradicts itself: corrupt, not stray
                raise BenchError("corrupt result row: its key does not match its case, "
                                 "variant, provider and trial", file=path, line=number,
                                 field="key")
            why = next((w for w in (check(row) for check in checks) if w), None)
            if why:
                read.outside.append((number, row.key, why))
                continue
            digest = hashlib.blake2b(line, digest_size=16).digest()
            seen = first.get(row.key)
            if seen is None:
                first[row.key] = (number, offset, digest)
                yield row
            elif seen[2] == digest or self._row_at(*seen[:2]) == row:
                read.identical_copies += 1
            else:
                differing.setdefault(row.key, []).append(number)
        read.conflicts = [(key, [first[key][0], *lines]) for key, lines in differing.items()]
        read.cut_line = cut[0] if cut else None
        read.counted = len(first)
        read.end = read_to

    def _row_at(self, number: int, offset: int) -> Row:
        """The row of line ``number``, read again from byte ``offset`` of ``results.jsonl``."""
        with self.results_path.open("rb") as handle:
            handle.seek(offset)
            return self._row(number, self._decode(number, handle.readline()))

    def written_rows(self, plan: Callable[[Row], str | None] | None = None) -> Iterator[Row]:
        """Every complete result row, in file order, each checked and migrated as
        :meth:`load_rows` does, copies included: for the run writer (resume, budgets), which
        must not add rows to a file that holds another plan's.

        Args:
            plan: ``row -> None or why the row is not in the run's plan``; None: not checked.

        Raises:
            BenchError: as :meth:`load_rows`, and a row outside ``plan`` (file, line, field
                ``key``).
        """
        for number, data in self._lines():
            row = self._row(number, data)
            if plan is not None:
                why = plan(row)
                if why:
                    raise BenchError(f"result row not in this run's plan: {why}",
                                     file=self.results_path, line=number, field="key")
            yield row

    def stored_rows(self, manifest: Manifest,
                    warn: Callable[[str], None] | None = None) -> "StoredRows":
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
            (warn or _print_warning)(line)
        return StoredRows(self, manifest, read.end, read.counted, variants=list(variants))

    def writer(self, sync_interval_s: float = 0.05) -> "RowWriter":
        """A :class:`RowWriter` appending to this run's ``results.jsonl``."""
        return RowWriter(self, sync_interval_s)

    def append(self, row: Row | Mapping[str, Any]) -> None:
        """Append one row (a :class:`Row`, or a dict of its shape: stamped with
        ``schema_version``) as one line (secrets in its free text redacted:
        :func:`_row_line`), flushed and fsynced before returning."""
        self.make_dir()
        line = _row_line(row)
        with self.results_path.open("ab") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


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

    def __init__(self, store: "RunStore", manifest: Manifest, end: int, count: int,
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


def _row_line(row: Row | Mapping[str, Any]) -> bytes:
    """The ``results.jsonl`` line of ``row`` (stamped as :func:`_stamped`): secrets in its
    free text (the provider's answer, error texts) redacted, identifiers (key, case, toolset,
    variant, provider) and data (labels, parsed calls) written as they are
    (:data:`bench.redact.ROW_FREE_TEXT`), so that resume, merge and replay read what ran."""
    return line_bytes(redact_fields(_stamped(row), ROW_FREE_TEXT))


def _refuse_dangling(path: Path) -> None:
    """Raise when ``path`` (a run folder or one above it) is a symbolic link to nothing.

    Raises:
        BenchError: names the link, its missing target and what to do.
    """
    if path.is_symlink() and not path.exists():
        raise BenchError(f"the run folder cannot be made or read: this is a symbolic link to "
                         f"'{os.readlink(path)}', which does not exist; remove the link or "
                         "create its target, then run again", file=path)


def _refuse_taken(path: Path) -> None:
    """Raise when ``path`` (a run folder or one above it) is a dangling symbolic link or
    something other than a folder (``mkdir`` would say only "File exists").

    Raises:
        BenchError: names ``path`` and what to do.
    """
    _refuse_dangling(path)
    if path.exists() and not path.is_dir():
        raise BenchError("the run folder cannot be made: this is a file, not a folder; move "
                         "it away, then run again", file=path)


def _stamped(record: Row | Manifest | Mapping[str, Any]) -> Any:
    """The JSON object to write for ``record``: a model's dump, or the dict with
    ``schema_version`` first when it has none (writers write the current shape)."""
    if isinstance(record, (Row, Manifest)):
        return record.to_json_dict()
    if "schema_version" in record:
        return record
    return {"schema_version": SCHEMA_VERSION, **record}


def _key_of(row: Row) -> str:
    """The key a row's case, variant, provider and trial make (what its ``key`` must be)."""
    return f"{row.case_id}|{row.variant}|{row.provider}|{row.trial}"


def _print_warning(line: str) -> None:
    """:meth:`RunStore.load_rows`'s default ``warn``: the line on stderr, as is."""
    print(line, file=sys.stderr, flush=True)


# Lines of one kind a report names one by one; the rest are summed up in one line.
SHOWN_PROBLEMS = 10


@dataclasses.dataclass
class RowsRead:
    """What :meth:`RunStore.read_rows` read from a run's ``results.jsonl``.

    Attributes:
        path: the file.
        rows: one :class:`Row` per key, the first in the file, in file order; rows outside
            the plan left out. What the run's tables and counts are made of
            (:meth:`RunStore.read_rows`; empty after a streamed :meth:`RunStore.iter_read`).
        counted: how many keys were counted (rows given), streamed or not.
        end: the byte offset just past the last line read.
        identical_copies: later copies of a key equal to its first row, dropped.
        conflicts: ``(key, line numbers)`` of each key whose later copies differ from its
            first row (the first line first: the row counted), in file order.
        outside: ``(line number, key, why)`` of each row outside the run's plan.
        cut_line: the number of a last line cut mid-way (a half-written row), or None.
    """

    path: Path
    rows: list[Row] = dataclasses.field(default_factory=list)
    counted: int = 0
    end: int = 0
    identical_copies: int = 0
    conflicts: list[tuple[str, list[int]]] = dataclasses.field(default_factory=list)
    outside: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)
    cut_line: int | None = None

    def report(self, writing: bool = False) -> list[str]:
        """One line per problem, each naming the file and line(s): ``warning: ...`` for rows
        left out that differ (a conflicting copy, a row outside the plan, a cut last line),
        ``note: ...`` for the number of identical copies dropped. [] for a clean file. At
        most :data:`SHOWN_PROBLEMS` lines of one kind, then one line for the rest.

        Args:
            writing: a process is appending to the run now: a cut last line is its row
                being written, not reported.
        """
        lines = []
        for key, numbers in self.conflicts[:SHOWN_PROBLEMS]:
            shown = ", ".join(map(str, numbers[:SHOWN_PROBLEMS]))
            more = f" and {len(numbers) - SHOWN_PROBLEMS} more" \
                if len(numbers) > SHOWN_PROBLEMS else ""
            lines.append(f"warning: {self.path}: lines {shown}{more} hold row '{key}' with "
                         f"different content; the first (line {numbers[0]}) is counted")
        if len(self.conflicts) > SHOWN_PROBLEMS:
            rest = self.conflicts[SHOWN_PROBLEMS:]
            lines.append(f"warning: {self.path}: {len(rest)} more keys have copies with "
                         f"different content (from line {min(n[1] for _, n in rest)}); the "
                         "first copy of each is counted")
        for number, key, why in self.outside[:SHOWN_PROBLEMS]:
            lines.append(f"warning: {self.path}:{number}: row '{key}' is not in this run's "
                         f"plan ({why}); not counted")
        if len(self.outside) > SHOWN_PROBLEMS:
            rest_lines = [number for number, _, _ in self.outside[SHOWN_PROBLEMS:]]
            lines.append(f"warning: {self.path}: {len(rest_lines)} more rows (lines "
                         f"{rest_lines[0]}-{rest_lines[-1]}) are not in this run's plan; "
                         "not counted")
        if self.cut_line is not None and not writing:
            lines.append(f"warning: {self.path}:{self.cut_line}: the last line is cut mid-way "
                         "(a half-written row); not counted")
        if self.identical_copies:
            lines.append(f"note: {self.path}: {self.identical_copies} identical "
                         f"{'copy' if self.identical_copies == 1 else 'copies'} of rows "
                         "dropped (each key counts once)")
        return lines


def plan_check(manifest: Manifest) -> Callable[[Row], str | None]:
    """``row -> None, or why it is not in the plan of the run of manifest``: the manifest's
    ``run_id``, and a variant, provider and trial the run's config plans (a row's key is made
    of these: :meth:`RunStore.read_rows` refuses one that is not)."""
    config = manifest.config
    variants = {v.name for v in manifest.variants}
    providers = set(config.get("providers") or [])
    trials = config.get("trials") if type(config.get("trials")) is int else None
    run_id = manifest.run_id

    def stray(row: Row) -> str | None:
        if row.run_id not in (None, run_id):
            return f"it belongs to run '{row.run_id}'"
        if variants and condition_variant(row.variant) not in variants:
            return f"variant '{row.variant}' is not one of the run's"
        if providers and row.provider not in providers:
            return f"provider '{row.provider}' is not one of the run's"
        if trials is not None and row.trial >= trials:
            return f"trial {row.trial} is past the run's {trials} trial(s)"
        return None

    return stray


class RowWriter:
    """Appends rows through one open file: each row is written and flushed to the OS at once
    (a killed process loses nothing), and fsynced by a background thread at most every
    ``sync_interval_s`` seconds and on :meth:`close` (group commit: a power cut loses at most
    that window, and a row is never half-read: see :meth:`RunStore.repair`). One fsync per row
    would cap a run at the disk's fsync rate; the thread keeps the fsync's few milliseconds
    off the caller's thread.

    Args:
        store: the run.
        sync_interval_s: the longest time (seconds) a written row waits for its fsync.

    Raises:
        BenchError: the run folder cannot be made (:meth:`RunStore.make_dir`).
        OSError: ``results.jsonl`` cannot be opened for appending; from
            :meth:`append` or :meth:`close` when writing or an earlier background fsync
            failed (e.g. the disk is full).
    """

    def __init__(self, store: RunStore, sync_interval_s: float = 0.05) -> None:
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

    def append(self, row: Row | Mapping[str, Any]) -> None:
        """Write one row (a :class:`Row`, or a dict of its shape: stamped with
        ``schema_version``) as one line (secrets in its free text redacted:
        :func:`_row_line`) and flush it; the background thread fsyncs it."""
        if self._error is not None:
            raise self._error
        try:
            self._handle.write(_row_line(row))
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
