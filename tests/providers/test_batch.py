"""Batch mode through the real openai and anthropic SDKs against fake batch endpoints on
127.0.0.1: submit, poll, collect, and resume after a crash without submitting twice."""

import json

import pytest

from bench.errors import BenchError
from bench.runner import RunConfig, Runner
from tests.fakebatch import BatchBackend
from tests.fakeserver import FakeServer
from tests.stored import row_dicts


@pytest.fixture(autouse=True)
def openai_and_anthropic_keys(monkeypatch):
    """Dummy keys: the SDKs only send them to 127.0.0.1."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


@pytest.fixture
def backend(project, monkeypatch):
    """The fake batch APIs; the SDKs find them through their base-URL variables."""
    batches = BatchBackend(polls_to_end=2)
    with FakeServer(handler=batches.handle) as server:
        batches.url = server.url
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield batches


def runner_for(backend, provider, run_id):
    pid = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-3-5-haiku"}[provider]
    return Runner(RunConfig(dataset="ecommerce", variants=["l3"], providers=[pid], limit=6,
                            trials=2, batch=True, batch_poll_s=0.0), run_id=run_id, command=[])


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_submits_polls_and_collects_every_row(backend, provider):
    runner = runner_for(backend, provider, f"b-{provider}")
    manifest = runner.run()
    rows = row_dicts(runner.store)
    assert manifest["status"] == "complete" and len(rows) == 12
    assert len(backend.created) == 1  # one batch for the run
    for row in rows:
        (call,) = row["parsed"]["calls"]
        assert call["arguments"]["echo"] == row["query"]
        assert row["request"]["batch"] == backend.created[0]
        assert row["cost_usd"] > 0
    price = runner.pricing.price(runner.config.providers[0], batch=True)
    usage = rows[0]["usage"]
    assert rows[0]["cost_usd"] == pytest.approx(
        price.cost(usage["prompt_tokens"], usage["completion_tokens"], usage["cached_tokens"]))
    ledger = json.loads((runner.store.dir / "batches.json").read_text())
    assert [b["status"] for b in ledger["batches"]] == ["collected"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_resumes_after_a_crash_without_submitting_again(backend, provider, project):
    runner = runner_for(backend, provider, f"crash-{provider}")

    def crash(seconds):
        raise KeyboardInterrupt  # the process dies while polling

    runner._sleep = crash
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    manifest = json.loads(runner.store.manifest_path.read_text())
    assert manifest["status"] == "interrupted" and manifest["rows_done"] == 0
    ledger = json.loads((runner.store.dir / "batches.json").read_text())
    assert [b["batch_id"] for b in ledger["batches"]] == backend.created

    resumed = Runner.resume(f"crash-{provider}", command=[])
    final = resumed.run()
    assert final["status"] == "complete" and final["rows_done"] == 12
    assert len(backend.created) == 1  # collected the recorded batch, submitted nothing new
    rows = row_dicts(resumed.store)
    assert len({r["key"] for r in rows}) == 12


@pytest.mark.slow
def test_failed_batch_requests_stay_pending_and_resume_submits_only_them(backend, project):
    from bench.providers.batch import custom_id
    runner = runner_for(backend, "openai", "partial")
    failing = custom_id(runner.plan[3].key)
    backend.fail = {failing}
    with pytest.raises(BenchError, match=r"1 batch request failed .*--resume partial"):
        runner.run()
    manifest = json.loads(runner.store.manifest_path.read_text())
    assert manifest["rows_done"] == 11 and manifest["status"] == "partial"
    assert manifest["batch_errors"][0]["key"] == runner.plan[3].key
    backend.fail = set()
    resumed = Runner.resume("partial", command=[])
    assert resumed.run()["status"] == "complete"
    assert len(backend.created) == 2
    second = backend.batches[backend.created[1]]
    assert [r["custom_id"] for r in second["requests"]] == [failing]


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_results_out_of_input_order_reach_their_own_items(backend, provider):
    """The fake APIs answer in reverse input order (neither API promises an order): every row
    still gets its own answer, matched by custom_id."""
    assert backend.reverse_results
    runner = runner_for(backend, provider, f"order-{provider}")
    runner.run()
    rows = row_dicts(runner.store)
    assert len(rows) == 12
    assert all(row["parsed"]["calls"][0]["arguments"]["echo"] == row["query"] for row in rows)
    state = backend.batches[backend.created[0]]
    first_in = state["requests"][0]["custom_id"]
    written = [json.loads(line)["custom_id"] for line in (
        backend.files[state["output_file_id"]].decode().splitlines() if provider == "openai"
        else backend._anthropic_results(backend.created[0]).decode().splitlines())]
    assert written[-1] == first_in and written[0] != first_in


@pytest.mark.parametrize("text,message", [
    ("[" * 100_000 + "]" * 100_000, "batches.json: unreadable batch ledger: JSON nested too "
                                    "deeply"),  # was a RecursionError traceback
    ("[]", "batches.json: field 'batches': unreadable batch ledger: must be an object whose "
           "'batches' is a list"),
    ('{"batches": [{"provider": "p", "batch_id": "b", "endpoint": "e"}]}',
     "batches.json: field 'batches.0.kind': unreadable batch ledger: Field required"),
    # the runner reads entry["key"] of every request: a KeyError traceback on resume
    ('{"batches": [{"provider": "p", "kind": "openai", "batch_id": "b", "endpoint": "e", '
     '"requests": {"c1": {"body": {}}}}]}',
     "batches.json: field 'batches.0.requests': unreadable batch ledger: "
     "request 'c1': 'key' must be a string"),
])
def test_a_hand_edited_batch_ledger_is_one_line_naming_file_and_field(tmp_path, text, message):
    from bench.errors import BenchError
    from bench.providers.batch import BatchLedger

    (tmp_path / "batches.json").write_text(text, encoding="utf-8")
    with pytest.raises(BenchError) as caught:
        BatchLedger(tmp_path)
    assert str(caught.value) == f"{tmp_path}/{message}"
