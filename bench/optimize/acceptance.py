"""The held-out decision: the start and the final variant run once on ``test``, paired.

Rule (every condition must hold):

1. the target metric, target provider: McNemar's exact test (Holm-corrected over every test
   below) significant at ``alpha``, a gain (final - start) of at least ``min_gain`` and above
   zero;
2. every gated metric the rows carry (no-call and ask restraint, arguments, episode task
   success...), on the target and on ``also_provider``: no ``regression`` verdict (Holm
   p < alpha and a loss beyond ``margin``: :func:`bench.compare.core.compare_rows`, the gate's
   own rule); on ``also_provider`` this includes the target metric;
3. episodes: mean steps, over the episodes both variants solved (:func:`paired_steps`), no
   more than ``(1 + margin)`` times the start's (the 856-tool MCP study saw +67% steps from
   rewritten descriptions);
4. tool-definition tokens at most ``max_tokens_ratio`` times the start's (held by every
   candidate already; repeated here for the record).
"""

from __future__ import annotations

from typing import Sequence

from bench.api import Evaluation
from bench.compare.core import Comparison, MetricComparison, compare_rows
from bench.optimize.config import OptimizeConfig
from bench.optimize.records import Acceptance, GateTest
from bench.optimize.runs import variant_rows
from bench.results import Row


def _gated(config: OptimizeConfig) -> list[str]:
    return list(dict.fromkeys([config.metric, *config.gated]))


def _present(rows: Sequence[Row], metrics: Sequence[str]) -> list[str]:
    """The metrics some row carries a value for."""
    dumped = [r.metrics.model_dump() for r in rows]
    return [m for m in metrics if any(d.get(m) is not None for d in dumped)]


def paired_steps(rows_a: Sequence[Row], rows_b: Sequence[Row]) -> tuple[float, float] | None:
    """Mean steps of the start and the final variant over the episodes (same case, trial and
    provider) that both finished without a task failure (``task_success`` True or unknown in
    both), or None when there is no such pair. Episodes one of them failed are left out: a
    fix that turns an early give-up into a solved task takes more steps by doing the task,
    which is not the rise the 856-tool MCP study warns about (more steps for the same work).
    """
    def key(row: Row) -> tuple[str, int, str]:
        return (row.case_id, row.trial, row.provider)

    def solved(row: Row) -> bool:
        return row.metrics.steps is not None and row.metrics.task_success is not False

    after = {key(r): r for r in rows_b if solved(r)}
    pairs = [(r.metrics.steps, after[key(r)].metrics.steps) for r in rows_a
             if solved(r) and key(r) in after]
    if not pairs:
        return None
    return (sum(float(a or 0) for a, _ in pairs) / len(pairs),
            sum(float(b or 0) for _, b in pairs) / len(pairs))


def decide(test: Evaluation, start: str, final: str, config: OptimizeConfig,
           token_ratio: float) -> Acceptance:
    """The :class:`Acceptance` of ``final`` over ``start`` from the ``test`` run."""
    rows_a, rows_b = variant_rows(test, start), variant_rows(test, final)
    out = Acceptance(tested=True, token_ratio=round(token_ratio, 4))
    metrics = _present(rows_a, _gated(config))
    if config.metric not in metrics:
        out.reasons.append(f"no test row carries the target metric {config.metric}")
        return out
    comparison = compare_rows(rows_a, rows_b, label_a=start, label_b=final, metrics=metrics,
                              alpha=config.alpha, margin=config.margin)
    out.tests = [_short(t) for t in comparison.tests]
    out.flips = _flips(comparison, config)
    out.reasons += _target_reasons(out.tests, config)
    out.reasons += [f"{t.metric} regresses on {t.provider}: {t.rate_start:.1%} -> "
                    f"{t.rate_final:.1%} (Holm p = {t.p_holm:.3g})"
                    for t in out.tests if t.verdict == "regression"]
    for provider in sorted({r.provider for r in rows_a}):
        means = paired_steps([r for r in rows_a if r.provider == provider],
                             [r for r in rows_b if r.provider == provider])
        if means is None:
            continue
        before, after = means
        out.steps[provider] = [round(before, 3), round(after, 3)]
        if after > before * (1 + config.margin):
            out.reasons.append(f"mean steps rise on {provider}: {before:.2f} -> {after:.2f}")
    if token_ratio > config.max_tokens_ratio:
        out.reasons.append(f"{token_ratio:.2f}x the start's tool-definition tokens")
    out.accepted = not out.reasons
    return out


def _target_reasons(tests: Sequence[GateTest], config: OptimizeConfig) -> list[str]:
    """Why the target metric on the target provider does not pass rule 1 ([] when it does)."""
    found = [t for t in tests if t.metric == config.metric and t.provider == config.target]
    if not found:
        return [f"no paired test of {config.metric} on {config.target}"]
    test = found[0]
    reasons = []
    if test.diff <= 0 or test.diff < config.min_gain:
        reasons.append(f"{config.metric} gains {test.diff:+.1%} on test (at least "
                       f"{config.min_gain:+.1%} and above 0 needed)")
    if test.p_holm >= config.alpha:
        reasons.append(f"{config.metric}: not significant on test (McNemar exact, Holm p = "
                       f"{test.p_holm:.3g} >= {config.alpha}; {test.b_only} fixed, "
                       f"{test.a_only} broken of {test.n})")
    return reasons


def _short(test: MetricComparison) -> GateTest:
    return GateTest(provider=test.group, metric=test.metric, n=test.n, rate_start=test.rate_a,
                    rate_final=test.rate_b, diff=test.diff, a_only=test.a_only,
                    b_only=test.b_only, p_value=test.p_value, p_holm=test.p_holm,
                    verdict=test.verdict)


def _flips(comparison: Comparison, config: OptimizeConfig) -> dict[str, list[str]]:
    """Test cases the final variant fixed and broke on the target metric and provider."""
    mine = [f for f in comparison.flips
            if f.metric == config.metric and f.group == config.target]
    return {"fixed": sorted({f.case_id for f in mine if f.direction == "gained"}),
            "broke": sorted({f.case_id for f in mine if f.direction == "lost"})}
