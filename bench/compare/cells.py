"""Table cells of a comparison, shared by ``bench compare``'s terminal table and the HTML and
Markdown reports (plain text; each renderer escapes it). No heavy imports: the command line
loads this before the statistics."""

from __future__ import annotations

import math


def pct(value: float | None) -> str:
    """A rate (fraction) as ``"87.5%"``; ``"-"`` when there is none (NaN or None)."""
    return "-" if value is None or math.isnan(value) else f"{value * 100:.1f}%"


def points(value: float | None) -> str:
    """A difference of rates (fraction) in signed percentage points, ``"+3.1"``; ``"-"`` when
    there is none."""
    return "-" if value is None or math.isnan(value) else f"{value * 100:+.1f}"


def p_value(value: float) -> str:
    """A p-value to 3 significant digits, ``"<0.001"`` below 0.001."""
    return f"{value:.3g}" if value >= 0.001 else "<0.001"


def mdd(value: float) -> str:
    """A minimum detectable difference (fraction) in points; NaN means that even a 100-point
    difference would not reach the power with this few pairs
    (:func:`bench.compare.paired.minimum_detectable_difference`)."""
    return "none (too few pairs)" if math.isnan(value) else f"{value * 100:.1f} pts"
