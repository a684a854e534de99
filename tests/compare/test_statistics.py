"""Statistical tests of the comparison statistics, on simulated paired data with a known
difference (vectorised; a fixed seed makes every figure reproducible)."""

import numpy as np
import pytest
from scipy.stats import binomtest

from bench.compare.paired import (holm_adjust, mcnemar_exact, mcnemar_power,
                                  minimum_detectable_difference, paired_bootstrap)

ALPHA = 0.05
SIMS = 2000


def simulate(rng, n, p_a_only, p_b_only, sims=SIMS):
    """Discordant counts (A only, B only) of ``sims`` paired data sets of n pairs."""
    counts = rng.multinomial(n, [p_a_only, p_b_only, 1 - p_a_only - p_b_only], size=sims)
    return counts[:, 0], counts[:, 1]


def test_vectorised_mcnemar_equals_scipy_binomtest():
    for a in range(0, 25, 3):
        for b in range(0, 25, 4):
            want = 1.0 if a + b == 0 else binomtest(b, a + b, 0.5).pvalue
            assert mcnemar_exact(a, b) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_false_positive_rate_is_within_one_point_of_alpha():
    # No true difference: 500 pairs, 30% discordant, split evenly.
    rng = np.random.default_rng(20261129)
    a_only, b_only = simulate(rng, 500, 0.15, 0.15)
    rate = float((mcnemar_exact(a_only, b_only) < ALPHA).mean())
    assert abs(rate - ALPHA) <= 0.01, rate


@pytest.mark.parametrize("n", [30, 60, 120, 250])
def test_exact_test_never_exceeds_alpha_at_small_n(n):
    rng = np.random.default_rng(n)
    a_only, b_only = simulate(rng, n, 0.2, 0.2)
    assert float((mcnemar_exact(a_only, b_only) < ALPHA).mean()) <= ALPHA + 0.01


@pytest.mark.parametrize("n", [100, 200, 400])
def test_mid_p_false_positive_rate_is_within_one_point_at_usual_sizes(n):
    rng = np.random.default_rng(n + 1)
    a_only, b_only = simulate(rng, n, 0.15, 0.15)
    rate = float((mcnemar_exact(a_only, b_only, mid_p=True) < ALPHA).mean())
    assert abs(rate - ALPHA) <= 0.01, rate


@pytest.mark.parametrize("mid_p", [False, True])
def test_exact_power_matches_simulation(mid_p):
    rng = np.random.default_rng(5)
    for n, delta in ((60, 0.15), (200, 0.1)):
        a_only, b_only = simulate(rng, n, (0.3 - delta) / 2, (0.3 + delta) / 2)
        simulated = float((mcnemar_exact(a_only, b_only, mid_p) < ALPHA).mean())
        assert abs(simulated - mcnemar_power(n, 0.3, delta, ALPHA, mid_p)) <= 0.03
    assert mcnemar_power(200, 0.3, 0.0) <= ALPHA


def test_power_rises_with_n_and_reaches_the_promised_power_at_the_mdd():
    rng = np.random.default_rng(7)
    psi, delta = 0.3, 0.1
    powers = []
    for n in (50, 100, 200, 400):
        a_only, b_only = simulate(rng, n, (psi - delta) / 2, (psi + delta) / 2)
        powers.append(float((mcnemar_exact(a_only, b_only) < ALPHA).mean()))
    assert powers == sorted(powers) and powers[0] < 0.5 < powers[-1]
    for n in (100, 400):
        mdd = minimum_detectable_difference(n, psi, ALPHA, 0.8)
        a_only, b_only = simulate(rng, n, (psi - mdd) / 2, (psi + mdd) / 2)
        power = float((mcnemar_exact(a_only, b_only) < ALPHA).mean())
        assert abs(power - 0.8) <= 0.03, (n, mdd, power)


def test_mdd_shrinks_like_one_over_root_n():
    small, large = (minimum_detectable_difference(n, 0.3) for n in (100, 400))
    assert large == pytest.approx(small / 2, rel=0.1)
    assert np.isnan(minimum_detectable_difference(0, 0.3))
    assert np.isnan(minimum_detectable_difference(3, 0.3))  # too few pairs for any difference
    # No discordance observed: the smallest difference detectable when all pairs go one way.
    assert 0 < minimum_detectable_difference(128, 0.0) < 0.1


def test_paired_bootstrap_interval_covers_the_true_difference():
    rng = np.random.default_rng(3)
    n, sims, covered = 150, 300, 0
    p_a, p_b = 0.10, 0.18  # true difference +0.08
    for _ in range(sims):
        kind = rng.choice(3, size=n, p=[p_a, p_b, 1 - p_a - p_b])
        both = rng.random(n) < 0.5
        a = (kind == 0) | ((kind == 2) & both)
        b = (kind == 1) | ((kind == 2) & both)
        low, high = paired_bootstrap(a, b, np.arange(n), 0.95, 500, int(rng.integers(1 << 30)))
        covered += low <= p_b - p_a <= high
    assert 0.91 <= covered / sims <= 0.985


def test_holm_matches_the_textbook_example_and_controls_familywise_error():
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    rng = np.random.default_rng(11)
    p_values = np.stack([mcnemar_exact(*simulate(rng, 400, 0.15, 0.15)) for _ in range(3)],
                        axis=1)
    any_rejected = [min(holm_adjust(list(row))) < ALPHA for row in p_values]
    assert np.mean(any_rejected) <= ALPHA + 0.01
