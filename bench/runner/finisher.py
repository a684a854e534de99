"""Rows of answered plan items, finished while the run's loop would otherwise wait.

An answer is charged at once (the next dispatch's budget decision sees it) and its row (parse
is done; execution, scoring, redaction and the write are left) is queued. The scheduler
finishes queued rows only when no answer waits, so that a finished request's slot goes to the
next send first: on one CPU-bound process, a row's finishing no longer delays the requests
behind it (``benchmarks/provider_throughput.py``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable, Union

from bench.episodes.loop import EpisodeOutcome
from bench.errors import BenchError, shorten_message
from bench.plural import count
from bench.results import Row
from bench.providers.pipeline import Outcome
from bench.runner.budget import ProgressHook, RowHook
from bench.runner.ledger import Ledger
from bench.runner.plan import PlanItem
from bench.runner.rows import CaseSummaries, build_episode_row, build_row
from bench.runner.session import RunSession

if TYPE_CHECKING:
    from bench.executor.runhook import RunExecution
    from bench.store import RowWriter

Answer = Union[Outcome, EpisodeOutcome]
Priced = tuple[float | None, float | None]  # one answer's (cost, billed) in USD (Ledger.charge)

ROW_BACKLOG = 64
"""Answered items whose rows may wait, at most, for the loop to be idle: past it a row is
finished at once, which bounds the memory held by unwritten answers (a reply each)."""


class RowFinisher:
    """Answered plan items in, scored rows (:class:`bench.results.Row`) out to the run's
    ``results.jsonl``, oldest first.

    ``writer`` and ``execution`` (the run's executor, or None) are set once the
    run's files are open. ``finished`` counts the plan's rows done, those of earlier runs of
    a resume included.

    The caller's hooks (``progress``, ``on_row``) run after their row is written. A hook that
    raises an ``Exception`` is called no more and its error, one line naming the hook and
    what it raised (:func:`hook_error`), goes to ``hook_failed``: the run stops sending, and
    every answered row is still written (a hook's bug loses nothing computed).
    """

    def __init__(self, session: RunSession, ledger: Ledger,
                 progress: ProgressHook | None, on_row: RowHook | None = None,
                 hook_failed: Callable[[BenchError], None] | None = None) -> None:
        self.session, self.ledger, self.progress = session, ledger, progress
        self.on_row = on_row
        self.hook_failed = hook_failed
        self.summaries = CaseSummaries()
        self.writer: RowWriter | None = None
        self.execution: RunExecution | None = None
        self.finished = 0
        self.queued: deque[tuple[PlanItem, Answer, list[Priced]]] = deque()

    def __len__(self) -> int:
        """Answered items whose rows are not written yet."""
        return len(self.queued)

    def answered(self, item: PlanItem, answer: Answer) -> None:
        """Charge ``item``'s answer (one request, or an episode's steps) and queue its row;
        past :data:`ROW_BACKLOG` queued, the oldest row is finished now."""
        responses = answer.responses if isinstance(answer, EpisodeOutcome) \
            else [answer.response]
        priced = self.ledger.charge(item.provider_id, responses, answer.cache)
        self.queued.append((item, answer, priced))
        if len(self.queued) > ROW_BACKLOG:
            self.finish_next()

    def finish_next(self) -> None:
        """Execute, score and append the oldest queued row.

        Raises:
            OSError: the row could not be written (the writer names the file).
        """
        assert self.writer is not None  # opened before any request is sent
        item, answer, priced = self.queued.popleft()
        summary = self.summaries.of(item.case)
        run_id = self.session.store.run_id
        if isinstance(answer, EpisodeOutcome):
            costs = [cost for cost, _ in priced]
            total = None if not costs or None in costs else sum(c for c in costs if c is not None)
            row = build_episode_row(
                item, run_id, answer, cost_usd=total,
                billed_usd=sum(billed or 0.0 for _, billed in priced), case_summary=summary)
        else:
            [(cost, billed)] = priced
            row = build_row(
                item, run_id, answer.response, cost_usd=cost, billed_usd=billed,
                attempts=answer.attempts, cache=answer.cache, execution=self.execution,
                case_summary=summary, bfcl=self.session.bfcl.get(item.case.id))
        self.writer.append(row)
        self.finished += 1
        self.report(item, row)

    def report(self, item: PlanItem | None, row: Row | None = None) -> None:
        """Call the progress hook (``item`` None: the run starts) and, with ``row``, the row
        hook; a hook that raises an ``Exception`` is dropped and reported to ``hook_failed``
        (a ``KeyboardInterrupt`` passes: it stops the run as Ctrl-C does)."""
        if self.progress is not None:
            try:
                self.progress(self.finished, len(self.session.plan), item)
            except Exception as exc:  # noqa: BLE001 - the caller's code: one line
                self.progress = None
                self._hook_raised("progress", exc)
        if row is not None and self.on_row is not None:
            try:
                self.on_row(row)
            except Exception as exc:  # noqa: BLE001 - the caller's code: one line
                self.on_row = None
                self._hook_raised("row", exc)

    def _hook_raised(self, hook: str, exc: Exception) -> None:
        error = hook_error(hook, exc, self.finished, len(self.session.plan),
                           self.session.resume_hint)
        if self.hook_failed is None:
            raise error from exc
        self.hook_failed(error)

    def finish_all(self) -> None:
        """Finish every queued row: nothing answered is lost at a stop or a failure.

        Raises:
            OSError: as :meth:`finish_next`.
        """
        while self.queued:
            self.finish_next()


def hook_error(hook: str, exc: Exception, done: int, planned: int, resume: str) -> BenchError:
    """The one-line failure of a run whose ``hook`` (``progress`` or ``row``: the caller's
    :data:`ProgressHook` / :data:`RowHook`) raised ``exc`` with ``done`` of ``planned`` rows
    written; ``resume`` says how to continue (``bench run --resume <run-id>``)."""
    try:
        said = str(exc)
    except Exception:  # noqa: BLE001 - its own __str__ raised
        said = "(its message cannot be shown)"
    kept = f"with {done} of {count(planned, 'row')} written (kept)" if done else \
        "before its first row"
    return BenchError(shorten_message(
        f"the {hook} hook raised {type(exc).__name__}: {said}; the run stopped {kept}: fix "
        f"the hook, then continue with: {resume}"))
