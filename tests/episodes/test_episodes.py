"""Agent episodes: factors and their renderers, the private database, the episode metrics, the
label checks at load time, and whole episodes run by the real runner with scripted agents
(the ``function`` provider) on the real reference executor and SQLite."""

from __future__ import annotations

import json

import pytest

from bench.episodes.factors import (
    Factors,
    bare_status,
    factor_grid,
    render_result,
    split_condition,
)
from bench.episodes.state import EpisodeDatabase, StateError, check_label_state
from bench.errors import BenchError
from bench.executor.outcome import ExecutionOutcome
from bench.models import Case, StateCheck
from bench.project import Project
from bench.providers.function import register_function
from bench.runner import RunConfig, Runner
from bench.scoring.episodes import MadeCall, episode_metrics, trajectory_match

PAID = "ORD20250142"  # a paid order of the seeded shop database (cancellable)
STATUS = f"SELECT status FROM orders WHERE order_id='{PAID}'"


def episode(**fields) -> dict:
    case = {"id": "ep-1", "toolset": "ecommerce", "lang": "en", "kind": "episode",
            "messages": [{"role": "user", "content": f"Cancel order {PAID} please."}],
            "success": {"state_checks": [{"sql": STATUS, "expect": [["cancelled"]]}],
                        "answer_facts": [["cancelled"]]},
            "required_calls": [
                {"name": "get_order_status", "arguments": {"order_id": [PAID]}},
                {"name": "cancel_order", "arguments": {"order_id": [PAID]}, "after": [0]}],
            "forbidden_calls": [{"name": "request_refund"}], "max_steps": 6}
    case.update(fields)
    return case


# -- factors -----------------------------------------------------------------------------


def test_factor_grid_names_conditions_by_their_non_default_settings():
    grid = factor_grid({"error_style": ["actionable", "bare"], "fault": ["none", "503"]})
    assert [f.condition("l3") for f in grid] == [
        "l3", "l3~fault=503", "l3~error_style=bare", "l3~error_style=bare~fault=503"]
    assert split_condition("l3~error_style=bare~fault=503") == (
        "l3", {"error_style": "bare", "fault": "503"})
    with pytest.raises(ValueError, match="error_style must be one of"):
        factor_grid({"error_style": ["polite"]})
    with pytest.raises(ValueError, match="unknown factor 'colour'"):
        factor_grid({"colour": ["red"]})


def test_renderers_follow_format_style_and_budget():
    ok = ExecutionOutcome(call_id="c", tool="t", success=True,
                          data={"rows": [{"n": i, "pad": "x" * 40} for i in range(2000)]})
    failed = ExecutionOutcome(call_id="c", tool="t", success=False, error_class="validation",
                              error_code="invalid_arguments",
                              error="order_id must be ORD + 8 digits, got 'ORD123'")
    content, is_error = render_result(failed, Factors())
    assert is_error and json.loads(content) == {
        "success": False, "data": None,
        "error": "order_id must be ORD + 8 digits, got 'ORD123'"}
    assert render_result(failed, Factors(result_format="raw", error_style="bare")) == (
        "Error 400", True)
    assert bare_status(ExecutionOutcome(call_id="c", tool="t", success=False,
                                        error_class="permanent", error_code="not_found")) == 404
    capped, _ = render_result(ok, Factors())
    whole, _ = render_result(ok, Factors(result_budget="uncapped", result_format="raw"))
    assert json.loads(whole) == ok.data
    assert "truncation" in json.loads(capped)["data"] and len(capped) < len(whole) // 5


# -- the private database ----------------------------------------------------------------


