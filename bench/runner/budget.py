"""What a run has been billed, and whether a budget lets one more request start."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bench.results import Row
from bench.runner.plan import PlanItem


@dataclass
class Spend:
    """What a run has been billed: USD, prompt + completion tokens, and requests."""

    usd: float = 0.0
    tokens: int = 0
    requests: int = 0

    def add(self, usd: float, tokens: int) -> None:
        """Count one billed request."""
        self.usd += usd
        self.tokens += tokens
        self.requests += 1

    @property
    def mean_usd(self) -> float:
        """Mean USD per billed request (0 before the first)."""
        return self.usd / self.requests if self.requests else 0.0

    @property
    def mean_tokens(self) -> float:
        """Mean tokens per billed request (0 before the first)."""
        return self.tokens / self.requests if self.requests else 0.0


# Called as hook(rows done, rows planned, plan item of the row just written) per row, and
# once with item None when the run starts (bench.progress.RunProgress is the CLI's). A hook
# that raises fails the run in one line; the rows answered are still written (RowFinisher).
ProgressHook = Callable[[int, int, "PlanItem | None"], None]

# Called with each result row once it is written (after ProgressHook's rows done is counted).
RowHook = Callable[[Row], None]

