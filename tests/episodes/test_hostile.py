"""Hostile episode labels and hostile scripted agents: what a dataset author or a model can
send must end as a one-line error or a scored episode, never as a changed shared database, a
file written elsewhere, a hang or a wrong score (a break-it review of agent episodes)."""

from __future__ import annotations

import sqlite3

import pytest

from bench.episodes.state import EpisodeDatabase, StateError, check_label_state
from bench.executor.backends.shopcache import shop_db_path
from bench.models import StateCheck


def _orders() -> int:
    conn = sqlite3.connect(f"{shop_db_path().resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM orders").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("overrides", [
    ["COMMIT", "DELETE FROM orders"],
    ["ROLLBACK", "DELETE FROM orders"],
    ["END", "DELETE FROM orders"],
])
def test_a_label_cannot_end_the_load_time_transaction_and_write_the_shared_database(
        overrides):
    before = _orders()
    with pytest.raises(StateError) as refused:
        check_label_state(overrides, [])
    assert refused.value.field == "state.overrides.0"
    assert _orders() == before > 0


@pytest.mark.parametrize("sql", [
    "ATTACH DATABASE '{target}' AS x",
    "VACUUM INTO '{target}'",
    # a trigger would run inside the model's writes, where no label budget applies
    "CREATE TRIGGER t AFTER UPDATE ON orders BEGIN SELECT '{target}'; END",
])
def test_label_sql_writes_no_file_outside_the_episode_copy(tmp_path, sql):
    target = tmp_path / "written.db"
    overrides = [sql.format(target=target)]
    with pytest.raises(StateError, match="override does not run") as at_load:
        check_label_state(overrides, [])
    assert at_load.value.field == "state.overrides.0"
    with pytest.raises(StateError, match="override does not run"):
        with EpisodeDatabase(overrides):
            pass
    assert not target.exists()


def test_a_state_check_that_writes_is_refused_at_load_time():
    # run read-only after the episode, it could never hold: refused when the label loads
    with pytest.raises(StateError, match="state check does not run") as refused:
        check_label_state([], [StateCheck(sql="DELETE FROM orders", expect=[])])
    assert refused.value.field == "success.state_checks.0.sql"


def test_label_sql_that_never_ends_is_stopped_with_its_field(monkeypatch):
    monkeypatch.setattr("bench.executor.backends.states.LABEL_SQL_BUDGET_S", 0.2)
    forever = ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
               "SELECT count(*) FROM n")
    with pytest.raises(StateError, match="ran longer than") as check:
        check_label_state([], [StateCheck(sql=forever, expect=[[1]])])
    assert check.value.field == "success.state_checks.0.sql"
    with pytest.raises(StateError, match="ran longer than") as override:
        check_label_state([f"UPDATE orders SET note = ({forever})"], [])
    assert override.value.field == "state.overrides.0"


def test_lone_surrogates_in_a_json_answers_prose_and_names_become_replacement_characters():
    # the embedded model's (and the function provider's) JSON answer may escape a lone
    # surrogate; kept, it made `bench report` stop with UnicodeEncodeError on the final answer
    from bench.parse import parse_json_tool_calls

    final = parse_json_tool_calls('{"tool_calls": [], "text": "done \\ud800"}', "stop")
    assert final.text == "done \ufffd"
    called = parse_json_tool_calls(
        '{"tool_calls": [{"name": "get\\udc00", "arguments": {}}], "text": "x"}', "stop")
    assert called.calls[0].name == "get\ufffd" and "broken_unicode" in called.calls[0].notes
    for parsed in (final, called):
        parsed.model_dump_json().encode("utf-8")  # what reports write


def _episode(**fields) -> dict:
    from tests.episodes.test_episodes import episode

    return episode(**fields)


