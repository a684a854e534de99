"""Progress of ``bench run`` a person can plan by: rows done / planned, rows per second, the
time left (ETA), and the variant and provider of the latest row.

The runner calls a :class:`RunProgress` once when it starts and once per finished row
(:data:`bench.runner.ProgressHook`). On a terminal it draws rich's progress bar; elsewhere
(CI logs, a pipe) it prints one plain line at each change of variant or provider, then at
most every ``interval_s`` seconds, and when the last row is done (the last of the rows
this session sends, when :meth:`RunProgress.set_plan` said which)::

    progress: 120/1116 rows (10.8%), 1.9 rows/s, ETA 8m 44s, variant l10, provider local

Rows per second count only this session's rows (a resumed run's earlier rows took no time
here) over the time since the run started, so the first rows of a variant, which fill the
local model's prompt cache and take longest, weigh in as they should.

The time left, once the plan is known (:meth:`RunProgress.set_plan`, which ``bench run``
calls), is projected per group (condition and provider: a variant, or a variant under a
tool count or retriever), each at its own measured pace: the mean time between rows of that
group, each gap counted from its provider's previous row (providers send in parallel, each
its groups in plan order: the time left is the slowest provider's, not the sum), its first
row left out (it fills the prompt cache: 190 s where later l50 rows took 3.6 s). A mean, not
a median: requests in flight together finish together (at ``--concurrency 3`` two gaps in
three are about 0 s, and a median read ``ETA 0s`` with 19 rows, about 2 s, left). A group
not yet started adds the first-row cost measured on the groups that did start; a group not
yet measured takes the median pace of its provider's measured ones, scaled by its requests'
size (tool-definition characters) relative to theirs, since the embedded model's time grows
with the tools block (1.4 s a row at l3, 3.6 s at l50). Until each provider with rows left
has a group with a second row the time left is unknown (``-``), never a projection of a
cold first row (which read ``10h 22m`` after the first row of a one-hour run), nor of
another provider's pace (the oracle's read ``ETA 0s`` with 18 s of a server's rows left).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.plural import count, noun

if TYPE_CHECKING:
    from bench.runner import PlanItem

PLAIN_INTERVAL_S = 10.0  # seconds between plain progress lines (CI logs)


def format_duration(seconds: float) -> str:
    """``45s``, ``8m 44s``, ``2h 05m`` (rounded to the second; hours drop the seconds)."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def format_rate(rows_per_s: float | None) -> str:
    """``1.9 rows/s`` (two decimals below 1, none from 10 up); ``- rows/s`` before any row."""
    if rows_per_s is None:
        return "- rows/s"
    digits = 2 if rows_per_s < 1 else 1 if rows_per_s < 10 else 0
    return f"{rows_per_s:.{digits}f} rows/s"


