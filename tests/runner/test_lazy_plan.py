"""The plan is made as it is read: the same items, in the same order, as the nested loops of
provider, variant, tool-space setting, trial and case (an episode case once per factor
setting), without one object per row held for the run."""

from __future__ import annotations

import gc

import pytest

from bench.datasets import load_dataset
from bench.episodes.factors import factor_grid
from bench.runner import load_variants, make_plan
from bench.runner.inflight import ItemQueue
from bench.runner.plan import PendingItems, PlanItem, plan_conditions


def expected_items(cases, variants, providers, trials, grid):
    """The plan as explicit nested loops (what make_plan documents)."""
    return [PlanItem(case, variant, provider, trial,
                     setting if case.kind == "episode" else None)
            for provider in providers for variant in variants for trial in range(trials)
            for case in cases if case.toolset == variant.toolset
            for setting in (grid if case.kind == "episode" else grid[:1])]


@pytest.fixture(scope="module")
def single():
    dataset = load_dataset("ecommerce")
    cases, variants = list(dataset.cases[:7]), load_variants(dataset, ["l3", "l10"])
    return make_plan(cases, variants, ["p1", "p2"], 3), \
        expected_items(cases, variants, ["p1", "p2"], 3, [None])


def test_the_plan_reads_as_the_nested_loops(single):
    plan, expected = single
    assert len(plan) == len(expected) == 7 * 2 * 2 * 3
    assert list(plan) == expected
    assert [plan[i] for i in range(len(plan))] == expected
    assert plan[-1] == expected[-1] and plan[-len(plan)] == expected[0]
    assert plan[5:40:7] == expected[5:40:7]
    assert plan[:2] == expected[:2]
    with pytest.raises(IndexError):
        plan[len(plan)]
    assert list(plan.of_provider("p2")) == [i for i in expected if i.provider_id == "p2"]
    assert plan_conditions(plan) == plan_conditions(expected) == ["l3", "l10"]


def test_episode_cases_are_planned_once_per_factor_setting():
    dataset = load_dataset("ecommerce-episodes")
    cases, variants = list(dataset.cases[:3]), load_variants(dataset, ["l3"])
    grid = factor_grid({"error_style": ["actionable", "bare"]})
    plan = make_plan(cases, variants, ["p"], 2, grid)
    assert list(plan) == expected_items(cases, variants, ["p"], 2, grid)
    assert len(plan) == 3 * 2 * 2
    assert plan_conditions(plan) == ["l3", "l3~error_style=bare"]


def test_a_plan_holds_no_item_per_row():
    dataset = load_dataset("ecommerce")
    before = sum(isinstance(o, PlanItem) for o in gc.get_objects())
    plan = make_plan(list(dataset.cases), load_variants(dataset, ["l3"]), ["p"], 50)
    queue = ItemQueue(PendingItems(plan).of_provider("p"))
    held = sum(isinstance(o, PlanItem) for o in gc.get_objects()) - before
    assert len(plan) > 10_000
    assert held <= 1  # the queue's next item only
    assert queue.popleft() == plan[0] and queue.popleft() == plan[1]


def test_pending_items_leave_out_done_keys_and_skipped_providers(single):
    plan, expected = single
    done = {expected[0].key, expected[3].key, expected[-1].key}
    pending = PendingItems(plan, done)
    assert len(pending) == len(expected) - 3 and pending
    assert list(pending) == [i for i in expected if i.key not in done]
    without = pending.without({"p1"})
    assert list(without) == [i for i in expected if i.key not in done and i.provider_id == "p2"]
    assert len(without) == len(list(without))
    assert list(without.of_provider("p1")) == []
    assert list(pending.of_provider("p1")) == [i for i in expected
                                               if i.key not in done and i.provider_id == "p1"]
    everything = PendingItems(plan, {i.key for i in expected})
    assert not everything and len(everything) == 0
    # a shard's plan is a list: the same view works on it
    assert list(PendingItems(expected[:5], {expected[1].key})) == \
        [expected[0], *expected[2:5]]


def test_an_item_queue_reads_one_ahead_and_can_be_cleared():
    queue = ItemQueue(iter([]))
    assert not queue
    with pytest.raises(IndexError):
        queue.popleft()
    dataset = load_dataset("ecommerce")
    plan = make_plan(list(dataset.cases[:3]), load_variants(dataset, ["l3"]), ["p"], 1)
    queue = ItemQueue(iter(plan))
    assert queue and queue.popleft() == plan[0]
    queue.clear()
    assert not queue


def test_a_run_holds_few_items_while_a_fast_provider_answers(project):
    """The oracle answers at once, so the loop never idles: items dispatched ahead of their
    rows must not pile up (they did, 48,000 in a 50,000-row run, until the warm-up queue was
    bounded)."""
    from bench.runner import RunConfig, Runner
    from bench.runner.scheduler import WARM_UP_AHEAD

    live: list[int] = []

    def on_row(row):
        if len(live) == 0 and row.trial == 6:  # well into the run
            live.append(sum(isinstance(o, PlanItem) for o in gc.get_objects()))

    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"],
                              trials=8, limit=250, split="all", execute=False),
                    run_id="fast", command=[])
    runner.run(on_row=on_row)
    assert len(runner.plan) == 2000 and live
    assert live[0] <= WARM_UP_AHEAD + 200, live  # + the finisher's backlog and tasks
