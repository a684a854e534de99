"""The Pareto set of an optimization (dev rate against tool-definition tokens): listed in the
report and result.json, and a candidate both less accurate and longer than another is not
on it."""

from __future__ import annotations

import json
import re
from typing import Any


import bench.optimize as bo
from bench.providers.function import register_function
from tests.optimize.test_optimize import TARGET


def worse(messages: Any, tools: Any, trial: int) -> list[dict[str, Any]]:
    """Rewrites track_shipment longer and without the word "shipment": the two shipment
    questions of dev fail, the parcel ones still do."""
    prompt = messages[-1].content or ""
    tool = re.search(r"Current description of `([^`]+)`:\n", prompt)
    assert tool is not None and tool.group(1) == "track_shipment"
    return [{"name": "propose_edit", "arguments": {
        "tool": "track_shipment", "reason": "say what it returns",
        "description": "Show where an order is: its delivery status and the expected "
                       "delivery date, from the carrier."}}]


register_function("opt-worse", worse)


def test_a_less_accurate_and_longer_candidate_is_not_in_the_pareto_set(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-worse", project=shop,
                      opt_id="worse")
    start, worse = run.result.candidate("start"), run.result.candidate("r1c1")
    assert (start.dev_k, worse.dev_k, worse.dev_n) == (9, 7, 13)
    assert worse.tokens > start.tokens and worse.status == "evaluated"
    assert start.pareto and not worse.pareto
    stored = json.loads((run.folder / "result.json").read_text(encoding="utf-8"))
    assert {c["name"]: c["pareto"] for c in stored["candidates"]} == {"start": True,
                                                                     "r1c1": False}
    report = (run.folder / "report.md").read_text(encoding="utf-8")
    (start_line,) = [line for line in report.splitlines() if line.startswith("| start ")]
    (worse_line,) = [line for line in report.splitlines() if line.startswith("| r1c1 ")]
    assert "start (Pareto)" in start_line and "(Pareto)" not in worse_line
    assert "<h2>Pareto set (dev)</h2><img" in (run.folder / "report.html").read_text("utf-8")


def test_the_pareto_set_keeps_the_shorter_and_the_more_accurate(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                      opt_id="good")
    start, fix = run.result.candidate("start"), run.result.candidate("r1c1")
    # the fix is more accurate and longer: neither dominates the other
    assert fix.dev_k > start.dev_k and fix.tokens > start.tokens
    assert start.pareto and fix.pareto
