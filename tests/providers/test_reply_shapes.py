"""Provider replies of unexpected shape, cut-off and refused answers, and reasoning tokens, per
adapter (issue 19 items 1, 2, 4; issue 18 items 1, 4).

Each adapter's ``parse_body`` is fuzzed with ``hypothesis``: valid bodies with parts replaced
by arbitrary JSON (wrong types, ``null``, ``NaN``, huge integers, lone surrogates, deep
nesting) and arbitrary JSON bodies. It must never raise, an invalid answer must carry a known
error code, and everything a row stores must be writable and readable as UTF-8. Finish and
stop reasons go through the real SDKs against the loopback fake server.
"""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.models import Message, Tool
from bench.parse import ANSWER_ERROR_CODES, PARSER_FAILED
from bench.providers import make_provider
from bench.providers.openai_chat import OpenAIChatProvider
from bench.providers.replies import UnreadableReply, reply_json
from tests.fakeserver import (complete_once, FakeServer, Reply, anthropic_body, anthropic_stream,
                              chat_body, gemini_body, responses_body, responses_stream)

PING = Tool(name="ping", description="No parameters.",
            input_schema={"type": "object", "properties": {}})
ASK = [Message(role="user", content="ping it")]


pytestmark = pytest.mark.usefixtures("keys")  # dummy API keys (tests/conftest.py)


def _provider(kind: str, url: str = "http://127.0.0.1:9"):
    if kind == "gemini":
        pytest.importorskip("google.genai")
    provider_id = {"openai": "openai:gpt-test", "openai-compat": f"openai-compat:m@{url}/v1",
                   "openai-responses": "openai-responses:gpt-test",
                   "anthropic": "anthropic:claude-test", "gemini": "gemini:gemini-test"}[kind]
    options = {} if kind == "openai-compat" else \
        {"base_url": url + ("/v1" if kind.startswith("openai") else "")}
    return make_provider(provider_id, **options)


# Valid bodies each adapter's fuzzing starts from (calls, prose, truncation, thoughts).
GEMINI_THINKING = gemini_body(calls=[("ping", {"a": [1, {"b": "c"}]})], text="ok")
GEMINI_THINKING["usageMetadata"]["thoughtsTokenCount"] = 40
GEMINI_THINKING["candidates"][0]["content"]["parts"].insert(
    0, {"text": "thinking...", "thought": True, "thoughtSignature": "c2ln"})
BASES = {
    "openai": [chat_body(calls=[("ping", {"a": [1, {"b": "c"}]}), ("ping", "")], text="hi"),
               chat_body(calls=[("ping", '{"a": ')], finish="length")],
    "openai-compat": [chat_body(calls=[("ping", ("obj", {"a": 1}))])],
    "openai-responses": [responses_body(calls=[("ping", {"a": [1]})], text="hi"),
                         responses_body(calls=[("ping", '{"a"')],
                                        incomplete="max_output_tokens")],
    "anthropic": [anthropic_body(calls=[("ping", {"a": {"b": [1, 2]}})], text="hi"),
                  {**anthropic_body(text="no"), "stop_reason": "refusal"}],
    "gemini": [GEMINI_THINKING, gemini_body(finish="MAX_TOKENS")],
}
ADAPTERS = list(BASES)

SURROGATES = st.sampled_from(["\ud800", "a\udfffb", "\ud83d", "\udc00x"])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-2 ** 70, max_value=2 ** 70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12) | SURROGATES)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8) | SURROGATES, inner, max_size=4),
                    max_leaves=16)


