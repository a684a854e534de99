"""The optimal assignment of a small cost matrix, without importing scipy.

A pure-Python port of scipy's ``linear_sum_assignment`` (the shortest augmenting path
algorithm of D. F. Crouse, "On implementing 2D rectangular assignment algorithms", IEEE TAES
52(4), 2016, pages 1685-1686; scipy/scipy ``scipy/optimize/rectangular_lsap/
rectangular_lsap.cpp``, unchanged since scipy 1.9). It follows the C++ step for step, with
the same floating-point operations in the same order, so it returns the same pairs as scipy,
ties included. bench's matrices are a label's calls by a response's calls (a handful each):
importing ``scipy.optimize`` costs about 0.4 s of CPU, which stalled the run's event loop at
the first row that needed it, while solving such a matrix here takes microseconds.

The algorithm does up to ``rows x rows x columns`` steps (``rows <= columns``), each one
interpreted here: a label of 1,000 calls that all match each of 1,000 calls made took 38 s in
this port against 0.4 s in scipy's C++ (measured). A matrix past :data:`PORT_MAX_STEPS` is
therefore handed to scipy itself, whose answer the port equals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["PORT_MAX_STEPS", "linear_sum_assignment"]

#: The largest ``rows x rows x columns`` (``rows <= columns``) solved by the port: about 40 ms
#: in the worst case measured (100 x 100, every row alike, columns all different), a tenth of
#: scipy's import; a larger matrix is solved by ``scipy.optimize.linear_sum_assignment``.
PORT_MAX_STEPS = 1_000_000


def linear_sum_assignment(cost: Sequence[Sequence[float]]) -> tuple[list[int], list[int]]:
    """``(rows, columns)`` of a minimum-cost assignment, as ``scipy.optimize.
    linear_sum_assignment(cost)`` returns them (rows ascending; ``min(n, m)`` pairs).

    Args:
        cost: an ``n x m`` matrix of finite floats (rows of equal length).

    Raises:
        ValueError: ragged rows, or a NaN or infinite entry (scipy refuses NaN and -inf, and
            an all-+inf row is infeasible; bench's costs are always finite).
    """
    nr = len(cost)
    nc = len(cost[0]) if nr else 0
    if any(len(row) != nc for row in cost):
        raise ValueError("cost matrix rows differ in length")
    if nr == 0 or nc == 0:
        return [], []
    flat = [float(value) for row in cost for value in row]
    if not all(math.isfinite(value) for value in flat):
        raise ValueError("cost matrix contains a NaN or infinite entry")
    if min(nr, nc) ** 2 * max(nr, nc) > PORT_MAX_STEPS:
        from scipy.optimize import linear_sum_assignment as compiled

        rows, cols = compiled([flat[i * nc:(i + 1) * nc] for i in range(nr)])
        return [int(r) for r in rows], [int(c) for c in cols]
    transpose = nc < nr
    if transpose:  # a tall matrix is solved transposed, as scipy does
        flat = [flat[i * nc + j] for j in range(nc) for i in range(nr)]
        nr, nc = nc, nr
    col4row = _solve(nr, nc, flat)
    if transpose:
        order = sorted(range(nr), key=col4row.__getitem__)
        return [col4row[v] for v in order], order
    return list(range(nr)), col4row


def _solve(nr: int, nc: int, cost: list[float]) -> list[int]:
    """The column of each row (``nr <= nc``) of a row-major ``cost``."""
    u = [0.0] * nr
    v = [0.0] * nc
    path = [-1] * nc
    col4row = [-1] * nr
    row4col = [-1] * nc
    for cur_row in range(nr):
        sink, min_val, shortest, in_rows, in_cols = _augmenting_path(
            nc, cost, u, v, path, row4col, cur_row)
        # update the dual variables
        u[cur_row] += min_val
        for i in range(nr):
            if in_rows[i] and i != cur_row:
                u[i] += min_val - shortest[col4row[i]]
        for j in range(nc):
            if in_cols[j]:
                v[j] -= min_val - shortest[j]
        # augment the previous solution along the path
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur_row:
                break
    return col4row


def _augmenting_path(nc: int, cost: list[float], u: list[float], v: list[float],
                     path: list[int], row4col: list[int], i: int
                     ) -> tuple[int, float, list[float], list[bool], list[bool]]:
    """(sink column, its path cost, shortest path cost per column, rows visited, columns
    visited) of the shortest augmenting path from row ``i``."""
    min_val = 0.0
    # filled in reverse, so that a constant matrix gives the identity (as scipy does)
    remaining = [nc - it - 1 for it in range(nc)]
    num_remaining = nc
    in_rows = [False] * len(u)
    in_cols = [False] * nc
    shortest = [math.inf] * nc
    sink = -1
    while sink == -1:
        index = -1
        lowest = math.inf
        in_rows[i] = True
        base = i * nc
        for it in range(num_remaining):
            j = remaining[it]
            r = min_val + cost[base + j] - u[i] - v[j]
            if r < shortest[j]:
                path[j] = i
                shortest[j] = r
            # among equal lowest costs, prefer a column that ends the path
            if shortest[j] < lowest or (shortest[j] == lowest and row4col[j] == -1):
                lowest = shortest[j]
                index = it
        min_val = lowest
        j = remaining[index]
        if row4col[j] == -1:
            sink = j
        else:
            i = row4col[j]
        in_cols[j] = True
        num_remaining -= 1
        remaining[index] = remaining[num_remaining]
    return sink, min_val, shortest, in_rows, in_cols
