"""End to end against a real OpenAI-compatible server: llama-cpp-python's
``python -m llama_cpp.server`` on loopback with the embedded SmolLM2 model, through the
``openai-compat`` adapter and the real openai SDK."""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from bench.models import Message, Tool
from bench.providers import make_provider
from conftest import requires_local_model
from tests.fakeserver import complete_once

pytestmark = [requires_local_model, pytest.mark.model]

WEATHER = Tool(name="get_weather", description="Get the current weather of a city.",
               input_schema={"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]})
ASK = [Message(role="user", content="What is the weather in Paris?")]


@contextlib.contextmanager
def serve(model_path, alias="smollm2", n_ctx=2048):
    """Run ``llama_cpp.server`` with ``model_path`` on a free loopback port; yield its
    ``/v1`` URL (the model answers as ``alias``; ``n_ctx``: context window, tokens)."""
    pytest.importorskip("uvicorn", reason="llama-cpp-python's server extra is not installed")
    from bench.providers.local import resolve_threads

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    threads = str(resolve_threads(None))
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads",
         threads, "--n_threads_batch", threads, "--model_alias", alias, "--verbose", "false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None:
                pytest.fail("llama_cpp.server exited: "
                            + process.stderr.read().decode("utf-8", "replace")[-2000:])
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not start within 180 s")
            time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


@pytest.fixture(scope="module")
def llama_server():
    """``llama_cpp.server`` with the default model; yields its ``/v1`` URL."""
    from bench.providers.local import resolve_model_path

    with serve(resolve_model_path(None)) as base:
        yield base


def compat(base, **options):
    return make_provider(f"openai-compat:smollm2@{base}", timeout_s=300, **options)


def test_named_tool_choice_yields_a_parsed_call(llama_server):
    response = complete_once(compat(llama_server, tool_choice="get_weather", max_tokens=40), 
        ASK, [WEATHER], variant_key="v", trial=0)
    (call,) = response.parsed.calls
    assert call.name == "get_weather" and call.valid
    assert isinstance(call.raw_arguments, str)  # this server sends a JSON string, like OpenAI
    assert set(call.arguments) <= {"city"} and response.parsed.error is None
    assert response.usage.prompt_tokens > 0 and response.latency_s > 0
    assert response.raw["model"] == "smollm2"


def test_streamed_call_is_assembled(llama_server):
    response = complete_once(compat(llama_server, tool_choice="get_weather", max_tokens=40,
                      stream=True), ASK, [WEATHER], variant_key="v", trial=0)
    (call,) = response.parsed.calls
    assert call.name == "get_weather" and call.valid and call.id
    assert response.finish_reason == "tool_calls"


def test_prose_cut_at_the_token_limit_is_invalid(llama_server):
    response = complete_once(compat(llama_server, tool_choice="auto", max_tokens=6), 
        ASK, [WEATHER], variant_key="v", trial=0)
    assert response.finish_reason == "length"
    assert response.parsed.error.startswith("truncated") and not response.parsed.declined
    assert response.usage.completion_tokens == 6
