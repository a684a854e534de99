"""The gate's decision for one (variant, provider, metric) and how it is shown: the
:class:`Verdict` (pass or fail, with its reasons, notes, flipped cases and power) and its
lines for the pytest report, the terminal summary and JUnit properties.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bench.plural import count

# the conventional target power (Cohen 1988, "Statistical Power Analysis for the Behavioral
# Sciences", 2nd ed.), bench compare's default too: a real drop of the printed size is missed
# 1 time in 5
POWER = 0.8
FLIP_LINES = 100  # per-case rule: flipped cases listed one line each, at most this many


@dataclass
class FlippedCase:
    """A case the baseline got right and the current run gets wrong, for one metric.

    Attributes:
        case_id, trial: which; query: its last user message; answer: the current answer in
        short form; errors: the current row's execution / argument errors in short form.
        metric: the metric that flipped; expected: the label in short form
        (``name(arg=value|value)``); allowed: the case is in ``allow_flips``.
    """

    case_id: str
    trial: int
    query: str
    answer: str
    errors: str
    metric: str = ""
    expected: str = ""
    allowed: bool = False

    def line(self) -> str:
        """One line: case, trial, metric, what the label expected and what the model did."""
        text = (f"{self.case_id} (trial {self.trial}) {self.metric}: expected "
                f"{self.expected or '?'}; the model: {self.answer}")
        return text + (f" [{self.errors}]" if self.errors else "")


@dataclass
class Verdict:
    """The gate's decision for one (variant, provider, metric).

    Attributes:
        variant, provider, metric: which test.
        n, successes: rows where the metric applies, and how many pass.
        rate, low, high: the rate and its 95% Wilson interval (fractions; NaN without rows).
        floor: the metric's absolute floor (None: none).
        baseline_rate, baseline_n: the baseline on the paired cases (None: no baseline).
        diff, diff_low, diff_high: current minus baseline with its paired bootstrap interval.
        p_value, p_holm: McNemar exact p-value and its Holm adjustment (None: not tested).
        lost, gained: pairs flipped right->wrong and wrong->right.
        reasons: why it fails (empty: it passes); notes: remarks on a passing metric.
        flips: every lost case (allowed ones flagged); flips_shown: how many of them a
            failure of the floor or the paired test quotes in full (the config's).
        per_case: the per-case rule applies (``fail_on_flips``, a deterministic provider, a
            baseline); per_case_why: why it does or does not, in words.
        mdd: the smallest drop (fraction) the paired test detects with :data:`POWER` at
            ``mdd_alpha`` on ``baseline_n`` pairs (NaN: not even 100 points; None: no
            baseline); mdd_alpha: ``alpha / tests``, Holm's first-step threshold.
        tests: the number of (variant, provider, metric) tests of the gate (Holm's family).
        target, target_text: the drop the gate is meant to catch (fraction) and, in words, how
            the detectable drop compares with it (the floor's distance below the baseline, or
            the margin).
        pairs_needed: pairs the paired test would need to detect ``target`` (None: not
            computed; ``PAIRS_CAP + 1``: more than
            :data:`bench.gate.power.PAIRS_CAP`).
        warning: the power warning (None: none).
    """

    variant: str
    provider: str
    metric: str
    n: int
    successes: int
    rate: float
    low: float
    high: float
    floor: float | None = None
    baseline_rate: float | None = None
    baseline_n: int | None = None
    diff: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    lost: int = 0
    gained: int = 0
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flips: list[FlippedCase] = field(default_factory=list)
    per_case: bool = False
    per_case_why: str = ""
    flips_shown: int = 5
    mdd: float | None = None
    mdd_alpha: float | None = None
    tests: int = 1
    target: float | None = None
    target_text: str = ""
    pairs_needed: int | None = None
    warning: str | None = None

    @property
    def passed(self) -> bool:
        """True when no failure reason applies."""
        return not self.reasons

    @property
    def test_name(self) -> str:
        """``<metric>[<variant>|<provider>]``: the pytest item and JUnit test-case name."""
        return f"{self.metric}[{self.variant}|{self.provider}]"

    def properties(self) -> list[tuple[str, str]]:
        """Name/value pairs for JUnit ``<properties>`` (fractions with 4 decimals)."""
        def fmt(value: float | None) -> str:
            return "" if value is None else f"{value:.4f}"
        return [("metric", self.metric), ("variant", self.variant),
                ("provider", self.provider), ("rate", fmt(self.rate)),
                ("interval", f"{fmt(self.low)}-{fmt(self.high)}"), ("n", str(self.n)),
                ("floor", fmt(self.floor)), ("baseline_rate", fmt(self.baseline_rate)),
                ("diff", fmt(self.diff)), ("p_value", fmt(self.p_value)),
                ("p_holm", fmt(self.p_holm)), ("lost_cases", str(self.lost)),
                ("gained_cases", str(self.gained)), ("mdd", fmt(self.mdd)),
                ("per_case_rule", "on" if self.per_case else "off"),
                ("verdict", "pass" if self.passed else "fail")]

    def power_text(self) -> str:
        """One line: the smallest drop the paired test detects here, and on how many pairs."""
        if self.mdd is None or self.mdd_alpha is None:
            return ("no baseline to pair with: only the floor decides"
                    if self.floor is not None else
                    "no baseline to pair with and no floor: this metric cannot fail on a drop "
                    "(write both with: bench baseline update)")
        alpha = self.mdd_alpha
        where = (f"{count(self.baseline_n or 0, 'pair')}, {POWER:.0%} power, alpha "
                 f"{alpha:.3g}" + (f" = {alpha * self.tests:.3g} / {self.tests} tests (Holm)"
                                   if self.tests > 1 else ""))
        if math.isnan(self.mdd):
            return f"the paired test detects no drop, not even 100 points ({where})"
        return f"the paired test detects a drop of {100 * self.mdd:.0f} points or more ({where})"

    def summary_lines(self) -> list[str]:
        """The verdict's power in the pytest terminal summary: one line, plus the warning."""
        lines = [f"{self.test_name}: {self.power_text()}; per-case rule "
                 f"{'on' if self.per_case else 'off'} ({self.per_case_why})"]
        if self.warning:
            lines.append(f"  WARNING: {self.warning}")
        return lines

    def message(self) -> str:
        """Multi-line text: metric, interval, floor, baseline, change, p-values, flipped cases."""
        def pct(value: float) -> str:
            return f"{100 * value:.1f}%"

        def points(value: float | None) -> str:  # set with baseline_rate (None: not compared)
            return "?" if value is None else f"{100 * value:+.1f}"
        head = (f"{self.metric} on variant {self.variant}, provider {self.provider}: "
                f"{'FAIL' if self.reasons else 'pass'}")
        lines = [head, f"  now       {pct(self.rate)} [{pct(self.low)}-{pct(self.high)}] "
                       f"({self.successes}/{self.n}, 95% Wilson)"]
        if self.floor is not None:
            lines.append(f"  floor     {pct(self.floor)}")
        if self.baseline_rate is None:
            lines.append("  baseline  none (write one with: bench baseline update)")
        else:
            lines.append(f"  baseline  {pct(self.baseline_rate)} on the same "
                         f"{count(self.baseline_n or 0, 'case')}")
            lines.append(f"  change    {points(self.diff)} points [{points(self.diff_low)}, "
                         f"{points(self.diff_high)}] (paired bootstrap), McNemar exact "
                         f"p={self.p_value:.4g}, Holm p={self.p_holm:.4g}; "
                         f"lost {self.lost}, gained {self.gained}")
        lines.append(f"  power     {self.power_text()}")
        lines.append(f"  per-case  {'on' if self.per_case else 'off'}: {self.per_case_why}")
        if self.warning:
            lines.append(f"  WARNING: {self.warning}")
        lines += [f"  FAIL: {r}" for r in self.reasons] + [f"  note: {n}" for n in self.notes]
        flipped = [f for f in self.flips if not f.allowed]
        if self.per_case and flipped:
            lines.append("  flipped cases (right in the baseline, wrong now):")
            lines += [f"    {f.line()}" for f in flipped[:FLIP_LINES]]
            if len(flipped) > FLIP_LINES:
                lines.append(f"    ... and {len(flipped) - FLIP_LINES} more")
        elif self.reasons and self.flips:
            shown = self.flips[:self.flips_shown]
            lines.append(f"  cases that were right in the baseline and are wrong now "
                         f"({len(shown)} of {self.lost}):")
            for flip in shown:
                lines.append(f"    {flip.case_id} (trial {flip.trial}): {flip.query!r}")
                lines.append(f"      expected: {flip.expected}")
                lines.append(f"      answer: {flip.answer}")
                if flip.errors:
                    lines.append(f"      errors: {flip.errors}")
        return "\n".join(lines)