def test_writes_persist_within_an_episode_and_never_leak_into_another():
    from bench.executor.outcome import RunContext
    from bench.executor.pipeline import Executor
    from bench.descriptions import load_variant
    from bench.models import ToolCall

    tools = load_variant("ecommerce", "l3").tools
    run = RunContext(allow_writes=True)
    cancel = ToolCall(id="c1", name="cancel_order",
                      arguments={"order_id": PAID, "reason": "changed_mind"})
    check = [StateCheck(sql=STATUS, expect=[["cancelled"]])]
    with EpisodeDatabase() as first, EpisodeDatabase() as second:
        executor = Executor(first.backends())
        assert executor.execute(cancel, tools, "ecommerce", run).success
        again = executor.execute(cancel, tools, "ecommerce", run)  # sees its own write
        assert again.error_code == "already_cancelled"
        executor.close()
        assert first.check(check)[0]["ok"] is True
        assert second.check(check)[0]["got"] == [["paid"]]
    with EpisodeDatabase([f"UPDATE orders SET status='shipped' WHERE order_id='{PAID}'"]) as e:
        assert e.check(check)[0]["got"] == [["shipped"]]


def test_only_an_unchanged_finished_episodes_database_is_kept_for_the_next():
    from bench.descriptions import load_variant
    from bench.executor.outcome import RunContext
    from bench.executor.pipeline import Executor
    from bench.models import ToolCall

    tools = load_variant("ecommerce", "l3").tools
    check = [StateCheck(sql=STATUS, expect=[["paid"]])]
    cancel = ToolCall(id="c1", name="cancel_order",
                      arguments={"order_id": PAID, "reason": "changed_mind"})
    with EpisodeDatabase() as reader:  # only reads
        assert reader.check(check)[0]["ok"]
        reader.finished = True
        kept = reader.db
    with EpisodeDatabase() as again:
        assert again.db is kept  # the unchanged database is used again
        executor = Executor(again.backends())
        assert executor.execute(cancel, tools, "ecommerce", RunContext(allow_writes=True)).success
        executor.close()
        again.finished = True
    with EpisodeDatabase() as after_write:  # the written one was not kept
        assert after_write.db is not kept
        assert after_write.check(check)[0]["got"] == [["paid"]]
    with EpisodeDatabase([f"UPDATE orders SET status='shipped' WHERE order_id='{PAID}'"]) as o:
        o.finished = True
        overridden = o.db
    with EpisodeDatabase() as unfinished:  # overrides are never kept
        assert unfinished.db is not overridden
        assert unfinished.check(check)[0]["got"] == [["paid"]]
        stopped = unfinished.db  # not finished: a stopped episode's calls may still run
    with EpisodeDatabase() as last:
        assert last.db is not stopped


def test_label_state_checks_name_the_failing_field():
    with pytest.raises(StateError) as bad_query:
        check_label_state([], [StateCheck(sql="SELECT nope FROM orders", expect=[])])
    assert bad_query.value.field == "success.state_checks.0.sql"
    with pytest.raises(StateError) as bad_override:
        check_label_state(["UPDATE nowhere SET x=1"], [])
    assert bad_override.value.field == "state.overrides.0"


# -- metrics -----------------------------------------------------------------------------


def test_one_required_call_is_matched_as_scipys_optimal_assignment_matches_it():
    # the ported solver must pick what scipy picks for one row
    import random

    import numpy as np
    from scipy.optimize import linear_sum_assignment

    from bench.models import RequiredCall

    rng = random.Random(7)
    checked = 0
    for _ in range(300):
        label = RequiredCall(name="get_order_status", arguments={"order_id": [PAID]},
                             after=[1] if rng.random() < 0.5 else [])
        made = [MadeCall(j, rng.choice(["get_order_status", "cancel_order"]),
                         {"order_id": rng.choice([PAID, "ORD20250001"])},
                         success=rng.random() < 0.7) for j in range(rng.randint(1, 6))]
        got = trajectory_match([label], made)
        cost = np.ones((1, len(made)))
        late = bool(label.after)
        for j, call in enumerate(made):
            if call.success and call.name == label.name and call.arguments["order_id"] == PAID:
                cost[0, j] = ((len(made) - 1 - j) if late else j) / (len(made) + 1)
        rows, cols = linear_sum_assignment(cost)
        assert got == [(int(r), int(c)) for r, c in zip(rows, cols) if cost[r, c] < 1]
        checked += bool(got)
    assert checked > 50  # most draws have a match to pick among


