"""The time left of `bench run`: per condition at its measured pace, never from a cold row."""

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

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


# -- rows finishing together, a skipped provider, providers sending in parallel ----------------


def test_rows_finishing_together_leave_a_time_left_at_their_mean_pace(project):
    """Three requests in flight at 0.3 s each: rows come three at a time, two gaps in three
    are 0 s; the time left is rows left x 0.1 s, not 0 (a median of the gaps)."""
    cases = list(load_dataset("ecommerce").cases)
    l3 = load_variant("ecommerce", "l3")
    plan = [PlanItem(cases[i], l3, "p", 0) for i in range(30)]
    finished = [0.3 * (1 + i // 3) for i in range(9)]
    times = iter([0.0, *finished])
    progress = RunProgress(Console(file=io.StringIO(), width=300), clock=lambda: next(times),
                           interval_s=0)
    progress.set_plan(plan)
    progress(0, 30, None)
    for done, item in enumerate(plan[:9], start=1):
        progress(done, 30, item)
    # gaps after the first row: 0, 0, 0.3, 0, 0, 0.3, 0, 0 -> 0.075 s a row
    assert progress.eta_s == pytest.approx(21 * 0.6 / 8)


def test_a_skipped_providers_rows_are_not_in_the_time_left(project, monkeypatch):
    from bench.cli import app

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    seen: list[set[str]] = []
    set_plan = RunProgress.set_plan

    def noting(self, pending):  # the real method, told what it was given
        items = list(pending)
        seen.append({item.provider_id for item in items})
        set_plan(self, items)

    monkeypatch.setattr(RunProgress, "set_plan", noting)
    result = CliRunner().invoke(app, ["run", "--provider", "oracle", "--provider",
                                      "openai:gpt-4o-mini", "--variants", "l3", "--limit",
                                      "3", "--no-execute", "--run-id", "skip"])
    assert result.exit_code == 3, result.output  # partial: the skipped provider's rows left
    assert "provider openai:gpt-4o-mini skipped" in result.output
    assert seen == [{"oracle"}]


def test_providers_sending_in_parallel_are_each_timed_on_their_own_rows(project):
    """The oracle answers every 0.1 s while a server answers every 1 s: the server's pace is
    1 s a row (not the 0.05 s since the oracle's previous row), and the time left is the
    slower provider's, as they send in parallel."""
    cases = list(load_dataset("ecommerce").cases)
    l3 = load_variant("ecommerce", "l3")
    fast = [PlanItem(cases[i], l3, "oracle", 0) for i in range(30)]
    slow = [PlanItem(cases[i], l3, "server", 0) for i in range(10)]
    events = sorted([(round(0.1 * (i + 1), 2), item) for i, item in enumerate(fast)] +
                    [(1.05 + i, item) for i, item in enumerate(slow[:3])],
                    key=lambda event: event[0])
    times = iter([0.0, *(t for t, _ in events)])
    progress = RunProgress(Console(file=io.StringIO(), width=300), clock=lambda: next(times),
                           interval_s=0)
    progress.set_plan(fast + slow)
    progress(0, 40, None)
    for done, (_, item) in enumerate(events, start=1):
        progress(done, 40, item)
    assert progress.eta_s == pytest.approx(7 * 1.0)


def test_no_time_left_is_claimed_from_another_providers_pace(project):
    cases = list(load_dataset("ecommerce").cases)
    l3 = load_variant("ecommerce", "l3")
    fast = [PlanItem(cases[i], l3, "oracle", 0) for i in range(5)]
    slow = [PlanItem(cases[i], l3, "server", 0) for i in range(5)]
    times = iter([0.0, 0.1, 0.2, 0.3])
    progress = RunProgress(Console(file=io.StringIO(), width=300), clock=lambda: next(times),
                           interval_s=0)
    progress.set_plan(fast + slow)
    progress(0, 10, None)
    for done, item in enumerate(fast[:3], start=1):
        progress(done, 10, item)
    assert progress.eta_s is None  # the server has sent no row yet
