"""Native tool search (``--retriever native``): Anthropic's tool search tool with deferred
tools, through the real ``anthropic`` SDK against the loopback fake server.

The fake answers as the real server does (``server_tool_use``, ``tool_search_tool_result``
with ``tool_reference`` blocks, then the model's ``tool_use``; :func:`fakeserver.
anthropic_tool_search_body`), and its bodies are checked against the SDK's own types, so the
wire format the tests hold bench to is the SDK's, not the fake's.
"""

from __future__ import annotations

import json
import typing

import pytest
from anthropic.types import (
    Message as SdkMessage,
    ServerToolUseBlock,
    ToolParam,
    ToolSearchToolBm25_20251119Param,
    ToolSearchToolRegex20251119Param,
    ToolSearchToolResultBlock,
    ToolUseBlock,
)

from bench.descriptions.tokens import openai_tool_tokens
from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import MALFORMED_REPLY
from bench.providers import make_provider
from bench.providers.anthropic_messages import AnthropicProvider
from bench.providers.base import HTTPOptions
from bench.providers.pipeline import ModelRequest, build_pipeline
from bench.providers.tool_search import ToolSearch, read_tool_search
from bench.report.toolspace import toolspace_table
from bench.results import Row
from bench.runner import RunConfig, Runner
from bench.toolspace.space import ToolSpace, space_grid
from tests.fakeserver import FakeServer, anthropic_tool_search_body, tool_search_handler
from tests.stored import row_dicts
from tests.toolspace.test_toolspace import one_line_error

SEARCH_NAMES = {"tool_search_tool_regex", "tool_search_tool_bm25"}


pytestmark = pytest.mark.usefixtures("keys")  # dummy API keys (tests/conftest.py)


def native_run(project, tmp_path, handler, *, run_id="native", retriever="native",
               stream=False, limit=6, server=None, **settings):
    """Run ecommerce l3 grown to 30 tools under ``retriever`` against a fake server answering
    with ``handler`` (or ``server``, cleared first); return (rows, requests, runner)."""
    if server is None:
        with FakeServer(handler=handler) as fresh:
            return native_run(project, tmp_path, handler, run_id=run_id, retriever=retriever,
                              stream=stream, limit=limit, server=fresh, **settings)
    server.clear()
    config = RunConfig(dataset="ecommerce", variants=["l3"], providers=["anthropic:fake"],
                       tools=[30], retrievers=[retriever], limit=limit, execute=False,
                       **settings)
    runner = Runner(config, run_id=run_id, provider_factory=lambda pid, cfg:
                    make_provider(pid, base_url=server.url, stream=stream))
    runner.run()
    return row_dicts(runner.store), list(server.requests), runner


# --- the wire format, against the SDK's types -------------------------------------------------


def literal_values(typed_dict, key):
    """The Literal values an SDK TypedDict allows for ``key``."""
    hint = typing.get_type_hints(typed_dict, include_extras=True)[key]
    while typing.get_origin(hint) is not typing.Literal:
        hint = typing.get_args(hint)[0]  # Required[...] / Annotated[...]
    return set(typing.get_args(hint))


def test_request_fields_are_the_sdk_types(project, tmp_path):
    rows, requests, _ = native_run(project, tmp_path, tool_search_handler(), limit=1)
    tools = requests[0].body["tools"]
    search, catalog = tools[0], tools[1:]
    # the search tool: the SDK's type and name literals, never deferred
    assert search == {"type": "tool_search_tool_regex_20251119",
                      "name": "tool_search_tool_regex"}
    assert search["type"] in literal_values(ToolSearchToolRegex20251119Param, "type")
    assert search["name"] in literal_values(ToolSearchToolRegex20251119Param, "name")
    # the whole catalog, each tool deferred, every key one the SDK's ToolParam has
    assert len(catalog) == 30 and all(t["defer_loading"] is True for t in catalog)
    assert all(set(t) <= set(ToolParam.__annotations__) for t in catalog)
    assert "anthropic-beta" not in requests[0].headers  # see bench.providers.tool_search
    summary = rows[0]["request"]["tool_search"]
    assert summary == {"tool": "tool_search_tool_regex_20251119", "deferred": 30,
                       "always_loaded": []}


