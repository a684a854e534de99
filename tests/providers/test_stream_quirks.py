"""Real-traffic quirks (issue 18) driven through the real SDKs against the loopback fake server:
usage on the finish chunk, a repeated first argument fragment, a first call at ``index: 1``,
``name: ""`` on continuation deltas, Anthropic's empty first ``partial_json`` and pings, Gemini
``thoughtSignature`` parts and streaming, and errors inside an HTTP 200 stream, which are
classified by what they say (a 4xx: the row's invalid answer; overloaded, 5xx and rate limits:
retried; only auth and configuration errors stop a run)."""

import json

import pytest

from bench.models import Message, Tool
from bench.providers import ProviderError, make_provider
from bench.providers.errors import error_from_exception, stream_error_status
from tests.fakeserver import (complete_once, FakeServer, Reply, anthropic_stream, chat_fragments,
                              chat_stream, error_body, gemini_body, gemini_stream, responses_body)

WEATHER = Tool(name="get_weather", description="Weather of a city.", input_schema={
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
ASK = [Message(role="user", content="Weather in Paris?")]


pytestmark = pytest.mark.usefixtures("keys")  # dummy API keys (tests/conftest.py)


@pytest.fixture
def server():
    """A fresh fake server for each test (tests/conftest.py's lasts the module)."""
    with FakeServer() as fake:
        yield fake


def provider(kind, server, **options):
    options = {"stream": True, "timeout_s": 10, **options}
    if kind == "openai-compat":
        return make_provider(f"openai-compat:m@{server.url}/v1", **options)
    base = server.url + ("/v1" if kind.startswith("openai") else "")
    return make_provider(f"{kind}:m", base_url=base, **options)


def ask(kind, server, **options):
    return complete_once(provider(kind, server, **options), ASK, [WEATHER], variant_key="v", trial=0)


# --- OpenAI Chat Completions stream quirks --------------------------------------------------

def test_usage_on_the_finish_chunk_is_counted(server):
    fragments = chat_fragments("call_1", "get_weather", '{"city": "Paris"}')
    server.script(Reply(events=chat_stream(fragments, usage=(31, 7), usage_on_finish=True)))
    response = ask("openai", server)
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (31, 7)
    assert response.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in response.parsed.calls] == [
        ("get_weather", {"city": "Paris"})]


def test_a_repeated_first_argument_fragment_is_dropped_when_it_breaks_the_json(server):
    fragments = chat_fragments("call_1", "get_weather", '{"city": "Paris"}', repeat_first=True)
    assert fragments[0]["arguments"] == fragments[1]["arguments"] == '{"city'
    server.script(Reply(events=chat_stream(fragments)))
    response = ask("openai", server)
    (call,) = response.parsed.calls
    assert call.valid and call.arguments == {"city": "Paris"}
    assert response.raw["choices"][0]["message"]["tool_calls"][0]["x_bench_repair"] == \
        "repeated first argument fragment dropped"


def test_a_repeat_that_does_not_repair_the_json_is_kept_as_sent(server):
    # a stream cut at the token limit: dropping the repeat would not make it decode either
    fragments = [{"index": 0, "id": "call_1", "name": "get_weather", "arguments": '{"city'},
                 {"index": 0, "arguments": '{"city'}, {"index": 0, "arguments": '": "Pa'}]
    server.script(Reply(events=chat_stream(fragments, finish="length")))
    answer = ask("openai", server).parsed
    (call,) = answer.calls
    assert not call.valid and call.raw_arguments == '{"city{"city": "Pa'
    assert answer.error is not None


def test_a_first_tool_call_at_index_1_and_empty_names_on_continuations(server):
    fragments = (chat_fragments("call_a", "get_weather", '{"city": "Paris"}', index=1,
                                empty_name=True)
                 + chat_fragments("call_b", "get_weather", '{"city": "Oslo"}', index=2,
                                  empty_name=True))
    assert fragments[1]["name"] == ""
    server.script(Reply(events=chat_stream(fragments, text="Checking.")))
    response = ask("openai", server)
    assert [(c.id, c.name, c.arguments) for c in response.parsed.calls] == [
        ("call_a", "get_weather", {"city": "Paris"}), ("call_b", "get_weather", {"city": "Oslo"})]


def test_sse_comment_lines_gzip_and_chunked_transfer_are_read(server):
    fragments = chat_fragments("call_1", "get_weather", '{"city": "Paris"}')
    server.script(Reply(events=chat_stream(fragments, comments=True), gzip=True, chunk_size=7))
    (call,) = ask("openai", server).parsed.calls
    assert call.arguments == {"city": "Paris"}


# --- errors inside a 200 stream ---------------------------------------------------------------

def test_openrouter_error_chunk_after_a_length_finish_is_a_validation_error(server):
    """The real OpenRouter case: ``finish_reason: "length"``, then ``{"error": {"code": 400,
    "message": "Token limit reached"}}``; the openai SDK raises APIError with code "400"."""
    fragments = chat_fragments("call_1", "get_weather", '{"city": "Pa')
    server.script(Reply(events=chat_stream(fragments, finish="length", error={
        "code": 400, "message": "Token limit reached"})))
    with pytest.raises(ProviderError) as caught:
        ask("openai-compat", server)
    error = caught.value
    assert error.error_class == "validation" and not error.retryable and error.status is None
    assert "Token limit reached" in str(error) and "code 400" in str(error)


@pytest.mark.parametrize("error,expected", [
    ({"code": 502, "message": "Provider returned error"}, "transient"),
    ({"code": "server_error", "message": "Provider disconnected"}, "transient"),
    ({"code": 429, "message": "Rate limit exceeded"}, "rate_limited"),
    ({"code": "insufficient_quota", "message": "You exceeded your quota"}, "permanent"),
    ({"code": 401, "message": "User not found."}, "permanent"),
    ({"message": "something odd"}, "validation"),
])
def test_openai_stream_error_chunks_are_classified_by_their_code(server, error, expected):
    server.script(Reply(events=chat_stream([], finish="stop", error=error)))
    with pytest.raises(ProviderError) as caught:
        ask("openai-compat", server)
    assert caught.value.error_class == expected
    assert error["message"] in str(caught.value)


@pytest.mark.parametrize("kind,expected", [("overloaded_error", "transient"),
                                           ("api_error", "transient"),
                                           ("rate_limit_error", "rate_limited"),
                                           ("invalid_request_error", "validation"),
                                           ("authentication_error", "permanent")])
def test_anthropic_error_events_are_classified_like_their_http_status(server, kind, expected):
    server.script(Reply(events=anthropic_stream(
        [("toolu_1", "get_weather", ['{"city": ', '"Paris"}'])],
        error={"type": kind, "message": "Overloaded" if kind == "overloaded_error" else kind})))
    with pytest.raises(ProviderError) as caught:
        ask("anthropic", server)
    assert caught.value.error_class == expected and kind in str(caught.value)


def test_gemini_stream_error_chunk_is_classified_by_its_code(server):
    body = gemini_body(calls=[("get_weather", {"city": "Paris"})], text="Sure.")
    server.script(Reply(events=gemini_stream(body, error={
        "code": 503, "status": "UNAVAILABLE", "message": "The model is overloaded."})))
    with pytest.raises(ProviderError) as caught:
        ask("gemini", server)
    assert caught.value.error_class == "transient" and caught.value.retryable
    assert "overloaded" in str(caught.value)


def test_a_chat_stream_reads_only_choice_0(server):
    # Calls and finish reason of a second choice (n > 1) were merged into the answer: an
    # extra call scored against the case, where the same reply unstreamed reads choice 0.
    events = chat_stream(chat_fragments("call_1", "get_weather", '{"city": "Paris"}'))
    other = [(None, {**data, "choices": [{**data["choices"][0], "index": 1}]})
             for _, data in chat_stream(chat_fragments("call_2", "get_weather",
                                                       '{"city": "Rome"}'), finish="stop")
             if isinstance(data, dict) and data.get("choices")]
    server.script(Reply(events=events[:-2] + other + events[-2:]))
    response = ask("openai-compat", server)
    assert [(c.id, c.arguments) for c in response.parsed.calls] == [("call_1",
                                                                     {"city": "Paris"})]
    assert response.finish_reason == "tool_calls"


def _responses_error_stream(kind, code):
    start = ("response.created", {"type": "response.created", "sequence_number": 0,
                                  "response": {**responses_body(), "status": "in_progress",
                                               "output": []}})
    if kind == "error":
        return [start, ("error", {"type": "error", "sequence_number": 1, "code": code,
                                  "message": "The server had an error", "param": None})]
    failed = {**responses_body(), "status": "failed", "output": [],
              "error": {"code": code, "message": "The server had an error"}}
    return [start, ("response.failed", {"type": "response.failed", "sequence_number": 1,
                                        "response": failed})]


@pytest.mark.parametrize("kind", ["error", "response.failed"])
@pytest.mark.parametrize("code,expected", [("server_error", "transient"),
                                           ("rate_limit_exceeded", "rate_limited"),
                                           ("insufficient_quota", "permanent")])
def test_openai_responses_stream_errors_are_classified_by_their_code(server, kind, code,
                                                                     expected):
    # Before: an error event was read as a stream cut by the token limit ("truncated") and a
    # failed response as a final invalid answer, so neither was ever retried.
    server.script(Reply(events=_responses_error_stream(kind, code)))
    with pytest.raises(ProviderError) as caught:
        ask("openai-responses", server)
    assert caught.value.error_class == expected
    assert code in str(caught.value) and "The server had an error" in str(caught.value)


def test_an_openai_responses_error_event_of_unknown_code_is_the_rows_invalid_answer(server):
    server.script(Reply(events=_responses_error_stream("error", "odd_thing")))
    with pytest.raises(ProviderError) as caught:
        ask("openai-responses", server)
    assert caught.value.error_class == "validation" and "code odd_thing" in str(caught.value)
    assert "The server had an error" in str(caught.value)


def test_stream_error_status_reads_each_providers_form():
    assert stream_error_status({"error": {"code": 400, "message": "x"}}) == (400, "code 400")
    assert stream_error_status({"code": "400"}) == (400, "code 400")
    assert stream_error_status({"type": "error", "error": {"type": "overloaded_error"}}) == \
        (529, "overloaded_error")
    assert stream_error_status({"error": {"status": "RESOURCE_EXHAUSTED"}}) == \
        (429, "RESOURCE_EXHAUSTED")
    assert stream_error_status({"code": True}) is None and stream_error_status("x") is None


def test_an_unreadable_answer_is_a_validation_error_not_a_run_stopper():
    error = error_from_exception(json.JSONDecodeError("Expecting value", "<html>", 0))
    assert error.error_class == "validation" and "could not be read" in str(error)


def test_non_json_200_body_is_a_transient_fault_retried_by_the_run(server):
    """A 200 body that is not JSON is a server fault like a 5xx (retried; after the last
    attempt the run records the row's invalid answer: tests/providers/test_reply_shapes_cli.py)."""
    server.script(Reply(raw=b"<html>bad gateway</html>"))
    with pytest.raises(ProviderError) as caught:
        complete_once(make_provider("openai:m", base_url=server.url + "/v1"), 
            ASK, [WEATHER], variant_key="v", trial=0)
    assert caught.value.error_class == "transient"


@pytest.mark.parametrize("status,expected", [(402, "permanent"), (405, "permanent"),
                                             (410, "validation"), (451, "validation")])
def test_only_auth_and_configuration_statuses_are_permanent(server, status, expected):
    server.script(Reply(status, error_body(status, "nope")))
    with pytest.raises(ProviderError) as caught:
        complete_once(make_provider("openai:m", base_url=server.url + "/v1"), 
            ASK, [WEATHER], variant_key="v", trial=0)
    assert caught.value.error_class == expected


# --- Anthropic ----------------------------------------------------------------------------

def test_anthropic_empty_first_partial_json_and_pings(server):
    events = anthropic_stream([("toolu_1", "get_weather", ['{"city": ', '"Paris"}']),
                               ("toolu_2", "get_weather", [])], text="Let me check.")
    partials = [e[1]["delta"]["partial_json"] for e in events
                if e[0] == "content_block_delta" and e[1]["delta"]["type"] == "input_json_delta"]
    assert partials == ["", '{"city": ', '"Paris"}', ""]
    assert ("ping", {"type": "ping"}) in events
    server.script(Reply(events=events))
    response = ask("anthropic", server)
    assert [(c.id, c.arguments, c.valid) for c in response.parsed.calls] == [
        ("toolu_1", {"city": "Paris"}, True), ("toolu_2", {}, True)]
    assert response.parsed.text == "Let me check." and response.finish_reason == "tool_use"


# --- Gemini ---------------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
def test_gemini_thought_signature_parts(server, stream):
    body = gemini_body(calls=[("get_weather", {"city": "Paris"}), ("get_weather",
                                                                   {"city": "Oslo"})],
                       thought_signature="EpwICpkIAXLI2nxl", usage=(29, 10, 0))
    body["candidates"][0]["content"]["parts"].append({"text": "", "thoughtSignature": "Eq0"})
    server.script(Reply(events=gemini_stream(body)) if stream else Reply(body=body))
    response = complete_once(provider("gemini", server, stream=stream), 
        ASK, [WEATHER], variant_key="v", trial=0)
    sent = server.requests[-1]
    assert sent.path.endswith(":streamGenerateContent" if stream else ":generateContent")
    assert [c.arguments for c in response.parsed.calls] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert response.parsed.error is None and not response.parsed.text
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (29, 10)
    assert response.finish_reason == "STOP"


def test_gemini_stream_joins_text_and_calls_across_chunks(server):
    body = gemini_body(calls=[("get_weather", {"city": "Paris"})], text="Checking.",
                       usage=(40, 12, 8))
    events = gemini_stream(body)
    assert len(events) == 2 and "finishReason" not in events[0][1]["candidates"][0]
    server.script(Reply(events=events, chunk_size=5))
    p = provider("gemini", server)
    response = complete_once(p, ASK, [WEATHER], variant_key="v", trial=0)
    assert "alt=sse" in p.endpoint and "stream" not in p.describe()["not_sent"]
    assert response.parsed.text == "Checking."
    assert [(c.name, c.arguments) for c in response.parsed.calls] == [
        ("get_weather", {"city": "Paris"})]
    assert (response.usage.prompt_tokens, response.usage.cached_tokens) == (40, 8)
    assert response.raw["responseId"] == body["responseId"]
