"""Provider errors in a run (issue 18.2): an error inside a 200 stream is classified by what it
says; a 4xx becomes that row's invalid answer with the message kept, overloaded/5xx/rate-limit
errors are retried like their HTTP forms, requests that fail after every retry stay pending while
the run goes on, and only auth and configuration errors stop a run (at once, one line)."""

import json

import pytest

from bench.errors import BenchError
from bench.runner import FAILED_IN_A_ROW_TO_PAUSE, RunConfig, Runner
from fakeserver import (FakeServer, Reply, anthropic_stream, chat_fragments, chat_stream,
                        error_body)

TOKEN_LIMIT = {"code": 400, "message": "Token limit reached"}


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "sk-compat")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


def config(provider, **overrides):
    settings = dict(dataset="ecommerce", variants=["l3"], providers=[provider], limit=3,
                    concurrency=1, stream=True, execute=False)
    settings.update(overrides)
    return RunConfig(**settings)


def openrouter_cut_stream():
    """The recorded OpenRouter shape: a call cut by ``finish_reason: "length"``, then an error
    chunk in the same HTTP 200 stream."""
    return Reply(events=chat_stream(chat_fragments("call_1", "search_orders", '{"status": "sh'),
                                    finish="length", error=TOKEN_LIMIT))


@pytest.mark.slow
def test_an_error_chunk_after_a_length_finish_is_the_rows_invalid_answer(project):
    with FakeServer() as server:
        server.script(openrouter_cut_stream())
        runner = Runner(config(f"openai-compat:m@{server.url}/v1"), run_id="or", command=[])
        manifest = runner.run()
    rows = list(runner.store.rows())
    assert manifest["status"] == "complete" and len(rows) == 3
    failed = [r for r in rows if r["parsed"]["error"]]
    (row,) = failed
    assert "Token limit reached" in row["parsed"]["error"] and row["attempts"] == 1
    assert row["request"]["error_class"] == "validation"
    assert row["response"]["finish_reason"] == "error"
    assert all(r["parsed"]["calls"] for r in rows if r is not row)


@pytest.mark.slow
def test_the_cli_run_goes_on_past_a_stream_error(run_bench, project):
    with FakeServer() as server:
        server.script(openrouter_cut_stream())
        result = run_bench("run", "--limit", "2", "--variants", "l3", "--stream", "--no-execute",
                           "--provider", f"openai-compat:m@{server.url}/v1", "--run-id", "cli",
                           timeout=300)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in
            (project / "reports" / "runs" / "cli" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and sum("Token limit reached" in (r["parsed"]["error"] or "")
                                  for r in rows) == 1


def test_an_anthropic_overloaded_event_is_retried_like_a_529(project, monkeypatch):
    with FakeServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        server.script(Reply(events=anthropic_stream(
            [("toolu_1", "search_orders", ['{"status"'])],
            error={"type": "overloaded_error", "message": "Overloaded"})))
        runner = Runner(config("anthropic:claude-test", limit=1), run_id="ovl", command=[])
        manifest = runner.run()
    (row,) = runner.store.rows()
    assert manifest["status"] == "complete" and row["attempts"] == 2
    assert row["parsed"]["error"] is None and row["parsed"]["calls"]


@pytest.mark.slow
def test_requests_failing_after_every_retry_stay_pending_and_the_run_goes_on(project):
    with FakeServer() as server:
        server.script(Reply(503, error_body(503, "busy")), Reply(503, error_body(503, "busy")))
        runner = Runner(config(f"openai-compat:m@{server.url}/v1", stream=False, attempts=2),
                        run_id="pend", command=[])
        first = runner.plan[0].key
        with pytest.raises(BenchError, match=r"1 request failed after every retry \(first: "
                                             rf"{first}: .*busy\).*--resume pend"):
            runner.run()
        manifest = json.loads(runner.store.manifest_path.read_text())
        assert manifest["status"] == "partial" and manifest["rows_done"] == 2
        assert [e["key"] for e in manifest["request_errors"]] == [first]
        assert first not in {r["key"] for r in runner.store.rows()}
        resumed = Runner.resume("pend", command=[]).run()
    assert resumed["status"] == "complete" and resumed["rows_done"] == 3
    assert "request_errors" not in resumed


@pytest.mark.slow
def test_the_cli_shows_the_rows_done_and_exits_3_when_requests_are_left_for_resume(run_bench,
                                                                                   project):
    """Retries exhausted on one request: the run is partial, not failed (exit 3, the code for
    'incomplete, resumable'), and the table of the rows done is still printed."""
    with FakeServer() as server:
        server.script(Reply(503, error_body(503, "busy")), Reply(503, error_body(503, "busy")))
        result = run_bench("run", "--limit", "2", "--variants", "l3", "--no-execute",
                           "--attempts", "2", "--concurrency", "1",
                           "--provider", f"openai-compat:m@{server.url}/v1",
                           "--run-id", "left", timeout=300)
    assert result.returncode == 3, result.stderr
    assert "partial run: 1 request failed after every retry" in result.stderr
    assert "bench run --resume left" in result.stderr and "selection" in result.stdout
    manifest = json.loads((project / "reports" / "runs" / "left" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["rows_done"] == 1


def test_a_provider_failing_every_request_is_paused_not_hammered(project):
    with FakeServer(handler=lambda request: Reply(500, error_body(500, "down"))) as server:
        runner = Runner(config(f"openai-compat:m@{server.url}/v1", stream=False, attempts=1,
                               limit=FAILED_IN_A_ROW_TO_PAUSE + 4), run_id="down", command=[])
        with pytest.raises(BenchError, match="stopped sending to openai-compat"):
            runner.run()
        sent = len(server.requests)
    manifest = json.loads(runner.store.manifest_path.read_text())
    # requests already queued to the worker when the pause came may still go out
    assert FAILED_IN_A_ROW_TO_PAUSE <= sent < FAILED_IN_A_ROW_TO_PAUSE + 4
    assert manifest["providers_paused"][0]["provider"].startswith("openai-compat:")


def test_an_auth_error_inside_a_stream_stops_the_run_at_once(project):
    with FakeServer() as server:
        server.script(Reply(events=chat_stream([], error={"code": 401,
                                                          "message": "User not found."})))
        runner = Runner(config(f"openai-compat:m@{server.url}/v1"), run_id="auth", command=[])
        with pytest.raises(BenchError, match=r"permanent error on case .*User not found\."
                                             r".*--resume auth") as info:
            runner.run()
    assert "\n" not in str(info.value)