def test_the_fake_answers_in_the_sdk_types():
    request = {"tools": [{"type": "tool_search_tool_bm25_20251119",
                          "name": "tool_search_tool_bm25"},
                         {"name": "get_weather", "description": "Weather of a city",
                          "input_schema": {"type": "object", "properties": {"city": {}}},
                          "defer_loading": True}],
               "messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    body = anthropic_tool_search_body(request)
    message = SdkMessage.model_validate(body)
    text, use, result, call = message.content
    assert isinstance(use, ServerToolUseBlock) and use.name == "tool_search_tool_bm25"
    assert use.name in literal_values(ToolSearchToolBm25_20251119Param, "name")
    assert isinstance(result, ToolSearchToolResultBlock) and result.tool_use_id == use.id
    assert [r.tool_name for r in result.content.tool_references] == ["get_weather"]
    assert isinstance(call, ToolUseBlock) and call.name == "get_weather"


# --- rows --------------------------------------------------------------------------------------


def test_rows_record_what_the_search_loaded(project, tmp_path):
    rows, requests, runner = native_run(project, tmp_path, tool_search_handler())
    assert len(rows) == 6 and len(requests) == 6
    catalog = {t.name: t for t in runner.session.plan[0].variant.tools}
    for row in rows:
        assert row["variant"] == "l3~tools=30~retriever=native"
        blocks = row["response"]["raw"]["content"]
        returned = [r["tool_name"] for b in blocks if b["type"] == "tool_search_tool_result"
                    for r in b["content"]["tool_references"]]
        retrieval = row["retrieval"]
        # what the model had in context: the tools the search returned, no more
        assert retrieval["offered"] == returned and retrieval["tools_offered"] == len(returned)
        assert retrieval["tool_tokens"] == sum(openai_tool_tokens([catalog[n]])
                                               for n in returned)
        (search,) = retrieval["tool_search"]["searches"]
        assert search["tool"] == "tool_search_tool_regex" and search["tools"] == returned
        assert search["input"]["pattern"].startswith("(?i)")
        # the server's blocks are not the model's calls
        assert not {c["name"] for c in row["parsed"]["calls"]} & SEARCH_NAMES
        # the fake model calls the first tool the search returned (none found: a text answer)
        assert len(row["parsed"]["calls"]) == (1 if returned else 0)
        expected = retrieval["expected"]
        missing = [n for n in expected if n not in returned]
        assert retrieval["missing"] == missing
        metrics = row["metrics"]
        if expected:
            assert metrics["retrieval_recall"] == 1 - len(missing) / len(expected)
            assert metrics["retrieved_all"] == (not missing)
        wrong = not metrics["selection_correct"]
        assert metrics["error_not_retrieved"] == (wrong and bool(missing))
        assert metrics["error_confused"] == (wrong and not missing)
    assert sum(bool(row["parsed"]["calls"]) for row in rows) >= 4  # most searches find a tool
    # the fake's lexical search finds some expected tools and misses others: a wrong tool is
    # then counted as not retrieved, or as confused when the expected one was loaded
    metrics = [r["metrics"] for r in rows]
    assert any(m["retrieval_recall"] == 1 for m in metrics)
    assert any(m["error_not_retrieved"] for m in metrics)
    assert any(m["error_confused"] for m in metrics)
    table = toolspace_table([Row.model_validate(r) for r in rows])
    assert list(table["retriever"]) == ["native"] and list(table["tools"]) == [30]


def test_a_failed_search_loads_nothing(project, tmp_path):
    rows, _, _ = native_run(project, tmp_path, tool_search_handler(error_code="unavailable"))
    for row in rows:
        retrieval = row["retrieval"]
        assert retrieval["offered"] == [] and retrieval["tool_tokens"] == 0
        (search,) = retrieval["tool_search"]["searches"]
        assert search["error"] == "unavailable" and search["tools"] == []
        assert row["parsed"]["calls"] == []
        if retrieval["expected"]:
            assert row["metrics"]["retrieval_recall"] == 0
            assert row["metrics"]["error_not_retrieved"] is True


@pytest.mark.slow  # over 1 s on 2 busy cores
def test_always_loaded_tools_are_sent_undeferred_and_counted(project, tmp_path):
    rows, requests, runner = native_run(project, tmp_path, tool_search_handler(search=False),
                                        always_loaded=["search_orders"], limit=3)
    tools = requests[0].body["tools"]
    assert [t["name"] for t in tools if "input_schema" in t and
            not t.get("defer_loading")] == ["search_orders"]
    assert sum(1 for t in tools if t.get("defer_loading")) == 29
    catalog = {t.name: t for t in runner.session.plan[0].variant.tools}
    for row in rows:
        retrieval = row["retrieval"]
        assert retrieval["offered"] == ["search_orders"]
        assert retrieval["tool_tokens"] == openai_tool_tokens([catalog["search_orders"]])
        assert retrieval["tool_search"]["always_loaded"] == ["search_orders"]
        assert retrieval["tool_search"]["searches"] == []
        assert row["request"]["tool_search"]["always_loaded"] == ["search_orders"]
        assert [c["name"] for c in row["parsed"]["calls"]] == ["search_orders"]


@pytest.mark.slow  # two runs, or a subprocess: over 1 s on 2 busy cores
def test_streamed_and_bm25(project, tmp_path):
    plain, _, _ = native_run(project, tmp_path, tool_search_handler(), run_id="plain",
                             retriever="native-bm25", limit=3)
    streamed, requests, _ = native_run(project, tmp_path, tool_search_handler(),
                                       run_id="streamed", retriever="native-bm25",
                                       stream=True, limit=3)
    assert requests[0].body["stream"] is True
    assert requests[0].body["tools"][0] == {"type": "tool_search_tool_bm25_20251119",
                                            "name": "tool_search_tool_bm25"}
    for a, b in zip(sorted(plain, key=lambda r: r["key"]),
                    sorted(streamed, key=lambda r: r["key"])):
        assert a["variant"] == "l3~tools=30~retriever=native-bm25"
        for search in (a, b):
            (one,) = search["retrieval"]["tool_search"]["searches"]
            assert set(one["input"]) == {"query"}
        strip = ({k: v for k, v in s.items() if k != "id"}
                 for s in a["retrieval"]["tool_search"]["searches"])
        assert list(strip) == [{k: v for k, v in s.items() if k != "id"}
                               for s in b["retrieval"]["tool_search"]["searches"]]
        assert a["retrieval"]["offered"] == b["retrieval"]["offered"]
        assert [c["name"] for c in a["parsed"]["calls"]] == \
            [c["name"] for c in b["parsed"]["calls"]]
        assert a["metrics"] == b["metrics"]


@pytest.mark.slow  # two runs, or a subprocess: over 1 s on 2 busy cores
def test_cached_answers_keep_their_search(project, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeServer(handler=tool_search_handler()) as server:  # the base URL is in the key
        first, requests, _ = native_run(project, tmp_path, None, run_id="one", server=server,
                                        cache="readwrite", cache_path=str(cache), limit=3)
        again, more, _ = native_run(project, tmp_path, None, run_id="two", server=server,
                                    cache="readwrite", cache_path=str(cache), limit=3)
    assert len(requests) == 3 and more == []
    assert [r["cache"] for r in again] == ["hit"] * 3
    # rows are written in finish order, which concurrency may change: compare by case
    assert ({r["case_id"]: r["retrieval"] for r in first}
            == {r["case_id"]: r["retrieval"] for r in again})


# --- reading the blocks -------------------------------------------------------------------------


def provider():
    return AnthropicProvider(HTTPOptions(model="fake", base_url="http://127.0.0.1:9"))


TOOLS = [Tool(name="get_weather", description="Weather", input_schema={"type": "object"}),
         Tool(name="get_time", description="Time", input_schema={"type": "object"})]


def parse(content):
    adapter = provider()
    body = adapter.search_request([Message(role="user", content="weather?")], TOOLS, trial=0,
                                  tool_search=ToolSearch())
    return adapter.parse_body({"content": content, "stop_reason": "tool_use"}, latency_s=0.0,
                              request=body)


USE = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_regex",
       "input": {"pattern": "weather"}}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}


