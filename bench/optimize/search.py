"""The search on ``dev``: run the current variant, show its failures to the proposer, run the
candidates paired against it, keep the best, until the rounds, the budget or the ideas run
out. ``test`` is never run here, and no prompt shows a test query: a failed ``dev`` case
whose text copies one (a case shared with another dataset's test split) is left out and
recorded (:func:`bench.optimize.evidence.withhold_test_copies`), and a rendered prompt that
still contains one is refused.

Choosing on ``dev`` needs no significance (``dev`` is small; the held-out test decides): a
candidate is kept when its target-metric rate on ``dev`` is above the current variant's on the
same rows and it does not over-trigger (more calls on no-call / ask cases than the current
one). Among the candidates so kept, the Pareto set on (dev rate, tool-definition tokens) is
updated (:func:`bench.stats.frontier.pareto_frontier`, as GEPA keeps a Pareto set of
candidates: Agrawal et al., "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning", https://arxiv.org/abs/2507.19457) and the next round starts from its most accurate
point (fewest tokens on a tie).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import jinja2

from bench.api import Evaluation
from bench.compare.core import compare_rows
from bench.descriptions.variants import Variant
from bench.optimize.candidates import Guards, build_candidates
from bench.optimize.evidence import (group_failures, refuse_test_copies, render_prompt,
                                     withhold_test_copies)
from bench.optimize.guards import restraint_calls
from bench.optimize.records import Candidate, OptimizeResult, Rejection, Round
from bench.optimize.runs import Runs, variant_rows
from bench.optimize.workspace import Workspace
from bench.results import Row
from bench.stats.frontier import pareto_frontier


@dataclass
class Search:
    """The state of the search (see the module docstring)."""

    workspace: Workspace
    runs: Runs
    guards: Guards
    template: jinja2.Template
    dataset: Path
    result: OptimizeResult
    variants: dict[str, Variant] = field(default_factory=dict)
    dev_rows: dict[str, list[Row]] = field(default_factory=dict)

    @property
    def metric(self) -> str:
        """The target metric."""
        return self.guards.config.metric

    def start(self) -> Candidate:
        """Write and run the starting variant on ``dev`` (round 0)."""
        start = self.guards.start
        variant = self.workspace.write_variant(start.name, start.tools,
                                               f"the start of optimization {self.result.opt_id}")
        self.variants[variant.name] = variant
        dev = self.runs.target("dev-r0", "dev r0", self.dataset, [variant.name], split="dev")
        rows = variant_rows(dev, variant.name)
        self.dev_rows[variant.name] = rows
        k, n = _rate(rows, self.metric)
        record = Candidate(name=variant.name, round=0, tokens=self.guards.start_tokens,
                           token_ratio=1.0, dev_k=k, dev_n=n, dev_rate=k / n if n else None,
                           restraint_calls=restraint_calls(rows), status="start")
        self.result.candidates.append(record)
        return record

    def run(self, rounds: int) -> str:
        """Run up to ``rounds`` rounds; returns why the search stopped."""
        current = self.start()
        for round_no in range(1, rounds + 1):
            spent = self.runs.budget_left()
            if spent:
                return spent
            stop, kept = self.round(round_no, current)
            if kept is None:
                return stop
            current = kept
        return f"{rounds} round(s) done"

    def round(self, round_no: int, current: Candidate) -> tuple[str, Candidate | None]:
        """One round from ``current``: (why the search stops, None) or ("", the kept one)."""
        variant = self.variants[current.name]
        failures = group_failures(self.dev_rows[current.name], self.metric,
                                  [t.name for t in variant.tools])
        record = Round(round=round_no, current=current.name,
                       current_dev_rate=current.dev_rate,
                       failures={tool: len(found) for tool, found in failures.items()})
        self.result.rounds.append(record)
        if not failures:
            return f"no failures on dev in round {round_no}", None
        index = self.guards.test_index()
        failures, record.withheld = withhold_test_copies(failures, index)
        if not failures:
            return (f"no failure on dev to show the proposer in round {round_no}: each copies "
                    "a test query (left out)"), None
        config = self.guards.config
        prompts = {tool: render_prompt(self.template, variant.tool(tool) or variant.tools[0],
                                       variant.tools, found, max_failures=config.max_failures,
                                       max_tokens_ratio=config.max_tokens_ratio)
                   for tool, found in failures.items()}
        for tool, prompt in prompts.items():  # whatever put a test query there: never sent
            refuse_test_copies(prompt, index, f"the proposer's prompt for {tool} in round "
                                              f"{round_no}")
        self.workspace.write_propose_tool([t.name for t in variant.tools])
        answers = self.runs.proposer(round_no, self.workspace.write_proposal_cases(round_no,
                                                                                   prompts))
        record.proposals = len(answers.rows)
        built, rejected = build_candidates(round_no, list(prompts), answers, variant,
                                           self.guards)
        self.result.rejections += rejected
        if not built:
            return f"no usable proposal in round {round_no}", None
        for candidate, draft in built:
            self.variants[candidate.name] = self.workspace.write_variant(
                candidate.name, draft.tools, f"optimization {self.result.opt_id}, round "
                f"{round_no}, edits {', '.join(candidate.tools)}")
        record.candidates = [c.name for c, _ in built]
        dev = self.runs.target(f"dev-r{round_no}", f"dev r{round_no}", self.dataset,
                               [current.name, *record.candidates], split="dev")
        if dev.status != "complete":  # the budget ran out mid-run: judge nothing on part of dev
            for candidate, _ in built:
                candidate.status = "unfinished"
                self.result.candidates.append(candidate)
            why = self.runs.budget_left() or f"the dev run ended {dev.status}"
            wanted = len(self.dev_rows[current.name]) * (len(record.candidates) + 1)
            return (f"{why}; round {round_no}'s dev run stopped after {len(dev.rows)} of "
                    f"{wanted} rows, its candidates not judged"), None
        kept = self._judge(round_no, current, [c for c, _ in built], dev)
        record.kept = kept.name if kept else None
        if kept is None:
            return f"no candidate improved on dev in round {round_no}", None
        return "", kept

    def _judge(self, round_no: int, current: Candidate, built: Sequence[Candidate],
               dev: Evaluation) -> Candidate | None:
        """Score each candidate against ``current`` on the round's ``dev`` rows, reject the
        over-triggering ones, mark the Pareto set; the kept candidate (or None)."""
        parent_rows = variant_rows(dev, current.name)
        parent_k, parent_n = _rate(parent_rows, self.metric)
        parent_rate = parent_k / parent_n if parent_n else None
        better: list[Candidate] = []
        for candidate in built:
            rows = variant_rows(dev, candidate.name)
            self.dev_rows[candidate.name] = rows
            _score(candidate, parent_rows, rows, self.metric, parent_rate)
            self.result.candidates.append(candidate)
            if candidate.restraint_calls is not None and candidate.parent_restraint_calls \
                    is not None and candidate.restraint_calls > candidate.parent_restraint_calls:
                extra = candidate.restraint_calls - candidate.parent_restraint_calls
                why = f"{extra} more call(s) on no-call/ask dev cases"
                candidate.flags.append(f"over-triggering: {why}")
                candidate.status = "rejected"
                self.result.rejections.append(Rejection(
                    round=round_no, tool=",".join(candidate.tools), candidate=candidate.name,
                    kind="over-triggering", reason=why))
            elif (candidate.dev_rate or 0) > (parent_rate or 0):
                better.append(candidate)
        self._mark_pareto()
        if not better:
            return None
        kept = max(better, key=lambda c: (c.dev_rate or 0, -c.tokens))
        kept.status = "kept"
        return kept

    def _mark_pareto(self) -> None:
        """Mark the Pareto set over every candidate that was not rejected."""
        pool = [c for c in self.result.candidates
                if c.status != "rejected" and c.dev_rate is not None]
        front = pareto_frontier([float(c.tokens) for c in pool],
                                [float(c.dev_rate or 0) for c in pool])
        for candidate in self.result.candidates:
            candidate.pareto = False
        for candidate, on in zip(pool, front):
            candidate.pareto = on


def _rate(rows: Sequence[Row], metric: str) -> tuple[int, int]:
    """(successes, applicable rows) of ``metric`` in ``rows``."""
    values = [v for v in (r.metrics.model_dump().get(metric) for r in rows) if v is not None]
    return sum(bool(v) for v in values), len(values)


def _score(candidate: Candidate, parent_rows: Sequence[Row], rows: Sequence[Row],
           metric: str, parent_rate: float | None) -> None:
    """Fill ``candidate``'s dev figures, paired against its parent's rows."""
    k, n = _rate(rows, metric)
    candidate.dev_k, candidate.dev_n = k, n
    candidate.dev_rate = k / n if n else None
    candidate.parent_rate = parent_rate
    candidate.restraint_calls = restraint_calls(rows)
    candidate.parent_restraint_calls = restraint_calls(parent_rows)
    try:
        comparison = compare_rows(parent_rows, rows, metrics=[metric], n_boot=200)
    except ValueError:  # no pair shares the metric
        return
    if comparison.tests:
        candidate.p_value = comparison.tests[0].p_value
    candidate.fixed = sorted({f.case_id for f in comparison.flips if f.direction == "gained"})
    candidate.broke = sorted({f.case_id for f in comparison.flips if f.direction == "lost"})