def _deep(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


# past orjson's 254 levels and MAX_ARGUMENT_DEPTH; built fresh for each draw (mutated later)
ODD = JSON | st.builds(_deep, st.just(300)) | st.builds(
    lambda v: copy.deepcopy(v), st.sampled_from([float("nan"), float("inf"), 2 ** 80, "", [],
                                                 {}, [None], "\ud800"]))


def _paths(value, prefix=()):
    yield prefix
    if len(prefix) > 12:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _replace(body, path, value):
    if not path:
        return value
    node = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return body


def _delete(body, path):
    node = body
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return body


def _encodable(value, depth=0) -> bool:
    """Every string and key of a stored value encodes as UTF-8 (no lone surrogate)."""
    if depth > 3_000:
        return True
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return True
        except UnicodeEncodeError:
            return False
    if isinstance(value, dict):
        return all(_encodable(k, depth + 1) and _encodable(v, depth + 1)
                   for k, v in value.items())
    if isinstance(value, list):
        return all(_encodable(v, depth + 1) for v in value)
    return True


_PARSERS: dict[str, object] = {}


def _parser(kind: str):
    """One provider per adapter for the fuzzing (parse_body only; no request is sent)."""
    if kind not in _PARSERS:
        _PARSERS[kind] = _provider(kind)
    return _PARSERS[kind]


def _check(provider, body) -> None:
    """The properties every reply must keep, whatever its shape."""
    response = provider.parse_body(body, latency_s=0.0)  # never raises
    parsed = response.parsed
    if parsed.error is not None:
        assert parsed.error_code in ANSWER_ERROR_CODES and parsed.error_code != PARSER_FAILED
        assert "\n" not in parsed.error and len(parsed.error) < 600
        assert parsed.calls == [] or parsed.error_code != "malformed_reply"
    else:
        assert parsed.error_code is None
    usage = response.usage
    for count in (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens):
        assert isinstance(count, int) and not isinstance(count, bool) and count >= 0
    assert usage.reasoning_tokens is None or usage.reasoning_tokens >= 0
    assert _encodable(parsed.model_dump()) and _encodable(response.finish_reason)
    assert _encodable(response.raw)
    response.model_dump_json()  # what the response cache stores


FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ADAPTERS)
@FUZZ
@given(data=st.data())
def test_fuzzed_reply_shapes_never_raise(kind, data):
    provider = _parser(kind)
    body = copy.deepcopy(data.draw(st.sampled_from(BASES[kind]), label="base"))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="mutations")):
        paths = list(_paths(body))
        path = data.draw(st.sampled_from(paths), label="path")
        if path and data.draw(st.booleans(), label="delete") and isinstance(body, (dict, list)):
            try:
                body = _delete(body, path)
                continue
            except (KeyError, IndexError, TypeError):
                pass
        body = _replace(body, path, data.draw(ODD, label="value"))
    _check(provider, body)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ADAPTERS)
@FUZZ
@given(body=ODD)
def test_arbitrary_json_bodies_never_raise(kind, body):
    _check(_parser(kind), body)


def test_a_parse_body_that_raises_becomes_a_parser_failed_answer():
    """The safety net the runner and ``complete()`` use: a bench bug in a parser is the
    row's invalid answer, never the run's end."""

    class Broken(OpenAIChatProvider):
        def parse_body(self, body, *, latency_s, request=None):
            raise KeyError("choices")

    provider = Broken(_provider("openai").options)
    response = provider.parse_reply({"choices": []}, latency_s=0.5)
    assert response.parsed.error_code == PARSER_FAILED
    assert response.parsed.error == ("parser_failed: the reply could not be parsed "
                                     "(KeyError: 'choices')")
    assert response.latency_s == 0.5


@pytest.mark.parametrize("content,why", [
    (b"<html>bad gateway</html>", "is not JSON (Expecting value at line 1 column 1)"),
    (b'{"a": "\xff"}', "is not UTF-8 (byte 7 of 10)"),
    (b"[" * 50_000, "nested deeper than the decoder's limit"),
    (b"", "is not JSON"),
])
def test_a_200_body_that_is_not_json_is_a_transient_unreadable_reply(content, why):
    with pytest.raises(UnreadableReply) as caught:
        reply_json(content)
    assert caught.value.error_class == "transient" and caught.value.retryable
    assert why in str(caught.value)
    import pickle  # sender processes send it back pickled
    again = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(again, UnreadableReply) and again.detail == caught.value.detail


