"""``compare_rows`` and ``bench compare``: pairing, verdicts, flips, exit codes, JSON."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from bench.compare import compare_rows
from bench.results import Manifest, Row
from bench.store import RunStore
from conftest import requires_local_model
from tests.toolspace.test_toolspace import one_line_error


def row(case, variant, ok, provider="local", trial=0, metrics=None, query=None):
    return {"key": f"{case}|{variant}|{provider}|{trial}", "run_id": "r", "case_id": case,
            "toolset": "ecommerce", "variant": variant, "provider": provider, "trial": trial,
            "lang": "en", "tags": [], "query": query or f"question {case}",
            "expected": {"calls": [{"name": "get_weather", "arguments": {"city": ["Paris"]}}]},
            "parsed": {"calls": [{"name": "get_weather",
                                  "arguments": {"city": "Paris" if ok else "Lyon"}}],
                       "error": None},
            "metrics": {"selection_correct": True, "arguments_correct": ok, **(metrics or {})},
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "cached_tokens": 0},
            "latency_s": 0.1}


def pair(n_cases, a_right, b_right, variant_a="l10", variant_b="l30", **kwargs):
    """Rows of two variants: A right on the first ``a_right`` cases, B on ``b_right``."""
    rows_a = [row(f"c{i:03d}", variant_a, i < a_right, **kwargs) for i in range(n_cases)]
    rows_b = [row(f"c{i:03d}", variant_b, i < b_right, **kwargs) for i in range(n_cases)]
    return rows_a, rows_b


def test_clear_regression_is_flagged_with_its_flipped_cases():
    rows_a, rows_b = pair(60, 50, 30)
    result = compare_rows(rows_a, rows_b, label_a="l10", label_b="l30", n_boot=500)
    test = next(t for t in result.tests if t.metric == "arguments_correct")
    assert (test.a_only, test.b_only, test.n) == (20, 0, 60)
    assert test.diff == pytest.approx(-20 / 60) and test.diff_high < 0
    assert test.verdict == "regression" and result.exit_code == 1
    lost = [f for f in result.flips if f.metric == "arguments_correct"]
    assert len(lost) == 20 and all(f.direction == "lost" for f in lost)
    assert lost[0].query == "question c030" and "Lyon" in lost[0].answer_b
    assert "Paris" in lost[0].answer_a and 'city="Paris"' in lost[0].expected
    same = next(t for t in result.tests if t.metric == "selection_correct")
    assert same.verdict == "no significant difference" and same.p_value == 1.0
    json.loads(result.model_dump_json())  # JSON-serialisable


def test_margin_and_holm_change_the_verdict():
    rows_a, rows_b = pair(60, 50, 30)
    assert compare_rows(rows_a, rows_b, margin=0.4, n_boot=200).exit_code == 0
    rows_a, rows_b = pair(200, 110, 100)  # 10 discordant pairs, all one way: p ~ 0.002
    result = compare_rows(rows_a, rows_b, n_boot=200)
    test = next(t for t in result.tests if t.metric == "arguments_correct")
    assert test.p_holm == pytest.approx(min(1, 2 * test.p_value))  # two tests in the family


def test_pairs_only_shared_cases_and_execution_metrics_join_when_present():
    rows_a, rows_b = pair(30, 20, 20, metrics={"exec_success": True})
    rows_b = rows_b[:25]
    result = compare_rows(rows_a, rows_b, n_boot=200)
    assert result.unpaired_a == 5 and result.unpaired_b == 0
    assert {t.metric for t in result.tests} == {"selection_correct", "arguments_correct",
                                                "execution_success"}
    assert all(t.n == 25 for t in result.tests)
    plain_a, plain_b = pair(30, 20, 20)
    assert "execution_success" not in {t.metric for t in compare_rows(plain_a, plain_b,
                                                                      n_boot=200).tests}


def test_no_shared_case_or_unknown_metric_is_an_error():
    rows_a, _ = pair(5, 5, 5)
    other = [row(f"x{i}", "l30", True) for i in range(5)]
    with pytest.raises(ValueError, match="share no"):
        compare_rows(rows_a, other)
    with pytest.raises(ValueError, match="unknown metric"):
        compare_rows(rows_a, rows_a, metrics=["speed"])


def test_providers_are_tested_separately_and_corrected_together():
    a1, b1 = pair(40, 30, 30, provider="local")
    a2, b2 = pair(40, 30, 10, provider="openai:x")
    result = compare_rows(a1 + a2, b1 + b2, metrics=["arguments_correct"], n_boot=200)
    by_group = {t.group: t for t in result.tests}
    assert set(by_group) == {"local", "openai:x"}
    assert by_group["openai:x"].verdict == "regression"
    assert by_group["local"].verdict == "no significant difference"


# --- the command line ------------------------------------------------------------------------

def write_run(home, run_id, rows, variants):
    store = RunStore(home / "reports" / "runs", run_id)
    store.write_manifest(Manifest.model_validate(
        {"run_id": run_id, "status": "complete", "config": {"variants": variants},
         "dataset": {}, "variants": [], "rows_planned": len(rows)}))
    for item in rows:
        store.append(Row.model_validate({**item, "run_id": run_id}))


def bench(home, *args):
    env = {**os.environ, "BENCH_HOME": str(home), "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "bench", "compare", *args], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def home(tmp_path):
    rows_a, rows_b = pair(60, 50, 30, query="天气 <b>Paris</b>")
    write_run(tmp_path, "both", rows_a + rows_b, ["l10", "l30"])
    write_run(tmp_path, "base", rows_a, ["l10"])
    write_run(tmp_path, "cand", [{**r, "variant": "l10", "key": r["key"].replace("l30", "l10")}
                                 for r in rows_b], ["l10"])
    return tmp_path


@pytest.mark.slow
def test_cli_variants_of_a_run(home):
    result = bench(home, "l10", "l30", "--run", "both", "--show", "2")
    assert result.returncode == 1, result.stderr
    assert "regression" in result.stdout and "arguments_correct" in result.stdout
    assert "20 right in l10, wrong in l30 (first 2)" in result.stdout
    assert "天气 <b>Paris</b>" in result.stdout  # shown as text, not styled
    better = bench(home, "l30", "l10", "--run", "both")
    assert better.returncode == 0 and "improvement" in better.stdout


@pytest.mark.slow
def test_cli_two_runs_and_json(home):
    result = bench(home, "base", "cand", "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["label_a"] == "base" and data["label_b"] == "cand"
    tests = {t["metric"]: t for t in data["tests"]}
    assert tests["arguments_correct"]["group"] == "local/l10"
    assert tests["arguments_correct"]["verdict"] == "regression"
    assert len(data["flips"]) == 20
    assert bench(home, "base", "cand", "--margin", "0.5").returncode == 0


@pytest.mark.slow
def test_cli_says_why_no_difference_is_detectable_with_few_pairs(tmp_path):
    rows_a, rows_b = pair(5, 3, 2)
    write_run(tmp_path, "few", rows_a + rows_b, ["l10", "l30"])
    result = bench(tmp_path, "l10", "l30", "--run", "few")
    assert result.returncode in (0, 1), result.stderr
    assert "none (too few pairs)" in result.stdout  # was a bare "-"
    rows_a, rows_b = pair(400, 300, 300)
    write_run(tmp_path, "many", rows_a + rows_b, ["l10", "l30"])
    assert "too few pairs" not in bench(tmp_path, "l10", "l30", "--run", "many").stdout


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["l10", "l99", "--run", "both"], "no variant 'l99'"),
    (["l10", "l30", "--run", "missing"], "no run 'missing'"),
    (["l10", "l30", "--run", "both", "--metrics", "speed"], "unknown metric"),
    (["l10", "l30", "--run", "../etc"], "invalid run id"),
    (["base", "nope"], "'base' is a run but 'nope' is not"),
    (["nope", "cand"], "'cand' is a run but 'nope' is not"),
    (["l10", "l10", "--run", "both"], "A and B are both 'l10'"),
    (["base", "base"], "A and B are both 'base'"),
])
def test_cli_bad_input_exits_2_with_one_line(home, args, message):
    result = bench(home, *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@requires_local_model
def test_cli_runs_two_variants_now_on_the_embedded_model(run_bench, project):
    result = run_bench("compare", "l3", "l30", "--limit", "2", "--run-id", "cmp-now", "--json")
    assert result.returncode in (0, 1), result.stderr
    data = json.loads(result.stdout)
    assert {t["metric"] for t in data["tests"]} >= {"selection_correct"}
    assert all(t["n"] == 2 and t["group"] == "local" for t in data["tests"]
               if t["metric"] == "selection_correct")
    rows = (project / "reports" / "runs" / "cmp-now" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 4  # the run is kept, so it can be compared again with --run
    again = run_bench("compare", "l3", "l30", "--run", "cmp-now", "--json")
    assert json.loads(again.stdout)["tests"] == data["tests"]


def test_flipped_answers_print_model_control_characters_escaped():
    # An answer is model output: an ESC/OSC sequence in an argument reached the terminal raw
    # (OSC 52 writes the clipboard, ESC [2J clears the screen).
    import io

    from rich.console import Console

    from bench.cli.compare_table import print_flips
    from bench.compare.core import Comparison, Flip

    flip = Flip(direction="lost", group="all", metric="selection_correct", case_id="c1",
                trial=0, query="q", expected="search_orders(keyword='x')",
                answer_a="search_orders(keyword='x')",
                answer_b="search_orders(keyword='\x1b]52;c;ZXZpbA==\x07[/]\x1b[2J')")
    comparison = Comparison(label_a="A", label_b="B", alpha=0.05, margin=0.0,
                            confidence=0.95, power=0.8, n_boot=10, seed=0, flips=[flip])
    buffer = io.StringIO()
    print_flips(Console(file=buffer, width=200), comparison, ["selection_correct"], 5)
    text = buffer.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "B: search_orders(keyword='\\x1b]52;c;ZXZpbA==\\x07[/]\\x1b[2J')" in text


@pytest.mark.parametrize("json_output", [False, True])
def test_a_closed_pipe_is_not_exit_1_the_regression_code(home, json_output):
    """``bench compare ... | head``: the reader went away; the exit code must not read as a
    regression (1) or bad input (2), and nothing is said on stderr."""
    read, write = os.pipe()
    os.close(read)  # no reader at all: the first write fails with EPIPE
    env = {**os.environ, "BENCH_HOME": str(home), "COLUMNS": "250"}
    try:
        result = subprocess.run([sys.executable, "-m", "bench", "compare", "l10", "l30", "--run",
                                 "both", *(["--json"] if json_output else [])], env=env,
                                stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


def test_two_runs_with_some_variants_in_common_are_paired_on_those(run_bench):
    for run_id, variants in (("both", "l3,l10"), ("one", "l3")):
        assert run_bench("run", "--provider", "oracle", "--variants", variants, "--limit",
                         "6", "--no-execute", "--run-id", run_id).returncode == 0
    result = run_bench("compare", "both", "one")
    assert result.returncode == 0, result.stderr
    assert "comparing the variants both runs have: l3 (left out: l10)" in result.stderr
    replayed = run_bench("run", "--provider", "replay:one", "--variants", "l3", "--limit",
                         "6", "--no-execute", "--run-id", "again")
    assert replayed.returncode == 0, replayed.stderr
    unpaired = run_bench("compare", "one", "again")
    assert unpaired.returncode == 2
    assert "provider: oracle in one, replay:one in again" in unpaired.stderr


@pytest.mark.slow
def test_compare_of_a_partial_run_names_it_and_is_not_a_pass(run_bench, project, monkeypatch):
    """A stored run with rows missing (here a provider without its key was skipped) compared
    with --run exited 0 as if complete: it says the run is partial and exits 3, as bench run
    does for an incomplete run; a regression among the pairs done still exits 1."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    made = run_bench("run", "--provider", "oracle,openai:gpt-4o-mini", "--variants", "l3,l10",
                     "--limit", "3", "--no-execute", "--run-id", "half")
    assert made.returncode == 3, made.stderr  # partial: the openai rows are missing
    result = run_bench("compare", "l3", "l10", "--run", "half")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "no significant regression" in result.stdout
    assert "run 'half' is partial: 6 of 12 rows done (bench run --resume half); the " \
        "comparison covers the pairs done only (not a pass)" in " ".join(result.stderr.split())
    as_json = run_bench("compare", "l3", "l10", "--run", "half", "--json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["tests"]

    rows_a, rows_b = pair(60, 50, 30)
    store_home = project
    write_run(store_home, "cut", rows_a + rows_b, ["l10", "l30"])
    manifest = store_home / "reports" / "runs" / "cut" / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    manifest.write_text(json.dumps({**data, "status": "interrupted", "rows_planned": 200}),
                        encoding="utf-8")
    regressed = run_bench("compare", "l10", "l30", "--run", "cut")
    assert regressed.returncode == 1  # the regression decides
    assert "run 'cut' is interrupted: 120 of 200 rows done" in " ".join(regressed.stderr.split())


KILL_ON_VARIANT = '''
import os
import signal
import time
from pathlib import Path

KILL_ON = {description!r}  # a description of the variant whose first request kills the run


def answer(messages, tools, trial):
    if any(tool.description == KILL_ON for tool in tools):
        results = Path("reports/runs/k1/results.jsonl")  # the other variant's rows first
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                not results.exists() or len(results.read_text().splitlines()) < {rows}):
            time.sleep(0.05)
        os.kill(os.getppid(), signal.SIGKILL)  # the run (functions run in a child)
    return []
'''


@pytest.mark.slow
def test_compare_of_a_killed_run_without_rows_of_a_variant_says_resume_it(run_bench, project):
    """bench run killed (SIGKILL) at its first l10 request, after the l3 rows: compare l3
    l10 --run said "run 'k1' has no variant 'l10'" (exit 2, bad input), though l10 is
    planned and bench run --resume makes its rows: it says the run is incomplete and how to
    resume it, exit 3; a variant the run never planned stays bad input."""
    from bench.descriptions import load_variant

    l10 = load_variant("ecommerce", "l10", project / "descriptions").tools[0].description
    (project / "killer.py").write_text(KILL_ON_VARIANT.format(description=l10, rows=2),
                                       encoding="utf-8")
    killed = run_bench("run", "--dataset", "ecommerce", "--variants", "l3,l10", "--limit", "2",
                       "--provider", "function:killer:answer", "--no-execute", "--run-id",
                       "k1")
    assert killed.returncode == -9, killed.stderr
    result = run_bench("compare", "l3", "l10", "--run", "k1")
    assert result.returncode == 3, result.stdout + result.stderr
    assert " ".join(result.stderr.split()) == (
        "incomplete: run 'k1' is crashed: 2 of 4 rows done, none of variant 'l10' yet; "
        "resume with bench run --resume k1, then compare again")
    unplanned = run_bench("compare", "l3", "l30", "--run", "k1")
    assert unplanned.returncode == 2
    assert "run 'k1' has no variant 'l30' (it has l3)" in unplanned.stderr


# -- bench compare's run-now mode: stopped, with a skipped provider, on conditions -------------

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


@pytest.mark.slow
def test_compare_running_now_on_conditions_says_to_give_a_run(run_bench):
    """``bench compare 'l3~tools=40' 'l50~tools=40'`` (no --run) said ``invalid variant name
    'l3~tools=40'``: the names are right, the command lacks --run."""
    one_line_error(run_bench("compare", "l3~tools=40", "l50~tools=40", "--provider", "oracle",
                             "--limit", "1"),
                   "'l3~tools=40' is a condition of a stored run", "give --run RUN")
