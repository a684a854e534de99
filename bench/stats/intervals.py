"""Confidence intervals for rates: Wilson score intervals and a bootstrap clustered by case."""

from __future__ import annotations

from statistics import NormalDist
from typing import TYPE_CHECKING

from bench.plural import count

if TYPE_CHECKING:  # imported where an array is made: `bench run`'s table starts without it
    import numpy as np
    from numpy.typing import ArrayLike


def wilson_arrays(successes: ArrayLike, n: ArrayLike,
                  confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score intervals (Wilson 1927), vectorised over arrays of counts.

    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``z`` the normal quantile of
    ``1 - (1 - confidence)/2``.

    Args:
        successes: array-like of success counts (0 <= successes <= n).
        n: array-like of trial counts; n = 0 gives NaN bounds.
        confidence: coverage, e.g. 0.95.

    Returns:
        (low, high) float arrays of fractions in [0, 1].
    """
    import numpy as np

    k = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    # the standard library's normal quantile: importing scipy.stats cost ~0.5 s of start-up
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denominator = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denominator
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
        # exact at the ends (k = 0, k = n), where rounding leaves ~1e-17
        low = np.where(n > 0, np.where(k == 0, 0.0, np.clip(centre - half, 0.0, 1.0)), np.nan)
        high = np.where(n > 0, np.where(k == n, 1.0, np.clip(centre + half, 0.0, 1.0)), np.nan)
    return low, high


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of one binomial rate (see :func:`wilson_arrays`).

    Args:
        successes: number of successes, 0 <= successes <= n.
        n: number of trials; n = 0 gives (nan, nan).
        confidence: coverage, e.g. 0.95.

    Returns:
        (low, high) as fractions in [0, 1].
    """
    low, high = wilson_arrays([successes], [n], confidence)
    return float(low[0]), float(high[0])


def cluster_bootstrap_interval(successes_per_case: ArrayLike, n_per_case: ArrayLike,
                               confidence: float = 0.95,
                               n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of a pooled rate, resampling whole cases (clusters).

    With several trials per case the trials of one case are correlated; resampling cases, not
    rows, keeps that correlation (cluster bootstrap: Davison & Hinkley 1997, §3.8). The rate
    of one resample is ``sum(successes) / sum(n)`` over the drawn cases.

    Args:
        successes_per_case: array of successes per case (int).
        n_per_case: array of applicable trials per case (int, > 0).
        confidence: coverage, e.g. 0.95.
        n_boot: number of resamples.
        seed: seed of numpy's default generator (results are reproducible).

    Returns:
        (low, high) fractions; (nan, nan) without cases.
    """
    import numpy as np

    k = np.asarray(successes_per_case, dtype=float)
    n = np.asarray(n_per_case, dtype=float)
    if len(k) == 0 or n.sum() == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(k), size=(n_boot, len(k)))
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = k[draws].sum(axis=1) / n[draws].sum(axis=1)
    rates = rates[~np.isnan(rates)]  # a resample of only non-applicable cases has no rate
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(rates, [tail, 100 - tail])
    return float(low), float(high)


def _trial_counts(n: ArrayLike, c: ArrayLike, k: int,
                  name: str) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    n = np.asarray(n, dtype=int)
    c = np.asarray(c, dtype=int)
    if k < 1 or np.any(n < k):
        raise ValueError(f"{name} needs at least {count(k, 'trial')} per case")
    return n, c


def pass_at_k(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """Unbiased pass@k per case: the chance that at least one of k trials drawn without
    replacement from the case's n trials succeeds, ``1 - C(n-c, k) / C(n, k)`` (Chen et al.
    2021, "Evaluating Large Language Models Trained on Code", eq. 1 and its numerically stable
    product form).

    Args:
        n: array of trials per case (each >= k).
        c: array of successful trials per case.
        k: trials drawn (>= 1).

    Returns:
        Float array of per-case estimates in [0, 1].

    Raises:
        ValueError: k < 1 or some n < k.
    """
    import numpy as np

    n, c = _trial_counts(n, c, k, f"pass@{k}")
    return np.array([1.0 if trials - good < k else
                     1.0 - float(np.prod(1.0 - k / np.arange(trials - good + 1, trials + 1)))
                     for trials, good in zip(n, c)], dtype=float)


def pass_hat_k(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """Unbiased pass^k per case: the chance that all k trials drawn without replacement from
    the case's n trials succeed, ``C(c, k) / C(n, k)`` (Yao et al. 2024, "τ-bench", §4).

    Args: as :func:`pass_at_k`.

    Returns:
        Float array of per-case estimates in [0, 1].

    Raises:
        ValueError: k < 1 or some n < k.
    """
    import numpy as np

    n, c = _trial_counts(n, c, k, f"pass^{k}")
    steps = np.arange(k)
    return np.array([0.0 if good < k else float(np.prod((good - steps) / (trials - steps)))
                     for trials, good in zip(n, c)], dtype=float)
