"""The end-of-run table summed as rows stream (bench.stats.running) gives the same figures as
the pandas frame path (summarize / bucket_table / pass_k_table) on real runs, and `bench run`
no longer imports pandas for it."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.providers.function import register_function
from bench.results import RowUsage
from bench.runner import RunConfig, Runner
from bench.stats.aggregate import pass_k_table
from bench.stats.buckets import bucket_table
from bench.stats.running import RunningSummary
from bench.stats.summary import summarize, summary_frame
from tests.report.test_episodes import CASE, scripted_agent

REPO = Path(__file__).resolve().parents[2]


def same(left: dict, right: dict) -> None:
    """Equal records: the same keys, numbers equal up to float rounding, NaN equal to NaN."""
    assert list(left) == list(right)
    for key, value in left.items():
        other = right[key]
        if isinstance(value, str) or isinstance(other, str):
            assert value == other, key
        elif value is None or other is None:
            assert value is other or (value is None and math.isnan(other)), key
        elif math.isnan(float(value)):
            assert math.isnan(float(other)), key
        else:
            assert float(value) == pytest.approx(float(other), rel=1e-9), key


def vary_usage(rows):
    """The oracle reports no usage or cost: give the rows varied, deterministic figures,
    one cost missing in one condition and reasoning tokens on some rows."""
    varied = []
    for i, row in enumerate(rows):
        usage = RowUsage(prompt_tokens=100 + 7 * i, completion_tokens=20,
                         cached_tokens=None if i % 5 == 0 else i % 3,
                         reasoning_tokens=None if i % 4 else i % 7)
        cost = None if (row.variant == "l30" and i % 11 == 0) else 0.001 * (i % 13)
        varied.append(row.model_copy(update={"usage": usage, "cost_usd": cost,
                                             "latency_s": 0.05 + (i * 37 % 17) / 10}))
    return varied


@pytest.fixture
def oracle_rows(project):
    """Rows of a real oracle run with the executor: two variants, two trials."""
    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3", "l30"], providers=["oracle"],
                              trials=2, limit=30), run_id="streamed", command=[])
    runner.run()
    return vary_usage(list(runner.store.load_rows()))


def check_same(rows, order):
    frame = summary_frame(rows)
    running = RunningSummary(order).add_all(rows)
    expected = summarize(frame, order).to_dict("records")
    got = running.summary()
    assert len(got) == len(expected) > 0
    for left, right in zip(got, expected):
        same(left, right)
    buckets = bucket_table(frame, order).to_dict("records")
    assert len(running.buckets()) == len(buckets)
    for left, right in zip(running.buckets(), buckets):
        same(left, right)
    assert running.trials == int(frame["trial"].max()) + 1
    return running, frame


def test_the_streamed_table_is_the_frame_table(oracle_rows):
    running, _ = check_same(oracle_rows, ["l30", "l3"])
    summary = running.summary()
    assert [r["variant"] for r in summary] == ["l30", "l3"]  # the display order
    assert math.isnan(summary[0]["cost_usd"]) and not math.isnan(summary[1]["cost_usd"])
    assert "mean_reasoning_tokens" in summary[0] and summary[0]["execution_success_n"] > 0


def test_a_row_seen_twice_counts_once(oracle_rows):
    once = RunningSummary().add_all(oracle_rows)
    twice = RunningSummary().add_all([*oracle_rows, *oracle_rows[:25]])
    assert len(twice) == len(once) == len(oracle_rows)
    for left, right in zip(twice.summary(), once.summary()):
        same(left, right)


def test_no_rows_give_no_records():
    running = RunningSummary(["l3"])
    assert len(running) == 0 and running.summary() == [] and running.buckets() == []
    assert running.pass_k([1]) == [] and not running.carries_pass_k_metric


@pytest.mark.slow  # an episode run of 4 conditions x 3 trials: several seconds
def test_pass_k_of_episodes_is_the_frame_pass_k(tmp_path, monkeypatch):
    (tmp_path / "datasets").mkdir()
    dataset = tmp_path / "cases.jsonl"
    dataset.write_text(json.dumps(CASE) + "\n", encoding="utf-8")
    shutil.copytree(REPO / "descriptions", tmp_path / "descriptions")
    monkeypatch.setenv("BENCH_HOME", str(tmp_path))
    register_function("streamed-agent", scripted_agent)
    runner = Runner(RunConfig(dataset=str(dataset), variants=["l3"], trials=3,
                              providers=["function:streamed-agent"],
                              factors={"error_style": ["actionable", "bare"],
                                       "fault": ["none", "503"]}),
                    run_id="streamed-episodes", command=[])
    runner.run()
    rows = list(runner.store.load_rows())
    running, frame = check_same(rows, [])
    assert running.carries_pass_k_metric
    expected = pass_k_table(frame, "task_success", ks=[1, 3]).to_dict("records")
    got = running.pass_k([1, 3])
    assert len(got) == len(expected) == 4
    for left, right in zip(got, expected):
        same(left, right)
    # the script fails only in the bare style with a fault: some condition is below 1
    assert {r["pass^3"] for r in got} != {1.0}


def test_a_run_s_own_rows_need_no_key_set(oracle_rows):
    keyed = RunningSummary(["l3", "l30"]).add_all(oracle_rows)
    unkeyed = RunningSummary(["l3", "l30"], unique_keys=True).add_all(oracle_rows)
    assert len(unkeyed) == len(keyed) and not unkeyed._seen
    for left, right in zip(unkeyed.summary(), keyed.summary()):
        same(left, right)


def table_of(stdout: str) -> str:
    """The per-variant table's lines (title to caption) of a command's output."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("run "))
    end = next(i for i, line in enumerate(lines) if line.startswith("rates with 95%"))
    return "\n".join(lines[start:end + 1])


@pytest.mark.slow  # three subprocesses: a few seconds of start-up
def test_the_run_sums_its_table_as_it_writes_without_pandas(project, run_bench):
    """`bench run` prints the table summed while its rows were written (no pandas in the
    process); `bench show` reads the same rows back from the file: the same table."""
    code = ("import sys, runpy; sys.argv = ['bench'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('bench', run_name='__main__')\n"
            "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
            "print('pandas imported:', 'pandas' in sys.modules)")
    args = ["run", "--provider", "oracle", "--dataset", "ecommerce", "--variants", "l3,l30",
            "--limit", "12", "--trials", "2", "--run-id", "summed"]
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                            text=True, cwd=project, env={**os.environ, "COLUMNS": "200",
                                                         "BENCH_HOME": str(project)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "pandas imported: False"
    shown = run_bench("show", "summed")
    assert shown.returncode == 0, shown.stderr
    assert table_of(result.stdout) == table_of(shown.stdout)
    assert "l30" in table_of(result.stdout)
