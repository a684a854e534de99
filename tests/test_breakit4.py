"""Defects found by hostile use of bench.evaluate, the request pipeline's user layers, resumes
of hand-edited manifests and budgets. Each test states what should happen."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import bench
from bench.errors import BenchError
from bench.providers.function import register_function
from bench.providers.pipeline import Exchange, Layer, Outcome
from tests.fakeserver import FakeServer, Reply, chat_body



@pytest.fixture
def proj(elsewhere):
    """A project folder; the cwd and BENCH_HOME are elsewhere (conftest's ``elsewhere``)."""
    return elsewhere


def _manifest(proj: Path, run_id: str) -> dict:
    return json.loads((proj / "reports" / "runs" / run_id / "manifest.json").read_text())


def _rows(proj: Path, run_id: str) -> int:
    path = proj / "reports" / "runs" / run_id / "results.jsonl"
    return sum(1 for line in path.open() if line.strip()) if path.exists() else 0


# -- a user layer --------------------------------------------------------------------------


def _cancelling(provider_id: str, inner: Layer) -> Layer:
    async def layer(exchange: Exchange) -> Outcome:
        raise asyncio.CancelledError()  # e.g. a layer whose own task or timeout misfires
    return layer


def test_a_layer_cancelling_its_request_does_not_make_a_complete_run(proj):
    try:
        result = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="c",
                                limit=3, layers=[_cancelling])
    except BenchError:
        result = None
    manifest = _manifest(proj, "c")
    assert manifest["status"] != "complete" or manifest["rows_done"] == 3
    assert result is None or len(result.rows) == 3


def _returns_none(provider_id: str, inner: Layer) -> Layer:
    async def layer(exchange: Exchange) -> Outcome:
        await inner(exchange)
        return None  # type: ignore[return-value]  # forgot the return value
    return layer


def test_a_layer_returning_none_is_a_one_line_error_naming_the_layer(proj):
    with pytest.raises(BenchError, match="_returns_none|layer"):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="n", limit=2,
                       layers=[_returns_none])


def _bogus_outcome(provider_id: str, inner: Layer) -> Layer:
    async def layer(exchange: Exchange) -> Outcome:
        outcome = await inner(exchange)
        return Outcome(outcome.response, -3, "bogus")  # type: ignore[arg-type]
    return layer


def test_a_layer_outcome_out_of_contract_is_not_written_into_rows(proj):
    try:
        result = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="o",
                                limit=1, layers=[_bogus_outcome])
    except BenchError:
        return
    row = result.rows[0]
    assert row.attempts is None or row.attempts >= 0
    assert row.cache in (None, "hit", "miss")


# -- evaluate()'s arguments ----------------------------------------------------------------


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


# -- Evaluation.compare --------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{"alpha": 5.0}, {"alpha": -1.0},
                                    {"margin": float("nan")}, {"metrics": ["nope"]},
                                    {"metrics": "selection_correct"}])
def test_compare_refuses_bad_settings(proj, kwargs):
    result = bench.evaluate("ecommerce", ["l3", "l10"], ["oracle"], project=proj, limit=2)
    with pytest.raises(BenchError):
        result.compare("l3", "l10", **kwargs)


# -- hand-edited manifests -----------------------------------------------------------------


@pytest.mark.parametrize("hits", ["lots", None])
def test_resume_of_a_manifest_with_bad_cache_counters_never_leaves_it_running(proj, hits):
    bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="h", limit=3,
                   cache="readwrite")
    run = proj / "reports" / "runs" / "h"
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["cache"]["hits"] = hits
    (run / "manifest.json").write_text(json.dumps(manifest))
    lines = (run / "results.jsonl").read_text().splitlines(keepends=True)
    (run / "results.jsonl").write_text("".join(lines[:-1]))  # one row left to do
    try:
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="h", limit=3,
                       cache="readwrite")
    except BenchError:
        pass
    assert _manifest(proj, "h")["status"] != "running"


def test_resume_of_a_manifest_naming_another_run_is_refused_or_read(proj):
    bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="x", limit=3)
    run = proj / "reports" / "runs" / "x"
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["run_id"] = "other"
    (run / "manifest.json").write_text(json.dumps(manifest))
    try:
        result = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="x",
                                limit=3)
    except BenchError:
        return
    assert len(result.rows) == 3, result.warnings


# -- stopping evaluate() in a notebook -----------------------------------------------------


_interrupted = threading.Event()


def _slowly(messages, tools, trial):
    # slow once Ctrl-C is sent, so that the run cannot finish its 30 rows before the signal
    # reaches it, however busy the machine (a fixed 0.02 s raced with the signal)
    time.sleep(0.5 if _interrupted.is_set() else 0.02)
    return [{"name": tools[0].name, "arguments": {}}]


def test_ctrl_c_stops_evaluate_called_inside_an_event_loop(proj):
    register_function("breakit4-slow", _slowly)
    _interrupted.clear()

    def interrupt(done, total, item):
        if item is not None and done == 2:
            _interrupted.set()
            os.kill(os.getpid(), signal.SIGINT)

    async def notebook_cell():
        return bench.evaluate("ecommerce", ["l3"], ["function:breakit4-slow"], project=proj,
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


# -- budgets -------------------------------------------------------------------------------


def test_max_usd_is_passed_by_at_most_one_request_at_concurrency_1(proj, tmp_path):
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("models:\n  openai-compat:\n    m: {input: 10.0, output: 50.0}\n")

    def answer(request):  # 100 prompt + 20 completion tokens: 0.002 USD each
        return Reply(body=chat_body(text="ok"))

    with FakeServer(handler=answer) as server:
        result = bench.evaluate("ecommerce", ["l3"], [f"openai-compat:m@{server.url}/v1"],
                                project=proj, run_id="b", limit=10, concurrency=1,
                                max_usd=0.005, pricing=str(pricing))
    assert result.status == "budget_exhausted"
    # Ledger.decision: with nothing in flight one more request goes while the limit is not
    # reached, so the run stops after the first request at or over it (3 x 0.002 USD)
    assert result.manifest.spent.billed_usd <= 0.005 + 0.002
    assert len(result.rows) == 3


def _raising(provider_id: str, inner: Layer) -> Layer:
    async def layer(exchange: Exchange) -> Outcome:
        raise ValueError("layer bug")
    return layer


def test_an_error_out_of_evaluate_is_not_chained_to_no_running_event_loop(proj):
    with pytest.raises(ValueError) as caught:
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, limit=1,
                       layers=[_raising])
    assert not isinstance(caught.value.__context__, RuntimeError)
