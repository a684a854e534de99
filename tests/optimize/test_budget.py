"""bench.optimize's budget with a priced target: an ``openai-compat`` provider on the loopback
fake server (through the real openai SDK) and a ``--pricing`` file, so every request bills
USD and tokens. The search stops when the budget is spent, says so, and a resumed run with a
larger budget continues from the cache."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import bench.optimize as bo
from tests.fakeserver import FakeServer, Recorded, Reply, chat_body
from tests.optimize.test_optimize import example

#: 100 prompt + 20 completion tokens a request (chat_body's usage) at 10 / 50 USD per
#: million: 0.002 USD and 120 tokens a request.
PER_REQUEST_USD, PER_REQUEST_TOKENS = 0.002, 120


def scripted(request: Recorded) -> Reply:
    """The worked example's target (:func:`example.target`) on the wire: it calls the first
    tool whose description mentions the query's key term."""
    body = request.body
    query = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    tools = [SimpleNamespace(name=t["function"]["name"],
                             description=t["function"].get("description", ""))
             for t in body.get("tools", [])]
    calls = example.target([SimpleNamespace(content=query)], tools, 0)
    return Reply(body=chat_body(calls=[(c["name"], {}) for c in calls],
                                text=None if calls else "Nothing to do."))


@pytest.fixture
def priced(tmp_path, monkeypatch):
    """The worked example's project, a pricing file and the fake server's target id."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "not-this-one"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("source: test\ndate: '2026-11-29'\nmodels:\n  openai-compat:\n"
                       "    m: {input: 10.0, output: 50.0}\n", encoding="utf-8")
    with FakeServer(handler=scripted) as server:
        yield SimpleNamespace(root=example.write_project(tmp_path / "proj"), server=server,
                              target=f"openai-compat:m@{server.url}/v1",
                              settings={"pricing": str(pricing), "concurrency": 1})


def _optimize(priced: Any, **options: Any) -> Any:
    return bo.optimize("shop", "start", priced.target, "function:opt-good",
                       project=priced.root, opt_id="budget", settings=priced.settings,
                       **options)


def test_the_search_stops_within_max_usd_says_so_and_resumes_from_the_cache(priced):
    stopped = _optimize(priced, max_usd=0.03)
    result = stopped.result
    # dev r0: 13 requests, 0.026 USD; round 1's dev run gets the 0.004 USD left: 2 requests
    assert result.stop_reason == ("budget: 0.0300 USD billed of 0.03 USD; round 1's dev run "
                                  "stopped after 15 of 26 rows, its candidates not judged")
    costs = {r.purpose: r for r in result.runs}
    assert costs["dev r1"].status == "budget_exhausted" and costs["dev r1"].requests == 2
    assert sum(r.billed_usd for r in result.runs) == pytest.approx(0.03)
    assert len(priced.server.requests) == 15
    # a candidate seen on 2 of its 13 dev cases is not judged, so nothing reaches test
    assert result.candidate("r1c1").status == "unfinished" and result.final == "start"
    assert not stopped.accepted and "test" not in costs
    report = (stopped.folder / "report.md").read_text(encoding="utf-8")
    assert "budget: 0.0300 USD billed of 0.03 USD" in report and "unfinished" in report

    resumed = _optimize(priced, max_usd=1.0)
    costs = {r.purpose: r for r in resumed.result.runs}
    # the dev run continues where it stopped: its 15 rows are not asked again
    assert len(priced.server.requests) == 15 + 11 + 42  # the rest of dev r1, then test
    assert costs["dev r1"].status == "complete" and costs["dev r1"].requests == 13
    assert resumed.result.stop_reason == "no failures on dev in round 2"
    assert resumed.accepted and resumed.result.final == "r1c1"
    assert costs["test"].billed_usd == pytest.approx(42 * PER_REQUEST_USD)


def test_the_search_stops_within_max_tokens(priced):
    run = _optimize(priced, max_total_tokens=1600)  # dev r0 bills 13 x 120 = 1560 tokens
    result = run.result
    assert result.stop_reason.startswith("budget: 1680 tokens billed of 1600; round 1's dev "
                                         "run stopped after 14 of 26 rows")
    assert sum(r.billed_tokens for r in result.runs) == 14 * PER_REQUEST_TOKENS
    assert len(priced.server.requests) == 14 and not run.accepted
