"""Provider errors in a run (issue 18.2): an error inside a 200 stream is classified by what it
says; a 4xx becomes that row's invalid answer with the message kept, overloaded/5xx/rate-limit
errors are retried like their HTTP forms, requests that fail after every retry stay pending while
the run goes on, and only auth and configuration errors stop a run (at once, one line)."""

import json

import pytest

from bench.errors import BenchError
from bench.runner import FAILED_IN_A_ROW_TO_PAUSE, RunConfig, Runner
from tests.fakeserver import (FakeServer, Reply, anthropic_stream, chat_fragments, chat_stream,
                              error_body)
from tests.stored import row_dicts

TOKEN_LIMIT = {"code": 400, "message": "Token limit reached"}


@pytest.fixture(autouse=True)
def compat_and_anthropic_keys(monkeypatch):
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
    rows = row_dicts(runner.store)
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
    (row,) = row_dicts(runner.store)
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
        assert first not in {r["key"] for r in row_dicts(runner.store)}
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


@pytest.mark.slow
def test_a_request_the_http_client_refuses_stops_the_run_unscored_until_resumed(
        run_bench, project, monkeypatch):
    """Credentials in OPENAI_BASE_URL, which the SDK's aiohttp transport refuses beside the
    API key's Authorization header: nothing reaches the server, so no row is scored (it used
    to be every row's invalid answer in a ``complete`` run); the run fails with one line and
    a resume with the setting fixed does the rows."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-for-the-test")
    with FakeServer() as server:
        host = server.url.removeprefix("http://")
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://u:p@{host}/v1")
        refused = run_bench("run", "--provider", "openai:gpt-4o-mini", "--limit", "3",
                            "--variants", "l3", "--no-execute", "--run-id", "refused",
                            timeout=300)
        sent_while_refused = len(server.requests)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        resumed = run_bench("run", "--resume", "refused", timeout=300)
    run_dir = project / "reports" / "runs" / "refused"
    assert refused.returncode == 2, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in refused.stderr
    assert "the request was not sent" in errors[0] and "Cannot combine AUTHORIZATION" in errors[0]
    assert "bench run --resume refused" in errors[0] and "validation" not in errors[0]
    assert sent_while_refused == 0
    assert resumed.returncode == 0, resumed.stderr
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and len(server.requests) == 3
    assert all(r["parsed"]["error"] is None and r["attempts"] == 1 for r in rows)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["rows_done"] == 3


@pytest.mark.slow
def test_a_refused_request_is_neither_retried_nor_left_as_a_failed_request(project,
                                                                          monkeypatch):
    """The run stops at the first refusal (class ``client``), as for a bad key: no retry, not
    counted among the requests that failed after every retry, the manifest says ``failed``."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-for-the-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://127.0.0.1:9/v1")
    runner = Runner(config("openai:gpt-4o-mini", stream=False, attempts=3), run_id="ftp",
                    command=[])
    with pytest.raises(BenchError, match=r"case .*: the request was not sent: the HTTP client "
                                         r"refused it \(UnsupportedProtocol: .*--resume ftp"):
        runner.run()
    manifest = json.loads(runner.store.manifest_path.read_text())
    assert manifest["status"] == "failed" and manifest["rows_done"] == 0
    assert "request_errors" not in manifest and row_dicts(runner.store) == []
    assert manifest["rate_limits"]["openai:gpt-4o-mini"]["retries"] == 0


@pytest.mark.slow
def test_a_proxy_variable_the_client_cannot_parse_ends_the_command_in_one_line(
        run_bench, project, monkeypatch):
    """HTTPS_PROXY='::bad::' made the SDK's client constructor raise httpx's InvalidURL: a
    traceback, exit 1. Now one line naming the variable, exit 2, no run folder; the same
    command runs once the variable is fixed."""
    with FakeServer() as server:
        args = ("run", "--provider", f"openai-compat:m@{server.url}/v1", "--limit", "2",
                "--variants", "l3", "--no-execute", "--run-id", "proxied")
        monkeypatch.setenv("HTTPS_PROXY", "::bad::")
        monkeypatch.setenv("HTTP_PROXY", "::bad::")
        refused = run_bench(*args, timeout=300)
        monkeypatch.delenv("HTTPS_PROXY")
        monkeypatch.delenv("HTTP_PROXY")
        fixed = run_bench(*args, timeout=300)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "InvalidURL" in errors[0] and "HTTPS_PROXY='::bad::'" in errors[0]
    assert fixed.returncode == 0, fixed.stderr
    rows = (project / "reports/runs/proxied/results.jsonl").read_text().splitlines()
    assert len(rows) == 2 and len(server.requests) == 2
