"""Reading a run's ``results.jsonl``: a half-written last row cut off
(:meth:`RowReader.repair`), each line decoded and checked against the contract
(:class:`bench.results.Row`), the rows as every reader counts them
(:meth:`RowReader.iter_read`: one per key, rows outside the plan left out); a stored run's
rows read again on each pass are :class:`bench.store.StoredRows`."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import ValidationError

from bench.errors import BenchError
from bench.jsonl import loads
from bench.results import Manifest, Row
from bench.store.checks import RowsRead, plan_check
from bench.store.records import key_of, stored_problem, whole_row


class RowReader:
    """The rows of one run's ``results.jsonl`` (``path``), read and checked; the reading
    half of :class:`bench.store.RunStore`, which gives each method under the same name.
    """

    def __init__(self, path: Path) -> None:
        self.results_path = path

    def all_rows(self) -> Iterator[Row]:
        """Every complete line as a :class:`Row`, in file order, copies included and no
        plan checked (a last line without newline is skipped):
        :meth:`bench.store.RunStore.load_rows` without a manifest or plan.

        Raises:
            BenchError: as :meth:`iter_read`.
        """
        for number, data in self._lines():
            yield self._row(number, data)

    def read_rows(self, manifest: Manifest | None = None, *,
                  plan: Callable[[Row], str | None] | None = None) -> RowsRead:
        """The run's rows as every reader counts them (:meth:`iter_read`), held in
        :attr:`RowsRead.rows`, and what was left out (:class:`RowsRead`).

        Raises:
            BenchError: as :meth:`iter_read`.
        """
        read = RowsRead(self.results_path)
        read.rows = list(self.iter_read(manifest, plan=plan, into=read))
        return read

    def repair(self) -> int:
        """Cut a half-written last row off ``results.jsonl``; return the bytes removed. A last
        line that is a whole row without its newline (:func:`whole_row`) gets the newline
        instead: it is a finished row."""
        if not self.results_path.is_file():
            return 0
        data = self.results_path.read_bytes()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        with self.results_path.open("r+b") as handle:
            if whole_row(data[keep:]):
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
                if not line.endswith(b"\n") and not whole_row(line):
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
            field, message = stored_problem(exc, "result row")
            raise BenchError(message, file=self.results_path,
                             line=number, field=field) from None

    def iter_read(self, manifest: Manifest | None = None, *,
                  plan: Callable[[Row], str | None] | None = None,
                  into: RowsRead | None = None, end: int | None = None) -> Iterator[Row]:
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
            BenchError: a line that is not a JSON object, a row that does not fit the
                contract (its key included), or a row of a newer schema (file, line, field),
                or ``results.jsonl`` not a file.
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
            if row.key != key_of(row):  # the row contradicts itself: corrupt, not stray
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
        :meth:`iter_read` does, copies included: for the run writer (resume, budgets), which
        must not add rows to a file that holds another plan's.

        Args:
            plan: ``row -> None or why the row is not in the run's plan``; None: not checked.

        Raises:
            BenchError: as :meth:`iter_read`, and a row outside ``plan`` (file, line, field
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

