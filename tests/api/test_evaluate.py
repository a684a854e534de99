"""bench.evaluate: the in-process API gives the rows, table and statistics of `bench run`,
with the cache and resume, from an explicit project folder (no CLI, no cwd, no BENCH_HOME)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import bench
from bench.errors import BenchError
from bench.providers.function import register_function
from bench.providers.pipeline import Exchange, Layer, Outcome
from conftest import REPO



class Sent:
    """Counts the requests that reached the provider (below the cache)."""

    count = 0

    def __init__(self, provider_id: str, inner: Layer) -> None:
        self.inner = inner

    async def __call__(self, exchange: Exchange) -> Outcome:
        outcome = await self.inner(exchange)
        Sent.count += outcome.cache != "hit"
        return outcome


def test_evaluate_returns_the_rows_and_table_of_bench_run(elsewhere, run_bench, project):
    result = bench.evaluate("ecommerce", ["l3", "l10"], ["oracle"], project=elsewhere,
                            run_id="api", limit=6, split="all")
    assert isinstance(result, bench.Evaluation) and result.status == "complete"
    assert len(result.rows) == 12 and all(isinstance(r, bench.Row) for r in result.rows)
    assert (elsewhere / "reports" / "runs" / "api" / "results.jsonl").is_file()
    assert not any(Path.cwd().iterdir())  # nothing written in the cwd
    table = result.summary.set_index("variant")
    assert list(table.index) == ["l3", "l10"]
    assert (table["cases"] == 6).all()
    assert (table["selection_correct_rate"] == 1.0).all()  # the oracle answers the labels
    assert (table["selection_correct_low"] < 1.0).all()  # with its Wilson interval
    # the same run through the command line gives the same rows (timestamps aside)
    assert run_bench("run", "--provider", "oracle", "--variants", "l3,l10", "--limit", "6",
                     "--split", "all", "--run-id", "cli").returncode == 0
    cli_rows = [json.loads(line) for line in
                (project / "reports" / "runs" / "cli" / "results.jsonl").open()]

    def comparable(row: dict) -> dict:
        return {k: v for k, v in row.items() if k not in ("run_id", "finished_at", "latency_s")}
    assert sorted(map(comparable, cli_rows), key=lambda r: r["key"]) == \
        sorted((comparable(r.to_json_dict()) for r in result.rows), key=lambda r: r["key"])


def test_evaluate_resumes_and_reads_the_cache(elsewhere):
    Sent.count = 0
    first = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                           limit=4, cache="readwrite", layers=[Sent])
    assert Sent.count == 4 and first.manifest.cache.misses == 4
    # the same run again: resumed, nothing sent
    again = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                           limit=4, cache="readwrite", layers=[Sent])
    assert Sent.count == 4 and [r.key for r in again.rows] == [r.key for r in first.rows]
    # a new run of the same requests: every answer from the cache
    cached = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="two",
                            limit=4, cache="readwrite", layers=[Sent])
    assert Sent.count == 4 and {r.cache for r in cached.rows} == {"hit"}
    with pytest.raises(BenchError, match="'one' exists"):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                       limit=4, resume=False)
    with pytest.raises(BenchError, match="trials cannot change"):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                       limit=4, trials=2)


def test_evaluate_compares_two_variants_and_refuses_bad_settings(elsewhere):
    result = bench.evaluate("ecommerce", ["l3", "l50"], ["oracle"], project=elsewhere,
                            limit=5, execute=False)
    comparison = result.compare("l3", "l50")
    assert {m.metric for m in comparison.tests} >= {"selection_correct"}
    selection = next(m for m in comparison.tests if m.metric == "selection_correct")
    assert selection.n == 5 and selection.rate_a == selection.rate_b == 1.0
    assert selection.verdict == "no significant difference"
    with pytest.raises(BenchError, match="no variant 'l10'"):
        result.compare("l3", "l10")
    with pytest.raises(BenchError, match="^evaluate\\(\\): trials: "):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, trials=0)
    with pytest.raises(BenchError, match="unknown setting .no_such_setting."):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, no_such_setting=1)


def test_evaluate_names_a_skipped_provider_and_refuses_when_all_are_skipped(elsewhere,
                                                                            monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # one provider runs, the other has no key: rows of the first, a warning naming the second
    result = bench.evaluate("ecommerce", ["l3"], ["oracle", "openai:gpt-4o-mini"],
                            project=elsewhere, run_id="half", limit=2)
    assert result.status == "partial"
    assert {row.provider for row in result.rows} == {"oracle"}
    assert any("openai:gpt-4o-mini skipped: OPENAI_API_KEY is not set" in w
               for w in result.warnings)
    # nothing can run: one line naming the provider and why, as `bench run` says
    with pytest.raises(BenchError, match=r"every provider was skipped \(openai:gpt-4o-mini: "
                                         r"OPENAI_API_KEY is not set\)"):
        bench.evaluate("ecommerce", ["l3"], ["openai:gpt-4o-mini"], project=elsewhere,
                       run_id="none", limit=2)


def test_evaluate_errors_say_how_to_continue_in_python(elsewhere):
    from bench.providers import make_provider
    from bench.providers.base import Provider
    from bench.providers.errors import ProviderError

    class Revoked(Provider):
        """Every request fails permanently, as with a revoked key."""

        provider_id = "revoked"

        async def complete(self, messages, tools, *, variant_key, trial):
            raise ProviderError("invalid key", error_class="permanent", status=401)

        def describe(self):
            return {"provider": "revoked", "model": "none"}

    def factory(provider_id, config):
        return Revoked() if provider_id == "revoked" else make_provider(provider_id)

    with pytest.raises(BenchError) as caught:
        bench.evaluate("ecommerce", ["l3"], ["revoked"], project=elsewhere, run_id="stopped",
                       limit=2, provider_factory=factory)
    message = str(caught.value)
    assert "continue with: evaluate(..., run_id='stopped') again" in message
    assert "bench run --resume" not in message


@pytest.mark.slow
def test_evaluate_in_a_script_without_a_main_guard_says_the_script_needs_one(elsewhere,
                                                                             tmp_path):
    # a function provider's worker is spawned: it runs the script again, whose unguarded
    # evaluate() failed there with a traceback, and the run said "cannot import 'answers'"
    (tmp_path / "cwd" / "answers.py").write_text(
        "def answer(messages, tools, trial):\n"
        "    return [{'name': tools[0].name, 'arguments': {}}]\n", encoding="utf-8")
    script = tmp_path / "cwd" / "evaluate_me.py"
    script.write_text(
        "import sys\n\nimport bench\n\n"
        "try:\n"
        f"    bench.evaluate('ecommerce', ['l3'], ['function:answers:answer'], "
        f"project={str(elsewhere)!r}, limit=2, execute=False)\n"
        "except bench.BenchError as exc:\n"
        "    print(exc, file=sys.stderr)\n"
        "    sys.exit(1)\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path / "cwd", env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr  # the worker ends quietly
    [line] = result.stderr.strip().splitlines()
    assert f"the script {script} calls bench when it is imported" in line
    assert 'if __name__ == "__main__":' in line and "cannot import" not in line
    assert not (elsewhere / "reports" / "runs").exists() or \
        not any((elsewhere / "reports" / "runs").iterdir())


def test_evaluate_with_a_raising_progress_hook_keeps_the_run_resumable(elsewhere):
    # a hook that raised at the run's start left an empty run folder; one that raised on a
    # row lost the rows answered but not yet written, with the hook's own traceback
    def breaks_at_start(done, total, item):
        print(item.case.id)  # item is None at the start: AttributeError

    with pytest.raises(BenchError) as caught:
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="hooked",
                       limit=3, execute=False, progress=breaks_at_start)
    message = str(caught.value)
    assert message.startswith("the progress hook raised AttributeError: ")
    assert "continue with: evaluate(..., run_id='hooked') again" in message
    assert "\n" not in message
    manifest = json.loads((elsewhere / "reports" / "runs" / "hooked" / "manifest.json")
                          .read_text(encoding="utf-8"))
    assert manifest["status"] == "failed" and manifest["error"] == message

    calls = []

    def breaks_on_a_row(done, total, item):
        calls.append(done)
        if item is not None:
            raise ValueError("hook bug")

    Sent.count = 0
    with pytest.raises(BenchError, match="^the progress hook raised ValueError: hook bug; "
                                         "the run stopped with [1-3] of 3 rows written"):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="hooked",
                       limit=3, execute=False, progress=breaks_on_a_row, layers=[Sent])
    assert calls[-1] >= 1 and len(calls) == 2  # called no more once it raised
    kept = (elsewhere / "reports" / "runs" / "hooked" / "results.jsonl").read_text(
        encoding="utf-8").splitlines()
    assert len(kept) == Sent.count  # every answer asked for is written
    # resumed with a working hook: only the rest is asked
    done = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere,
                          run_id="hooked", limit=3, execute=False, layers=[Sent])
    assert done.status == "complete" and len(done.rows) == 3 and Sent.count == 3


# -- evaluate()'s arguments and settings, misused ----------------------------------------------


def _manifest(proj: Path, run_id: str) -> dict:
    return json.loads((proj / "reports" / "runs" / run_id / "manifest.json").read_text())


def _rows(proj: Path, run_id: str) -> int:
    path = proj / "reports" / "runs" / run_id / "results.jsonl"
    return sum(1 for line in path.open() if line.strip()) if path.exists() else 0


@pytest.mark.parametrize("variants, providers", [("l3", ["oracle"]), (["l3"], "oracle")])
def test_a_single_string_for_a_list_argument_is_named(proj, variants, providers):
    try:
        result = bench.evaluate("ecommerce", variants, providers, project=proj, limit=1)
    except BenchError as exc:
        assert "'l'" not in str(exc) and "'o'" not in str(exc), str(exc)
    else:
        assert result.status == "complete"


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_missing_project_folder_is_named(tmp_path, kind):
    where = tmp_path / "no-project"
    if kind == "file":
        where.write_text("x")
    with pytest.raises(BenchError, match="no-project"):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=where, limit=1)


@pytest.mark.parametrize("kwargs", [{"variants": None}, {"project": None}, {"run_id": 5}])
def test_arguments_of_the_wrong_type_are_bench_errors(proj, kwargs):
    args = {"dataset": "ecommerce", "variants": ["l3"], "providers": ["oracle"],
            "project": proj, "limit": 1, **kwargs}
    with pytest.raises(BenchError):
        bench.evaluate(**args)


@pytest.mark.parametrize("setting", [{"cache": "bogus"}, {"max_usd": -5}])
def test_a_bad_setting_given_to_a_resume_is_named_as_the_callers(proj, setting):
    bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="r", limit=2)
    with pytest.raises(BenchError) as caught:
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="r", limit=2,
                       **setting)
    assert "stored config is invalid" not in str(caught.value)
    assert "manifest.json" not in str(caught.value)


@pytest.mark.parametrize("kwargs", [{"alpha": 5.0}, {"alpha": -1.0},
                                    {"margin": float("nan")}, {"metrics": ["nope"]},
                                    {"metrics": "selection_correct"}])
def test_compare_refuses_bad_settings(proj, kwargs):
    result = bench.evaluate("ecommerce", ["l3", "l10"], ["oracle"], project=proj, limit=2)
    with pytest.raises(BenchError):
        result.compare("l3", "l10", **kwargs)


# -- stopping evaluate() in a notebook ---------------------------------------------------------

_interrupted = threading.Event()


def _slowly(messages, tools, trial):
    # slow once Ctrl-C is sent, so that the run cannot finish its 30 rows before the signal
    # reaches it, however busy the machine (a fixed 0.02 s raced with the signal)
    time.sleep(0.5 if _interrupted.is_set() else 0.02)
    return [{"name": tools[0].name, "arguments": {}}]


def test_ctrl_c_stops_evaluate_called_inside_an_event_loop(proj):
    register_function("evaluate-slow", _slowly)
    _interrupted.clear()

    def interrupt(done, total, item):
        if item is not None and done == 2:
            _interrupted.set()
            os.kill(os.getpid(), signal.SIGINT)

    async def notebook_cell():
        return bench.evaluate("ecommerce", ["l3"], ["function:evaluate-slow"], project=proj,
                              run_id="nb", limit=30, concurrency=1, progress=interrupt)

    loop = asyncio.new_event_loop()  # as a notebook's: no SIGINT handler of asyncio.run
    try:
        loop.run_until_complete(notebook_cell())
    except KeyboardInterrupt:
        pass
    finally:
        loop.close()
    manifest = _manifest(proj, "nb")
    assert manifest["status"] == "interrupted"
    assert _rows(proj, "nb") < 30


# -- an error out of evaluate() ----------------------------------------------------------------


def _raising(provider_id: str, inner: Layer) -> Layer:
    async def layer(exchange: Exchange) -> Outcome:
        raise ValueError("layer bug")
    return layer


def test_an_error_out_of_evaluate_is_not_chained_to_no_running_event_loop(proj):
    with pytest.raises(ValueError) as caught:
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, limit=1,
                       layers=[_raising])
    assert not isinstance(caught.value.__context__, RuntimeError)
