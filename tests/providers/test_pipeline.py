"""The request pipeline (bench.providers.pipeline): stacks chosen from the registry's declared
capabilities, and user layers added without touching the runner, against the loopback fake
server through the real openai SDK and against in-process providers."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter

import pytest

import bench
from bench.errors import BenchError
from bench.providers import make_provider
from bench.providers.base import Provider, ProviderResponse
from bench.providers.cache import ResponseCache
from bench.providers.errors import ProviderError
from bench.providers.pipeline import Exchange, Layer, ModelRequest, Outcome, build_pipeline
from bench.runner import RunConfig, Runner
from tests.api.test_evaluate import _manifest
from tests.fakeserver import FakeServer, Reply, chat_body, error_body
from tests.stored import row_dicts


@pytest.fixture(autouse=True)
def compat_key(monkeypatch):
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "sk-pipeline-test-key")


class Counting:
    """A user layer: counts the requests of each provider and what each carried."""

    seen: Counter[str] = Counter()
    requests: list[ModelRequest] = []

    def __init__(self, provider_id: str, inner: Layer) -> None:
        self.provider_id, self.inner = provider_id, inner

    async def __call__(self, exchange: Exchange) -> Outcome:
        Counting.seen[self.provider_id] += 1
        Counting.requests.append(exchange.request)
        return await self.inner(exchange)


@pytest.fixture(autouse=True)
def fresh_counts():
    Counting.seen, Counting.requests = Counter(), []


def test_stacks_follow_the_registry_capabilities(tmp_path):
    http = make_provider("openai-compat:m@http://127.0.0.1:9/v1")
    cache = ResponseCache(tmp_path / "c.sqlite")
    try:
        assert build_pipeline("openai-compat:m@http://127.0.0.1:9/v1", http, concurrency=2,
                              attempts=3, cache=cache).layers == \
            ["InvalidAsAnswer", "Cached", "Retrying", "Send"]
        # without the cache, and with a user layer above the cache
        assert build_pipeline("openai-compat:m@x", http, concurrency=2, attempts=3,
                              extra=[Counting]).layers == \
            ["InvalidAsAnswer", "Counting", "Retrying", "Send"]
        # a recorded kind (replay) is never cached again, whatever the run's cache says
        replayed = build_pipeline("replay:some-run", http, concurrency=1, attempts=1,
                                  cache=cache)
        assert replayed.layers == ["InvalidAsAnswer", "Retrying", "Send"]
    finally:
        cache.close()


def test_a_user_layer_sees_provider_requests_of_every_item_without_runner_changes(project):
    with FakeServer(handler=lambda r: Reply(body=chat_body(calls=[("get_weather",
                                                                    {"city": "x"})]))) as srv:
        pid = f"openai-compat:m@{srv.url}/v1"
        runner = Runner(RunConfig(dataset="ecommerce", variants=["l3", "l10"],
                                  providers=[pid, "oracle"], limit=3, execute=False),
                        run_id="layered", command=[], layers=[Counting])
        runner.run()
    rows = row_dicts(runner.store)
    assert len(rows) == 12
    assert Counting.seen == {pid: 6, "oracle": 6}
    # a provider-level request: the case's messages, the variant's tools, trial and key
    keys = {row["key"] for row in rows}
    assert {r.key for r in Counting.requests} == keys
    l10 = [r for r in Counting.requests if "|l10|" in r.key]
    assert all(len(r.tools) == len(runner.variants[1].tools) for r in l10)


class Failing(Provider):
    """A provider whose every request fails permanently (as a revoked key)."""

    provider_id = "failing"

    async def complete(self, messages, tools, *, variant_key, trial) -> ProviderResponse:
        raise ProviderError("invalid key", error_class="permanent", status=401)

    def describe(self):
        return {"provider": "failing", "model": "none"}


def test_a_fallback_layer_answers_when_its_provider_fails(project):
    oracle_pipelines = {}

    def fallback(provider_id: str, inner: Layer) -> Layer:
        async def layer(exchange: Exchange) -> Outcome:
            try:
                return await inner(exchange)
            except ProviderError:
                return await oracle_pipelines["oracle"].complete(exchange.request)
        return layer

    def factory(provider_id, config):
        if provider_id == "failing":
            return Failing()
        return make_provider(provider_id, dataset=config.dataset)

    config = RunConfig(dataset="ecommerce", variants=["l3"], providers=["failing"], limit=4,
                       execute=False)
    runner = Runner(config, run_id="fallback", command=[], provider_factory=factory,
                    layers=[fallback])
    # the fallback's own pipeline: the oracle, built the same way
    oracle_pipelines["oracle"] = build_pipeline("oracle", factory("oracle", config),
                                                concurrency=1, attempts=1)
    runner.run()
    rows = row_dicts(runner.store)
    assert len(rows) == 4 and all(r["metrics"]["selection_correct"] for r in rows)
    # without the layer the same run stops on the first request, resumably
    with pytest.raises(BenchError, match="permanent HTTP 401 error on case"):
        Runner(config, run_id="no-fallback", command=[], provider_factory=factory).run()


def test_validation_errors_and_retries_go_through_the_layers_in_order(project):
    calls = {"n": 0}

    def handler(request):
        calls["n"] += 1
        if calls["n"] == 1:
            return Reply(status=503, body=error_body(503, "busy"))
        if calls["n"] == 2:
            return Reply(status=400, body=error_body(400, "prompt is too long"))
        return Reply(body=chat_body(calls=[("get_weather", {"city": "x"})]))

    with FakeServer(handler=handler) as srv:
        pid = f"openai-compat:m@{srv.url}/v1"
        runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], providers=[pid],
                                  limit=2, execute=False, attempts=3),
                        run_id="order", command=[], layers=[Counting])
        runner.run()
    rows = sorted(row_dicts(runner.store), key=lambda r: r["attempts"])
    # the 503 was retried under the user layer (it saw one request per item); the 400 became
    # that item's invalid answer, named, with the run going on
    assert Counting.seen[pid] == 2
    assert calls["n"] == 3
    invalid = [r for r in rows if r["parsed"]["error_code"] == "provider_error"]
    assert len(invalid) == 1 and "too long" in invalid[0]["parsed"]["error"]


def _choosing(choice: str):
    """A user layer factory that sends every request with tool_choice ``choice``."""
    def factory(provider_id: str, inner: Layer) -> Layer:
        async def layer(exchange: Exchange) -> Outcome:
            request = dataclasses.replace(exchange.request, tool_choice=choice)
            return await inner(Exchange(request, exchange.provider))
        return layer
    return factory


def test_a_per_request_tool_choice_is_sent_recorded_and_keyed(project):
    with FakeServer(handler=lambda r: Reply(body=chat_body(calls=[("get_weather",
                                                                    {"city": "x"})]))) as srv:
        pid = f"openai-compat:m@{srv.url}/v1"
        config = RunConfig(dataset="ecommerce", variants=["l3"], providers=[pid], limit=2,
                           execute=False, cache="readwrite")
        Runner(config, run_id="auto", command=[]).run()
        chosen = Runner(config, run_id="required", command=[],
                        layers=[_choosing("required")])
        chosen.run()
        bodies = [r.body for r in srv.requests]
    # the provider's setting (auto) for the first run; the layer's choice for the second,
    # which the cache does not answer from the first run's entries
    assert [b["tool_choice"] for b in bodies] == ["auto", "auto", "required", "required"]
    rows = row_dicts(chosen.store)
    assert {r["request"]["tool_choice"] for r in rows} == {"required"}
    assert {r["cache"] for r in rows} == {"miss"}


def test_a_per_request_tool_choice_a_provider_cannot_send_is_the_rows_invalid_answer(project):
    config = RunConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"], limit=2,
                       execute=False)
    runner = Runner(config, run_id="oracle-choice", command=[], layers=[_choosing("none")])
    runner.run()
    rows = row_dicts(runner.store)
    assert len(rows) == 2
    assert all(r["parsed"]["error_code"] == "provider_error"
               and "takes no per-request tool_choice" in r["parsed"]["error"] for r in rows)


# -- user layers that break the pipeline's contract --------------------------------------------


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