def test_the_documented_tool_result_shape_is_read_too():
    # Anthropic's tool search page shows the result as a tool_result of tool_reference blocks
    response = parse([USE, {"type": "tool_result", "tool_use_id": "srvtoolu_1",
                            "content": [{"type": "tool_reference", "tool_name": "get_weather"}]},
                      CALL])
    assert response.tool_search is not None
    assert response.tool_search.loaded == ["get_weather"]
    assert [c.name for c in response.parsed.calls] == ["get_weather"]


@pytest.mark.parametrize("result, message", [
    ({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
      "content": {"type": "surprise"}}, "content[1].content: expected a "
                                        "tool_search_tool_search_result"),
    ({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_9",
      "content": {"type": "tool_search_tool_search_result", "tool_references": []}},
     "content[1].tool_use_id: 'srvtoolu_9' answers no earlier tool search"),
    ({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
      "content": {"type": "tool_search_tool_search_result", "tool_references": "x"}},
     "content[1].content.tool_references: expected a list"),
])
def test_malformed_search_blocks_are_an_invalid_answer(result, message):
    response = parse([USE, result, CALL])
    assert response.parsed.error_code == MALFORMED_REPLY
    assert message in response.parsed.error


def test_without_tool_search_the_blocks_are_not_read():
    outcome = read_tool_search([CALL])
    assert outcome.searches == [] and outcome.loaded == []
    adapter = provider()
    body = adapter.build_request([Message(role="user", content="weather?")], TOOLS, trial=0)
    assert all("defer_loading" not in t for t in body["tools"])
    assert adapter.parse_body({"content": [CALL]}, latency_s=0.0,
                              request=body).tool_search is None


