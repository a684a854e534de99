"""Calibration of ``bench compare``'s test: false-positive rate and power of the exact McNemar
test on simulated paired data, next to the promised minimum detectable difference (MDD).

Usage: python benchmarks/compare_calibration.py [--sims 2000] [--discordant 0.3] [--seed 0]
Prints, per number of pairs n: the false-positive rate with no true difference, the MDD at 80%
power, and the simulated power at a true difference equal to the MDD and to 10 points.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.compare.paired import mcnemar_exact, minimum_detectable_difference


def rejection_rate(rng: np.random.Generator, n: int, a_only: float, b_only: float, sims: int,
                   alpha: float) -> float:
    """Share of ``sims`` simulated data sets of n pairs where McNemar rejects at ``alpha``."""
    counts = rng.multinomial(n, [a_only, b_only, 1 - a_only - b_only], size=sims)
    return float((mcnemar_exact(counts[:, 0], counts[:, 1]) < alpha).mean())


def main() -> None:
    """Print the calibration table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--discordant", type=float, default=0.3)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    psi = args.discordant
    print(f"discordant share {psi}, alpha {args.alpha}, {args.sims} simulations per cell")
    print(f"{'n':>6} {'false pos.':>10} {'MDD 80%':>8} {'power@MDD':>10} {'power@10pt':>10}")
    for n in (50, 100, 128, 200, 400, 800):
        null = rejection_rate(rng, n, psi / 2, psi / 2, args.sims, args.alpha)
        mdd = minimum_detectable_difference(n, psi, args.alpha, 0.8)
        at_mdd = rejection_rate(rng, n, (psi - mdd) / 2, (psi + mdd) / 2, args.sims, args.alpha)
        at_10 = rejection_rate(rng, n, (psi - 0.1) / 2, (psi + 0.1) / 2, args.sims, args.alpha)
        print(f"{n:>6} {null:>10.3f} {mdd * 100:>7.1f}p {at_mdd:>10.3f} {at_10:>10.3f}")


if __name__ == "__main__":
    main()
