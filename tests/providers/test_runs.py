"""`bench run` with several providers: a provider without its key is skipped with the reason
(manifest and stderr), the others run; keys never reach the run directory. Plus the small
shared modules: error classes, Retry-After, schema dialects."""

import json

import pytest

from bench.descriptions.schema_dialects import gemini_schema, nullable, openai_strict_schema
from bench.providers.errors import classify_status, parse_retry_after
from tests.fakeserver import FakeServer

SECRET = "sk-compat-secret-123"


@pytest.fixture
def no_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", SECRET)


@pytest.mark.slow
def test_missing_keys_are_skipped_and_the_other_provider_runs(run_bench, project, no_keys):
    with FakeServer() as server:
        compat = f"openai-compat:fake-model@{server.url}/v1"
        result = run_bench("run", "--limit", "2", "--variants", "l3", "--run-id", "multi",
                           "--provider", "openai:gpt-test", "--provider", "anthropic:claude-test",
                           "--provider", compat, "--parallel-tool-calls", timeout=300)
        served = list(server.requests)
    assert result.returncode == 3, result.stderr  # incomplete: not to be taken as done
    assert "provider openai:gpt-test skipped: OPENAI_API_KEY is not set" in result.stderr
    assert ("partial run: 2 of 6 rows; skipped openai:gpt-test (OPENAI_API_KEY is not set), "
            "anthropic:claude-test (ANTHROPIC_API_KEY is not set); fix that, then: bench run "
            "--resume multi") in result.stderr
    assert "provider anthropic:claude-test skipped: ANTHROPIC_API_KEY is not set" \
        in result.stderr
    run_dir = project / "reports" / "runs" / "multi"
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["providers_skipped"] == [
        {"provider": "openai:gpt-test", "reason": "OPENAI_API_KEY is not set"},
        {"provider": "anthropic:claude-test", "reason": "ANTHROPIC_API_KEY is not set"}]
    assert manifest["status"] == "partial" and manifest["rows_done"] == 2
    (described,) = manifest["providers"]
    assert described["provider"] == compat and described["parallel_tool_calls"] is True
    rows = [json.loads(line) for line in
            (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["provider"] for r in rows} == {compat} and len(rows) == 2
    assert all(r["response"]["request_id"] for r in rows)
    assert all(r["parsed"]["error"] is None and r["parsed"]["calls"] for r in rows)
    assert len(served) == 2 and all(r.body["parallel_tool_calls"] is True for r in served)
    assert served[0].headers["authorization"] == f"Bearer {SECRET}"
    for path in run_dir.iterdir():
        assert SECRET not in path.read_text(encoding="utf-8"), path.name


@pytest.mark.slow
def test_every_provider_skipped_is_a_one_line_error(run_bench, no_keys):
    result = run_bench("run", "--limit", "1", "--variants", "l3", "--provider", "openai:gpt-x",
                       timeout=300)
    assert result.returncode == 2
    assert "every provider was skipped" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_bad_provider_ids_are_one_line_errors(run_bench):
    for provider, words in (("openai-compat:model-without-url", "openai-compat:<model>@"),
                            ("mistral:large", "unknown provider"), ("openai:", "model is "
                                                                    "missing")):
        result = run_bench("run", "--limit", "1", "--variants", "l3", "--provider", provider,
                           timeout=300)
        assert result.returncode == 2 and words in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("status,expected", [(429, "rate_limited"), (408, "timeout"),
                                             (409, "transient"), (500, "transient"),
                                             (529, "transient"), (400, "validation"),
                                             (422, "validation"), (401, "permanent"),
                                             (403, "permanent"), (404, "permanent")])
def test_status_classes(status, expected):
    assert classify_status(status) == expected


def test_retry_after_forms():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"},
                             now=1445412480.0) == 10.0
    assert parse_retry_after({"Retry-After": "soon"}) is None and parse_retry_after({}) is None


def test_strict_schema_nested_objects_and_arrays():
    schema = {"type": "object", "required": ["items"], "properties": {
        "items": {"type": "array", "uniqueItems": True, "items": {
            "type": "object", "properties": {"sku": {"type": "string"},
                                             "qty": {"type": "integer", "default": 1}},
            "required": ["sku"]}},
        "note": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}
    converted, changes = openai_strict_schema(schema, "order")
    item = converted["properties"]["items"]["items"]
    assert item["additionalProperties"] is False and item["required"] == ["sku", "qty"]
    assert item["properties"]["qty"] == {"type": ["integer", "null"]}
    assert converted["properties"]["note"]["anyOf"][-1] == {"type": "null"}
    assert "uniqueItems" not in converted["properties"]["items"]
    assert "order$.items.items.qty: dropped 'default' (not supported in strict mode)" in changes
    assert "order$.items.items.qty: optional -> required and nullable" in changes
    assert "order$.note: optional -> required and nullable" in changes
    assert schema["properties"]["items"]["items"]["required"] == ["sku"]  # input untouched


def test_nullable_without_a_type_wraps_in_any_of():
    assert nullable({"const": 3}) == {"anyOf": [{"const": 3}, {"type": "null"}]}


def test_gemini_schema_multi_type_becomes_any_of():
    converted, changes = gemini_schema(
        {"type": "object", "properties": {"v": {"type": ["string", "integer", "null"]},
                                          "w": {"oneOf": [{"type": "string"}]},
                                          "$comment": {"type": "string"}},
         "$schema": "https://json-schema.org/draft/2020-12/schema"}, "t")
    assert converted["properties"]["v"] == {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}],
                                            "nullable": True}
    assert converted["properties"]["w"] == {"anyOf": [{"type": "STRING"}]}
    assert "$schema" not in converted
    assert "t$: dropped '$schema' (not in Gemini's schema subset)" in changes
    assert "t$.w: oneOf -> anyOf" in changes


def test_local_threads_option_env_and_default(monkeypatch):
    import os

    from bench.errors import BenchError
    from bench.providers.local import resolve_threads

    monkeypatch.delenv("BENCH_THREADS", raising=False)
    assert resolve_threads(None) == max(1, min(4, os.cpu_count() or 1))
    cores = os.cpu_count() or 1
    monkeypatch.setenv("BENCH_THREADS", str(cores))
    assert resolve_threads(None) == cores and resolve_threads(1) == 1
    monkeypatch.setenv("BENCH_THREADS", str(cores + 1))  # more than the cores: refused
    with pytest.raises(BenchError, match="logical cores"):
        resolve_threads(None)
    monkeypatch.setenv("BENCH_THREADS", "many")
    with pytest.raises(BenchError, match="BENCH_THREADS"):
        resolve_threads(None)
