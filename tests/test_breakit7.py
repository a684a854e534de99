"""Defects found by running the lazy plan, its resume, shards and the shop database the way
users do (Ctrl-C, skipped providers, many requests in flight, a damaged cache file)."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.executor.backends.shopcache import shop_db_path
from bench.executor.backends.shopdb import GENERATOR_VERSION, N_CUSTOMERS
from bench.progress import RunProgress
from bench.runner import PlanItem

# -- a damaged cached shop database -----------------------------------------------------


def _damage(path: Path, how: str) -> None:
    whole = path.read_bytes()
    damaged = {"empty": b"", "garbage": b"garbage\n", "cut": whole[:1_000_000],
               "cut at a page": whole[:4096 * 100],
               "overwritten head": b"\0" * 100 + whole[100:]}[how]
    path.write_bytes(damaged)


@pytest.mark.parametrize("how", ["empty", "garbage", "cut", "cut at a page",
                                 "overwritten head"])
def test_a_damaged_cached_shop_database_is_built_again(tmp_path, how):
    path = shop_db_path(seed=11, folder=tmp_path)
    good = path.read_bytes()
    _damage(path, how)
    assert shop_db_path(seed=11, folder=tmp_path) == path
    assert path.read_bytes() == good  # generated again, deterministically
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == N_CUSTOMERS
    assert not list(tmp_path.glob(".shop-*"))


@pytest.mark.slow  # two `bench run` subprocesses
def test_runs_on_a_damaged_cached_shop_database_score_as_on_a_whole_one(
        run_bench, project, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("BENCH_CACHE_DIR", str(cache))
    path = shop_db_path(folder=cache / "executor")
    assert path.name == f"shop-g{GENERATOR_VERSION}-s20261129.sqlite"
    # episodes: the load-time check read it (a traceback: "file is not a database")
    path.write_bytes(b"garbage\n")
    done = run_bench("run", "--dataset", "ecommerce-episodes", "--provider", "oracle",
                     "--variants", "l3", "--limit", "2", "--run-id", "ep")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # single answers: every execution failed on a shop without tables, silently
    path.write_bytes(b"")
    done = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "6",
                     "--run-id", "single")
    assert done.returncode == 0, done.stderr
    results = project / "reports" / "runs" / "single" / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    ran = [r["metrics"]["execution_success"] for r in rows
           if r["metrics"]["execution_success"] is not None]
    assert ran and all(ran)  # the oracle's calls run


# -- the time left ----------------------------------------------------------------------


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


def test_the_last_row_sent_prints_its_progress_line_when_a_provider_was_skipped(project):
    """8 rows planned, 4 of them a skipped provider's: the 4th row is this session's last and
    prints its line (the plain log ended at the line before)."""
    cases = list(load_dataset("ecommerce").cases)
    l3 = load_variant("ecommerce", "l3")
    sent = [PlanItem(cases[i], l3, "p", 0) for i in range(4)]
    out = io.StringIO()
    times = iter([0.0, 1.0, 2.0, 3.0, 4.0])
    progress = RunProgress(Console(file=out, width=300), clock=lambda: next(times),
                           interval_s=3600)
    progress.set_plan(sent)
    progress(0, 8, None)
    for done, item in enumerate(sent, start=1):
        progress(done, 8, item)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("progress: 1/8 rows")
    assert lines[-1].startswith("progress: 4/8 rows (50.0%)") and "ETA 0s" in lines[-1]
    assert len(lines) == 2


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


# -- bench compare's run-now mode, stopped --------------------------------------------------

STOPPER = '''import itertools
_calls = itertools.count(1)

def answer(messages, tools, trial):
    if next(_calls) == 6:  # as if Ctrl-C were pressed during the sixth request
        raise KeyboardInterrupt
    return []
'''


@pytest.mark.slow  # three `bench` subprocesses, each starting a function worker
def test_a_stopped_compare_says_how_to_finish_its_run_and_compare_it(run_bench, project):
    (project / "stopper.py").write_text(STOPPER, encoding="utf-8")
    stopped = run_bench("compare", "l3", "l10", "--provider", "function:stopper:answer",
                        "--limit", "5", "--run-id", "cmp")
    assert stopped.returncode == 130, stopped.stderr
    assert "Traceback" not in stopped.stderr
    said = " ".join(stopped.stderr.split())
    assert "of 10 rows kept in" in said
    assert "finish with: bench run --resume cmp, then: bench compare l3 l10 --run cmp" in said
    # what it says works: the same 10 rows, each once
    finished = run_bench("run", "--resume", "cmp")
    assert finished.returncode == 0, finished.stderr
    compared = run_bench("compare", "l3", "l10", "--run", "cmp")
    assert compared.returncode == 0, compared.stderr
    keys = [json.loads(line)["key"] for line in
            (project / "reports" / "runs" / "cmp" / "results.jsonl").read_text(
                encoding="utf-8").splitlines()]
    assert len(keys) == len(set(keys)) == 10


def test_a_compare_run_now_with_a_skipped_provider_is_not_a_pass(project, run_bench,
                                                                 monkeypatch):
    """One provider has no key: the other's rows are compared, the skip is said, and the exit
    code is 3 (incomplete), not 0; with no provider left, one line says so."""
    from bench.cli import app

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["compare", "l3", "l10", "--provider", "oracle",
                                      "--provider", "openai:gpt-4o-mini", "--limit", "3",
                                      "--run-id", "cmp"])
    said = " ".join(result.output.split())
    assert result.exit_code == 3, result.output
    assert "provider openai:gpt-4o-mini skipped: OPENAI_API_KEY is not set" in said
    assert ("partial: openai:gpt-4o-mini not compared (skipped); fix that, then: bench run "
            "--resume cmp, then: bench compare l3 l10 --run cmp") in said
    rows = (project / "reports" / "runs" / "cmp" / "results.jsonl").read_text(
        encoding="utf-8").splitlines()
    assert {json.loads(line)["provider"] for line in rows} == {"oracle"} and len(rows) == 6
    alone = run_bench("compare", "l3", "l10", "--provider", "openai:gpt-4o-mini", "--limit",
                      "3", "--run-id", "cmp2")
    assert alone.returncode == 2
    assert "error: every provider was skipped; nothing to run" in alone.stderr
    assert "has no variant" not in alone.stderr
