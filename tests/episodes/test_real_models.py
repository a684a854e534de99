"""Episodes end to end on real models (the tiny SmolLM2-135M, so these check the loop, not
the model's skill): through llama.cpp's OpenAI-compatible server (``llama_cpp.server``
behind a recording loopback proxy, via the ``openai-compat`` adapter and the real openai
SDK), and on the embedded model (``local``). Each episode must run to an end (a final
answer, the step limit or the loop guard), feed the first step's result back into the
second step's prompt, and write a well-formed row.

Run them one at a time on this machine: ``flock /tmp/model.lock python -m pytest ...``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from bench.models import Case, Message
from bench.providers.cache import messages_digest
from bench.store import RunStore
from conftest import requires_local_model
from tests.fakeserver import FakeServer, Recorded, Reply
from tests.providers.test_llama_server import serve

pytestmark = [requires_local_model, pytest.mark.model, pytest.mark.slow]

MODEL = "smollm2-135m"
CASE = {"id": "model-ep-1", "toolset": "ecommerce", "lang": "en", "kind": "episode",
        # worded so that the tiny model calls a tool in its first answer (asked "what is the
        # status of my order ...", it answers in words at once: nothing to feed back)
        "messages": [{"role": "user", "content": "Use get_order_status to look up order "
                                                 "ORD20250002."}],
        "success": {"answer_facts": [["delivered"]]},
        "required_calls": [{"name": "get_order_status",
                            "arguments": {"order_id": ["ORD20250002"]}}],
        "max_steps": 3}
ENDINGS = {"final_answer", "step_limit", "loop_guard"}


def write_dataset(tmp_path):
    """The one-episode dataset as a ``.jsonl`` file in ``tmp_path``."""
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(CASE) + "\n", encoding="utf-8")
    return path


def finished_row(project, run_id):
    """The run's one row, read through the results contract (a malformed row raises)."""
    (row,) = RunStore(project / "reports" / "runs", run_id).load_rows()
    episode = row.episode
    assert episode is not None and episode.stop_reason in ENDINGS, episode
    steps = episode.steps
    assert 2 <= len(steps) <= CASE["max_steps"], "the model made no call in its first answer"
    assert row.metrics.steps == len(steps)
    assert row.metrics.tool_calls == sum(len(s.calls) for s in steps)
    assert isinstance(row.metrics.task_success, bool)
    assert row.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in steps)
    for step in steps[:-1]:  # every answer before the last made calls, whose results went back
        assert step.calls and step.error is None
        assert [r.call_id for r in step.results] == [c.id for c in step.calls]
    if episode.stop_reason == "final_answer":
        assert not steps[-1].calls
    return row


def conversation_after_first_step(row):
    """The conversation the second step must have been asked with: the question, the first
    answer's calls, their results as the row says they were sent."""
    first = row.episode.steps[0]
    return [*Case.model_validate(CASE).messages,
            Message(role="assistant", content=first.text or None,
                    tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments}
                                for c in first.calls]),
            *(Message(role="tool", tool_call_id=r.call_id, content=r.content,
                      is_error=r.is_error or None) for r in first.results)]


def test_episode_through_llama_cpp_openai_compatible_server(run_bench, project, tmp_path):
    from bench.providers.local import resolve_model_path

    with serve(resolve_model_path(None, MODEL), n_ctx=8192) as upstream:
        def forward(request: Recorded) -> Reply:
            """Pass the request on to llama.cpp's server and its answer back unchanged."""
            sent = urllib.request.Request(upstream.removesuffix("/v1") + request.path,
                                          data=json.dumps(request.body).encode("utf-8"),
                                          headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(sent, timeout=600) as answer:
                    return Reply(answer.status, raw=answer.read())
            except urllib.error.HTTPError as exc:
                return Reply(exc.code, raw=exc.read())

        with FakeServer(handler=forward) as proxy:
            # a named tool_choice: llama.cpp's server then constrains the answer to a call
            result = run_bench("run", "--dataset", str(write_dataset(tmp_path)),
                               "--variants", "l3", "--provider",
                               f"openai-compat:smollm2@{proxy.url}/v1", "--tool-choice",
                               "get_order_status", "--request-timeout", "600",
                               "--run-id", "llama-ep", timeout=1500)
            requests = list(proxy.requests)
    assert result.returncode == 0, result.stderr
    row = finished_row(project, "llama-ep")
    steps = row.episode.steps
    assert len(requests) == len(steps)
    first = steps[0]
    tool_messages = [m for m in requests[1].body["messages"] if m["role"] == "tool"]
    assert tool_messages == [{"role": "tool", "tool_call_id": r.call_id,
                              "content": r.content} for r in first.results]
    assert tool_messages and requests[1].body["messages"][0]["content"] == \
        CASE["messages"][0]["content"]
    assert steps[1].messages_sha256 == messages_digest(conversation_after_first_step(row))


def test_episode_on_the_embedded_model(run_bench, project, tmp_path):
    from llama_cpp import Llama

    from bench.providers.local import resolve_model_path

    result = run_bench("run", "--dataset", str(write_dataset(tmp_path)), "--variants", "l3",
                       "--provider", "local", "--model", MODEL, "--run-id", "local-ep",
                       timeout=1500)
    assert result.returncode == 0, result.stderr
    row = finished_row(project, "local-ep")
    steps = row.episode.steps
    # the second step was asked with the first step's results ...
    assert steps[1].messages_sha256 == messages_digest(conversation_after_first_step(row))
    # ... and the model's prompt grew by at least their tokens (the embedded model gets
    # each result as a "Tool result (<id>): <content>" turn, bench.providers.local.prompt)
    vocab = Llama(model_path=str(resolve_model_path(None, MODEL)), vocab_only=True,
                  verbose=False)
    result_tokens = sum(len(vocab.tokenize(r.content.encode("utf-8"), add_bos=False))
                        for r in steps[0].results)
    grew = steps[1].usage.prompt_tokens - steps[0].usage.prompt_tokens
    assert grew >= result_tokens > 0
