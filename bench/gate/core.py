"""Decide pass or fail per (variant, provider, metric) of a gate run.

Decision rule (issue 8), per gated metric of each (variant, provider):

- **fail** when the rate is below its absolute floor (``floors`` in the config);
- **fail** when it is significantly worse than the baseline by more than ``margin``: McNemar's
  exact test paired on the same (case, trial), Holm-corrected across every test of the gate,
  Holm p < ``alpha`` and ``rate - baseline rate < -margin`` (verdict ``regression`` of
  :func:`bench.compare.core.compare_frames`);
- **fail** when a case right in the baseline is wrong now and the provider is deterministic
  (:attr:`bench.providers.registry.ProviderSpec.deterministic`: greedy ``local``, ``oracle``,
  ``function:``, ``replay:``): the *per-case rule* (``fail_on_flips``, on by default; cases in
  ``allow_flips`` may flip). Same request, same answer: a flip there is caused by the change,
  not by sampling, and on a gate of a few cases the paired test cannot see it (4 of 8 cases
  lost give McNemar p = 0.125). Answers that are sampled (hosted APIs) leave the rule off;
- otherwise **pass**; a significant improvement beyond the margin passes and says that the
  baseline can be updated.

Every verdict also carries the gate's power: the smallest drop the paired test detects with
80% power (:data:`bench.gate.verdict.POWER`) at its number of pairs,
:func:`bench.compare.paired.minimum_detectable_difference` at ``alpha / m`` for ``m`` tests of
the gate (the threshold of Holm's first step, the one a lone regression must pass), and a
warning when that drop is larger than the regression the gate is meant to catch: the distance
from the baseline rate to the floor when a floor lies beyond the margin, else the margin.

Running the gate is :mod:`bench.gate.run`, its baseline :mod:`bench.gate.baseline`, a
verdict and its text :mod:`bench.gate.verdict`, the power :mod:`bench.gate.power` and the
description lock's changes :mod:`bench.gate.changes`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from bench.compare.cells import short_expected
from bench.compare.core import Comparison, MetricComparison
from bench.datasets.splits import refuse_mixed_splits
from bench.gate.baseline import compare_with_baseline, group_name
from bench.gate.changes import unevaluated_changes
from bench.gate.config import ANSWER_ONLY_METRICS, GateConfig
from bench.gate.power import set_power
from bench.gate.verdict import FlippedCase, Verdict
from bench.plural import count
from bench.results import Row, as_rows
from bench.stats.frame import results_frame
from bench.stats.intervals import wilson_interval


def _short_answer(row: Row, limit: int = 240) -> str:
    if row.parsed is not None and row.parsed.error:
        return f"(unparseable: {row.parsed.error})"[:limit]
    calls = row.calls()
    if not calls:
        return "(no call)"
    text = "; ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False, default=str)})"
                     for c in calls)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _short_errors(row: Row, call_errors: Sequence[str], limit: int = 240) -> str:
    parts = []
    if call_errors:
        parts.append("executor: " + "; ".join(call_errors))
    codes = row.metrics.error_codes or []
    if codes:
        parts.append("scoring: " + ", ".join(codes))
    text = " | ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def evaluate(config: GateConfig, rows: Sequence[Row | Mapping[str, Any]],
             baseline: dict[str, Any] | None,
             call_errors: dict[tuple[str, int], list[str]] | None = None,
             split: str | None = None, fail_without_reference: bool = False) -> list[Verdict]:
    """Decide every (variant, provider, metric) of the gate (rule in the module docstring).

    Args:
        config: the gate settings.
        rows: the current result rows.
        baseline: a document of :func:`bench.gate.baseline.load_baseline`, or None
            (floors only).
        call_errors: executor errors per (case, trial) quoted with flipped cases
            (:attr:`bench.gate.run.GateRun.call_errors`).
        split: the split the rows ran (:func:`bench.datasets.splits.run_split`); None: not
            checked.
        fail_without_reference: a metric with neither a floor nor baseline cases to pair
            with fails (it could not fail on any drop): no baseline file, a baseline that
            does not hold the metric, or none of the variant and provider; the pytest gate
            sets it, so that a CI gate whose baseline was never written (or not committed,
            or not updated after a metric was added) does not pass in silence.

    Returns:
        One :class:`Verdict` per (variant, provider, metric) in config order.

    Raises:
        BenchError: the baseline was recorded on another split than ``split``.
    """
    if baseline and split is not None:
        stored = (baseline.get("dataset") or {}).get("split") or "all"
        refuse_mixed_splits({"the baseline": str(stored), "this gate run": split},
                            "gate against each other")
    rows = as_rows(rows)
    frame = results_frame(rows)
    against = _reference(config, rows, frame, baseline, call_errors or {},
                         fail_without_reference)
    verdicts = []
    for variant in config.variants:
        for provider in config.providers:
            part = frame[(frame["variant"] == variant) & (frame["provider"] == provider)] \
                if not frame.empty else frame
            per_case, per_case_why = per_case_rule(config, provider, baseline is not None)
            for metric in config.gated_metrics:
                verdicts.append(_decide(against, part, variant, provider, metric, per_case,
                                        per_case_why))
    return verdicts


@dataclass
class _Reference:
    """What every verdict of one :func:`evaluate` is judged against, gathered once.

    Attributes:
        config, baseline, call_errors, fail_without_reference: :func:`evaluate`'s arguments.
        comparison: the paired comparison with the baseline (None: no baseline, or nothing
            to pair); tests: its tests by (``<variant>/<provider>``, metric).
        rows_by_key: the current rows by their key (``case|variant|provider|trial``).
        baseline_sha, current_sha: each variant's description hash in the baseline and in
            the current rows.
        stale: what the description lock says changed, per variant
            (:func:`unevaluated_changes`).
        unknown_allowed: cases of ``allow_flips`` this gate did not run.
        tests_count: the number of tests of the gate (Holm's family).
    """

    config: GateConfig
    baseline: dict[str, Any] | None
    call_errors: dict[tuple[str, int], list[str]]
    fail_without_reference: bool
    comparison: Comparison | None
    tests: dict[tuple[str, str], MetricComparison]
    rows_by_key: dict[str, Row]
    baseline_sha: dict[Any, Any]
    current_sha: dict[str, str | None]
    stale: dict[str, list[tuple[str, bool]]]
    unknown_allowed: list[str]
    tests_count: int


def _reference(config: GateConfig, rows: Sequence[Row], frame: pd.DataFrame,
               baseline: dict[str, Any] | None, call_errors: dict[tuple[str, int], list[str]],
               fail_without_reference: bool) -> _Reference:
    """The :class:`_Reference` of the current ``rows`` (``frame``: their results frame).

    Raises:
        BenchError: a description lock that cannot be read with ``require_reevaluation``
            (:func:`unevaluated_changes`).
    """
    comparison = compare_with_baseline(config, frame, baseline) if baseline else None
    tests = {(t.group, t.metric): t for t in comparison.tests} if comparison else {}
    baseline_sha = {v.get("name"): v.get("sha256") for v in (baseline or {}).get("variants") or []}
    current_sha = {r.variant: r.request.variant_sha256 if r.request is not None else None
                   for r in rows}
    stale = unevaluated_changes(config, frame, rows)
    tests_count = len(comparison.tests) if comparison else \
        len(config.variants) * len(config.providers) * len(config.gated_metrics)
    ran = {r.case_id for r in rows}
    return _Reference(config=config, baseline=baseline, call_errors=call_errors,
                      fail_without_reference=fail_without_reference, comparison=comparison,
                      tests=tests, rows_by_key={r.key: r for r in rows},
                      baseline_sha=baseline_sha, current_sha=current_sha, stale=stale,
                      unknown_allowed=sorted(set(config.allow_flips) - ran),
                      tests_count=tests_count)


def _decide(against: _Reference, part: pd.DataFrame, variant: str, provider: str, metric: str,
            per_case: bool, per_case_why: str) -> Verdict:
    """The verdict of ``metric`` for (``variant``, ``provider``), whose rows are ``part``:
    its rate, then each rule of the module docstring in turn (floor, paired test, per-case
    rule), the notes on changed descriptions, and its power."""
    config = against.config
    verdict = _measured(config, part, variant, provider, metric, per_case, per_case_why,
                        against.tests_count)
    _floor_reasons(verdict, config, part)
    test = against.tests.get((group_name(variant, provider), metric))
    if against.fail_without_reference and verdict.floor is None and test is None and \
            (verdict.n or against.baseline is None):
        verdict.reasons.append(_no_reference(config, against.baseline, metric, variant,
                                             provider))
    _paired_test(verdict, config, test, against.baseline)
    _description_notes(verdict, against)
    _lost_cases(verdict, against)
    _apply_per_case_rule(verdict, against.unknown_allowed)
    if test is not None:
        set_power(verdict, config, test.a_only + test.b_only)
    return verdict


def _measured(config: GateConfig, part: pd.DataFrame, variant: str, provider: str,
              metric: str, per_case: bool, per_case_why: str, tests_count: int) -> Verdict:
    """A verdict with no reason yet: ``metric``'s rate over the rows ``part`` where it
    applies, with its 95% Wilson interval and the gate's settings for it."""
    values = part[metric].dropna() if metric in part else pd.Series(dtype=bool)
    n, successes = int(len(values)), int(values.sum())
    low, high = wilson_interval(successes, n)
    return Verdict(variant=variant, provider=provider, metric=metric, n=n,
                   successes=successes, rate=successes / n if n else float("nan"),
                   low=low, high=high, floor=config.floors.get(metric),
                   per_case=per_case, per_case_why=per_case_why,
                   flips_shown=config.flips_shown, tests=max(tests_count, 1))


def _floor_reasons(verdict: Verdict, config: GateConfig, part: pd.DataFrame) -> None:
    """Fail a verdict without rows (saying why the metric may be missing) or below its
    floor."""
    metric = verdict.metric
    if verdict.n == 0:
        episodes = not part.empty and (part["expected_kind"] == "episode").all()
        verdict.reasons.append(
            f"no row carries {metric} (" + (
                "the cases are episodes: gate their task_success)" if episodes
                else "execute = false: execution metrics are not computed)"
                if config.execute is False and metric not in ANSWER_ONLY_METRICS
                else "is the metric produced for these cases?)"))
    elif verdict.floor is not None and verdict.rate < verdict.floor:
        verdict.reasons.append(f"{100 * verdict.rate:.1f}% is below the floor "
                               f"{100 * verdict.floor:.1f}%")


def _paired_test(verdict: Verdict, config: GateConfig, test: MetricComparison | None,
                 baseline: dict[str, Any] | None) -> None:
    """Copy the paired test with the baseline (``test``; None: not paired) into the verdict:
    a regression beyond the margin fails it, an improvement or a missing pairing is noted."""
    if test is not None:
        verdict.baseline_rate, verdict.baseline_n = test.rate_a, test.n
        verdict.diff, verdict.diff_low, verdict.diff_high = \
            test.diff, test.diff_low, test.diff_high
        verdict.p_value, verdict.p_holm = test.p_value, test.p_holm
        verdict.lost, verdict.gained = test.a_only, test.b_only
        if test.verdict == "regression":
            verdict.reasons.append(
                f"significantly worse than the baseline ({100 * test.diff:+.1f} "
                f"points, Holm p={test.p_holm:.4g} < alpha {config.alpha}) by more "
                f"than the margin of {100 * config.margin:.1f} points")
        elif test.verdict == "improvement":
            verdict.notes.append("significantly better than the baseline: update "
                                 "it with `bench baseline update`")
    elif baseline is not None and verdict.n:
        verdict.notes.append("the baseline has no paired cases for this variant "
                             "and provider (update it with `bench baseline update`)")


def _description_notes(verdict: Verdict, against: _Reference) -> None:
    """Note a description changed since the baseline, and add what the description lock says
    changed (:func:`unevaluated_changes`: a reason or a note each)."""
    variant = verdict.variant
    was_sha, now_sha = against.baseline_sha.get(variant), against.current_sha.get(variant)
    if was_sha and now_sha and was_sha != now_sha:
        verdict.notes.append(f"the description of {variant} changed since the "
                             f"baseline (sha256 {was_sha[:12]} -> "
                             f"{now_sha[:12]})")
    for text, fails in against.stale.get(variant, []):
        (verdict.reasons if fails else verdict.notes).append(text)


def _lost_cases(verdict: Verdict, against: _Reference) -> None:
    """Add every case of the verdict's metric that the baseline got right and the current
    run gets wrong (:class:`FlippedCase`, with its answer and errors in short form)."""
    if against.comparison is None:
        return
    variant, provider, metric = verdict.variant, verdict.provider, verdict.metric
    lost = [f for f in against.comparison.flips if f.direction == "lost"
            and f.metric == metric and f.group == group_name(variant, provider)]
    for flip in lost:
        row = against.rows_by_key.get(f"{flip.case_id}|{variant}|{provider}|{flip.trial}")
        if row is None:
            continue
        verdict.flips.append(FlippedCase(
            case_id=flip.case_id, trial=flip.trial,
            query=str(row.query or ""), answer=_short_answer(row),
            errors=_short_errors(row, against.call_errors.get(
                (flip.case_id, flip.trial), [])),
            metric=metric, expected=short_expected(row.expected),
            allowed=flip.case_id in against.config.allow_flips))


def _no_reference(config: GateConfig, baseline: dict[str, Any] | None, metric: str,
                  variant: str, provider: str) -> str:
    """Why a gated ``metric`` of (``variant``, ``provider``) without a floor has nothing to
    compare with, and how to write it: no baseline file, a baseline that does not hold the
    metric (written before the metric was gated), or one without paired cases of that
    variant and provider (docs/gate.md: such a metric fails, since no drop could fail it)."""
    if baseline is None:
        why = f"no baseline ({config.baseline_path} does not exist)"
    elif metric not in (baseline.get("metrics") or ()):
        why = (f"the baseline {config.baseline_path} does not hold {metric} (written before "
               "it was gated)")
    else:
        why = (f"the baseline {config.baseline_path} has no case of {variant} with "
               f"{provider} paired with this run's")
    return (f"{why} and no floor: nothing to compare with, so no drop could fail this "
            "metric; write both with: bench baseline update (then commit the baseline)")


def per_case_rule(config: GateConfig, provider: str, has_baseline: bool) -> tuple[bool, str]:
    """Whether the per-case rule applies to ``provider``'s answers, and why in words.

    On when ``fail_on_flips`` is set, a baseline exists and the provider's kind is registered
    ``deterministic`` (:class:`bench.providers.registry.ProviderSpec`)."""
    from bench.providers.registry import kind_of, provider_spec

    spec = provider_spec(provider)
    deterministic = spec is not None and spec.deterministic
    kind = kind_of(provider)
    if not deterministic:
        return False, (f"{kind} answers are sampled: the same request can get another answer, "
                       "so one flipped case may be noise; the paired test decides")
    if not config.fail_on_flips:
        return False, "fail_on_flips = false"
    if not has_baseline:
        return False, "no baseline to compare cases with"
    return True, (f"{kind} answers are deterministic: any case right in the baseline and "
                  "wrong now fails")


def _apply_per_case_rule(verdict: Verdict, unknown_allowed: Sequence[str]) -> None:
    """Add the per-case rule's failure (flips outside ``allow_flips``) and notes."""
    allowed = sorted({f.case_id for f in verdict.flips if f.allowed})
    flipped = [f for f in verdict.flips if not f.allowed]
    if verdict.per_case and flipped:
        verdict.reasons.append(
            f"{count(len(flipped), 'case')} right in the baseline "
            f"{'is' if len(flipped) == 1 else 'are'} wrong now with deterministic answers "
            "(per-case rule; let a case flip with allow_flips = [\"<case id>\"], or turn the "
            "rule off with fail_on_flips = false)")
    if verdict.per_case and allowed:
        verdict.notes.append(f"flipped but in allow_flips: {', '.join(allowed)}")
    if verdict.per_case and unknown_allowed:
        verdict.notes.append(f"allow_flips names cases this gate did not run: "
                             f"{', '.join(unknown_allowed)}")
