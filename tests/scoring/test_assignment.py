"""The ported assignment solver returns scipy's pairs, ties included."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment as scipy_assignment

from bench.scoring.assignment import linear_sum_assignment
from conftest import REPO


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


# -- the ported solver is cubic in pure Python: a 1,000-call label by a 1,000-call episode took
# 38 s to score (0.4 s in scipy), stalling the run's event loop --------------------------------


def python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (its own ``sys.modules``) importing this checkout."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={"PYTHONPATH": str(REPO),
                                                           "PATH": "/usr/bin:/bin"})


TRAJECTORY = """
import sys
from bench.models import RequiredCall
from bench.scoring.episodes import MadeCall, trajectory_match

def match(n):
    # every required call accepts any arguments: each matches every call made (distinct calls,
    # so the loop guard does not stop them), the shape whose augmenting paths are longest
    required = [RequiredCall(name="search_orders", arguments={}) for _ in range(n)]
    made = [MadeCall(step=0, name="search_orders", arguments={"keyword": str(j)}, success=True)
            for j in range(n)]
    pairs = trajectory_match(required, made)
    assert sorted(i for i, _ in pairs) == sorted(j for _, j in pairs) == list(range(n))
    return "scipy.optimize" in sys.modules

print(match(20), match(150))
"""


def test_hundreds_of_required_calls_matching_hundreds_made_are_solved_by_scipy():
    """A label and an episode of 150 alike calls each: the port's 3.4 million interpreted
    steps are handed to scipy's compiled solver (same pairs); 20 by 20 stays in the port."""
    result = python(TRAJECTORY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]
