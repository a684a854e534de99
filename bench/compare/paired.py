"""The statistics of a paired comparison (:mod:`bench.compare.core`): McNemar's exact test
(:func:`mcnemar_exact`) and its exact power (:func:`mcnemar_power`), the minimum detectable
difference (:func:`minimum_detectable_difference`), Holm's step-down correction
(:func:`holm_adjust`) and the paired percentile bootstrap over cases
(:func:`paired_bootstrap`). scipy is imported on first use.
"""

from __future__ import annotations

from typing import Any, Sequence, overload

import numpy as np


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order.

    The i-th smallest p-value (1-based) is multiplied by ``m - i + 1``, then made monotone
    (running maximum) and capped at 1; rejecting adjusted p < alpha controls the family-wise
    error rate at alpha.
    """
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted.tolist()


def _binom() -> Any:
    """``scipy.stats.binom``, imported on first use: scipy.stats costs about 40 MB and 0.5 s
    to import, which a report without a comparison never needs."""
    from scipy.stats import binom

    return binom


@overload
def mcnemar_exact(a_only: int, b_only: int, mid_p: bool = False) -> float: ...
@overload
def mcnemar_exact(a_only: np.ndarray, b_only: np.ndarray, mid_p: bool = False) -> np.ndarray: ...
def mcnemar_exact(a_only: int | np.ndarray, b_only: int | np.ndarray,
                  mid_p: bool = False) -> float | np.ndarray:
    """Two-sided McNemar p-value(s) from the discordant counts (McNemar 1947), exact.

    Under "no difference" the discordant pairs split 50/50, so the p-value is the exact
    two-sided binomial test of ``b_only`` successes in ``a_only + b_only`` trials at 0.5; the
    binomial is then symmetric and that test equals ``min(1, 2·P(X <= min(a, b)))`` (the value
    ``scipy.stats.binomtest(b, a + b).pvalue`` gives; computed with ``scipy.stats.binom`` so
    that arrays of counts are handled at once). The exact test is conservative: its
    false-positive rate is at most alpha, and below it when few pairs are discordant.

    Args:
        a_only: pairs where only A is right (int or int array).
        b_only: pairs where only B is right (same shape).
        mid_p: return the mid-p value ``2·P(X < m) + P(X = m)``, m = min(a, b), instead
            (Fagerland, Lydersen & Laake 2013, BMC Med. Res. Methodol. 13:91): closer to alpha
            on average, no longer guaranteed below it.

    Returns:
        float (or float array) in [0, 1]; 1.0 where there is no discordant pair.
    """
    a = np.asarray(a_only, dtype=float)
    b = np.asarray(b_only, dtype=float)
    low = np.minimum(a, b)
    p = 2.0 * _binom().cdf(low, a + b, 0.5)
    if mid_p:
        p = p - _binom().pmf(low, a + b, 0.5)
    p = np.where(a + b > 0, np.minimum(1.0, p), 1.0)
    return float(p) if p.ndim == 0 else p


def mcnemar_power(n: int, discordant_share: float, difference: float, alpha: float = 0.05,
                  mid_p: bool = False) -> float:
    """Exact power of :func:`mcnemar_exact` at two-sided ``alpha`` for n pairs.

    The number of discordant pairs D is Binomial(n, ψ); given D, the pairs where only B is
    right are Binomial(D, (ψ + δ) / 2ψ). Power = Σ_D P(D) · P(p-value < alpha | D), summed
    exactly over D = 0..n with the test's own rejection region (no normal approximation).

    Args:
        n: number of pairs.
        discordant_share: ψ, share of discordant pairs (0 < ψ <= 1).
        difference: δ = rate_B - rate_A, |δ| <= ψ.
        alpha: two-sided significance level.
        mid_p: power of the mid-p variant instead.

    Returns:
        Power in [0, 1].
    """
    psi = float(discordant_share)
    if n <= 0 or psi <= 0:
        return 0.0
    discordant = np.arange(n + 1)
    weight = _binom().pmf(discordant, n, psi)
    # largest k whose two-sided p-value is below alpha: reject when min(a, b) <= k
    k = _binom().ppf(alpha / 2, discordant, 0.5)
    k = np.where(mcnemar_exact(k, discordant - k, mid_p) < alpha, k, k - 1)
    q = min(max((psi + difference) / (2 * psi), 0.0), 1.0)
    reject = np.where(k >= 0, _binom().cdf(k, discordant, q)
                      + _binom().sf(discordant - k - 1, discordant, q), 0.0)
    return float(np.sum(weight * reject))


def minimum_detectable_difference(n: int, discordant_share: float, alpha: float = 0.05,
                                  power: float = 0.8, mid_p: bool = False) -> float:
    """Smallest rate difference the McNemar test detects with ``power`` at two-sided ``alpha``.

    The exact power of :func:`mcnemar_power` is solved for δ by bisection. A difference can
    never exceed the discordant share, so ψ is taken as ``max(discordant_share, δ)``: with few
    discordant pairs observed, the answer is the smallest difference that would be detected if
    every discordant pair went one way.

    Args:
        n: number of pairs.
        discordant_share: ψ, the expected share of discordant pairs (0 <= ψ <= 1), e.g. the
            observed one.
        alpha: two-sided significance level.
        power: target power, e.g. 0.8.
        mid_p: for the mid-p variant of the test.

    Returns:
        δ as a fraction in (0, 1] (to 1e-4); NaN when no δ reaches the power (n too small).
    """
    observed = min(max(float(discordant_share), 0.0), 1.0)

    def power_at(delta: float) -> float:
        return mcnemar_power(n, max(observed, delta), delta, alpha, mid_p)

    if n <= 0 or power_at(1.0) < power:
        return float("nan")
    low, high = 0.0, 1.0
    while high - low > 1e-4:
        middle = (low + high) / 2
        if power_at(middle) >= power:
            high = middle
        else:
            low = middle
    return high


def paired_bootstrap(a: np.ndarray, b: np.ndarray, cases: np.ndarray, confidence: float,
                     n_boot: int, seed: int) -> tuple[float, float]:
    """The ``confidence`` percentile interval of ``rate_B - rate_A`` over ``n_boot``
    resamples of the cases (all pairs of a case together: ``cases`` gives each pair's case),
    drawn from a generator seeded with ``seed``."""
    codes, index = np.unique(cases, return_inverse=True)
    diff_sum = np.bincount(index, weights=b.astype(float) - a.astype(float),
                           minlength=len(codes))
    count = np.bincount(index, minlength=len(codes)).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(codes), size=(n_boot, len(codes)))
    diffs = diff_sum[draws].sum(axis=1) / count[draws].sum(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return float(low), float(high)
