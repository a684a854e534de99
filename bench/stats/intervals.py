"""Confidence intervals for rates."""

from __future__ import annotations

from scipy.stats import binomtest


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate (Wilson 1927), via ``scipy.stats.binomtest``.

    Args:
        successes: number of successes, 0 <= successes <= n.
        n: number of trials; n = 0 gives (nan, nan).
        confidence: coverage, e.g. 0.95.

    Returns:
        (low, high) as fractions in [0, 1].
    """
    if n == 0:
        return float("nan"), float("nan")
    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)