def test_unreadable_replies_through_every_sdk_are_transient():
    with FakeServer() as server:
        for kind in ADAPTERS:
            provider = _provider(kind, server.url)
            server.script(Reply(raw=b"<html>502</html>"))
            with pytest.raises(UnreadableReply) as caught:
                complete_once(provider, ASK, [PING], variant_key="v", trial=0)
            assert caught.value.error_class == "transient", kind


def test_other_adapters_name_the_bad_field():
    cases = [
        ("openai-responses", {**responses_body(), "output": [{"type": "function_call",
                                                             "name": 3}]},
         "malformed_reply: output[0].name: expected a string, got integer"),
        ("openai-responses", {**responses_body(), "output": ["x"]},
         "malformed_reply: output[0]: expected an object, got string"),
        ("anthropic", {**anthropic_body(), "content": [{"type": "tool_use", "name": "ping",
                                                        "id": ["x"]}]},
         "malformed_reply: content[0].id: expected a string, got array"),
        ("anthropic", {**anthropic_body(), "usage": {"output_tokens": "20"}},
         "malformed_reply: usage.output_tokens: expected an integer, got string"),
        ("gemini", {**gemini_body(), "candidates": [{"content": {"parts": [
            {"functionCall": "ping"}]}}]},
         "malformed_reply: candidates[0].content.parts[0].functionCall: expected an object, "
         "got string"),
        ("gemini", {**gemini_body(), "usageMetadata": {"thoughtsTokenCount": 1.5}},
         "malformed_reply: usageMetadata.thoughtsTokenCount: expected an integer, got number"),
    ]
    for kind, body, error in cases:
        parsed = _provider(kind).parse_body(body, latency_s=0.0).parsed
        assert parsed.error == error and parsed.error_code == "malformed_reply", kind


def test_lone_surrogates_in_anthropic_and_gemini_calls_are_cleaned_and_kept_escaped():
    for kind, body in (("anthropic", anthropic_body(calls=[("pi\ud800ng", {"k\udfff": "v"})])),
                       ("gemini", gemini_body(calls=[("pi\ud800ng", {"k\udfff": "v"})]))):
        response = _provider(kind).parse_body(body, latency_s=0.0)
        (call,) = response.parsed.calls
        assert call.name == "pi\ufffdng" and call.arguments == {"k\ufffd": "v"}
        assert "broken_unicode" in call.notes and call.raw_arguments == {"k\\udfff": "v"}
        # the raw body keeps the name as received, its lone surrogate as the text \ud800
        assert _encodable(response.raw) and r'"pi\\ud800ng"' in json.dumps(response.raw)


# --- cut-off and refused answers (issue 18 item 4), through the real SDKs -----------------

@pytest.fixture(scope="module")
def shared_server():
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def server(shared_server):
    """The module's server with an empty script: replies a failed or skipped test left queued
    do not answer the next test's requests."""
    shared_server.clear()
    return shared_server


def test_a_reply_left_queued_by_one_test(server):
    server.script(Reply(body=anthropic_body(text="stale")))  # never requested


def test_does_not_answer_the_next_test(server):
    response = complete_once(_provider("anthropic", server.url), ASK, [PING], variant_key="v",
                             trial=0)
    assert response.parsed.text != "stale"


def _gemini_reply(finish, parts=None, message=None):
    body = gemini_body(finish=finish)
    candidate = body["candidates"][0]
    if parts is None:
        candidate["content"] = {"role": "model"}  # no parts at all
    else:
        candidate["content"]["parts"] = parts
    if message:
        candidate["finishMessage"] = message
    return body


