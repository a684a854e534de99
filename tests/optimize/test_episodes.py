"""bench.optimize on an episode dataset (``ecommerce-episodes``, played on the reference
executor) with a scripted ``function:`` target whose trajectory depends on the description
text: the proposer sees the failed episodes' trajectories, and acceptance on ``test`` checks
task success and mean steps."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import bench.optimize as bo
from bench.errors import BenchError
from bench.datasets import load_dataset
from bench.project import Project
from bench.providers.function import register_function
from bench.providers.oracle import OracleProvider, episode_step

TARGET = "function:opt-ep-target"
_ORACLE: dict[str, OracleProvider] = {}


def target(messages: Any, tools: Any, trial: int) -> dict[str, Any]:
    """Plays each episode's label (the oracle's next step), except that it gives up instead of
    calling ``track_shipment`` while that description never says "courier", and, when it says
    "repeat the last lookup to confirm", repeats its last call once before answering (one more
    step in every episode that calls a tool)."""
    described = {t.name: t.description.lower() for t in tools}
    step = episode_step(_ORACLE["cases"].find(messages, tools), messages, tools)
    tracking = described.get("track_shipment", "")
    if any(c["name"] == "track_shipment" for c in step["tool_calls"]) and \
            "courier" not in tracking:
        return {"tool_calls": [], "text": "Sorry, I cannot see where it is."}
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    if not step["tool_calls"] and "repeat the last lookup to confirm" in tracking and \
            last is not None and last.tool_calls:
        said = [[(c["name"], c["arguments"]) for c in m.tool_calls or []]
                for m in messages if m.role == "assistant"]
        if len(said) < 2 or said[-2] != said[-1]:
            return {"tool_calls": [{"name": n, "arguments": a} for n, a in said[-1]],
                    "text": None}
    return step


def _proposer(extra: str):
    def propose(messages: Any, tools: Any, trial: int) -> list[dict[str, Any]]:
        prompt = messages[-1].content or ""
        _ORACLE.setdefault("prompts", []).append(prompt)
        tool = re.search(r"Current description of `([^`]+)`:\n", prompt)
        assert tool is not None
        description = prompt[tool.end():].split("\n\nFailures", 1)[0].strip()
        if tool.group(1) != "track_shipment":
            return [{"name": "propose_edit", "arguments": {
                "tool": tool.group(1), "description": description, "reason": "keep"}}]
        return [{"name": "propose_edit", "arguments": {
            "tool": "track_shipment", "description": f"{description} {extra}",
            "reason": "the failed episodes ask where a parcel is"}}]
    return propose


register_function("opt-ep-target", target)
register_function("opt-ep-good", _proposer("Also for courier questions."))
register_function("opt-ep-slow",
                  _proposer("Also for courier questions; repeat the last lookup to confirm."))


@pytest.fixture
def shop(elsewhere):
    """The repo's datasets and descriptions in a project of their own; the oracle the
    scripted target follows loaded from its ``ecommerce-episodes``."""
    with Project(elsewhere, None).activate():
        _ORACLE["cases"] = OracleProvider(load_dataset("ecommerce-episodes").cases)
    _ORACLE.pop("prompts", None)
    return elsewhere


OPTIONS = {"metric": "task_success", "alpha": 0.1}


def test_the_proposer_sees_the_failed_episodes_trajectories_and_a_fix_is_accepted(shop):
    run = bo.optimize("ecommerce-episodes", "l3", TARGET, "function:opt-ep-good",
                      project=shop, opt_id="ep-good", **OPTIONS)
    result = run.result
    start, fix = result.candidate("l3"), result.candidate("r1c1")
    # dev: the four tracking episodes the target gave up on, fixed; none broken
    assert (start.dev_k, start.dev_n, fix.dev_k) == (17, 21, 21) and fix.broke == []
    assert fix.fixed == ["ecom-ep-002", "ecom-ep-003", "ecom-ep-024", "ecom-ep-029"]
    # the prompts carry each failed episode's trajectory and how it ended
    prompts = [json.loads(line)["messages"][0]["content"] for line in (
        run.folder / "work" / "proposals" / "r1.jsonl").read_text("utf-8").splitlines()]
    (tracking,) = [p for p in prompts if "Current description of `track_shipment`" in p]
    assert tracking.count("trajectory: search_orders -> get_order_status\n") == 2
    assert "answered: final_answer: Sorry, I cannot see where it is." in tracking
    assert "why wrong: task_success\n" in tracking  # named once, not once per source
    # test: task success checked (5 episodes fixed, none broken), steps paired and unchanged
    (test,) = result.acceptance.tests
    assert (test.metric, test.b_only, test.a_only) == ("task_success", 5, 0)
    assert result.acceptance.steps == {TARGET: [2.056, 2.056]}
    assert run.accepted and result.acceptance.reasons == []


def test_an_edit_that_adds_steps_beyond_the_margin_is_rejected_with_the_reason(shop):
    run = bo.optimize("ecommerce-episodes", "l3", TARGET, "function:opt-ep-slow",
                      project=shop, opt_id="ep-slow", **OPTIONS)
    acceptance = run.result.acceptance
    assert acceptance.tests[0].verdict == "improvement"  # task success alone would pass
    assert not run.accepted and acceptance.steps == {TARGET: [2.056, 2.833]}
    assert acceptance.reasons == [f"mean steps rise on {TARGET}: 2.06 -> 2.83"]
    report = (run.folder / "report.md").read_text("utf-8")
    assert "mean steps rise" in report
    # within a 50% margin the same edit (+38% steps) passes
    lenient = bo.optimize("ecommerce-episodes", "l3", TARGET, "function:opt-ep-slow",
                          project=shop, opt_id="ep-slow-lenient", margin=0.5, **OPTIONS)
    assert lenient.accepted and lenient.result.acceptance.steps == {TARGET: [2.056, 2.833]}


def test_episode_datasets_need_an_episode_target_metric(shop):
    with pytest.raises(BenchError, match="episode rows carry no selection_correct; optimize "
                                         "an episode dataset for task_success"):
        bo.optimize("ecommerce-episodes", "l3", TARGET, "function:opt-ep-good", project=shop)