@pytest.mark.parametrize("fields, message", [
    ({"required_calls": [
        {"name": "get_order_status", "arguments": {"order_id": ["ORD20250142"]}, "after": [1]},
        {"name": "cancel_order", "arguments": {"order_id": ["ORD20250142"]}, "after": [0]}]},
     "form a cycle"),
    ({"kind": "Episode"}, "kind must be \"single\" or \"episode\", got 'Episode'"),
    ({"max_steps": True}, "max_steps"),
    ({"required_calls": [{"name": "get_order_status"},
                         {"name": "cancel_order", "after": [True]}]}, "after"),
])
def test_unsatisfiable_or_mistyped_episode_labels_are_refused(fields, message):
    from bench.models import Case

    with pytest.raises(ValueError, match=message):
        Case.model_validate(_episode(**fields))


def test_a_single_case_refuses_a_step_limit_it_would_ignore():
    from bench.models import Case

    single = {"id": "c", "toolset": "ecommerce", "lang": "en", "expected": {"no_call": True},
              "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ValueError, match="max_steps: only for"):
        Case.model_validate({**single, "max_steps": 3})
    Case.model_validate({**single, "max_steps": 8})  # a dump of any case holds the default


def test_a_forbidden_calls_arguments_must_fit_the_tools_schema(tmp_path):
    # a misspelt argument made the forbidden call never match: never counted
    import json

    from bench.datasets.loader import load_dataset
    from bench.descriptions import load_variant
    from bench.errors import BenchError
    from bench.datasets.labels import check_against_tools

    path = tmp_path / "ep.jsonl"
    bad = _episode(forbidden_calls=[{"name": "cancel_order", "arguments": {"orderid": ["x"]}}])
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(BenchError) as refused:
        check_against_tools(load_dataset(str(path)), "ecommerce",
                            load_variant("ecommerce", "l3").tools)
    assert refused.value.field == "forbidden_calls.0.arguments.orderid"


def test_call_ids_stay_unique_when_the_model_uses_the_names_the_loop_would_give():
    # a result is paired with its call by id: two calls with one id get each other's results
    from bench.episodes.loop import _call_ids
    from bench.models import ToolCall

    used: set[str] = set()
    step0 = _call_ids([ToolCall(id=i, name="t") for i in ("x", "call_0_2", "x", "call_1_0")],
                      used, 0)
    step1 = _call_ids([ToolCall(id=i, name="t") for i in ("x", "")], used, 1)
    ids = [c.id for c in step0 + step1]
    assert len(set(ids)) == len(ids) == 6, ids
    assert ids[:2] == ["x", "call_0_2"]  # unique ids are kept as the model sent them


def test_an_error_that_echoes_a_giant_argument_is_capped_like_a_result():
    # jsonschema's message quotes the whole value: a 5 MB argument came back as a 5 MB error
    # under the capped budget
    import json

    from bench.episodes.factors import Factors, render_result
    from bench.executor.outcome import ExecutionOutcome

    error = "invalid arguments for 'get_order_status': order_id: '" + "A" * 5_000_000 + "' x"
    failed = ExecutionOutcome(call_id="c", tool="t", success=False, error_class="validation",
                              error_code="invalid_arguments", error=error)
    for fmt in ("envelope", "raw"):
        capped, is_error = render_result(failed, Factors(result_format=fmt))
        text = json.loads(capped)["error"] if fmt == "envelope" else capped
        assert is_error and len(capped.encode("utf-8")) <= 2000 * 4 + 200
        assert text.startswith("invalid arguments for 'get_order_status'")
        assert text.endswith("' x") and "cut" in text
    whole, _ = render_result(failed, Factors(result_budget="uncapped", result_format="raw"))
    assert whole == error


@pytest.mark.slow
def test_ids_of_a_conversation_given_by_the_label_are_not_given_again(project):
    # an episode may start from a history with calls: the loop's "call_0" paired the model's
    # first result with the history's call of that id
    import json

    from bench.providers.function import register_function
    from bench.runner import RunConfig, Runner

    seen: list[list[str]] = []

    def agent(messages, tools, trial):
        seen.append([c["id"] for m in messages if m.role == "assistant"
                     for c in m.tool_calls or []])
        if len(seen) == 1:
            return [{"name": "get_order_status", "arguments": {"order_id": "ORD20250142"}}]
        return {"tool_calls": [], "text": "It is cancelled."}

    register_function("history", agent)
    history = [{"role": "user", "content": "Status of ORD20250143?"},
               {"role": "assistant", "tool_calls": [
                   {"id": "call_0", "name": "get_order_status",
                    "arguments": {"order_id": "ORD20250143"}}]},
               {"role": "tool", "tool_call_id": "call_0", "content": "{\"status\": \"paid\"}"},
               {"role": "user", "content": "Now cancel ORD20250142."}]
    path = project / "history.jsonl"
    path.write_text(json.dumps(_episode(messages=history)) + "\n")
    Runner(RunConfig(dataset=str(path), variants=["l3"], providers=["function:history"]),
           run_id="history", command=["bench", "run"]).run()
    assert len(seen) == 2 and len(seen[1]) == len(set(seen[1])) == 2, seen


def test_different_undecodable_calls_are_no_retry_storm(project):
    # an undecodable call's arguments are {}: three different malformed calls counted as one
    # call repeated, and the loop guard ended the episode
    import json

    from bench.providers.function import register_function
    from bench.runner import RunConfig, Runner
    from tests.episodes.test_episodes import _rows

    def sloppy(messages, tools, trial):
        step = sum(1 for m in messages if m.role == "assistant")
        if step < 3:  # JSON cut short, a different order each time
            return [{"name": "get_order_status",
                     "arguments": '{"order_id": "ORD2025014%d"' % step}]
        return {"tool_calls": [], "text": "It is cancelled."}

    register_function("sloppy", sloppy)
    path = project / "sloppy.jsonl"
    path.write_text(json.dumps(_episode()) + "\n")
    Runner(RunConfig(dataset=str(path), variants=["l3"], providers=["function:sloppy"]),
           run_id="sloppy", command=["bench", "run"]).run()
    (row,) = _rows("sloppy")
    assert row["episode"]["stop_reason"] == "final_answer"
    assert row["metrics"]["repeated_calls"] == 0 and row["metrics"]["tool_calls"] == 3
    assert row["episode"]["steps"][0]["calls"][0]["raw_arguments"] == \
        '{"order_id": "ORD20250140"'


def test_a_label_checked_at_load_time_leaves_no_trace_for_the_next_label():
    check_label_state(["DELETE FROM orders", "CREATE TABLE scratch(a)"], [])
    with pytest.raises(StateError, match="no such table: scratch"):
        check_label_state([], [StateCheck(sql="SELECT a FROM scratch", expect=[])])
    check_label_state([], [StateCheck(sql="SELECT 1 FROM orders LIMIT 1", expect=[[1]])])
    with pytest.raises(StateError, match="does not run"):  # rolled back after a failure too
        check_label_state(["UPDATE orders SET note='x'", "DROP TABLE nowhere"], [])
    # json_extract fails on a row only: a leaked 'x' note would fail this check
    check_label_state([], [StateCheck(
        sql="SELECT json_extract('not json', '$') FROM orders WHERE note = 'x'", expect=[])])
    with pytest.raises(StateError, match="malformed JSON"):  # the trick itself works
        check_label_state(["UPDATE orders SET note='x'"], [StateCheck(
            sql="SELECT json_extract('not json', '$') FROM orders WHERE note = 'x'",
            expect=[])])


@pytest.mark.slow
def test_a_killed_episode_leaves_nothing_on_disk(tmp_path):
    # kill -9 skips every cleanup: an episode's database must not be a file (3.6 MB per
    # episode in flight once stayed in /tmp)
    import os
    import signal
    import subprocess
    import sys

    from bench.executor.backends.shopcache import shop_db_path
    shop_db_path()  # the seeded file, cached outside tmp_path
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    make = ("from bench.episodes.state import EpisodeDatabase\n"
            "import os, signal\n"
            "db = EpisodeDatabase([\"UPDATE orders SET status='x'\"]).__enter__()\n"
            "assert db.check([])== []\n"
            "print('entered', flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", make], env=env, capture_output=True,
                            text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert killed.stdout.strip() == "entered"
    assert os.listdir(tmp_path) == []