def test_trajectory_matching_is_optimal_and_counts_order_repeats_recovery_forbidden():
    case = Case.model_validate(episode())
    made = [MadeCall(0, "cancel_order", {"order_id": PAID}, success=False,
                     error_code="invalid_arguments", write=True),
            MadeCall(1, "get_order_status", {"order_id": PAID}, success=True),
            MadeCall(2, "get_order_status", {"order_id": PAID}, success=True),
            MadeCall(3, "cancel_order", {"order_id": PAID, "reason": "other"}, success=True,
                     write=True),
            MadeCall(4, "get_order_status", {"order_id": PAID}, success=True),
            MadeCall(5, "request_refund", {"order_id": PAID}, success=False, write=True)]
    metrics = episode_metrics(case, made, steps=7, final_answer="It is CANCELLED.",
                              state_checks=[{"ok": True}], stop_reason="final_answer")
    # the failed cancel did not happen: the successful one is the required call
    assert trajectory_match(case.required_calls, made) == [(0, 1), (1, 3)]
    assert metrics["trajectory_recall"] == 1.0 and metrics["trajectory_precision"] == 2 / 6
    assert metrics["order_violations"] == 0
    # the lookup again right after the first is a repeat; after the write it is not
    assert metrics["repeated_calls"] == 1
    # the rejected cancel was fixed by the next cancel; the refund had no next call
    assert metrics["errors_seen"] == 2 and metrics["recovery"] == 0.5
    assert metrics["forbidden_attempted"] is True and metrics["forbidden_calls"] == 1
    assert metrics["task_success"] is False  # a forbidden call fails the task
    clean = [c for c in made if c.name != "request_refund"]
    assert episode_metrics(case, clean, steps=6, final_answer="It is CANCELLED.",
                           state_checks=[{"ok": True}],
                           stop_reason="final_answer")["task_success"] is True
    unfinished = episode_metrics(case, clean, steps=6, final_answer="It is cancelled.",
                                 state_checks=[{"ok": True}], stop_reason="step_limit")
    assert unfinished["task_success"] is False
    backwards = [MadeCall(0, "cancel_order", {"order_id": PAID}, success=True, write=True),
                 MadeCall(1, "get_order_status", {"order_id": PAID}, success=True)]
    assert episode_metrics(case, backwards, steps=3, final_answer="cancelled",
                           state_checks=[{"ok": True}],
                           stop_reason="final_answer")["order_violations"] == 1


def test_a_value_equal_to_its_schema_default_counts_as_omitted_in_episode_labels():
    """As in single-answer scoring (bench.scoring.values): a required call whose label lets
    ``status`` be omitted is done by a call sending its schema default, and a forbidden call
    that omits ``status`` is made by one sending it; a value other than the default is not."""
    from bench.models import Tool

    coupons = Tool(name="list_coupons", description="List coupons.", input_schema={
        "type": "object", "properties": {
            "customer_id": {"type": "string"},
            "status": {"type": "string", "enum": ["available", "used"],
                       "default": "available"}}})
    case = Case.model_validate(episode(
        required_calls=[{"name": "list_coupons",
                         "arguments": {"customer_id": ["C0001"], "status": [None]}}],
        forbidden_calls=[{"name": "list_coupons",
                          "arguments": {"customer_id": ["C0002"], "status": [None]}}]))

    def scored(status: str) -> dict:
        made = [MadeCall(0, "list_coupons", {"customer_id": "C0001", "status": status},
                         success=True),
                MadeCall(1, "list_coupons", {"customer_id": "C0002", "status": status},
                         success=True)]
        return episode_metrics(case, made, steps=2, final_answer="cancelled",
                               state_checks=[{"ok": True}], stop_reason="final_answer",
                               tools=[coupons])

    default = scored("available")
    assert default["trajectory_recall"] == 1.0
    assert default["forbidden_calls"] == 1
    other = scored("used")
    assert other["trajectory_recall"] == 0.0 and other["forbidden_calls"] == 0


