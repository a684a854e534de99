"""The ported assignment solver returns scipy's pairs, ties included."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment as scipy_assignment

from bench.scoring.assignment import linear_sum_assignment


def _draw(rng: random.Random, kind: int) -> list[list[float]]:
    """A random matrix of 1-7 rows and columns; most kinds are full of ties."""
    rows, cols = rng.randint(1, 7), rng.randint(1, 7)
    values = {0: lambda: rng.random(),
              1: lambda: float(rng.randint(0, 2)),  # small integers: many equal paths
              2: lambda: rng.choice([0.0, 0.25, 1.0, 10.0, 10.5]),  # bench's pair costs
              3: lambda: 5.0}[kind]  # constant: scipy returns the identity
    return [[values() for _ in range(cols)] for _ in range(rows)]


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
def test_the_port_pairs_rows_and_columns_exactly_as_scipy_does(kind):
    rng = random.Random(kind)
    for _ in range(1500):
        cost = _draw(rng, kind)
        rows, cols = scipy_assignment(np.array(cost))
        assert linear_sum_assignment(cost) == ([int(r) for r in rows], [int(c) for c in cols])


def test_an_empty_matrix_pairs_nothing_and_bad_entries_are_refused():
    assert linear_sum_assignment([]) == ([], [])
    assert linear_sum_assignment([[], []]) == ([], [])
    with pytest.raises(ValueError, match="NaN or infinite"):
        linear_sum_assignment([[0.0, float("nan")]])
    with pytest.raises(ValueError, match="NaN or infinite"):
        linear_sum_assignment([[float("inf")]])
    with pytest.raises(ValueError, match="differ in length"):
        linear_sum_assignment([[0.0, 1.0], [0.0]])
