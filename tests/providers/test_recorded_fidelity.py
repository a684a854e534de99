"""Fidelity suite (issue 18): responses recorded from the real provider APIs, served on loopback
to ``bench run`` through the CLI, every adapter, streamed and not.

``tests/data/recorded/manifest.yaml`` lists each recording (repository, path, commit, license)
with the values read from it by hand: tool calls, finish reason, usage, or the error message. The
loopback server serves each body as recorded (status, Content-Type), some gzip-compressed with
``Content-Encoding: gzip``, streams with chunked transfer cut at 1 to 4,096 bytes (inside lines and
characters), SSE comment lines, ``ping`` events and padded ``data:`` lines as they were recorded.
Two CLI runs (``--stream`` and not) ask one provider per route (OpenAI, the Responses API,
Anthropic, Gemini, and each OpenAI-compatible vendor at its own ``/<vendor>/v1`` base URL); the
server hands each route its recordings in order and logs which case got which, and each test
below checks one recording's row.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict, deque
from pathlib import Path

import pytest
import yaml

from tests.fakeserver import FakeServer, Recorded, Reply, default_reply

DATA = Path(__file__).parents[1] / "data" / "recorded"
MANIFEST = yaml.safe_load((DATA / "manifest.yaml").read_text(encoding="utf-8"))
RECORDINGS = MANIFEST["recordings"]
CORE_ROUTES = {"openai": "openai:gpt-recorded", "responses": "openai-responses:gpt-recorded",
               "anthropic": "anthropic:claude-recorded", "gemini": "gemini:gemini-recorded"}


def body_bytes(recording: dict) -> bytes:
    """The bytes served for a recording: the file as recorded, or, for the one-JSON-per-line
    fixtures, that JSON framed as SSE events the way the provider sends them."""
    raw = (DATA / recording["body"]).read_bytes()
    framing = recording.get("framing")
    if framing is None:
        return raw
    lines = [line for line in raw.decode("utf-8").splitlines() if line.strip()]
    if framing == "anthropic-events":
        return "".join(f"event: {json.loads(line)['type']}\ndata: {line}\n\n"
                       for line in lines).encode("utf-8")
    assert framing == "data-lines", framing
    return ("".join(f"data: {line}\n\n" for line in lines) + "data: [DONE]\n\n").encode("utf-8")


def route_of(request: Recorded) -> tuple[str, bool]:
    """(route, streamed?) of a request: the core APIs by path, a vendor by its path prefix."""
    path, body = request.path, request.body if isinstance(request.body, dict) else {}
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini", ":streamGenerateContent" in path
    stream = bool(body.get("stream"))
    if path == "/v1/chat/completions":
        return "openai", stream
    if path == "/v1/responses":
        return "responses", stream
    if path == "/v1/messages":
        return "anthropic", stream
    return path.strip("/").split("/")[0], stream


def user_text(request: Recorded) -> str:
    """The last user message of a request (the row's ``query``), in any dialect."""
    body = request.body if isinstance(request.body, dict) else {}
    turns = body.get("messages") or body.get("contents") or body.get("input") or []
    for turn in reversed(turns):
        if turn.get("role") != "user":
            continue
        content = turn.get("content", turn.get("parts"))
        if isinstance(content, str):
            return content
        return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
    return ""


class RecordedServer(FakeServer):
    """Serves each route its recordings in manifest order, then default answers; remembers
    which (streamed?, route, query) got which recording."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, bool], deque] = defaultdict(deque)
        for recording in RECORDINGS:
            self.queues[recording["route"], recording["stream"]].append(recording)
        self.served: dict[tuple[bool, str, str], str] = {}
        self._served_lock = threading.Lock()
        super().__init__(handler=self.answer)

    def answer(self, request: Recorded) -> Reply:
        route, stream = route_of(request)
        with self._served_lock:
            queue = self.queues.get((route, stream))
            recording = queue.popleft() if queue else None
            if recording is not None:
                self.served[stream, route, user_text(request)] = recording["id"]
        if recording is None:
            return default_reply(request)
        served = recording["served"]
        return Reply(recording["status"], raw=body_bytes(recording),
                     content_type=recording["content_type"], gzip=served["gzip"],
                     chunk_size=served["chunk_size"])


def providers(url: str) -> dict[str, str]:
    """Route -> provider id of the run."""
    vendors = {r["route"] for r in RECORDINGS if r["route"] not in CORE_ROUTES}
    return {**CORE_ROUTES, **{v: f"openai-compat:{v}-model@{url}/{v}/v1" for v in vendors}}


@pytest.fixture(scope="module")
def rows_by_recording(tmp_path_factory) -> dict[str, dict]:
    """Both CLI runs against the recorded server; each recording's row."""
    import shutil
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    project = tmp_path_factory.mktemp("recorded") / "project"
    shutil.copytree(repo / "datasets", project / "datasets")
    shutil.copytree(repo / "descriptions", project / "descriptions")
    per_route = max(sum(1 for r in RECORDINGS if (r["route"], r["stream"]) == key)
                    for key in {(r["route"], r["stream"]) for r in RECORDINGS})
    found: dict[str, dict] = {}
    with RecordedServer() as server:
        by_route = providers(server.url)
        env = {**os.environ, "BENCH_HOME": str(project), "COLUMNS": "200",
               "PYTHONPATH": str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test",
               "GEMINI_API_KEY": "gm-test", "OPENAI_COMPAT_API_KEY": "compat-test",
               "OPENAI_BASE_URL": server.url + "/v1", "ANTHROPIC_BASE_URL": server.url,
               "GOOGLE_GEMINI_BASE_URL": server.url}
        for stream in (False, True):
            run_id = "recorded-stream" if stream else "recorded"
            command = [sys.executable, "-m", "bench", "run", "--variants", "l3", "--limit",
                       str(per_route), "--no-execute", "--concurrency", "1", "--run-id", run_id,
                       *(["--stream"] if stream else [])]
            for provider in by_route.values():
                command += ["--provider", provider]
            result = subprocess.run(command, cwd=project, env=env, capture_output=True,
                                    text=True, timeout=600)
            assert result.returncode == 0, result.stderr[-3000:]
            route_by_provider = {p: r for r, p in by_route.items()}
            results = project / "reports" / "runs" / run_id / "results.jsonl"
            for line in results.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                served = server.served.get((stream, route_by_provider[row["provider"]],
                                            row["query"]))
                if served is not None and row["trial"] == 0:
                    found[served] = row
    return found


@pytest.mark.slow
@pytest.mark.parametrize("recording", RECORDINGS, ids=[r["id"] for r in RECORDINGS])
def test_recorded_response_parses_as_read_by_hand(recording, rows_by_recording):
    row = rows_by_recording.get(recording["id"])
    assert row is not None, f"{recording['id']} was not served to its provider"
    expect = recording["expect"]
    parsed = row["parsed"]
    assert [[c["name"], c["arguments"]] for c in parsed["calls"]] == expect["calls"]
    assert all(c["valid"] for c in parsed["calls"])
    assert row["response"]["finish_reason"] == expect["finish_reason"]
    if "error" in expect:
        assert expect["error"] in (parsed["error"] or ""), parsed["error"]
        assert row["request"]["error_class"] == expect["error_class"]
        return
    assert parsed["error"] is None, parsed["error"]
    if "text" in expect:
        assert parsed["text"] == expect["text"]
    usage, want = row["usage"], expect["usage"]
    assert (usage["prompt_tokens"], usage["cached_tokens"]) == (want["prompt"], want["cached"])
    # reasoning tokens reported apart from completion tokens may be counted in (issue 18.1)
    assert usage["completion_tokens"] in (want["completion"], want["completion"]
                                          + want.get("reasoning_outside_completion", 0))


def test_the_manifest_covers_every_adapter_streamed_and_not():
    seen = {(r["adapter"], r["stream"]) for r in RECORDINGS}
    for adapter in ("openai", "openai-responses", "anthropic", "gemini", "openai-compat"):
        assert {(adapter, False), (adapter, True)} <= seen, adapter
    assert len(RECORDINGS) >= 30
    vendors = {r["vendor"] for r in RECORDINGS if r["adapter"] == "openai-compat"}
    assert {"Groq", "Mistral", "OpenRouter", "xAI", "DeepSeek", "Hugging Face"} <= vendors
    for recording in RECORDINGS:
        source = recording["source"]
        assert source["license"] in ("MIT", "Apache-2.0") and len(source["commit"]) == 40
        assert (DATA / recording["body"]).is_file()
