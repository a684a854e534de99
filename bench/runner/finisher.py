"""Rows of answered plan items, finished while the run's loop would otherwise wait.

An answer is charged at once (the next dispatch's budget decision sees it) and its row (parse
is done; execution, scoring, redaction and the write are left) is queued. The scheduler
finishes queued rows only when no answer waits, so that a finished request's slot goes to the
next send first: on one CPU-bound process, a row's finishing no longer delays the requests
behind it (``benchmarks/provider_throughput.py``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Union

from bench.episodes.loop import EpisodeOutcome
from bench.providers.pipeline import Outcome
from bench.runner.budget import ProgressHook, RowHook
from bench.runner.ledger import Ledger
from bench.runner.plan import PlanItem
from bench.runner.rows import CaseSummaries, build_episode_row, build_row
from bench.runner.session import RunSession

if TYPE_CHECKING:
    from bench.executor.runhook import RunExecution
    from bench.runstore import RowWriter

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
    """

    def __init__(self, session: RunSession, ledger: Ledger,
                 progress: ProgressHook | None, on_row: RowHook | None = None) -> None:
        self.session, self.ledger, self.progress = session, ledger, progress
        self.on_row = on_row
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
        if self.progress:
            self.progress(self.finished, len(self.session.plan), item)
        if self.on_row:
            self.on_row(row)

    def finish_all(self) -> None:
        """Finish every queued row: nothing answered is lost at a stop or a failure.

        Raises:
            OSError: as :meth:`finish_next`.
        """
        while self.queued:
            self.finish_next()
