"""What an optimization records: candidates, rejections, rounds, runs and the acceptance
decision (pydantic models, stored in ``result.json`` and read by the report)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RejectionKind = Literal["unparseable", "no-op", "tokens", "leak", "assertive",
                        "over-triggering", "no gain"]


class RunCost(BaseModel):
    """One run of the optimization and what it cost.

    Attributes:
        run_id: the run (under ``work/reports/runs``).
        purpose: ``dev r<k>``, ``propose r<k>`` or ``test``.
        status: the run's manifest status.
        rows: rows read; requests: requests sent (cache hits are 0); cache_hits: rows
            answered from the cache.
        billed_usd: USD billed (0 for cache hits and unpriced providers).
        billed_tokens: prompt + completion tokens of the requests sent.
        seconds: wall time of the :func:`bench.evaluate` call.
    """

    run_id: str
    purpose: str
    status: str
    rows: int
    requests: int
    cache_hits: int
    billed_usd: float
    billed_tokens: int
    seconds: float


class Rejection(BaseModel):
    """A proposal or candidate that was not kept, and why (one line)."""

    round: int
    tool: str
    candidate: str | None = None
    kind: RejectionKind
    reason: str


class Candidate(BaseModel):
    """One variant the search evaluated on ``dev`` (the start is round 0).

    Attributes:
        name: its variant name in the work project.
        round: the round that proposed it; parent: the variant it edits.
        tools: the tools it edits (one, or several for a round's combined candidate).
        reasons: the proposer's reasons per edited tool.
        tokens: OpenAI tool-definition tokens; token_ratio: against the start.
        dev_k / dev_n / dev_rate: the target metric on ``dev`` (successes, applicable rows,
            fraction).
        parent_rate: the parent's rate on the same rows; p_value: McNemar exact, parent vs
            this one, on ``dev`` (information only: ``dev`` chooses, ``test`` decides).
        fixed / broke: ``dev`` cases it got right where the parent did not, and the reverse.
        restraint_calls: rows of no-call / ask cases where it called a tool (parent's:
            parent_restraint_calls).
        flags: anti-gaming findings (assertive wording, over-triggering).
        status: ``start``, ``kept`` (became the current variant), ``evaluated``,
            ``rejected``, ``unfinished`` (the budget stopped its dev run: not judged on part
            of ``dev``; a resume with a larger budget finishes it).
        pareto: on the Pareto front of (dev rate, tokens) when the search ended.
    """

    name: str
    round: int
    parent: str | None = None
    tools: list[str] = Field(default_factory=list)
    reasons: dict[str, str] = Field(default_factory=dict)
    tokens: int
    token_ratio: float
    dev_k: int | None = None
    dev_n: int | None = None
    dev_rate: float | None = None
    parent_rate: float | None = None
    p_value: float | None = None
    fixed: list[str] = Field(default_factory=list)
    broke: list[str] = Field(default_factory=list)
    restraint_calls: int | None = None
    parent_restraint_calls: int | None = None
    flags: list[str] = Field(default_factory=list)
    status: Literal["start", "kept", "evaluated", "rejected", "unfinished"] = "evaluated"
    pareto: bool = False


class Round(BaseModel):
    """One round: the variant it started from, the proposals it asked, what it kept.

    Attributes:
        failures: failed ``dev`` rows per tool (those left out included).
        withheld: ``dev`` cases left out of the proposer's prompts, case id -> why (a text
            of the failure contains a test query: :func:`bench.optimize.evidence.
            withhold_test_copies`).
    """

    round: int
    current: str
    current_dev_rate: float | None
    failures: dict[str, int] = Field(default_factory=dict)
    withheld: dict[str, str] = Field(default_factory=dict)
    proposals: int = 0
    candidates: list[str] = Field(default_factory=list)
    kept: str | None = None


class GateTest(BaseModel):
    """One paired test of the acceptance (a :class:`bench.compare.core.MetricComparison`
    in short form)."""

    provider: str
    metric: str
    n: int
    rate_start: float
    rate_final: float
    diff: float
    a_only: int
    b_only: int
    p_value: float
    p_holm: float
    verdict: str


class Acceptance(BaseModel):
    """The held-out decision, made once on ``test``.

    Attributes:
        accepted: the final variant passed every condition.
        tested: a test run happened (False when the search kept nothing).
        reasons: one line per condition that failed (or why nothing was tested).
        tests: the paired tests (Holm over all of them).
        steps: mean episode steps ``{provider: [start, final]}`` when episodes ran.
        flips: ``test`` cases ``{"fixed": [...], "broke": [...]}`` on the target metric,
            target provider.
        token_ratio: final tokens / start tokens.
    """

    accepted: bool = False
    tested: bool = False
    reasons: list[str] = Field(default_factory=list)
    tests: list[GateTest] = Field(default_factory=list)
    steps: dict[str, list[float]] = Field(default_factory=dict)
    flips: dict[str, list[str]] = Field(default_factory=dict)
    token_ratio: float = 1.0


class OptimizeResult(BaseModel):
    """``result.json``: the whole optimization.

    Attributes:
        opt_id, toolset, start (variant), final (the current variant when the search ended),
        output (the output variant's name), stop_reason (why the search ended).
        start_sha256: :attr:`bench.descriptions.variants.Variant.sha256` of the start as the
            run loaded it (descriptions and schemas); ``bench optimize adopt`` compares the
            project's start with it. None in a result written before it was recorded.
    """

    opt_id: str
    toolset: str
    start: str
    start_sha256: str | None = None
    final: str
    output: str
    stop_reason: str
    rounds: list[Round] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list)
    rejections: list[Rejection] = Field(default_factory=list)
    runs: list[RunCost] = Field(default_factory=list)
    acceptance: Acceptance = Field(default_factory=Acceptance)

    def candidate(self, name: str) -> Candidate:
        """The candidate called ``name``.

        Raises:
            KeyError: no such candidate.
        """
        for found in self.candidates:
            if found.name == name:
                return found
        raise KeyError(name)

    @property
    def requests(self) -> int:
        """Requests sent by every run (0 for a full replay)."""
        return sum(r.requests for r in self.runs)

    @property
    def billed_usd(self) -> float:
        """USD billed by every run."""
        return sum(r.billed_usd for r in self.runs)
