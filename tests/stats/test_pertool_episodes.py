"""Per-tool figures count episode rows by their trajectories' calls (bench.stats.pertool),
through the real runner with scripted agents (``function:`` providers) on the shipped
ecommerce toolset's reference executor; and ``bench show RUN --per-tool`` says in one line
when there is nothing to count."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from bench.api import evaluate
from bench.cli import app
from bench.project import Project
from bench.providers.function import register_function
from bench.stats.frame import results_frame
from bench.stats.pertool import call_checks, confusion_pairs, per_tool_table

PAID = "ORD20250142"  # a paid order of the seeded shop database (cancellable)
OTHER = "ORD20250143"


def _episode(case_id: str, order: str) -> dict:
    return {"id": case_id, "toolset": "ecommerce", "lang": "en", "kind": "episode",
            "messages": [{"role": "user", "content": f"Cancel order {order} please."}],
            "success": {"answer_facts": [["cancelled"]]},
            "required_calls": [
                {"name": "get_order_status", "arguments": {"order_id": [order]}},
                {"name": "cancel_order", "arguments": {"order_id": [order]}, "after": [0]}],
            "forbidden_calls": [{"name": "request_refund"}], "max_steps": 6}


SINGLE = {"id": "s-1", "toolset": "ecommerce", "lang": "en",
          "messages": [{"role": "user", "content": f"Where is my order {PAID}?"}],
          "expected": {"calls": [{"name": "get_order_status",
                                  "arguments": {"order_id": [PAID]}}]}}


def agent(messages, tools, trial):
    """ep-1: looks the order up twice, cancels it, answers. ep-2: looks it up, asks for a
    refund instead of cancelling (forbidden), answers. s-1: one lookup."""
    text = messages[0].content
    calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls or []]
    if text.startswith("Where is"):
        return [{"name": "get_order_status", "arguments": {"order_id": PAID}}]
    order = PAID if PAID in text else OTHER
    if PAID in text:
        plan = [("get_order_status", {"order_id": order}),
                ("get_order_status", {"order_id": order}),
                ("cancel_order", {"order_id": order, "reason": "changed_mind"})]
    else:
        plan = [("get_order_status", {"order_id": order}),
                ("request_refund", {"order_id": order, "reason": "changed_mind"})]
    if len(calls) < len(plan):
        name, arguments = plan[len(calls)]
        return [{"name": name, "arguments": arguments}]
    return {"tool_calls": [], "text": f"Order {order} is cancelled."}


def _run(project, cases: list[dict], run_id: str, provider: str = "function:pt-agent"):
    path = project / f"{run_id}.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return evaluate(path, ["l3"], [provider], project=project, run_id=run_id, split="all")


def test_episode_rows_count_every_trajectory_call_against_the_required_calls(project):
    register_function("pt-agent", agent)
    result = _run(project, [_episode("ep-1", PAID), _episode("ep-2", OTHER), SINGLE], "pt")
    by_case = {r.case_id: r for r in result.rows}
    assert [c.name for s in by_case["ep-1"].episode.steps for c in s.calls] == [
        "get_order_status", "get_order_status", "cancel_order"]

    frame = results_frame(result.rows)
    kinds = dict(zip(frame["case_id"], frame["expected_kind"]))
    assert kinds == {"ep-1": "episode", "ep-2": "episode", "s-1": "calls"}
    assert dict(zip(frame["case_id"], frame["predicted_tools"]))["ep-2"] == (
        "get_order_status", "request_refund")

    table = per_tool_table(frame).set_index("tool")
    counts = {t: (int(r["tp"]), int(r["fp"]), int(r["fn"])) for t, r in table.iterrows()}
    # get_order_status: ep-1 1 right + 1 repeat, ep-2 1 right, s-1 1 right
    # cancel_order: ep-1 made, ep-2 missed; request_refund: called where nothing asked it
    assert counts == {"get_order_status": (3, 1, 0), "cancel_order": (1, 0, 1),
                      "request_refund": (0, 1, 0)}
    assert table.loc["get_order_status", "precision"] == 3 / 4
    assert table.loc["cancel_order", "recall"] == 1 / 2

    pairs = {(r["expected"], r["chosen"]): r["count"]
             for r in confusion_pairs(frame).to_dict("records")}
    assert pairs == {("cancel_order", "request_refund"): 1,
                     ("(no call)", "get_order_status"): 1}

    # required calls made / missed count; an episode's extra calls are not "forbidden" here
    checks = call_checks(frame).set_index("tool")
    assert (checks.loc["cancel_order", "required"],
            checks.loc["cancel_order", "required_made"]) == (2, 1)
    assert checks.loc["get_order_status", "forbidden"] == 0
    assert checks.loc["request_refund", "forbidden"] == 0

    shown = CliRunner().invoke(app, ["show", "pt", "--per-tool"], env={
        "BENCH_HOME": str(project), "COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "request_refund" in shown.output and "no single-answer rows" not in shown.output
    assert "An episode counts every call of its trajectory" in " ".join(shown.output.split())


def _no_call_answer(messages, tools, trial):
    return {"tool_calls": [], "text": "I cannot help with that."}


def test_show_per_tool_says_in_one_line_when_nothing_can_be_counted(project):
    register_function("pt-quiet", _no_call_answer)
    case = {"id": "n-1", "toolset": "ecommerce", "lang": "en",
            "messages": [{"role": "user", "content": "Tell me a joke"}],
            "expected": {"no_call": True}}
    _run(project, [case], "quiet", provider="function:pt-quiet")
    env = {"BENCH_HOME": str(project), "COLUMNS": "200"}
    shown = CliRunner().invoke(app, ["show", "quiet", "--per-tool"], env=env)
    assert shown.exit_code == 0, shown.output
    lines = [ln for ln in shown.output.splitlines() if ln.startswith("per tool")]
    assert lines == ["per tool: no tool was expected or called in the 1 finished row (every "
                     "case is no-call or ask, and no answer called a tool): nothing to count"]

    # a run with no finished row (stopped before its first): one line, no table
    store = Project(project).store("quiet")
    store.results_path.write_text("", encoding="utf-8")
    empty = CliRunner().invoke(app, ["show", "quiet", "--per-tool"], env=env)
    assert empty.exit_code == 0, empty.output
    lines = [ln for ln in empty.output.splitlines() if ln.startswith("per tool")]
    assert lines == ["per tool: run quiet has no finished row yet: nothing to count "
                     "(rows 0/1)"]
    assert "┃" not in empty.output