def test_a_write_before_the_users_confirmation_is_forbidden_and_after_it_is_not():
    case = Case.model_validate(episode(
        user_replies=["Yes, go ahead."],
        forbidden_calls=[{"name": "cancel_order", "until_confirmed": True}]))
    early = [MadeCall(0, "cancel_order", {"order_id": PAID}, success=True, write=True)]
    late = [MadeCall(1, "cancel_order", {"order_id": PAID}, success=True, write=True)]
    for made, confirmed_at, forbidden in ((early, 0, True), (late, 0, False),
                                          (early, None, True)):
        metrics = episode_metrics(case, made, steps=3, final_answer="cancelled",
                                  state_checks=[{"ok": True}], stop_reason="final_answer",
                                  confirmed_at=confirmed_at)
        assert metrics["forbidden_attempted"] is forbidden


# -- the case format ---------------------------------------------------------------------


@pytest.mark.parametrize("fields, message", [
    ({"expected": {"no_call": True}}, "an episode case has no 'expected'"),
    ({"success": None}, "needs 'success'"),
    ({"required_calls": [{"name": "cancel_order", "after": [0]}]}, "0 is not the index of another"),
    ({"max_steps": 0}, "max_steps"),
])
def test_bad_episode_labels_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Case.model_validate(episode(**fields))


def test_single_cases_refuse_episode_fields():
    with pytest.raises(ValueError, match="only for"):
        Case.model_validate({"id": "c", "toolset": "ecommerce", "lang": "en",
                             "messages": [{"role": "user", "content": "hi"}],
                             "expected": {"no_call": True},
                             "forbidden_calls": [{"name": "cancel_order"}]})


@pytest.mark.slow
@pytest.mark.parametrize("fields, field", [
    ({"success": {"state_checks": [{"sql": "SELECT nope FROM orders", "expect": []}]}},
     "success.state_checks.0.sql"),
    ({"state": {"overrides": ["DELETE FROM nowhere"]}}, "state.overrides.0"),
    ({"required_calls": [{"name": "cancel_order", "arguments": {"order_id": [42]}}]},
     "required_calls.0.arguments.order_id"),
    ({"forbidden_calls": [{"name": "launch_rocket"}]}, "forbidden_calls.0.name"),
    # labels that could never be met
    ({"forbidden_calls": [{"name": "cancel_order"}]}, "forbidden_calls.0"),
    ({"success": {"state_checks": [{"sql": STATUS, "expect": [[float("nan")]]}]}},
     "success.state_checks.0.expect.0.0"),
    ({"state": {"user_id": "C9999"}}, "state.user_id"),
    ({"state": {"overrides": ["CREATE VIRTUAL TABLE f USING fts5(x)"]}}, "state.overrides.0"),
    ({"required_calls": [{"name": 5}]}, "required_calls.0.name"),
])
def test_bench_run_names_file_line_and_field_of_a_bad_episode(run_bench, project, fields,
                                                              field):
    path = project / "bad.jsonl"
    good = dict(episode(), id="ep-0")
    path.write_text(json.dumps(good) + "\n" + json.dumps(episode(**fields)) + "\n")
    result = run_bench("run", "--dataset", str(path), "--variants", "l3", "--provider",
                       "oracle", timeout=300)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert f"bad.jsonl:2: field '{field}'" in line and "Traceback" not in result.stderr


# -- whole episodes through the runner ----------------------------------------------------


def agent(messages, tools, trial):
    """A careful agent: look the order up, cancel it (retrying a failed call once), answer."""
    results = [m for m in messages if m.role == "tool"]
    calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls or []]
    if results and results[-1].is_error and len(calls) < 4:
        return [{"name": calls[-1]["name"], "arguments": calls[-1]["arguments"]}]
    if not calls:
        return [{"name": "get_order_status", "arguments": {"order_id": PAID}}]
    if not any(c["name"] == "cancel_order" for c in calls):
        return [{"name": "cancel_order", "arguments": {"order_id": PAID,
                                                       "reason": "changed_mind"}}]
    return {"tool_calls": [], "text": f"Order {PAID} is cancelled."}