class RunProgress:
    """The progress hook of one ``bench run``: call it as ``progress(done, total, item)``.

    Args:
        console: where to draw or print (``bench run`` passes its stderr console).
        interval_s: seconds between plain lines while the variant and provider stay the same.
        clock: monotonic seconds (injectable for tests); read once per call.
        live: draw rich's progress bar (default: when ``console`` is a terminal), else print
            plain lines.

    Use it as a context manager (the bar is drawn inside the block) or call :meth:`stop`.
    """

    def __init__(self, console: Console, *, interval_s: float = PLAIN_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, live: bool | None = None) -> None:
        self.console = console
        self.interval_s = interval_s
        self.clock = clock
        self.live = console.is_terminal if live is None else live
        self.done = 0
        self.total = 0
        self.variant: str | None = None
        self.provider: str | None = None
        self._started_at: float | None = None  # the first call: the run's start
        self._done_at_start = 0
        self._first_row: tuple[float, int] | None = None  # (time, done) of the first row
        self._now = 0.0
        self._last_line_at: float | None = None
        self._bar: Progress | None = None
        self._task: Any = None
        self._left: dict[tuple[str, str], int] | None = None  # rows left per group
        self._size: dict[tuple[str, str], float] = {}  # mean request size per group
        # seconds between its rows: [sum, count] (a mean needs no list of every gap)
        self._gaps: dict[tuple[str, str], list[float]] = {}
        self._first_gap: dict[tuple[str, str], float] = {}  # its first row's time
        self._began: float | None = None  # the start event's time
        self._last_at: dict[str, float] = {}  # provider id -> its latest row's time

    def set_plan(self, pending: Iterable[PlanItem]) -> None:
        """The rows this session will do, for the per-group time left (see the module
        docstring); without it the time left is rows left / :attr:`rows_per_s`."""
        left: dict[tuple[str, str], int] = {}
        size: dict[tuple[str, str], list[int]] = {}
        for item in pending:
            group = (item.condition, item.provider_id)
            left[group] = left.get(group, 0) + 1
            if len(size.setdefault(group, [])) < 20:  # a sample is enough
                size[group].append(sum(len(t.description) + len(str(t.input_schema))
                                       for t in item.tools))
        self._left = left
        self._size = {g: statistics.fmean(v) if v else 0.0 for g, v in size.items()}

    def _group_eta(self) -> float | None:
        """Seconds left projected per group, the slowest provider's sum; None until every
        provider with rows left has a group with a measured pace."""
        assert self._left is not None
        paces = {g: total / n for g, (total, n) in self._gaps.items() if n}
        if not paces:
            return None
        warm = [max(0.0, self._first_gap[g] - pace) for g, pace in paces.items()
                if g in self._first_gap]
        extra = statistics.median(warm) if warm else 0.0
        per_provider: dict[str, float] = {}  # providers send in parallel
        for group, left in self._left.items():
            if left <= 0:
                continue
            if group in paces:
                time_left = left * paces[group]
            else:  # at the pace of its provider's measured groups
                like = {g: p for g, p in paces.items() if g[1] == group[1]}
                if not like:  # another provider's pace says nothing of this one's
                    return None
                measured_size = statistics.fmean(self._size.get(g, 0.0) for g in like) or 1.0
                typical = statistics.median(like.values())
                scale = self._size.get(group, measured_size) / measured_size
                pace = typical * max(scale, 0.1)
                started = group in self._first_gap
                time_left = (left if started else left - 1) * pace
                if not started:
                    time_left += pace + extra
            per_provider[group[1]] = per_provider.get(group[1], 0.0) + time_left
        return max(per_provider.values(), default=0.0)

    def __enter__(self) -> "RunProgress":
        if self.live:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[rows]}, "
                                                                  "{task.fields[speed]}, "
                                                                  "ETA {task.fields[eta]}"),
                                 TimeElapsedColumn(), console=self.console)
            self._bar.start()
            self._task = self._bar.add_task("starting", total=None, rows="rows",
                                            speed="- rows/s", eta="-")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop drawing the bar (idempotent; plain mode has nothing to stop)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    @property
    def rows_per_s(self) -> float | None:
        """Rows finished per second in this session since its first row, None before the
        second. The first row is left out: it carries the start-up (a model's first read of
        the tools block took 50 s where a row then took 5 s, and an ETA of 15 h for 2 h)."""
        if self._first_row is None:
            return None
        first_at, first_done = self._first_row
        rows = self.done - first_done
        elapsed = self._now - first_at
        return rows / elapsed if rows > 0 and elapsed > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds until every planned row is done: per group once the plan is known
        (:meth:`set_plan`), else at :attr:`rows_per_s`; None unknown."""
        if self.done >= self.total:
            return 0.0
        if self._left is not None:
            return self._group_eta()
        rate = self.rows_per_s
        return (self.total - self.done) / rate if rate else None

    def _timed(self, item: PlanItem) -> None:
        """Note the time since its provider's previous row (or the start) against ``item``'s
        group."""
        group = (item.condition, item.provider_id)
        since = self._last_at.get(item.provider_id,
                                  self._began if self._began is not None else self._now)
        gap = self._now - since
        self._last_at[item.provider_id] = self._now
        if group in self._first_gap:
            sums = self._gaps.setdefault(group, [0.0, 0])
            sums[0] += gap
            sums[1] += 1
        else:
            self._first_gap[group] = gap
        if self._left is not None and group in self._left:
            self._left[group] -= 1

    def line(self) -> str:
        """The plain progress line, e.g. ``progress: 120/1116 rows (10.8%), 1.9 rows/s, ETA
        8m 44s, variant l10, provider local``."""
        share = 100.0 * self.done / self.total if self.total else 100.0
        eta = self.eta_s
        return (f"progress: {self.done}/{count(self.total, 'row')} ({share:.1f}%), "
                f"{format_rate(self.rows_per_s)}, "
                f"ETA {'-' if eta is None else format_duration(eta)}, "
                f"variant {self.variant or '-'}, provider {self.provider or '-'}")

    def __call__(self, done: int, total: int, item: PlanItem | None = None) -> None:
        """One event: the run started (``item`` None) or finished the row of ``item``.

        Args:
            done: rows done so far, earlier sessions' included.
            total: rows planned.
            item: the plan item whose row was just written, or None.
        """
        self._now = self.clock()
        if self._started_at is None:
            self._started_at, self._done_at_start = self._now, done
        self.done, self.total = done, total
        if item is not None and self._first_row is None:
            self._first_row = (self._now, done)
        if item is not None:
            self._timed(item)
        elif self._began is None:
            self._began = self._now
        changed = False
        if item is not None:
            changed = (item.condition, item.provider_id) != (self.variant, self.provider)
            self.variant, self.provider = item.condition, item.provider_id
        if self._bar is not None:
            eta = self.eta_s
            self._bar.update(self._task, completed=done, total=total,
                             description=f"{self.variant} · {self.provider}"
                             if self.variant else "starting",
                             rows=noun(total, "row"), speed=format_rate(self.rows_per_s),
                             eta="-" if eta is None else format_duration(eta))
            return
        if item is None:
            return
        due = self._last_line_at is None or self._now - self._last_line_at >= self.interval_s
        # the session's last row: the plan's last, or the last sent (a skipped provider's
        # rows stay planned)
        last = done >= total or (self._left is not None and item is not None and
                                 not any(n > 0 for n in self._left.values()))
        if changed or due or last:
            self._last_line_at = self._now
            self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)