@pytest.mark.parametrize("finish,parts,code,error", [
    ("MAX_TOKENS", None, "truncated", "truncated: the answer hit the token limit"),
    ("UNEXPECTED_TOOL_CALL", None, "unexpected_tool_call",
     "unexpected_tool_call: finishReason UNEXPECTED_TOOL_CALL (Unexpected tool call: "
     "code_execution)"),
    ("MALFORMED_FUNCTION_CALL", [], "malformed_function_call",
     "malformed_function_call: finishReason MALFORMED_FUNCTION_CALL (Malformed function call: "
     "print(ping()))"),
    ("SAFETY", None, "blocked", "blocked: finishReason SAFETY"),
])
def test_gemini_cut_off_and_refused_answers_are_invalid_with_their_code(server, finish, parts,
                                                                        code, error):
    message = {"UNEXPECTED_TOOL_CALL": "Unexpected tool call: code_execution",
               "MALFORMED_FUNCTION_CALL": "Malformed function call: print(ping())"}.get(finish)
    server.script(Reply(body=_gemini_reply(finish, parts, message)))
    response = complete_once(_provider("gemini", server.url), ASK, [PING], variant_key="v", trial=0)
    assert response.parsed.error_code == code and response.parsed.error == error
    assert response.parsed.calls == [] and not response.parsed.declined
    assert response.finish_reason == finish


def test_gemini_max_tokens_with_thoughts_only_counts_them(server):
    body = _gemini_reply("MAX_TOKENS")
    body["usageMetadata"] = {"promptTokenCount": 50, "thoughtsTokenCount": 512,
                             "totalTokenCount": 562}  # no candidatesTokenCount: no output
    server.script(Reply(body=body))
    response = complete_once(_provider("gemini", server.url), ASK, [PING], variant_key="v", trial=0)
    assert response.parsed.error_code == "truncated"
    assert response.usage.completion_tokens == 512 and response.usage.reasoning_tokens == 512


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("stop,error", [
    ("refusal", "refusal: stop_reason refusal (the model's safety classifier stopped the "
                "answer)"),
    ("pause_turn", "pause_turn: stop_reason pause_turn (the turn was paused before it "
                   "finished)"),
])
def test_anthropic_refusal_and_pause_turn_are_invalid_with_their_code(server, stop, error,
                                                                      stream):
    if stream:
        server.script(Reply(events=anthropic_stream([], text="I can", stop=stop)))
    else:
        server.script(Reply(body=anthropic_body(text="I can", stop=stop)))
    provider = _provider("anthropic", server.url) if not stream else \
        make_provider("anthropic:claude-test", base_url=server.url, stream=True)
    response = complete_once(provider, ASK, [PING], variant_key="v", trial=0)
    assert response.parsed.error_code == stop and response.parsed.error == error
    assert response.parsed.text == "I can" and not response.parsed.declined
    assert response.finish_reason == stop