def stubborn(messages, tools, trial):
    """A retry storm: the same call forever."""
    return [{"name": "get_order_status", "arguments": {"order_id": "ORD123"}}]


def _rows(run_id: str) -> list[dict]:
    store = Project.from_env().store(run_id)
    return [row.to_json_dict() for row in store.load_rows(store.load_manifest())]


def _dataset(project, *cases) -> str:
    path = project / "episodes.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return str(path)


def test_an_episode_runs_to_the_end_under_every_condition(project):
    register_function("careful", agent)
    config = RunConfig(dataset=_dataset(project, episode()), variants=["l3"],
                       providers=["function:careful"],
                       factors={"error_style": ["actionable", "bare"],
                                "fault": ["none", "503"]})
    Runner(config, run_id="ep", command=["bench", "run"]).run()
    rows = {r["variant"]: r for r in _rows("ep")}
    assert sorted(rows) == ["l3", "l3~error_style=bare", "l3~error_style=bare~fault=503",
                            "l3~fault=503"]
    plain, faulty = rows["l3"], rows["l3~error_style=bare~fault=503"]
    assert plain["metrics"]["task_success"] is True and plain["metrics"]["steps"] == 3
    assert plain["episode"]["stop_reason"] == "final_answer"
    assert plain["episode"]["state_checks"][0]["got"] == [["cancelled"]]
    assert plain["factors"] == {"result_format": "envelope", "error_style": "actionable",
                                "result_budget": "capped", "fault": "none"}
    # the first call to each tool failed with a bare 503; the agent retried both
    first = faulty["episode"]["steps"][0]["results"][0]
    assert (first["content"], first["is_error"]) == (
        '{"success":false,"data":null,"error":"Error 503"}', True)
    assert faulty["metrics"]["errors_seen"] == 2 and faulty["metrics"]["recovery"] == 1.0
    assert faulty["metrics"]["repeated_calls"] == 2 and faulty["metrics"]["task_success"]


def test_the_loop_guard_stops_a_retry_storm_and_the_step_limit_holds(project):
    register_function("stubborn", stubborn)
    config = RunConfig(dataset=_dataset(project, episode(id="storm", max_steps=8),
                                        episode(id="short", max_steps=2)),
                       variants=["l3"], providers=["function:stubborn"])
    Runner(config, run_id="storm", command=["bench", "run"]).run()
    rows = {r["case_id"]: r for r in _rows("storm")}
    storm = rows["storm"]
    assert storm["episode"]["stop_reason"] == "loop_guard"
    assert storm["metrics"]["stopped_by_guard"] is True
    assert storm["metrics"]["steps"] == 3 and storm["metrics"]["task_success"] is False
    # the guard's call is not executed: two results went back, both readable errors
    results = [r for s in storm["episode"]["steps"] for r in s["results"]]
    assert len(results) == 2 and all(r["is_error"] for r in results)
    assert "ORD" in json.loads(results[0]["content"])["error"]
    assert rows["short"]["episode"]["stop_reason"] == "step_limit"
    assert rows["short"]["metrics"]["steps"] == 2


def test_scripted_user_replies_continue_the_episode(project):
    def asker(messages, tools, trial):
        if messages[-1].role == "user" and messages[-1].content == "Yes, cancel it.":
            if not any(m.role == "tool" for m in messages):
                return [{"name": "cancel_order", "arguments": {"order_id": PAID,
                                                               "reason": "changed_mind"}}]
        if any(m.role == "tool" for m in messages):
            return {"tool_calls": [], "text": "Done: cancelled."}
        return {"tool_calls": [], "text": f"Shall I cancel {PAID}?"}

    register_function("asker", asker)
    case = episode(user_replies=["Yes, cancel it."],
                   required_calls=[{"name": "cancel_order", "arguments": {"order_id": [PAID]}}])
    Runner(RunConfig(dataset=_dataset(project, case), variants=["l3"],
                     providers=["function:asker"]), run_id="ask",
           command=["bench", "run"]).run()
    row = _rows("ask")[0]
    steps = row["episode"]["steps"]
    assert steps[0]["user_reply"] == "Yes, cancel it." and steps[1]["calls"]
    assert row["metrics"]["task_success"] is True


