"""The gate's power: the smallest drop its paired test detects, the drop it is meant to catch,
and the pairs it would need (the module docstring of :mod:`bench.gate.core`).
"""

from __future__ import annotations

import math

from bench.compare.paired import mcnemar_power, minimum_detectable_difference
from bench.gate.config import GateConfig
from bench.gate.verdict import POWER, Verdict
from bench.plural import count

PAIRS_CAP = 100_000  # "pairs needed" is searched up to this many


def set_power(verdict: Verdict, config: GateConfig, discordant: int) -> None:
    """Fill the verdict's power fields and warning (see the module docstring of
    :mod:`bench.gate.core`).

    ``discordant``: pairs that differ between the baseline and now (the share ψ of
    :func:`bench.compare.paired.minimum_detectable_difference`)."""
    n = verdict.baseline_n or 0
    if n <= 0:
        return
    alpha = config.alpha / verdict.tests
    share = discordant / n
    verdict.mdd_alpha = alpha
    verdict.mdd = minimum_detectable_difference(n, share, alpha, POWER)
    floor, base = verdict.floor, verdict.baseline_rate
    distance = None if floor is None or base is None else base - floor
    if floor is not None and distance is not None and distance > config.margin:
        verdict.target = distance
        verdict.target_text = (f"more than the {100 * distance:.1f} points from the baseline "
                               f"down to the floor {100 * floor:.1f}%")
        missed = "a smaller drop, one the floor does not catch, can pass unnoticed"
    else:
        verdict.target = config.margin
        verdict.target_text = (f"more than the margin of {100 * config.margin:.1f} points"
                               if config.margin else
                               "while this gate is meant to catch any drop (margin 0)")
        missed = "a smaller real regression can pass unnoticed"
    if verdict.per_case or not (math.isnan(verdict.mdd) or verdict.mdd > verdict.target):
        return
    if verdict.target > 0:
        verdict.pairs_needed = pairs_needed(verdict.target, share, alpha)
    smallest = ("no drop at all, not even 100 points," if math.isnan(verdict.mdd)
                else f"only drops of {100 * verdict.mdd:.0f} points or more")
    need = "" if verdict.pairs_needed is None else (
        f"; detecting {100 * verdict.target:.1f} points takes about "
        + (f"{verdict.pairs_needed:,} pairs" if verdict.pairs_needed <= PAIRS_CAP
           else f"more than {PAIRS_CAP:,} pairs"))
    verdict.warning = (f"at {count(n, 'pair')} the paired test detects {smallest} with "
                       f"{POWER:.0%} power, {verdict.target_text}: {missed}{need}")


def pairs_needed(drop: float, discordant_share: float, alpha: float,
                 power: float = POWER) -> int:
    """The number of pairs at which McNemar's exact test detects a drop of ``drop``
    (fraction > 0) with ``power`` at two-sided ``alpha``, the discordant share being
    ``max(discordant_share, drop)`` (:func:`bench.compare.paired.mcnemar_power`); searched by
    doubling then bisection, so "about" (an exact test's power is not monotone in n);
    ``PAIRS_CAP + 1`` when even :data:`PAIRS_CAP` pairs fall short."""
    share = max(discordant_share, drop)

    def enough(n: int) -> bool:
        return mcnemar_power(n, share, -drop, alpha) >= power

    high = 8
    while not enough(high):
        if high >= PAIRS_CAP:
            return PAIRS_CAP + 1
        high = min(high * 2, PAIRS_CAP)
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high