def _chat_refusal_stream(refusal):
    base = {"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunks = [{"role": "assistant"}] + [{"refusal": piece} for piece in refusal] + [{}]
    return [(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason":
                                         "stop" if not delta else None}]})
            for delta in chunks] + [(None, "[DONE]")]


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_refusal_is_invalid_not_a_decline(server, stream):
    # A refusal is the model's safety refusal, not "no tool fits": scored as a decline it
    # would count as a correct answer on a case that expects no call.
    if stream:
        server.script(Reply(events=_chat_refusal_stream(["I can't ", "help with that."])))
    else:
        body = chat_body()
        body["choices"][0]["message"].update(content=None, refusal="I can't help with that.")
        server.script(Reply(body=body))
    provider = make_provider("openai:gpt-test", base_url=server.url + "/v1", stream=stream)
    response = complete_once(provider, ASK, [PING], variant_key="v", trial=0)
    assert response.parsed.error_code == "refusal" and not response.parsed.declined
    assert response.parsed.error == "refusal: message.refusal (the model refused to answer)"
    assert response.parsed.text == "I can't help with that."


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses_refusal_part_is_invalid_not_a_decline(server, stream):
    body = responses_body()
    body["output"] = [{"type": "message", "id": "msg_r", "status": "completed",
                       "role": "assistant",
                       "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]
    server.script(Reply(events=responses_stream(body)) if stream else Reply(body=body))
    provider = make_provider("openai-responses:gpt-test", base_url=server.url + "/v1",
                             stream=stream)
    response = complete_once(provider, ASK, [PING], variant_key="v", trial=0)
    assert response.parsed.error_code == "refusal" and not response.parsed.declined
    assert response.parsed.text == "I can't help with that."


# --- reasoning tokens (issue 18 item 1), through the real SDKs ---------------------------

def _chat_with_reasoning(completion, reasoning, total):
    body = chat_body(calls=[("ping", {})], usage=(100, completion, 0))
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    body["usage"]["total_tokens"] = total
    return body


def test_reasoning_tokens_of_every_adapter(server):
    responses = responses_body(calls=[("ping", {})], usage=(100, 300, 0))
    responses["usage"]["output_tokens_details"] = {"reasoning_tokens": 256}
    thinking = gemini_body(calls=[("ping", {})], usage=(100, 20, 0))
    thinking["usageMetadata"]["thoughtsTokenCount"] = 700
    expected = [
        # OpenAI: reasoning inside completion_tokens (total = prompt + completion)
        ("openai", _chat_with_reasoning(300, 256, 400), 300, 256),
        # an OpenAI-compatible server that counts them outside (xAI: total adds them)
        ("openai-compat", _chat_with_reasoning(44, 256, 400), 300, 256),
        # one that reports them inside, like OpenAI
        ("openai-compat", _chat_with_reasoning(300, 256, 400), 300, 256),
        ("openai-compat", chat_body(calls=[("ping", {})], usage=(100, 20, 0)), 20, None),
        ("openai-responses", responses, 300, 256),
        # Gemini: thoughts are billed as output but not in candidatesTokenCount
        ("gemini", thinking, 720, 700),
        ("anthropic", anthropic_body(calls=[("ping", {})], usage=(100, 20, 0)), 20, None),
    ]
    for kind, body, completion, reasoning in expected:
        server.script(Reply(body=body))
        usage = complete_once(_provider(kind, server.url), ASK, [PING], variant_key="v",
                                                     trial=0).usage
        assert (usage.completion_tokens, usage.reasoning_tokens) == (completion, reasoning), kind
        assert usage.prompt_tokens == 100


def test_the_price_of_a_gemini_answer_counts_its_thoughts():
    from bench.providers.gemini import UsageMetadata, gemini_usage
    from bench.providers.pricing import ModelPrice
    price = ModelPrice(input=1e-6, cached_input=1e-7, output=1e-5)
    usage = gemini_usage(UsageMetadata.model_validate(
        {"promptTokenCount": 1000, "candidatesTokenCount": 10, "thoughtsTokenCount": 990}))
    cost = price.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
    assert math.isclose(cost, 1000 * 1e-6 + 1000 * 1e-5)


def test_openai_batch_output_lines_of_unexpected_shape_are_errors_not_exceptions():
    from bench.providers.batch import _openai_line
    assert _openai_line(1, "<html>") is None  # names no request: it stays pending
    assert _openai_line(2, '{"custom_id": 5}') is None
    assert _openai_line(3, '{"custom_id": "r1", "response": "ok"}') == (
        "r1", None, "malformed batch output line 3: response: expected an object, got string")
    custom, body, error = _openai_line(
        4, '{"custom_id": "r2", "response": {"status_code": 200, "body": {"choices": "x"}}}')
    assert (custom, error) == ("r2", None)
    parsed = _provider("openai").parse_reply(body, latency_s=0.0).parsed
    assert parsed.error == "malformed_reply: choices: expected a list, got string"