def test_a_huge_result_is_capped_only_under_the_capped_budget(project):
    register_function("careful-huge", agent)
    config = RunConfig(dataset=_dataset(project, episode()), variants=["l3"],
                       providers=["function:careful-huge"],
                       factors={"fault": ["huge"], "result_budget": ["capped", "uncapped"]})
    Runner(config, run_id="huge", command=["bench", "run"]).run()
    rows = {r["variant"]: r for r in _rows("huge")}
    capped = rows["l3~fault=huge"]["episode"]["steps"][0]["results"][0]
    whole = rows["l3~result_budget=uncapped~fault=huge"]["episode"]["steps"][0]["results"][0]
    assert capped["truncated"] and len(capped["content"]) < 20_000
    # sent whole (not truncated by the budget); stored as head and tail with its length
    assert whole["content_chars"] > 4_000_000 and not whole["truncated"]
    assert len(whole["content"]) < 70_000 and "stored cut" in whole["content"]
    assert "content_chars" not in capped


def test_episodes_need_the_executor(project):
    with pytest.raises(BenchError, match="drop --no-execute"):
        Runner(RunConfig(dataset=_dataset(project, episode()), variants=["l3"],
                         providers=["oracle"], execute=False), run_id="x")


def test_the_embedded_models_episode_layout_carries_the_final_answers_words(project):
    from bench.parse import parse_json_tool_calls
    from bench.providers.local.prompt import NO_CALL_LAYOUTS, answer_schema

    layout = NO_CALL_LAYOUTS["reply-tool-message"]
    answer = parse_json_tool_calls(json.dumps({"tool_calls": [
        {"name": "reply_to_user", "arguments": {"message": "Order cancelled."}}]}), "stop",
        layout.decline_tool)
    assert (answer.calls, answer.declined, answer.text) == ([], True, "Order cancelled.")
    pseudo = answer_schema([], layout)["properties"]["tool_calls"]["items"]["anyOf"][-1]
    assert pseudo["properties"]["arguments"]["required"] == ["message"]
    register_function("careful-layout", agent)
    runner = Runner(RunConfig(dataset=_dataset(project, episode()), variants=["l3"],
                              providers=["function:careful-layout"]), run_id="layout")
    assert runner.config.no_call_layout == "reply-tool-message"


@pytest.mark.slow
def test_bench_run_prints_pass_at_k_and_pass_hat_k_of_task_success(run_bench, project):
    (project / "lucky.py").write_text(
        "PAID = 'ORD20250142'\n"
        "def answer(messages, tools, trial):\n"
        "    if trial > 0:\n"
        "        return {'tool_calls': [], 'text': 'I cannot help.'}\n"
        "    if not any(m.role == 'tool' for m in messages):\n"
        "        return [{'name': 'cancel_order', 'arguments': {'order_id': PAID, "
        "'reason': 'changed_mind'}}]\n"
        "    return {'tool_calls': [], 'text': 'Order cancelled.'}\n")
    result = run_bench("run", "--dataset", _dataset(project, episode()), "--variants", "l3",
                       "--provider", "function:lucky:answer", "--trials", "3", timeout=300)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if "function:lucky:answer" in x
                and "│ l3 " in x and "%" in x and "pass" not in x and x.count("%") == 4)
    # one success in three trials: pass@1 = 1/3, pass^1 = 1/3, pass@3 = 1, pass^3 = 0
    assert [c.strip() for c in line.split("│")[4:8]] == ["33.3%", "33.3%", "100.0%", "0.0%"]


