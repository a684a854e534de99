"""HTTP adapters driven through the real SDKs against the loopback fake server (no keys, no
internet): wire formats, parsing failure modes (BRIEF §8), error classes, streaming."""

import asyncio
import json
import socket
import threading

import pytest

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import strictly_valid
from bench.providers import ProviderError, ProviderUnavailable, make_provider
from bench.providers.errors import error_from_exception
from tests.fakeserver import (complete_once, Reply, anthropic_body, anthropic_stream,
                              chat_body, chat_stream, error_body, gemini_body, responses_body,
                              responses_stream)

WEATHER = Tool(name="get_weather", description="Weather of a city.", input_schema={
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city"]})
PING = Tool(name="ping", description="No parameters.",
            input_schema={"type": "object", "properties": {}})
TOOLS = [WEATHER, PING]
ASK = [Message(role="system", content="You are terse."),
       Message(role="user", content="上海天气?")]


pytestmark = pytest.mark.usefixtures("keys")  # dummy API keys (tests/conftest.py)


def openai(server, **options):
    return make_provider("openai:gpt-test", base_url=server.url + "/v1", **options)


def anthropic(server, **options):
    return make_provider("anthropic:claude-test", base_url=server.url, **options)


def responses(server, **options):
    return make_provider("openai-responses:gpt-test", base_url=server.url + "/v1", **options)


def ask(provider, messages=ASK, tools=TOOLS, trial=0):
    return complete_once(provider, messages, tools, variant_key="v", trial=trial)


# --- OpenAI Chat Completions --------------------------------------------------------------

def test_openai_normal_answer_request_body_usage_and_request_id(server):
    server.script(Reply(body=chat_body(calls=[("get_weather", {"city": "上海"})],
                                       usage=(120, 15, 64))))
    response = ask(openai(server), trial=2)
    sent = server.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["seed"] == 1234 + 2 and sent.body["max_completion_tokens"] == 512
    assert sent.body["tool_choice"] == "auto" and "parallel_tool_calls" not in sent.body
    assert sent.body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert [t["function"]["name"] for t in sent.body["tools"]] == ["get_weather", "ping"]
    (call,) = response.parsed.calls
    assert call.name == "get_weather" and call.arguments == {"city": "上海"} and call.valid
    assert response.finish_reason == "tool_calls"
    assert response.usage.model_dump() == {"prompt_tokens": 120, "completion_tokens": 15,
                                           "cached_tokens": 64, "reasoning_tokens": None}
    assert response.request_id.startswith("req_") and response.latency_s > 0
    assert response.request["tools"] == ["get_weather", "ping"]


def test_openai_parallel_calls_keep_order_and_ids(server):
    server.script(Reply(body=chat_body(calls=[("get_weather", {"city": "Paris"}),
                                              ("get_weather", {"city": "Oslo"})],
                                       ids=["call_a", "call_b"])))
    calls = ask(openai(server)).parsed.calls
    assert [(c.id, c.arguments["city"]) for c in calls] == [("call_a", "Paris"),
                                                            ("call_b", "Oslo")]


def test_arguments_as_object_pass_lenient_fail_strict(server):
    server.script(Reply(body=chat_body(calls=[("get_weather", ("obj", {"city": "Rome"}))])))
    (call,) = ask(openai(server)).parsed.calls
    assert call.arguments == {"city": "Rome"} and call.valid
    assert "arguments_as_object" in call.notes and not strictly_valid(call)


def test_double_encoded_arguments_are_repaired_and_noted(server):
    server.script(Reply(body=chat_body(calls=[("get_weather",
                                               json.dumps(json.dumps({"city": "Lima"})))])))
    (call,) = ask(openai(server)).parsed.calls
    assert call.arguments == {"city": "Lima"} and call.notes == ["double_encoded"]
    assert not strictly_valid(call)


def test_malformed_arguments_make_an_invalid_call(server):
    server.script(Reply(body=chat_body(calls=[("get_weather", "{city: Lima}")])))
    answer = ask(openai(server)).parsed
    (call,) = answer.calls
    assert not call.valid and call.notes == ["malformed_json"]
    assert call.raw_arguments == "{city: Lima}"


def test_truncated_answer_is_invalid_never_empty_arguments(server):
    server.script(Reply(body=chat_body(calls=[("get_weather", '{"city": "Shang')],
                                       finish="length")))
    answer = ask(openai(server)).parsed
    assert answer.error.startswith("truncated") and not answer.declined
    (call,) = answer.calls
    assert not call.valid and "truncated" in call.notes


def test_truncated_even_when_the_cut_arguments_decode(server):
    # A no-parameter call cut at the limit must not read as a valid {} call.
    server.script(Reply(body=chat_body(calls=[("ping", "")], finish="length")))
    answer = ask(openai(server)).parsed
    assert answer.error is not None and not answer.calls[0].valid
    assert answer.calls[0].notes == ["truncated"]


def test_empty_string_arguments_for_a_tool_without_parameters(server):
    server.script(Reply(body=chat_body(calls=[("ping", "")])))
    (call,) = ask(openai(server)).parsed.calls
    assert call.valid and call.arguments == {} and call.notes == ["empty"]


def test_unicode_escapes_and_a_broken_surrogate(server):
    wire = '{"city": "\\u4e0a\\u6d77 \\ud83c\\udf27 \\ud83d"}'
    server.script(Reply(body=chat_body(calls=[("get_weather", wire)])))
    (call,) = ask(openai(server)).parsed.calls
    assert call.arguments["city"] == "上海 🌧 \ufffd"
    assert call.notes == ["broken_unicode"] and not strictly_valid(call)


def test_prose_instead_of_a_call_is_no_call(server):
    server.script(Reply(body=chat_body(text="I cannot help with that.")))
    answer = ask(openai(server, tool_choice="required")).parsed
    assert answer.calls == [] and answer.declined and answer.error is None
    assert answer.text == "I cannot help with that."
    assert server.requests[-1].body["tool_choice"] == "required"


def test_tool_choice_named_none_and_parallel_off_in_the_body(server):
    server.script(Reply(body=chat_body(text="ok")), Reply(body=chat_body(text="ok")))
    ask(openai(server, tool_choice="get_weather", parallel_tool_calls=False))
    body = server.requests[-1].body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False
    ask(openai(server, tool_choice="none"))
    assert server.requests[-1].body["tool_choice"] == "none"


def test_tool_choice_naming_an_unknown_tool_is_a_validation_error(server):
    before = len(server.requests)
    with pytest.raises(ProviderError) as caught:
        ask(openai(server, tool_choice="send_email"))
    assert caught.value.error_class == "validation" and not caught.value.retryable
    assert len(server.requests) == before  # nothing was sent


def test_strict_mode_rewrites_schemas_logs_changes_and_maps_null_back(server):
    provider = openai(server, strict=True)
    provider.prepare(TOOLS, variant_key="v", label="variant 'l3'")
    server.script(Reply(body=chat_body(calls=[("get_weather",
                                               {"city": "Oslo", "unit": None})])))
    response = ask(provider)
    function = server.requests[-1].body["tools"][0]["function"]
    assert function["strict"] is True
    schema = function["parameters"]
    assert schema["required"] == ["city", "unit"] and schema["additionalProperties"] is False
    assert schema["properties"]["unit"]["type"] == ["string", "null"]
    assert None in schema["properties"]["unit"]["enum"]
    assert "minLength" not in schema["properties"]["city"]
    assert WEATHER.input_schema["required"] == ["city"]  # the canonical tool is untouched
    changes = provider.describe()["dialect_changes"]["variant 'l3'"]
    assert "get_weather$.unit: optional -> required and nullable" in changes
    assert "get_weather$.city: dropped 'minLength' (not supported in strict mode)" in changes
    assert "ping$: set additionalProperties false" in changes
    assert response.request["dialect_changes"] == changes  # both tools were in the request
    (call,) = response.parsed.calls
    assert call.arguments == {"city": "Oslo"} and "strict_null_omitted" in call.notes


def test_stream_assembles_calls_by_id_when_the_index_repeats(server):
    fragments = [{"index": 0, "id": "call_1", "name": "get_weather", "arguments": '{"ci'},
                 {"index": 0, "arguments": 'ty": "Paris"}'},
                 {"index": 0, "id": "call_2", "name": "get_weather", "arguments": ""},
                 {"index": 0, "arguments": '{"city": "東京"}'}]
    server.script(Reply(events=chat_stream(fragments, usage=(50, 9))))
    response = ask(openai(server, stream=True))
    assert server.requests[-1].body["stream"] is True
    calls = response.parsed.calls
    assert [(c.id, c.arguments) for c in calls] == [("call_1", {"city": "Paris"}),
                                                    ("call_2", {"city": "東京"})]
    assert response.usage.prompt_tokens == 50 and response.finish_reason == "tool_calls"


def test_stream_cut_at_the_token_limit_is_invalid(server):
    fragments = [{"index": 0, "id": "call_1", "name": "get_weather", "arguments": '{"city": "Pa'}]
    server.script(Reply(events=chat_stream(fragments, finish="length")))
    answer = ask(openai(server, stream=True)).parsed
    assert answer.error.startswith("truncated") and not answer.calls[0].valid


@pytest.mark.parametrize("status,headers,error_class,retry_after", [
    (429, {"retry-after": "7"}, "rate_limited", 7.0),
    (429, {"retry-after-ms": "250"}, "rate_limited", 0.25),
    (500, {}, "transient", None),
    (503, {}, "transient", None),
    (400, {}, "validation", None),
    (401, {}, "permanent", None),
    (404, {}, "permanent", None),
])
def test_http_errors_map_to_error_classes(server, status, headers, error_class, retry_after):
    server.script(Reply(status, error_body(status, "scripted failure"), headers=headers))
    with pytest.raises(ProviderError) as caught:
        ask(openai(server))
    error = caught.value
    assert (error.error_class, error.status, error.retry_after_s) == (error_class, status,
                                                                      retry_after)
    assert error.request_id and "scripted failure" in str(error)
    assert len([r for r in server.requests if r.path.endswith("completions")]) >= 1


def test_sdk_does_not_retry_itself(server):
    before = len(server.requests)
    server.script(Reply(500, error_body(500, "boom")), Reply(body=chat_body(text="ok")))
    with pytest.raises(ProviderError):
        ask(openai(server))
    assert len(server.requests) == before + 1  # the runner owns retries
    ask(openai(server))  # consume the second scripted reply


def test_slow_answer_past_the_timeout_is_a_timeout(server):
    server.script(Reply(body=chat_body(text="late"), delay_s=3.0))
    with pytest.raises(ProviderError) as caught:
        ask(openai(server, timeout_s=0.3))
    assert caught.value.error_class == "timeout" and caught.value.retryable


def test_refused_connection_is_transient():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = make_provider(f"openai-compat:m@http://127.0.0.1:{port}/v1", timeout_s=2)
    with pytest.raises(ProviderError) as caught:
        ask(provider)
    assert caught.value.error_class == "transient"


class BrokenServer:
    """A loopback TCP server that reads each request and answers ``reply`` (raw bytes, maybe
    no HTTP at all), then closes the connection: a server or proxy that breaks the exchange.

    Attributes:
        url: ``http://127.0.0.1:<port>``.
    """

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed: the test is over
                return
            with connection:
                connection.recv(65536)
                if self.reply:
                    connection.sendall(self.reply)

    def __enter__(self) -> "BrokenServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._socket.close()


BROKEN_REPLIES = {
    "the connection closed unanswered": b"",
    "a reply that is not HTTP": b"HELLO WORLD\r\n\r\n",
    "a header aiohttp cannot parse": b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n{}",
    "a body cut short": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"choices\": ["),
}


@pytest.mark.parametrize("kind", ["gemini", "openai", "anthropic"])
@pytest.mark.parametrize("reply", list(BROKEN_REPLIES))
def test_a_broken_exchange_is_transient_on_every_sdk(kind, reply):
    """google-genai raises aiohttp's own errors: a closed connection, a DNS failure or a cut
    body was ``validation``, the row's invalid answer, never retried; aiohttp's parser error
    for a reply that is not HTTP carries status 400, read as the server's HTTP 400."""
    if kind == "gemini":
        pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') not installed")
    with BrokenServer(BROKEN_REPLIES[reply]) as broken:
        base_url = broken.url + ("/v1" if kind == "openai" else "")
        provider = make_provider(f"{kind}:m", base_url=base_url, timeout_s=5)
        with pytest.raises(ProviderError) as caught:
            ask(provider)
    error = caught.value
    assert (error.error_class, error.status) == ("transient", None), str(error)
    assert "HTTP 400" not in str(error)


def test_non_json_body_is_a_classified_error(server):
    server.script(Reply(raw=b"<html>bad gateway</html>"))
    with pytest.raises(ProviderError):
        ask(openai(server))


# --- openai-compat ---------------------------------------------------------------------------

def test_openai_compat_needs_no_key_and_sends_max_tokens(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    provider = make_provider(f"openai-compat:qwen2.5@{server.url}/v1", max_tokens=64)
    server.script(Reply(body=chat_body(calls=[("ping", ("obj", {}))])))
    (call,) = ask(provider).parsed.calls
    assert call.name == "ping" and call.valid
    body = server.requests[-1].body
    assert body["model"] == "qwen2.5" and body["max_tokens"] == 64
    assert "max_completion_tokens" not in body
    assert provider.describe()["base_url"] == f"{server.url}/v1"
    assert "sk-" not in json.dumps(provider.describe())


def test_missing_keys_make_providers_unavailable(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for provider_id, variable in (("openai:gpt-x", "OPENAI_API_KEY"),
                                  ("openai-responses:gpt-x", "OPENAI_API_KEY"),
                                  ("anthropic:claude-x", "ANTHROPIC_API_KEY")):
        with pytest.raises(ProviderUnavailable) as caught:
            make_provider(provider_id)
        assert variable in caught.value.reason and caught.value.provider_id == provider_id


# --- Anthropic Messages --------------------------------------------------------------------

def test_anthropic_answer_request_shape_and_usage(server):
    server.script(Reply(body=anthropic_body(calls=[("get_weather", {"city": "上海"})],
                                            text="Checking.", usage=(30, 12, 200))))
    response = ask(anthropic(server, parallel_tool_calls=False, tool_choice="required"))
    sent = server.requests[-1]
    assert sent.path == "/v1/messages"
    # SDK 2.x sends the key as a bearer token; older ones as x-api-key
    assert "sk-ant-test" in (sent.headers.get("x-api-key"), sent.headers.get("authorization",
                                                                           "")[7:])
    assert sent.headers["anthropic-version"]
    assert sent.body["system"] == "You are terse."
    assert sent.body["messages"] == [{"role": "user",
                                      "content": [{"type": "text", "text": "上海天气?"}]}]
    assert sent.body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert sent.body["tools"][0]["input_schema"] == WEATHER.input_schema
    (call,) = response.parsed.calls
    assert call.arguments == {"city": "上海"} and call.id.startswith("toolu_")
    assert response.parsed.text == "Checking." and response.finish_reason == "tool_use"
    assert response.usage.model_dump() == {"prompt_tokens": 230, "completion_tokens": 12,
                                           "cached_tokens": 200, "reasoning_tokens": None}
    assert response.request_id


def test_anthropic_named_tool_choice_and_none(server):
    server.script(Reply(body=anthropic_body(text="ok")), Reply(body=anthropic_body(text="ok")))
    ask(anthropic(server, tool_choice="ping"))
    assert server.requests[-1].body["tool_choice"] == {"type": "tool", "name": "ping"}
    ask(anthropic(server, tool_choice="none", parallel_tool_calls=False))
    assert server.requests[-1].body["tool_choice"] == {"type": "none"}


def test_anthropic_max_tokens_makes_the_call_invalid(server):
    server.script(Reply(body=anthropic_body(calls=[("get_weather", {})], stop="max_tokens")))
    answer = ask(anthropic(server)).parsed
    assert answer.error.startswith("truncated") and not answer.calls[0].valid


def test_anthropic_input_sent_as_a_string_is_decoded(server):
    server.script(Reply(body=anthropic_body(calls=[("get_weather", '{"city": "Kyiv"}')])))
    (call,) = ask(anthropic(server)).parsed.calls
    assert call.arguments == {"city": "Kyiv"} and call.valid


def test_anthropic_stream_joins_partial_json(server):
    server.script(Reply(events=anthropic_stream(
        [("toolu_1", "get_weather", ['{"ci', 'ty": "Ber', 'lin"}']),
         ("toolu_2", "ping", [])], text="On it.", usage=(40, 22))))
    response = ask(anthropic(server, stream=True))
    assert [(c.id, c.arguments) for c in response.parsed.calls] == [
        ("toolu_1", {"city": "Berlin"}), ("toolu_2", {})]
    assert response.parsed.text == "On it." and response.finish_reason == "tool_use"
    assert response.usage.completion_tokens == 22 and response.usage.prompt_tokens == 40


def test_anthropic_stream_cut_mid_json_is_invalid(server):
    server.script(Reply(events=anthropic_stream([("toolu_1", "get_weather", ['{"city": "Be'])],
                                                stop="max_tokens")))
    answer = ask(anthropic(server, stream=True)).parsed
    (call,) = answer.calls
    assert answer.error is not None and not call.valid and call.arguments == {}
    assert call.raw_arguments == '{"city": "Be'


@pytest.mark.parametrize("status,error_class", [(529, "transient"), (429, "rate_limited"),
                                                (413, "validation"), (403, "permanent")])
def test_anthropic_errors_map_to_classes(server, status, error_class):
    server.script(Reply(status, error_body(status, "nope"), headers={"retry-after": "1"}))
    with pytest.raises(ProviderError) as caught:
        ask(anthropic(server))
    assert caught.value.error_class == error_class


# --- requests the HTTP client refuses to send -------------------------------------------

# Class ``client``: each setting below makes the real SDK's HTTP client raise before a byte
# reaches the server.
REFUSED = {  # what is set -> (provider, environment, what the error names)
    # aiohttp: "Cannot combine AUTHORIZATION header with ... credentials encoded in URL"
    "credentials in OPENAI_BASE_URL": (
        "openai:gpt-test", {"OPENAI_BASE_URL": "http://u:p@{host}/v1"},
        "Cannot combine AUTHORIZATION header"),
    "credentials in ANTHROPIC_BASE_URL": (
        "anthropic:claude-test", {"ANTHROPIC_BASE_URL": "http://u:p@{host}"},
        "Cannot combine AUTHORIZATION header"),
    "a base URL that is not http": (
        "openai:gpt-test", {"OPENAI_BASE_URL": "ftp://{host}/v1"}, "UnsupportedProtocol"),
    "a port out of range": (
        "openai:gpt-test", {"OPENAI_BASE_URL": "http://127.0.0.1:99999/v1"},
        "UnsupportedProtocol"),
    "an API key that is not ASCII": (  # typographic quotes pasted around the key
        "openai:gpt-test", {"OPENAI_API_KEY": "\u201csk-test\u201d",
                            "OPENAI_BASE_URL": "http://{host}/v1"}, "UnicodeEncodeError"),
    "a newline in the API key": (
        "openai:gpt-test", {"OPENAI_API_KEY": "sk-test\nX-Evil: 1",
                            "OPENAI_BASE_URL": "http://{host}/v1"},
        "Forbidden control character"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("setting", list(REFUSED))
def test_a_request_the_http_client_refuses_is_class_client(server, monkeypatch, setting, stream):
    """Never ``validation`` (it would be scored as the model's invalid answer) nor
    ``transient`` (retried, then reported as a failed connection): nothing was sent."""
    provider_id, env, says = REFUSED[setting]
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(host=server.url.removeprefix("http://")))
    before = len(server.requests)
    with pytest.raises(ProviderError) as caught:
        ask(make_provider(provider_id, stream=stream))
    error = caught.value
    assert (error.error_class, error.retryable, error.status) == ("client", False, None)
    assert str(error).startswith("client: the request was not sent") and says in str(error)
    assert len(server.requests) == before


# Settings the SDK's HTTP client refuses while it is made (the provider is built), not while
# it sends: each was a traceback (httpx's InvalidURL, urllib's ValueError) or said only "No
# such file or directory".
CLIENT_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                    "all_proxy", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "SSL_CERT_FILE",
                    "SSL_CERT_DIR")
UNBUILDABLE_ENV = {
    "a proxy variable that is no URL": (
        {"HTTPS_PROXY": "::bad::", "HTTP_PROXY": "::bad::"}, "InvalidURL",
        "HTTPS_PROXY='::bad::'"),
    "a proxy URL with an IPv6 host left open": (
        {"HTTP_PROXY": "http://proxyuser:proxypass99@[::1:5"}, "InvalidURL",
        "HTTP_PROXY='http://***@[::1:5'"),
    "a certificate file that does not exist": (
        {"SSL_CERT_FILE": "/nonexistent/ca.pem"}, "FileNotFoundError",
        "SSL_CERT_FILE='/nonexistent/ca.pem'"),
}
UNBUILDABLE_URL = {
    "an IPv6 host left open in the id": (
        "openai-compat:m@http://[::1:5/v1", {}, "Invalid IPv6 URL",
        "the base URL 'http://[::1:5/v1'"),
    "two ports in OPENAI_BASE_URL": (
        "openai:m", {"OPENAI_BASE_URL": "http://127.0.0.1:8000:1/v1"}, "InvalidURL",
        "OPENAI_BASE_URL='http://127.0.0.1:8000:1/v1'"),
    "two ports in ANTHROPIC_BASE_URL": (
        "anthropic:m", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8000:1"}, "InvalidURL",
        "ANTHROPIC_BASE_URL='http://127.0.0.1:8000:1'"),
}


def refused_while_made(monkeypatch, provider_id, env, **options):
    """The BenchError :func:`make_provider` raises for ``provider_id`` with only ``env`` set
    of the client variables."""
    for name in CLIENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(BenchError) as caught:
        make_provider(provider_id, **options)
    message = str(caught.value)
    assert message.startswith(f"provider '{provider_id}' cannot start: its HTTP client "
                              "refused the settings (")
    return message


@pytest.mark.parametrize("provider_id", ["openai:m", "openai-responses:m", "anthropic:m",
                                         "gemini:m", "openai-compat:m@http://127.0.0.1:9/v1"])
@pytest.mark.parametrize("setting", list(UNBUILDABLE_ENV))
def test_proxy_and_certificate_variables_the_client_refuses_are_one_line_naming_them(
        monkeypatch, provider_id, setting):
    if provider_id.startswith("gemini"):
        pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') not installed")
    env, raised, named = UNBUILDABLE_ENV[setting]
    message = refused_while_made(monkeypatch, provider_id, env)
    assert raised in message and named in message and "proxypass99" not in message


@pytest.mark.parametrize("setting", list(UNBUILDABLE_URL))
def test_a_base_url_the_client_cannot_parse_is_one_line_naming_it(monkeypatch, setting):
    provider_id, env, raised, named = UNBUILDABLE_URL[setting]
    message = refused_while_made(monkeypatch, provider_id, env)
    assert raised in message and named in message


def test_a_request_the_sdk_cannot_build_is_class_client_and_other_code_s_errors_are_not(server):
    """The openai SDK's own refusal (its request builder's TypeError, the real exception) is
    ``client``; the same built-in classes raised by other code (a reply's JSON) are not."""
    import openai as sdk

    async def build_wrongly():
        client = sdk.AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
        try:
            await client.post("/chat/completions", body={}, content=b"{}", cast_to=object)
        finally:
            await client.close()

    before = len(server.requests)
    with pytest.raises(TypeError) as caught:
        asyncio.run(build_wrongly())
    error = error_from_exception(caught.value)
    assert error.error_class == "client" and "Passing both `body` and `content`" in str(error)
    assert len(server.requests) == before
    try:
        json.loads("<html>")
    except ValueError as exc:
        assert error_from_exception(exc).error_class == "validation"
    try:
        len(5)  # a TypeError raised here, not by an HTTP client
    except TypeError as exc:
        assert error_from_exception(exc).error_class == "validation"


def test_the_same_settings_without_the_fault_reach_the_server(server, monkeypatch):
    """The control of the test above: its server and SDK path answer when nothing is wrong."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    before = len(server.requests)
    server.script(Reply(body=chat_body(text="ok")))
    assert ask(make_provider("openai:gpt-test")).parsed.text == "ok"
    assert len(server.requests) == before + 1


# --- multi-turn history: ids paired in every dialect ---------------------------------------

HISTORY = [
    Message(role="system", content="Be brief."),
    Message(role="user", content="Weather in Paris and Oslo?"),
    Message(role="assistant", content=None, tool_calls=[
        {"id": "call_p", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_o", "name": "get_weather", "arguments": {"city": "Oslo"}}]),
    Message(role="tool", tool_call_id="call_o", content="-3C"),
    Message(role="tool", tool_call_id="call_p", content="12C"),
    Message(role="user", content="And in Rome?"),
]


def test_history_converts_to_openai_chat_with_ids_paired(server):
    body = openai(server).build_request(HISTORY, TOOLS, trial=0)
    assistant, first, second = body["messages"][2:5]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_p", "call_o"]
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"]) == {"city": "Oslo"}
    assert (first["role"], first["tool_call_id"], second["tool_call_id"]) == ("tool", "call_o",
                                                                            "call_p")


def test_history_converts_to_anthropic_with_tool_results_in_one_user_turn(server):
    body = anthropic(server).build_request(HISTORY, TOOLS, trial=0)
    assert body["system"] == "Be brief."
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]
    uses = body["messages"][1]["content"]
    assert [(b["type"], b["id"], b["input"]) for b in uses] == [
        ("tool_use", "call_p", {"city": "Paris"}), ("tool_use", "call_o", {"city": "Oslo"})]
    results = body["messages"][2]["content"]
    assert [b.get("tool_use_id") for b in results] == ["call_o", "call_p", None]
    assert results[2] == {"type": "text", "text": "And in Rome?"}  # text after the results


def test_history_converts_to_responses_items(server):
    body = responses(server).build_request(HISTORY, TOOLS, trial=0)
    assert body["instructions"] == "Be brief."
    kinds = [(i.get("type") or i["role"], i.get("call_id")) for i in body["input"]]
    assert kinds == [("user", None), ("function_call", "call_p"), ("function_call", "call_o"),
                     ("function_call_output", "call_o"), ("function_call_output", "call_p"),
                     ("user", None)]


def test_history_through_the_sdk_to_anthropic(server):
    server.script(Reply(body=anthropic_body(calls=[("get_weather", {"city": "Rome"})])))
    (call,) = ask(anthropic(server), messages=HISTORY).parsed.calls
    assert call.arguments == {"city": "Rome"}
    assert server.requests[-1].body["messages"][2]["content"][0]["tool_use_id"] == "call_o"


def test_tool_result_for_an_unknown_call_is_a_validation_error(server):
    broken = [Message(role="user", content="hi"),
              Message(role="tool", tool_call_id="call_zzz", content="x")]
    for provider in (openai(server), anthropic(server), responses(server)):
        with pytest.raises(ProviderError) as caught:
            provider.build_request(broken, TOOLS, trial=0)
        assert caught.value.error_class == "validation" and "call_zzz" in str(caught.value)


# --- OpenAI Responses ------------------------------------------------------------------------

def test_responses_answer_and_request_shape(server):
    server.script(Reply(body=responses_body(calls=[("get_weather", {"city": "Quito"})],
                                            text="Sure.", usage=(80, 10, 32))))
    response = ask(responses(server, tool_choice="get_weather", parallel_tool_calls=True))
    sent = server.requests[-1]
    assert sent.path == "/v1/responses" and sent.body["store"] is False
    assert sent.body["instructions"] == "You are terse."
    assert sent.body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert sent.body["tools"][0]["name"] == "get_weather" and sent.body["tools"][0]["strict"] \
        is False
    assert sent.body["parallel_tool_calls"] is True
    (call,) = response.parsed.calls
    assert call.arguments == {"city": "Quito"} and call.id.startswith("call_")
    assert response.parsed.text == "Sure." and response.usage.cached_tokens == 32


def test_responses_incomplete_answer_is_invalid(server):
    server.script(Reply(body=responses_body(calls=[("get_weather", '{"city": "Qu')],
                                            incomplete="max_output_tokens")))
    response = ask(responses(server))
    assert response.finish_reason == "max_output_tokens"
    assert response.parsed.error.startswith("truncated") and not response.parsed.calls[0].valid


@pytest.mark.slow
def test_responses_stream_uses_the_completed_response(server):
    body = responses_body(calls=[("get_weather", {"city": "Lagos"}), ("ping", "")])
    server.script(Reply(events=responses_stream(body)))
    calls = ask(responses(server, stream=True)).parsed.calls
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Lagos"}),
                                                      ("ping", {})]


# --- Gemini (optional extra) -----------------------------------------------------------------

def gemini(server, **options):
    pytest.importorskip("google.genai", reason="google-genai (extra 'gemini') not installed")
    return make_provider("gemini:gemini-test", base_url=server.url, **options)


RICH = Tool(name="search_orders", description="Search orders.", input_schema={
    "type": "object", "additionalProperties": False,
    "properties": {"status": {"type": ["string", "null"], "enum": ["shipped", "paid", None]},
                   "page": {"type": "integer", "exclusiveMinimum": 0, "default": 1},
                   "kind": {"const": "order"},
                   "email": {"type": "string", "format": "email"},
                   "ids": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}}}})


def test_gemini_schema_subset_tool_config_and_answer(server):
    provider = gemini(server, tool_choice="search_orders")
    provider.prepare([RICH], variant_key="v", label="l10")
    server.script(Reply(body=gemini_body(calls=[("search_orders", {"status": "shipped"})],
                                         usage=(70, 8, 0))))
    response = ask(provider, tools=[RICH], trial=1)
    sent = server.requests[-1]
    assert sent.path == "/v1beta/models/gemini-test:generateContent"
    assert sent.headers["x-goog-api-key"] == "gm-test"
    assert sent.body["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    assert sent.body["toolConfig"] == {"functionCallingConfig": {
        "mode": "ANY", "allowedFunctionNames": ["search_orders"]}}
    assert sent.body["generationConfig"]["seed"] == 1235
    params = sent.body["tools"][0]["functionDeclarations"][0]["parameters"]
    assert "additionalProperties" not in params
    props = params["properties"]
    assert props["status"] == {"type": "STRING", "nullable": True, "enum": ["shipped", "paid"]}
    assert "exclusiveMinimum" not in props["page"] and props["kind"]["enum"] == ["order"]
    assert "format" not in props["email"] and "enum" not in props["ids"]["items"]
    changes = provider.describe()["dialect_changes"]["l10"]
    assert "search_orders$: dropped 'additionalProperties' (not in Gemini's schema subset)" \
        in changes
    assert any("exclusiveMinimum" in c for c in changes) and len(changes) >= 6
    (call,) = response.parsed.calls
    assert call.arguments == {"status": "shipped"} and response.usage.prompt_tokens == 70
    assert provider.describe()["not_sent"] == ["parallel_tool_calls"]


def test_gemini_history_names_the_function_response(server):
    body = gemini(server).build_request(HISTORY, TOOLS, trial=0)
    roles = [c["role"] for c in body["contents"]]
    assert roles == ["user", "model", "user"]
    responses_ = [p["functionResponse"] for p in body["contents"][2]["parts"][:2]]
    assert [(r["id"], r["name"]) for r in responses_] == [("call_o", "get_weather"),
                                                          ("call_p", "get_weather")]


def test_gemini_max_tokens_and_malformed_call_are_invalid(server):
    server.script(Reply(body=gemini_body(calls=[("get_weather", {"city": "X"})],
                                         finish="MAX_TOKENS")),
                  Reply(body=gemini_body(finish="MALFORMED_FUNCTION_CALL")))
    provider = gemini(server)
    assert ask(provider).parsed.error.startswith("truncated")
    answer = ask(provider).parsed
    assert answer.error.startswith("malformed_function_call: finishReason "
                                   "MALFORMED_FUNCTION_CALL") and not answer.declined
    assert answer.error_code == "malformed_function_call"


def test_gemini_rate_limit_is_classified(server):
    provider = gemini(server)
    server.script(Reply(429, error_body(429, "RESOURCE_EXHAUSTED"), headers={"retry-after": "4"}))
    with pytest.raises(ProviderError) as caught:
        ask(provider)
    assert caught.value.error_class == "rate_limited" and caught.value.retry_after_s == 4.0
