"""Token cost per provider family: OpenAI encodings, Anthropic's count_tokens endpoint (over a
loopback server driven by the real SDK) or a labeled estimate."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import pytest

from bench.descriptions import load_variant
from bench.descriptions.cost import (anthropic_cost, anthropic_system_prompt_tokens,
                                     openai_costs)
from bench.descriptions.tokens import openai_tool_tokens


class _CountTokens(BaseHTTPRequestHandler):
    """POST /v1/messages/count_tokens: input_tokens = 7 + characters of the tools JSON / 4."""

    requests: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        key = self.headers.get("x-api-key") or self.headers.get("authorization", "")
        type(self).requests.append((self.path, key, body))
        tokens = 7 + len(json.dumps(body.get("tools", []))) // 4
        payload = json.dumps({"input_tokens": tokens}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def count_server():
    _CountTokens.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CountTokens)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _CountTokens.requests
    server.shutdown()


def test_anthropic_count_tokens_endpoint_is_used_when_a_client_is_there(project, count_server):
    url, requests = count_server
    tools = load_variant("ecommerce", "l10").tools
    client = anthropic.Anthropic(api_key="test-key", base_url=url, max_retries=0)
    cost = anthropic_cost(tools, "claude-sonnet-4-5", client=client)
    assert not cost.estimate and cost.overhead is None  # the endpoint already counts it
    (path, key, with_tools), (_, _, without) = requests
    assert path == "/v1/messages/count_tokens" and "test-key" in key
    assert with_tools["model"] == "claude-sonnet-4-5" and "tools" not in without
    assert [t["name"] for t in with_tools["tools"]] == [t.name for t in tools]
    assert set(with_tools["tools"][0]) == {"name", "description", "input_schema"}
    assert cost.tokens == len(json.dumps(with_tools["tools"])) // 4


def test_anthropic_without_key_is_a_labeled_estimate(project, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    cost = anthropic_cost(load_variant("ecommerce", "l3").tools, "claude-sonnet-4-5")
    assert cost.estimate and "estimate" in cost.method and cost.label == "estimate"
    assert cost.overhead == 346 and cost.total == cost.tokens + 346


def test_documented_system_prompt_tokens():
    assert anthropic_system_prompt_tokens("claude-opus-4-1-20250805") == 346
    assert anthropic_system_prompt_tokens("claude-haiku-4-5", "any") == 313
    assert anthropic_system_prompt_tokens("claude-3-haiku-20240307", "tool") == 340
    assert anthropic_system_prompt_tokens("some-other-model") is None


def test_openai_encodings_grow_with_the_description(project):
    short, long = (load_variant("ecommerce", v).tools for v in ("l3", "l50"))
    o200k, cl100k = openai_costs(short)
    assert o200k.tokens == openai_tool_tokens(short) and o200k.estimate
    assert cl100k.label == "cl100k" and cl100k.tokens != o200k.tokens
    assert openai_costs(long)[0].tokens > 2 * o200k.tokens


@pytest.mark.slow
def test_variants_command_shows_every_family(run_bench, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = run_bench("variants", "--toolset", "ecommerce", "--variants", "l3,l30", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["variants"]
    assert [r["variant"] for r in rows] == ["l3", "l30"]
    families = [(c["family"], c["label"], c["estimate"]) for c in rows[0]["costs"]]
    assert families == [("openai", "o200k", True), ("openai", "cl100k", True),
                        ("anthropic", "estimate", True)]
    table = run_bench("variants", "--toolset", "ecommerce", "--variants", "l3")
    assert "anthropic estimate*" in table.stdout and "+346" in table.stdout