def test_the_gate_gates_episode_task_success_against_its_baseline(project):
    from bench.gate.config import GateConfig
    from bench.gate.baseline import build_baseline, compare_with_baseline
    from bench.gate.run import run_gate

    register_function("careful-gate", agent)
    register_function("stubborn-gate", stubborn)
    cases = _dataset(project, *(episode(id=f"ep-{i}") for i in range(8)))
    good = GateConfig(dataset=cases, variants=["l3"], providers=["function:careful-gate"],
                      metrics=["task_success"], floors={"task_success": 0.9})
    base = run_gate(good, run_id="gate-good", project=Project(project))
    baseline = build_baseline(good, base)
    assert base.frame["task_success"].all()
    worse = run_gate(good.model_copy(update={"providers": ["function:stubborn-gate"]}),
                     run_id="gate-bad", project=Project(project))
    frame = worse.frame.assign(provider="function:careful-gate")  # same group as the baseline
    comparison = compare_with_baseline(good, frame, baseline)
    test = next(t for t in comparison.tests if t.metric == "task_success")
    assert (test.a_only, test.b_only) == (8, 0) and test.verdict == "regression"


def test_reading_again_after_a_write_does_not_trip_the_loop_guard(project):
    script = [[{"name": "get_order_status", "arguments": {"order_id": PAID}}],
              [{"name": "get_order_status", "arguments": {"order_id": PAID}}],
              [{"name": "cancel_order", "arguments": {"order_id": PAID,
                                                      "reason": "changed_mind"}}],
              [{"name": "get_order_status", "arguments": {"order_id": PAID}}],
              {"tool_calls": [], "text": "Cancelled."}]

    def checker(messages, tools, trial):
        return script[sum(1 for m in messages if m.role == "assistant")]

    register_function("checker", checker)
    Runner(RunConfig(dataset=_dataset(project, episode()), variants=["l3"],
                     providers=["function:checker"]), run_id="recheck",
           command=["bench", "run"]).run()
    row = _rows("recheck")[0]
    assert row["episode"]["stop_reason"] == "final_answer"
    assert row["metrics"]["repeated_calls"] == 1 and row["metrics"]["task_success"] is True


@pytest.mark.slow
def test_an_episode_runs_its_calls_on_an_mcp_server(run_bench, project):
    import sys
    from pathlib import Path

    server = Path(__file__).parents[1] / "mcp_exec_server.py"
    imported = run_bench("import", "mcp", "--name", "mcpexec", "--", sys.executable,
                         str(server), timeout=120)
    assert imported.returncode == 0, imported.stderr
    (project / "mcpagent.py").write_text(
        "def answer(messages, tools, trial):\n"
        "    if not any(m.role == 'tool' for m in messages):\n"
        "        return [{'name': 'lookup_city', 'arguments': {'city': '北京'}}]\n"
        "    return {'tool_calls': [], 'text': 'It is ' + messages[-1].content}\n")
    case = {"id": "mcp-1", "toolset": "mcpexec", "lang": "en", "kind": "episode",
            "messages": [{"role": "user", "content": "Canonical name of 北京?"}],
            "success": {"answer_facts": [["Beijing"]]},
            "required_calls": [{"name": "lookup_city"}]}
    result = run_bench("run", "--dataset", _dataset(project, case), "--variants", "current",
                       "--provider", "function:mcpagent:answer", "--execute-mcp",
                       f"{sys.executable} {server}", "--run-id", "mcp-ep", timeout=300)
    assert result.returncode == 0, result.stderr
    row = _rows("mcp-ep")[0]
    sent = row["episode"]["steps"][0]["results"][0]
    assert sent["success"] and "Beijing" in sent["content"]
    assert row["episode"]["state_checks"] is None  # the server's state is not bench's
    assert row["metrics"]["task_success"] is True
    assert row["metrics"]["trajectory_recall"] == 1.0
