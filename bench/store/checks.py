"""What reading a run's rows found besides the rows: conflicting and identical copies of a
key, rows outside the run's plan, a cut last line (:class:`RowsRead`, whose
:meth:`RowsRead.report` returns the lines to show), and the plan check itself
(:func:`plan_check`)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Callable

from bench.models import condition_variant
from bench.results import Manifest, Row


def print_warning(line: str) -> None:
    """The default ``warn`` of :meth:`bench.store.RunStore.load_rows` and
    :meth:`bench.store.RunStore.stored_rows`: the line on stderr, as is."""
    print(line, file=sys.stderr, flush=True)


# Lines of one kind a report names one by one; the rest are summed up in one line.
SHOWN_PROBLEMS = 10


@dataclasses.dataclass
class RowsRead:
    """What :meth:`bench.store.RunStore.read_rows` read from a run's ``results.jsonl``.

    Attributes:
        path: the file.
        rows: one :class:`Row` per key, the first in the file, in file order; rows outside
            the plan left out. What the run's tables and counts are made of
            (:meth:`bench.store.RunStore.read_rows`; empty after a streamed
            :meth:`bench.store.RunStore.iter_read`).
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
    of these: :meth:`bench.store.RunStore.read_rows` refuses one that is not)."""
    config = manifest.config
    variants = {v.name for v in manifest.variants}
    stored = config.get("providers")
    providers = {str(p) for p in stored} if isinstance(stored, list) else set()
    count = config.get("trials")
    trials = count if isinstance(count, int) and not isinstance(count, bool) else None
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

