"""An episode row stays bounded whatever the label or the model sends: a state check's rows,
a call's arguments and an answer's text over 64 KB are stored once, as head and tail with
their full length, after scoring on the whole value; label SQL cannot build a giant value
(a break-it review: a 2,000,000-row check made a 31 MB row, a 50 MB argument a 150 MB row,
``SELECT randomblob(400000000)`` an 800 MB row and 3.1 GB of memory)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.episodes.state import LABEL_VALUE_BYTES, StateError, check_label_state
from bench.episodes.stored import STORED_CHARS
from bench.models import Case, StateCheck
from bench.providers.function import register_function
from bench.runner import RunConfig, Runner
from tests.episodes.test_episodes import PAID, episode

HALF = STORED_CHARS // 2


def _lines(project: Path, run_id: str) -> list[bytes]:
    """The run's results.jsonl lines, as written."""
    return (project / "reports" / "runs" / run_id / "results.jsonl").read_bytes().splitlines()


def _run(project: Path, run_id: str, case: dict, agent_name: str) -> dict:
    """Run ``case`` with the registered scripted agent; its one row."""
    path = project / f"{run_id}.jsonl"
    path.write_text(json.dumps(case) + "\n", encoding="utf-8")
    Runner(RunConfig(dataset=str(path), variants=["l3"], providers=[f"function:{agent_name}"]),
           run_id=run_id, command=["bench", "run"]).run()
    (line,) = _lines(project, run_id)
    return json.loads(line)


def _numbered(n: int) -> str:
    """The compact JSON text of the rows ``[1,"row"]`` ... ``[n,"row"]``."""
    return "[" + ",".join(f'[{i},"row"]' for i in range(1, n + 1)) + "]"


def _assert_cut(stored: str, whole: str) -> None:
    """``stored`` is ``whole``'s head and tail, saying it was cut."""
    assert stored.startswith(whole[:HALF]) and stored.endswith(whole[-HALF:])
    assert f"[... stored cut: {len(whole) - 2 * HALF:,} characters ...]" in stored


def _final(messages, tools, trial):
    return {"tool_calls": [], "text": "Done."}


@pytest.mark.slow
def test_a_state_check_returning_many_rows_is_compared_whole_and_stored_cut(project):
    many = ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {n}) "
            "SELECT x, 'row' FROM n")
    register_function("final", _final)
    case = episode(success={"state_checks": [
        {"sql": many.format(n=50_000), "expect": []},
        {"sql": many.format(n=6_000), "expect": [[i, "row"] for i in range(1, 6_001)]}]},
        required_calls=[])
    row = _run(project, "rows", case, "final")
    (line,) = _lines(project, "rows")
    # three texts of 64 KB (two results, one label's expected rows) and small fields; the
    # rows stored whole made a 780 KB line
    assert len(line) < 4 * STORED_CHARS
    wrong, right = row["episode"]["state_checks"]
    assert wrong["ok"] is False and right["ok"] is True  # compared on every row
    assert row["metrics"]["state_checks_passed"] == 0.5
    for check, n in ((wrong, 50_000), (right, 6_000)):
        whole = _numbered(n)
        assert check["got_rows"] == n and check["got_chars"] == len(whole)
        _assert_cut(check["got"], whole)
    assert right["expect_chars"] == len(_numbered(6_000))
    _assert_cut(right["expect"], _numbered(6_000))


def _giant(middle: str) -> str:
    return "A" * 500_000 + middle + "A" * 500_000


def _flood(messages, tools, trial):
    """Two calls whose giant arguments differ only in the middle, an undecodable giant call,
    then a giant final answer stating the fact in its middle."""
    step = sum(1 for m in messages if m.role == "assistant")
    if step < 2:
        return [{"name": "get_order_status", "arguments": {"order_id": _giant(str(step))}}]
    if step == 2:
        return [{"name": "get_order_status", "arguments": '{"order_id": "' + _giant("2")}]
    return {"tool_calls": [], "text": _giant(f" {PAID} is cancelled. ")}


@pytest.mark.slow
def test_giant_arguments_and_answers_are_scored_whole_and_stored_once_cut(project):
    register_function("flood", _flood)
    case = episode(success={"answer_facts": [["is cancelled"]]}, required_calls=[])
    row = _run(project, "flood", case, "flood")
    (line,) = _lines(project, "flood")
    # five values cut (two arguments, one raw text, the answer's text and the final
    # answer), each stored once: about 64 KB each; stored whole three times, 15 MB
    assert line.count(b"stored cut") == 5
    assert len(line) < 6 * STORED_CHARS
    metrics, steps = row["metrics"], row["episode"]["steps"]
    # scored on the whole values: the fact and the calls' difference lie in the cut middle
    assert metrics["task_success"] is True and metrics["repeated_calls"] == 0
    assert steps[0]["calls"][0]["arguments"] == steps[1]["calls"][0]["arguments"]
    for number in (0, 1):
        call = steps[number]["calls"][0]
        whole = '{"order_id":"' + _giant(str(number)) + '"}'
        assert call["valid"] and call["arguments_chars"] == len(whole)
        _assert_cut(call["arguments"], whole)
        assert steps[number]["stored_cut"] is True
        assert not {"arguments", "raw_arguments"} & set(steps[number]["parsed"]["calls"][0])
    undecodable = steps[2]["calls"][0]
    raw = '{"order_id": "' + _giant("2")
    assert not undecodable["valid"] and undecodable["raw_arguments_chars"] == len(raw)
    _assert_cut(undecodable["raw_arguments"], raw)
    assert "raw_arguments" not in steps[2]["parsed"]["calls"][0]
    answer = _giant(f" {PAID} is cancelled. ")
    assert steps[3]["text_chars"] == row["episode"]["final_answer_chars"] == len(answer)
    _assert_cut(steps[3]["text"], answer)
    _assert_cut(row["episode"]["final_answer"], answer)
    assert "text" not in steps[3]["parsed"]


