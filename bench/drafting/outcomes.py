"""What ``bench variants draft`` produces and reports (:mod:`bench.drafting`): the drafts
(:class:`Draft`), the command's result (:class:`DraftResult`) and its progress, one
:class:`DraftStep` per request (:class:`Steps`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Draft:
    """One drafted text: ``tool``, ``variant`` (``l<N>``), the ``target`` and actual
    ``lines`` (non-empty lines), and the ``text``."""

    tool: str
    variant: str
    target: int
    lines: int
    text: str


@dataclass
class DraftResult:
    """What ``bench variants draft`` did.

    Attributes:
        drafts: the drafts written, in tool then length order.
        failed: tool -> one line naming each length that was not written, and each section
            that could not be drafted, with the reason (an unusable answer, a failed request,
            the tool's time budget spent, a text written meanwhile by another process). A
            tool's other lengths are written all the same.
        method: how the drafts were asked (``whole`` or ``sections``: :data:`bench.drafting.asker.METHODS`).
        asked: drafts asked for (each tool's lengths without a text yet, or all with
            ``force``).
        kept: tool -> the lengths (``l<N>``) not asked because its spec already had a text
            for them (a run that resumes); tools that kept none are absent.
    """

    drafts: list[Draft]
    failed: dict[str, str]
    method: str = "whole"
    asked: int = 0
    kept: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class DraftStep:
    """One drafting request answered (or skipped), for a progress line.

    Attributes:
        done: requests answered so far, this one included (1-based).
        total: requests planned.
        tool: the tool drafted.
        part: what was asked: a length (``l10``), or a spec section and the question's
            number (``constraints 2/3``).
        outcome: a few words: ``10 lines``, ``unusable: <why>``, ``not asked: <why>``.
        seconds: this request's wall time (s).
        elapsed_s: the command's wall time so far (s).
    """

    done: int
    total: int
    tool: str
    part: str
    outcome: str
    seconds: float
    elapsed_s: float


ProgressHook = Callable[[DraftStep], None]
"""Called once per :class:`DraftStep`, in order (``bench variants draft`` prints a line)."""


class Steps:
    """Counts requests and reports each to a :data:`ProgressHook` (``total``: the requests
    planned; ``progress``: None reports nothing)."""

    def __init__(self, total: int, progress: ProgressHook | None) -> None:
        self.total, self.done, self.progress = total, 0, progress
        self.started = time.monotonic()

    def __call__(self, tool: str, part: str, outcome: str, seconds: float = 0.0) -> None:
        """Count one request of ``tool`` (``part``, ``outcome`` and its wall time in
        ``seconds``: :class:`DraftStep`) and report it."""
        self.done += 1
        if self.progress is not None:
            self.progress(DraftStep(self.done, self.total, tool, part, outcome, seconds,
                                    time.monotonic() - self.started))

    def skip(self, count: int) -> None:
        """Count ``count`` planned requests that are not needed, without a line."""
        self.done += count
