"""The time left of `bench run`: per condition at its measured pace, never from a cold row."""

import io

import pytest
from rich.console import Console

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.progress import RunProgress
from bench.runner import PlanItem


def _items(project_cases, variant, count):
    return [PlanItem(project_cases[i % len(project_cases)], variant, "local", 0)
            for i in range(count)]


def test_the_time_left_is_projected_per_variant_and_unknown_after_a_cold_first_row(project):
    cases = list(load_dataset("ecommerce").cases)
    l3, l50 = load_variant("ecommerce", "l3"), load_variant("ecommerce", "l50")
    plan = _items(cases, l3, 100) + _items(cases, l50, 100)
    # l3: a cold first row of 190 s, then 1.4 s a row; l50 starts later
    times = iter([0.0, 190.0, 191.4, 192.8, 194.2])
    progress = RunProgress(Console(file=io.StringIO(), width=300), clock=lambda: next(times),
                           interval_s=0)
    progress.set_plan(plan)
    progress(0, 200, None)
    progress(1, 200, plan[0])
    assert progress.eta_s is None  # one cold row: no claim (it once read 10h 22m)
    for done in (2, 3, 4):
        progress(done, 200, plan[done - 1])
    eta = progress.eta_s
    assert eta is not None
    # l3: 96 rows left at 1.4 s; l50: 100 rows at 1.4 s scaled by its larger tools block,
    # plus the first-row cost measured on l3 (190 - 1.4 s)
    size = {v.name: sum(len(t.description) + len(str(t.input_schema)) for t in v.tools)
            for v in (l3, l50)}
    expected = 96 * 1.4 + 100 * 1.4 * size["l50"] / size["l3"] + (190 - 1.4)
    assert eta == pytest.approx(expected, rel=1e-6)
    assert eta < 3600  # a one-hour projection at most, not ten


def test_a_measured_group_uses_its_own_pace(project):
    cases = list(load_dataset("ecommerce").cases)
    l3, l50 = load_variant("ecommerce", "l3"), load_variant("ecommerce", "l50")
    plan = _items(cases, l3, 3) + _items(cases, l50, 10)
    times = iter([0.0, 10.0, 11.0, 12.0, 40.0, 44.0, 48.0])
    progress = RunProgress(Console(file=io.StringIO(), width=300), clock=lambda: next(times),
                           interval_s=0)
    progress.set_plan(plan)
    progress(0, 13, None)
    for done, item in enumerate(plan[:6], start=1):
        progress(done, 13, item)
    # l3 is done; l50 has had 3 rows (a first row, then 4 s each): 7 left at 4 s
    assert progress.eta_s == pytest.approx(7 * 4.0)
