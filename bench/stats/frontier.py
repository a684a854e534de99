"""The accuracy-per-token Pareto frontier of description variants."""

from __future__ import annotations

import math
from typing import Sequence


def pareto_frontier(costs: Sequence[float], accuracies: Sequence[float]) -> list[bool]:
    """Which points no other point beats on both cost and accuracy.

    A point is dominated when another point costs no more (e.g. tool-definition tokens) and is
    at least as accurate, and is strictly better on one of the two. Points whose cost or
    accuracy is NaN are never on the frontier.

    Args:
        costs: cost of each point (lower is better), e.g. tokens.
        accuracies: accuracy of each point as a fraction (higher is better); same length.

    Returns:
        One bool per point, True when it is on the frontier.

    Raises:
        ValueError: the two sequences differ in length.
    """
    if len(costs) != len(accuracies):
        raise ValueError("costs and accuracies must have the same length")
    points = [(float(c), float(a)) for c, a in zip(costs, accuracies)]
    on_frontier = []
    for cost, acc in points:
        if math.isnan(cost) or math.isnan(acc):
            on_frontier.append(False)
            continue
        dominated = any(c <= cost and a >= acc and (c < cost or a > acc)
                        for c, a in points if not (math.isnan(c) or math.isnan(a)))
        on_frontier.append(not dominated)
    return on_frontier