@pytest.mark.slow
def test_a_step_stored_cut_is_a_replay_miss_not_its_cut_answer(project):
    from bench.descriptions import load_variant
    from bench.providers.replay import ReplayMiss, ReplayProvider

    def giant_answer(messages, tools, trial):
        return {"tool_calls": [], "text": _giant(" cancelled ")}

    register_function("giant-answer", giant_answer)
    case = episode(success={"answer_facts": [["cancelled"]]}, required_calls=[])
    row = _run(project, "giant", case, "giant-answer")
    assert row["episode"]["steps"][0]["stored_cut"] is True
    with pytest.raises(ReplayMiss):
        asyncio.run(ReplayProvider("replay:giant").complete(
            Case.model_validate(case).messages, load_variant("ecommerce", "l3").tools,
            variant_key="l3", trial=0))


@pytest.mark.slow
def test_label_sql_building_a_value_over_the_limit_stops_the_run_with_file_line_field(
        run_bench, project):
    big = f"hex(randomblob({LABEL_VALUE_BYTES // 2 + 1}))"  # just over the limit, as text
    path = project / "eps.jsonl"
    path.write_text(json.dumps(episode(id="ep-0")) + "\n" + json.dumps(episode(
        id="ep-1", state={"overrides": [f"UPDATE orders SET note = {big}"]})) + "\n",
        encoding="utf-8")
    done = run_bench("run", "--dataset", str(path), "--provider", "oracle", "--variants", "l3")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    (message,) = done.stderr.strip().splitlines()
    assert f"eps.jsonl:2: field 'state.overrides.0': override does not run: builds a value " \
           f"over {LABEL_VALUE_BYTES:,} bytes" in message


def test_a_state_check_building_a_value_over_the_limit_is_refused_at_load():
    check = StateCheck(sql=f"SELECT hex(randomblob({LABEL_VALUE_BYTES // 2 + 1}))", expect=[])
    with pytest.raises(StateError, match=f"over {LABEL_VALUE_BYTES:,} bytes") as at_load:
        check_label_state([], [check])
    assert at_load.value.field == "success.state_checks.0.sql"


@pytest.mark.slow
def test_a_state_check_over_the_limit_after_the_episodes_writes_records_the_error(project):
    from tests.episodes.test_episodes import agent

    # small while the order is paid (the load-time check passes), over the limit once the
    # agent has cancelled it
    sql = (f"SELECT hex(randomblob(CASE status WHEN 'cancelled' THEN "
           f"{LABEL_VALUE_BYTES // 2 + 1} ELSE 1 END)) FROM orders WHERE order_id = '{PAID}'")
    register_function("canceller", agent)
    row = _run(project, "late", episode(success={"state_checks": [
        {"sql": sql, "expect": [["00"]]}]}), "canceller")
    (line,) = _lines(project, "late")
    assert len(line) < STORED_CHARS  # the value stored cut was 64 KB, whole 1 MB
    (check,) = row["episode"]["state_checks"]
    assert check["ok"] is False and row["metrics"]["task_success"] is False
    assert f"builds a value over {LABEL_VALUE_BYTES:,} bytes" in check["got"]["error"]


@pytest.mark.slow
@pytest.mark.parametrize("table", ["TABLE big", "TEMP TABLE big"])
def test_label_sql_growing_the_database_past_the_limit_is_refused_at_load(table):
    # the time budget alone let a recursive CTE insert 3,000,000 rows (749 MB held)
    from bench.episodes.state import LABEL_GROWTH_BYTES
    rows = LABEL_GROWTH_BYTES // 500_000 + 10  # blobs of 500 KB, a little over the limit
    grow = [f"CREATE {table}(b BLOB)",
            f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {rows}) "
            "INSERT INTO big SELECT randomblob(500000) FROM c"]
    with pytest.raises(StateError) as at_load:
        check_label_state(grow, [])
    assert at_load.value.field == "state.overrides.1"
    assert f"grows the database by more than {LABEL_GROWTH_BYTES // 2**20} MB" in str(
        at_load.value)
    # the limit is the label's: the same copy takes the next label's writes as before
    check_label_state([grow[0], grow[1].replace(f"LIMIT {rows}", "LIMIT 10")], [])


def test_an_episodes_copy_never_grows_past_the_label_limit(tmp_path):
    import shutil

    from bench.episodes.state import LABEL_GROWTH_BYTES, apply_overrides
    from bench.executor.backends.shopcache import shop_db_path
    copy = tmp_path / "episode.sqlite"
    shutil.copyfile(shop_db_path(), copy)
    seeded = copy.stat().st_size
    rows = LABEL_GROWTH_BYTES // 500_000 + 10  # blobs of 500 KB, a little over the limit
    with pytest.raises(StateError, match="grows the database by more than"):
        apply_overrides(copy, [
            "CREATE TABLE big(b BLOB)",
            f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {rows}) "
            "INSERT INTO big SELECT randomblob(500000) FROM c"])
    assert copy.stat().st_size <= seeded + LABEL_GROWTH_BYTES