# --- refusals ----------------------------------------------------------------------------------


def test_native_conditions_take_no_top_k():
    grid = space_grid([30], ["native", "bm25", "native-bm25"], [3])
    assert [s.condition("l3") for s in grid] == [
        "l3~tools=30~retriever=native", "l3~tools=30~retriever=bm25~top_k=3",
        "l3~tools=30~retriever=native-bm25"]
    with pytest.raises(ValueError, match="top_k goes with a bm25 or embedding"):
        ToolSpace(30, "native", 5)


@pytest.mark.parametrize("settings, message", [
    ({"providers": ["openai:gpt-x"], "retrievers": ["native"]},
     "provider 'openai:gpt-x' has no native tool search"),
    ({"providers": ["anthropic:a", "local"], "retrievers": ["none", "native-bm25"]},
     "provider 'local' has no native tool search"),
    ({"providers": ["anthropic:a"], "retrievers": ["native"], "top_k": [3]},
     "--top-k needs a retriever"),
    ({"providers": ["anthropic:a"], "retrievers": ["bm25"], "always_loaded": ["x"]},
     "--always-loaded goes with --retriever native"),
])
def test_bad_native_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**settings)


@pytest.mark.slow  # two runs, or a subprocess: over 1 s on 2 busy cores
def test_other_providers_are_one_line_errors(run_bench):
    result = run_bench("run", "--provider", "openai:gpt-x", "--variants", "l3", "--tools",
                       "30", "--retriever", "native", "--limit", "2", timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert "provider 'openai:gpt-x' has no native tool search" in line


def test_an_unknown_always_loaded_tool_is_refused(project, tmp_path):
    with pytest.raises(BenchError, match="--always-loaded: 'nope' is not a tool of "
                                         "ecommerce/l3 \\(30 tools\\)"):
        Runner(RunConfig(dataset="ecommerce", variants=["l3"], providers=["anthropic:a"],
                         tools=[30], retrievers=["native"], always_loaded=["nope"], limit=1),
               run_id="nope")


@pytest.mark.slow  # over 1 s on 2 busy cores
def test_episode_cases_are_refused(project, tmp_path):
    dataset = tmp_path / "episodes.jsonl"
    dataset.write_text(json.dumps({
        "id": "ep-1", "toolset": "ecommerce", "lang": "en", "kind": "episode",
        "messages": [{"role": "user", "content": "Where is order ORD20250002?"}],
        "success": {"answer_facts": [["delivered"]]},
        "required_calls": [{"name": "get_order_status",
                            "arguments": {"order_id": ["ORD20250002"]}}],
        "max_steps": 3}) + "\n", encoding="utf-8")
    with pytest.raises(BenchError, match="case 'ep-1' is an episode; native tool search runs "
                                         "on single-answer cases only"):
        Runner(RunConfig(dataset=str(dataset), variants=["l3"], providers=["anthropic:a"],
                         tools=[30], retrievers=["native"]), run_id="episodes")


@pytest.mark.parametrize("kind", ["openai", "function"])
def test_a_tool_search_request_elsewhere_is_an_invalid_answer(kind, tmp_path):
    import asyncio

    if kind == "function":
        from bench.providers.function import register_function
        register_function("ts_noop", lambda messages, tools, trial: [])
        adapter = make_provider("function:ts_noop")
    else:
        adapter = make_provider("openai:gpt-x", base_url="http://127.0.0.1:9/v1")
    pipeline = build_pipeline(adapter.provider_id, adapter, concurrency=1, attempts=1)
    request = ModelRequest([Message(role="user", content="weather?")], TOOLS, 0, "k", "key",
                           tool_search=ToolSearch())

    async def ask():
        try:
            return await pipeline.complete(request)
        finally:
            await adapter.aclose()
    outcome = asyncio.run(ask())
    assert "has no native tool search" in (outcome.response.parsed.error or "")
    assert outcome.response.parsed.calls == []


def test_search_inputs_are_redacted_like_the_answer(project, tmp_path):
    # a BM25 search's query is the model's free text: a key pasted in the question and
    # echoed by the search is redacted in the row and in the cache, as the raw answer is
    # (the case's own query is the dataset's data, stored as it is)
    key = "sk-ant-api03-" + "Q7x2" * 8
    dataset = tmp_path / "cases.jsonl"
    dataset.write_text(json.dumps({
        "id": "k-1", "toolset": "ecommerce", "lang": "en",
        "messages": [{"role": "user", "content": f"Find my orders, my key is {key}"}],
        "expected": {"calls": [{"name": "search_orders", "arguments": {}}]}}) + "\n",
        encoding="utf-8")
    cache = tmp_path / "cache.sqlite"
    with FakeServer(handler=tool_search_handler()) as server:
        config = RunConfig(dataset=str(dataset), variants=["l3"], providers=["anthropic:a"],
                           tools=[30], retrievers=["native-bm25"], execute=False,
                           cache="readwrite", cache_path=str(cache))
        runner = Runner(config, run_id="secret", provider_factory=lambda pid, cfg:
                        make_provider(pid, base_url=server.url))
        runner.run()
        assert key in json.dumps(server.requests[0].body)  # it was sent and echoed back
    (row,) = row_dicts(runner.store)
    (search,) = row["retrieval"]["tool_search"]["searches"]
    assert "Find my orders" in search["input"]["query"] and key not in search["input"]["query"]
    assert key not in json.dumps(row["response"])  # as the raw answer's copy of it
    import sqlite3
    with sqlite3.connect(cache) as db:
        (answer,) = db.execute("SELECT response FROM responses").fetchone()
    searches = json.loads(answer)["tool_search"]["searches"]
    assert "Find my orders" in searches[0]["input"]["query"] and key not in answer


# -- the native retriever's option refusals ----------------------------------------------------


@pytest.mark.slow
def test_native_retriever_refusals_name_the_option_once(run_bench, monkeypatch):
    """``error: field 'always_loaded': --always-loaded: ...`` named the setting twice."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")  # refused before any request
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    line = one_line_error(run_bench("run", "--provider", "anthropic:fake", "--variants", "l3",
                                    "--limit", "1", "--no-execute", "--retriever", "native",
                                    "--always-loaded", "nonexistent"),
                          "--always-loaded: 'nonexistent' is not a tool of ecommerce/l3")
    assert line.startswith("error: --always-loaded: ")
