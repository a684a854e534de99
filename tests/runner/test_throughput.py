"""Runner throughput paths against the loopback fake server through the real openai SDK:
concurrency keeps each answer on its plan item, 429 Retry-After is honoured, 5xx retried,
budgets stop and resume, the response cache and replay."""

import asyncio
import json
import re
import sqlite3
import threading
import time

import pytest

import bench
from bench.errors import BenchError
from bench.models import Message, Tool
from bench.providers.cache import ResponseCache, request_key
from bench.providers.pricing import Pricing
from bench.runner import RunConfig, Runner
from bench.stats.summary import rows_frame, summarize
from tests.fakeserver import FakeServer, Reply, chat_body, error_body
from tests.stored import row_dicts

SECRET = "sk-compat-secret-0123456789"


@pytest.fixture(autouse=True)
def compat_key(monkeypatch):
    """A key for the openai-compat server: it must never reach a cache or a run file."""
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", SECRET)


class EchoServer(FakeServer):
    """Answers each chat request with a call whose ``echo`` argument is the last user message,
    after ``latency_s`` plus a per-request jitter, and records arrival times."""

    def __init__(self, latency_s=0.0, jitter_s=0.0):
        self.arrivals = []
        self._jitter = jitter_s
        self._n = 0
        super().__init__(latency_s=latency_s, handler=self._echo)

    def _echo(self, request):
        self.arrivals.append(time.monotonic())
        self._n += 1
        user = [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]
        name = request.body["tools"][0]["function"]["name"]
        return Reply(body=chat_body(calls=[(name, {"echo": user})]),
                     delay_s=self._jitter * ((self._n * 7919) % 11) / 10)


def compat(server):
    return f"openai-compat:m@{server.url}/v1"


def config(server, **overrides):
    settings = dict(dataset="ecommerce", variants=["l3"], providers=[compat(server)], limit=4,
                    concurrency=1)
    settings.update(overrides)
    return RunConfig(**settings)


def rows_of(runner):
    return row_dicts(runner.store)


def test_concurrent_answers_stay_attached_to_their_plan_items(project):
    with EchoServer(latency_s=0.05, jitter_s=0.05) as server:
        runner = Runner(config(server, limit=40, concurrency=8), run_id="conc", command=[])
        manifest = runner.run()
    rows = rows_of(runner)
    assert manifest["status"] == "complete" and len(rows) == 40
    assert len({r["key"] for r in rows}) == 40
    for row in rows:
        (call,) = row["parsed"]["calls"]
        assert call["arguments"]["echo"] == row["query"], row["key"]
    # requests overlapped: some arrived before an earlier one could have been answered
    arrivals = sorted(server.arrivals)
    overlapping = max(sum(1 for t in arrivals if start <= t < start + 0.05)
                      for start in arrivals)
    assert overlapping >= 4
    assert [r["key"] for r in rows] != [i.key for i in runner.plan]  # written as they finished


def test_429_with_retry_after_pauses_then_retries(project):
    with EchoServer() as server:
        server.script(Reply(429, error_body(429, "slow down"), headers={"retry-after": "0.6"}))
        runner = Runner(config(server, limit=2), run_id="rl", command=[])
        manifest = runner.run()
    rows = rows_of(runner)
    assert manifest["status"] == "complete"
    assert [r["attempts"] for r in rows] == [2, 1]
    assert len(server.requests) == 3
    assert server.requests[0].body == server.requests[1].body  # the same request, retried
    stats = manifest["rate_limits"][compat(server)]
    assert stats["rate_limited"] == 1 and stats["retries"] == 1
    assert stats["paused_s"] == pytest.approx(0.6, rel=1e-3)  # the header's, not a clock's


@pytest.mark.slow
def test_retry_after_delays_the_retry_by_the_servers_seconds(project):
    with EchoServer() as server:  # the scripted 429 bypasses the handler: arrivals are retries
        server.script(Reply(429, error_body(429, "slow down"), headers={"retry-after": "0.5"}))
        started = time.monotonic()
        Runner(config(server, limit=1), run_id="rl2", command=[]).run()
    assert len(server.arrivals) == 1 and server.arrivals[0] - started >= 0.5


def test_rate_limit_headers_without_retry_after_pause_the_provider(project):
    with EchoServer() as server:
        server.script(Reply(429, error_body(429, "tokens"), headers={
            "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "400ms"}))
        started = time.monotonic()
        manifest = Runner(config(server, limit=1), run_id="rl3", command=[]).run()
    assert server.arrivals[0] - started >= 0.4
    assert manifest["rate_limits"][compat(server)]["paused_s"] == pytest.approx(0.4, rel=1e-2)


def test_gate_halves_concurrency_on_429_and_grows_back():
    from bench.providers.ratelimit import ProviderGate
    now = [0.0]
    gate = ProviderGate(8, clock=lambda: now[0])
    assert gate.rate_limited(2.0) == 2.0 and gate.limit == 4
    gate.rate_limited(2.0)  # a second 429 from the same burst: one signal
    assert gate.limit == 4 and gate.paused_until == 2.0
    now[0] = 3.0

    async def four_requests():
        for _ in range(4):
            await gate.acquire()
            gate.release(True)
    asyncio.run(four_requests())
    assert gate.limit == 5 and gate.stats.min_limit == 4


def test_retries_count_attempts_wait_with_backoff_and_stop_at_the_limit():
    from bench.providers.errors import ProviderError
    from bench.providers.ratelimit import ProviderGate, call_with_retries

    def scripted(*outcomes):
        queue = list(outcomes)

        async def request():
            outcome = queue.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        return request

    def server_error():
        return ProviderError("boom", error_class="transient", status=500)

    def recorder(into):
        async def sleep(seconds):
            into.append(seconds)
        return sleep

    def retried(request, **options):
        return asyncio.run(call_with_retries(request, gate, **options))

    waits: list[float] = []
    gate = ProviderGate(4)
    assert retried(scripted("ok"), sleep=recorder(waits)) == ("ok", 1)
    assert waits == [] and gate.stats.retries == 0
    assert retried(scripted(server_error(), server_error(), "ok"), attempts=5,
                   sleep=recorder(waits)) == ("ok", 3)
    assert len(waits) == 2 and all(0 <= w <= 60 for w in waits) and gate.stats.retries == 2
    waits.clear()
    limited = ProviderError("slow down", error_class="rate_limited", status=429,
                            retry_after_s=0.01)
    assert retried(scripted(limited, "ok"), sleep=recorder(waits)) == ("ok", 2)
    assert waits == [0.0]  # the gate's pause holds the retry back, not a backoff
    made: list[float] = []
    with pytest.raises(ProviderError, match="boom"):
        retried(scripted(*[server_error()] * 3), attempts=3, sleep=recorder(made))
    assert len(made) == 2  # 3 attempts, 2 waits, then the last error
    with pytest.raises(ProviderError, match="no key") as info:
        retried(scripted(ProviderError("no key", error_class="permanent", status=401),
                         "never"), sleep=recorder(waits))
    assert info.value.status == 401
    with pytest.raises(ProviderError, match="boom"):
        retried(scripted(server_error(), "never"), attempts=1)
    assert gate.in_flight == 0


@pytest.mark.slow
def test_server_errors_are_retried_and_permanent_errors_stop_the_run_resumably(project):
    with EchoServer() as server:
        server.script(Reply(500, error_body(500, "boom")), Reply(503, error_body(503, "busy")))
        runner = Runner(config(server, limit=2, concurrency=1), run_id="err", command=[])
        runner.run()
        assert [r["attempts"] for r in rows_of(runner)] == [3, 1]

        server.script(Reply(body=chat_body(calls=[("search_orders", {})])),
                      Reply(401, error_body(401, "bad key")))
        runner = Runner(config(server, limit=3), run_id="perm", command=[])
        first, second = (item.case for item in runner.plan[:2])  # the 401 answers the second
        with pytest.raises(BenchError, match=rf"permanent HTTP 401 error on case '{second.id}', "
                                             r"variant 'l3', trial 0.*--resume perm") as info:
            runner.run()
        assert SECRET not in str(info.value)
        manifest = json.loads(runner.store.manifest_path.read_text())
        kept = {r["case_id"] for r in rows_of(runner)}
        # a request already in flight when the error arrived is finished and kept
        assert manifest["status"] == "failed" and second.id not in kept and first.id in kept
        resumed = Runner.resume("perm", command=[]).run()
    assert resumed["status"] == "complete" and resumed["rows_done"] == 3
    asked = [json.dumps(r.body, ensure_ascii=False) for r in server.requests[4:]]
    assert sum(json.dumps(second.query, ensure_ascii=False)[1:-1] in body
               for body in asked) == 2  # the second case: 401, then ok


def test_answers_waiting_for_their_rows_are_written_when_an_error_stops_the_run(project):
    """Rows are finished while the loop idles (bench.runner.finisher): with 32 requests in
    flight and no latency, answers queue up; a permanent error then stops the run, and every
    answer the server gave before it still has its row."""
    answered = []

    class CountingServer(FakeServer):
        def __init__(self):
            super().__init__(handler=self._answer)

        def _answer(self, request):
            if len(answered) >= 150:
                return Reply(401, error_body(401, "bad key"))
            user = [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]
            answered.append(user)
            return Reply(body=chat_body(calls=[("search_orders", {})]))

    with CountingServer() as server:
        runner = Runner(config(server, split="all", limit=60, trials=5, concurrency=32),
                        run_id="drain", command=[])
        with pytest.raises(BenchError, match="permanent HTTP 401"):
            runner.run()
    rows = rows_of(runner)
    manifest = json.loads(runner.store.manifest_path.read_text())
    assert len(answered) == 150
    assert len(rows) == 150 and manifest["rows_done"] == 150
    assert len({r["key"] for r in rows}) == 150


def test_answers_waiting_for_their_rows_are_written_when_a_run_is_interrupted(project):
    """An interrupt that leaves the run's loop at once (here raised by a user layer, as a
    second Ctrl-C would) still writes the row of every answer already received: the queue
    of unwritten rows is finished before the writer closes."""
    answers = []

    class InterruptAfter:
        def __init__(self, provider_id, inner):
            self.inner = inner

        async def __call__(self, exchange):
            if len(answers) >= 120:
                raise KeyboardInterrupt
            outcome = await self.inner(exchange)
            answers.append(exchange.request.key)
            return outcome

    with EchoServer() as server:
        runner = Runner(config(server, split="all", limit=60, trials=5, concurrency=32),
                        run_id="interrupt", command=[], layers=[InterruptAfter])
        with pytest.raises(KeyboardInterrupt):
            runner.run()
    rows = rows_of(runner)
    manifest = json.loads(runner.store.manifest_path.read_text())
    assert manifest["status"] == "interrupted"
    # 120 answers came back before the interrupt; at most the 32 requests in flight had not
    # reported to the loop yet (without the final drain, about 40 rows were left here)
    assert len(rows) == manifest["rows_done"] >= 120 - 32
    assert {r["key"] for r in rows} <= set(answers)


def write_pricing(path, usd_per_million=1.0):
    path.write_text("source: test\ndate: '2026-11-29'\nmodels:\n  openai-compat:\n"
                    f"    m: {{input: {usd_per_million}, output: {usd_per_million}}}\n")
    return str(path)


def test_budget_stops_cleanly_and_resume_continues(project, tmp_path):
    pricing = write_pricing(tmp_path / "pricing.yaml")  # 120 tokens a request -> $0.00012
    with EchoServer() as server:
        runner = Runner(config(server, limit=10, max_usd=0.0006, pricing=pricing),
                        run_id="budget", command=[])
        manifest = runner.run()
        rows = rows_of(runner)
        assert manifest["status"] == "budget_exhausted"
        assert len(rows) == 5 and len(server.requests) == 5
        assert manifest["spent"]["billed_usd"] == pytest.approx(0.0006)
        assert all(r["cost_usd"] == pytest.approx(0.00012) for r in rows)

        again = Runner.resume("budget", command=[]).run()  # same budget: nothing more is sent
        assert again["status"] == "budget_exhausted" and len(server.requests) == 5

        resumed = Runner.resume("budget", overrides={"max_usd": 1.0}, command=[]).run()
    rows = rows_of(runner)
    assert resumed["status"] == "complete" and resumed["config"]["max_usd"] == 1.0
    assert len(rows) == 10 and len({r["key"] for r in rows}) == 10
    assert len(server.requests) == 10
    summary = summarize(rows_frame(rows), ["l3"])
    assert summary.loc[0, "cost_usd"] == pytest.approx(0.0012)
    assert summary.loc[0, "cost_per_case_usd"] == pytest.approx(0.00012)


def test_token_budget_stops_the_run(project):
    with EchoServer() as server:
        manifest = Runner(config(server, limit=10, max_total_tokens=360), run_id="tok",
                          command=[]).run()
    assert manifest["status"] == "budget_exhausted" and manifest["rows_done"] == 3


@pytest.mark.slow
def test_a_budget_stop_exits_3_and_a_resume_with_more_budget_completes(run_bench, project):
    with EchoServer() as server:
        common = ["--provider", compat(server), "--variants", "l3", "--limit", "10",
                  "--concurrency", "1", "--no-execute"]
        stopped = run_bench("run", *common, "--run-id", "budget", "--max-total-tokens", "360")
        assert stopped.returncode == 3, stopped.stderr
        assert "budget reached" in stopped.stderr and "3 of 10 rows" in stopped.stderr
        assert "bench run --resume budget" in stopped.stderr
        finished = run_bench("run", "--resume", "budget", "--max-total-tokens", "100000")
        assert finished.returncode == 0, finished.stderr
        assert "resuming run budget: 3 of 10 rows already done" in finished.stderr
        assert "10 rows in" in finished.stderr
        assert "next: bench report budget (HTML in reports/budget/)" in finished.stderr
        assert "10 cases x 1 variant x 1 provider x 1 trial ->" in finished.stderr
        manifest_path = project / "reports" / "runs" / "budget" / "manifest.json"
        manifest = manifest_path.read_text()
        asked = len(server.requests)
        again = run_bench("run", "--resume", "budget")  # complete: nothing to do
    assert again.returncode == 0, again.stderr
    assert "run budget is already complete (10 rows); nothing to do" in again.stderr
    assert "l3" in again.stdout  # the table
    assert len(server.requests) == asked
    assert manifest_path.read_text() == manifest  # ended_at kept


def test_max_usd_needs_a_price(project):
    with EchoServer() as server:
        runner = Runner(config(server, max_usd=1.0), run_id="noprice", command=[])
        with pytest.raises(BenchError, match="needs a price.*--pricing"):
            runner.run()


@pytest.mark.slow
def test_resume_refuses_to_change_what_is_measured(project):
    with EchoServer() as server:
        Runner(config(server, limit=1), run_id="fixed", command=[]).run()
    with pytest.raises(BenchError, match="^trials cannot change when resuming 'fixed': "
                                         "stored 1, given 3 "):
        Runner.resume("fixed", overrides={"trials": 3})
    # the stored values given again change nothing: not refused
    assert Runner.resume("fixed", overrides={"trials": 1, "limit": 1}).config.trials == 1


def test_cache_keys_differ_by_trial_and_settings_and_never_hold_the_key():
    messages = [Message(role="user", content="hi")]
    tools = [Tool(name="t", description="d", input_schema={"type": "object"})]
    identity = {"body": {"model": "m", "temperature": 0.7}, "base_url": "http://h/v1"}
    keys = {request_key("p", identity, messages, tools, trial) for trial in range(5)}
    assert len(keys) == 5
    hotter = {"body": {"model": "m", "temperature": 1.0}, "base_url": "http://h/v1"}
    assert request_key("p", hotter, messages, tools, 0) != request_key("p", identity, messages,
                                                                       tools, 0)
    with_key = {**identity, "api_key": SECRET}
    assert request_key("p", with_key, messages, tools, 0) == request_key("p", identity,
                                                                         messages, tools, 0)


def test_cache_readwrite_then_read_serves_every_trial_from_its_own_entry(project, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with EchoServer() as server:
        first = Runner(config(server, trials=2, concurrency=4, cache="readwrite",
                              cache_path=str(cache)), run_id="c1", command=[]).run()
        assert len(server.requests) == 8
        assert first["cache"] == {**first["cache"], "hits": 0, "misses": 8, "writes": 8}
        second_runner = Runner(config(server, trials=2, concurrency=4, cache="read",
                                      cache_path=str(cache)), run_id="c2", command=[])
        second = second_runner.run()
    assert len(server.requests) == 8  # nothing new was asked
    assert second["cache"]["hits"] == 8 and second["cache"]["misses"] == 0
    rows = rows_of(second_runner)
    assert all(r["cache"] == "hit" and r["billed_usd"] in (0.0, None) for r in rows)
    with sqlite3.connect(cache) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(DISTINCT key) FROM responses").fetchone()[0] == 8
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    for path in (project / "reports").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_cache_is_safe_under_concurrent_writers(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite", "readwrite")
    from bench.parse import ParsedAnswer
    from bench.providers import ProviderResponse
    messages = [Message(role="user", content="hi")]
    answer = ProviderResponse(raw="x", parsed=ParsedAnswer(), latency_s=0.1)

    def write(worker):
        for i in range(50):
            key = request_key("p", {"w": worker}, messages, [], i)
            cache.put(key, answer, provider_id="p", base_url=None, messages=messages, tools=[],
                      trial=i)
            assert cache.get(key) is not None

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.writes == 400 and cache.hits == 400


@pytest.mark.slow
def test_replay_answers_from_a_run_and_a_miss_names_case_variant_and_how_to_record(project):
    with EchoServer() as server:
        recorded = Runner(config(server, limit=3), run_id="rec", command=[])
        recorded.run()
    replay = Runner(RunConfig(dataset="ecommerce", variants=["l3"], providers=["replay:rec"],
                              limit=3, concurrency=2), run_id="rep", command=[])
    assert replay.run()["status"] == "complete"
    original = {r["case_id"]: r for r in rows_of(recorded)}
    for row in rows_of(replay):
        assert row["parsed"] == original[row["case_id"]]["parsed"]
        assert row["metrics"] == original[row["case_id"]]["metrics"]
        assert row["billed_usd"] in (0.0, None)

    missing = Runner(RunConfig(dataset="ecommerce", variants=["l3"], providers=["replay:rec"],
                               limit=4), run_id="miss", command=[])
    # --limit samples are nested: the sample of 4 is the recorded 3 and one more case
    (new,) = {c.id for c in missing.cases} - {c.id for c in recorded.cases}
    with pytest.raises(BenchError) as info:
        missing.run()
    message = str(info.value)
    assert f"no recorded answer for 1 item of variant 'l3' (cases {new};" in message
    assert "--cache write" in message and f"--cases {new}" in message
    assert "(then replay a run that has them" in message  # the source is a run, not a cache
    assert len(rows_of(missing)) == 3  # the hits before the miss were kept


@pytest.mark.slow
def test_replay_from_a_cache_file_and_unknown_sources(project, tmp_path):
    cache = tmp_path / "c.sqlite"
    with EchoServer() as server:
        Runner(config(server, limit=2, cache="write", cache_path=str(cache)), run_id="w",
               command=[]).run()
    replay = Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=2,
                              providers=[f"replay:{cache}"]), run_id="r", command=[])
    assert replay.run()["status"] == "complete"
    assert all(r["parsed"]["calls"][0]["arguments"]["echo"] == r["query"]
               for r in rows_of(replay))
    with pytest.raises(BenchError, match="neither a cache file nor a run"):
        Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=1,
                         providers=["replay:nope"]), run_id="r2", command=[]).run()


def test_pricing_prefix_match_user_override_and_batch_discount(tmp_path):
    table = Pricing()
    assert table.price("openai:gpt-4o-mini-2024-07-18") == table.price("openai:gpt-4o-mini")
    assert table.price("openai:gpt-4o-mini") != table.price("openai:gpt-4o")
    assert table.price("openai-compat:anything@http://x") is None
    assert table.price("local") is None  # in process: no USD, rows carry no cost
    mini = table.price("openai:gpt-4o-mini")
    assert mini.cost(1_000_000, 0) == pytest.approx(0.15)
    assert table.price("openai:gpt-4o-mini", batch=True).input == pytest.approx(mini.input / 2)
    custom = Pricing(write_pricing(tmp_path / "p.yaml", 2.0))
    assert custom.price("openai-compat:m@http://x").cost(500_000, 0) == pytest.approx(1.0)
    (tmp_path / "bad.yaml").write_text("models:\n  openai:\n    gpt-x: {input: -1, output: 1}\n")
    with pytest.raises(BenchError, match=r"bad.yaml:3.*models.openai.gpt-x.input"):
        Pricing(tmp_path / "bad.yaml")


@pytest.mark.parametrize("text,where", [
    # each made costs NaN or negative, which no --max-usd comparison stops
    ("models:\n  openai:\n    gpt-x: {input: .inf, output: 1}\n",
     "bad.yaml:3: field 'models.openai.gpt-x.input'"),
    ("models:\n  openai:\n    gpt-x: {input: 1, output: 1, cached_input: .nan}\n",
     "bad.yaml:3: field 'models.openai.gpt-x.cached_input'"),
    ("batch_discount: {openai: -1}\n", "bad.yaml:1: field 'batch_discount.openai'"),
    ("batch_discount: {openai: .nan}\n", "bad.yaml:1: field 'batch_discount.openai'"),
    ("batch_discount: {openai: 2}\n", "bad.yaml:1: field 'batch_discount.openai'"),
    # every cost is printed as USD
    ("currency: EUR\n", "bad.yaml:1: field 'currency'"),
])
def test_pricing_values_that_would_break_costs_are_refused(tmp_path, text, where):
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(BenchError, match=re.escape(where)):
        Pricing(tmp_path / "bad.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("signame, code, concurrency, limit", [
    ("SIGINT", 130, 2, 20), ("SIGTERM", 143, 2, 20),
    ("SIGTERM+SIGINT", 143, 2, 20),  # the first signal decides: a CI timeout, then Ctrl-C
    ("SIGINT", 130, 16, 40)])
def test_a_signal_stops_a_concurrent_run_which_resumes_without_redoing_rows(
        project, signame, code, concurrency, limit):
    """Ctrl-C and SIGTERM (a CI job's timeout) keep finished rows, mark the run interrupted
    and leave it resumable."""
    import os
    import signal
    import subprocess
    import sys
    from conftest import REPO
    with EchoServer(latency_s=0.3) as server:
        env = {**os.environ, "BENCH_HOME": str(project),
               "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        args = [sys.executable, "-m", "bench", "run", "--provider", compat(server), "--variants",
                "l3", "--limit", str(limit), "--concurrency", str(concurrency), "--run-id",
                "sig"]
        process = subprocess.Popen(args, cwd=project, env=env, stderr=subprocess.PIPE, text=True)
        results = project / "reports" / "runs" / "sig" / "results.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                not results.exists() or results.read_text().count("\n") < 2):
            time.sleep(0.05)
        for name in signame.split("+"):
            process.send_signal(getattr(signal, name))
            time.sleep(0.2)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == code, stderr
        assert "bench run --resume sig" in stderr and "Traceback" not in stderr
        manifest = json.loads(results.with_name("manifest.json").read_text())
        kept = results.read_text().splitlines()
        assert manifest["status"] == "interrupted" and 2 <= len(kept) < limit
        asked = len(server.requests)
        resumed = subprocess.run([*args[:3], "run", "--resume", "sig"], cwd=project, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
    rows = results.read_text().splitlines()
    assert rows[:len(kept)] == kept and len({json.loads(r)["key"] for r in rows}) == limit
    assert len(server.requests) - asked == limit - len(kept)  # nothing answered asked again


@pytest.mark.slow
@pytest.mark.parametrize("stops", [1, 2])
def test_a_stop_cancels_requests_that_outlive_their_wait(project, stops):
    """After Ctrl-C, requests in flight get their timeout + STOP_GRACE_S: one that times out
    then is left for the resume, and the run still ends ``interrupted`` (not ``failed``); a
    second Ctrl-C cancels them at once instead of waiting (the server here answers after 10
    minutes, the timeout is 15). Only the finished rows are written."""
    import os
    import signal
    import subprocess
    import sys
    from conftest import REPO

    class SlowAfterTwo(EchoServer):
        def _echo(self, request):
            reply = super()._echo(request)
            if self._n > 2:
                reply.delay_s = 600.0
            return reply

    with SlowAfterTwo() as server:
        env = {**{k: v for k, v in os.environ.items() if k != "COLUMNS"},
               "BENCH_HOME": str(project),
               "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        args = [sys.executable, "-m", "bench", "run", "--provider", compat(server), "--variants",
                "l3", "--limit", "10", "--concurrency", "1", "--run-id", "stuck",
                "--request-timeout", "1" if stops == 1 else "900", "--attempts", "1"]
        process = subprocess.Popen(args, cwd=project, env=env, stderr=subprocess.PIPE, text=True)
        results = project / "reports" / "runs" / "stuck" / "results.jsonl"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                    not results.exists() or results.read_text().count("\n") < 2):
                time.sleep(0.05)
            for _ in range(stops):
                process.send_signal(signal.SIGINT)
                time.sleep(0.5)
            # a stop that waited for the 600 s answer (or the 900 s timeout) fails here
            _, stderr = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, stderr
        # one line, however long (stderr is a pipe: no terminal width to wrap at)
        assert any(line.startswith("interrupted: ") and
                   line.endswith("finish with: bench run --resume stuck")
                   for line in stderr.splitlines()), stderr
        assert json.loads(results.with_name("manifest.json").read_text())["status"] == \
            "interrupted"
        assert results.read_text().count("\n") == 2


def test_stop_signals_call_back_from_the_loop_and_restore_the_previous_handlers():
    """SIGINT and SIGTERM reach the run as loop callbacks (never in the middle of writing a
    row); the first signal is the one kept (a CI timeout, then Ctrl-C, reads as terminated);
    the previous handlers are back afterwards."""
    import os
    import signal
    from bench.runner import StopSignals
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signals, calls = StopSignals(), []

    async def main():
        signals.install(asyncio.get_running_loop(), calls.append)
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        while len(calls) < 2:
            await asyncio.sleep(0.01)
        signals.remove()
    asyncio.run(main())
    assert calls == [1, 2] and signals.signum == signal.SIGINT
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_labels_are_prepared_only_for_requests_already_sent(project, tmp_path, monkeypatch):
    """The runner computes labels' reference results while it waits for answers, but only
    for requests it has sent: a label's reference calls may run on a user's MCP server, so
    none may run for rows a budget stop never records."""
    from bench.executor.runhook import RunExecution
    prepared = []
    real_prepare = RunExecution.prepare

    def counting(self, case, tools, toolset):
        prepared.append(case.id)
        return real_prepare(self, case, tools, toolset)

    monkeypatch.setattr(RunExecution, "prepare", counting)
    pricing = write_pricing(tmp_path / "pricing.yaml")  # 120 tokens a request -> $0.00012
    with EchoServer(latency_s=0.05) as server:
        runner = Runner(config(server, limit=40, max_usd=0.0006, pricing=pricing),
                        run_id="prepare", command=[])
        manifest = runner.run()
    recorded = {row["case_id"] for row in rows_of(runner)}
    assert manifest["status"] == "budget_exhausted" and len(recorded) == 5
    assert prepared and set(prepared) <= recorded


def test_rate_limit_reset_reads_exhausted_windows_from_either_dialect():
    from bench.providers.errors import rate_limit_reset_s
    from bench.providers.openai_chat import _response_class
    headers_class = type(_response_class()(200).headers)  # the SDK's httpx(2).Headers
    openai_headers = headers_class({"X-RateLimit-Remaining-Requests": "0",
                                     "X-RateLimit-Reset-Requests": "1m2.5s",
                                     "x-ratelimit-remaining-tokens": "10",
                                     "x-ratelimit-reset-tokens": "9s", "Content-Type": "x"})
    assert rate_limit_reset_s(openai_headers) == pytest.approx(62.5)
    anthropic_headers = {"Anthropic-RateLimit-Tokens-Remaining": "0",
                         "anthropic-ratelimit-tokens-reset": "1970-01-01T00:00:30Z"}
    assert rate_limit_reset_s(anthropic_headers, now=10.0) == pytest.approx(20.0)
    assert rate_limit_reset_s({"x-request-id": "r", "content-length": "3"}) is None
    assert rate_limit_reset_s([("x-ratelimit-remaining-requests", "0"),
                               ("x-ratelimit-reset-requests", "6s")]) == 6.0
    assert rate_limit_reset_s({"x-ratelimit-remaining-tokens": "5",
                               "x-ratelimit-reset-tokens": "1s"}) is None


@pytest.mark.slow
def test_resume_refuses_options_that_change_what_the_run_measures(run_bench):
    made = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "2",
                     "--run-id", "r1", "--no-execute")
    assert made.returncode == 0, made.stderr
    refused = run_bench("run", "--resume", "r1", "--limit", "1", "--trials", "2")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: --limit, --trials cannot change when resuming 'r1': --limit stored 2, given 1; "
        "--trials stored 1, given 2 (it would change what the run measures); start a new run")
    allowed = run_bench("run", "--resume", "r1", "--concurrency", "8")
    assert allowed.returncode == 0, allowed.stderr  # throughput settings may change
    assert "run r1 is already complete" in allowed.stderr


@pytest.mark.parametrize("option", [["--trials", "1001"], ["--concurrency", "1025"],
                                    ["--attempts", "101"]])
def test_out_of_range_run_options_are_usage_errors_not_tracebacks(project, option):
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-m", "bench", "run", "--limit", "1", *option],
                            cwd=project, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert option[0] in result.stderr and "less than or equal" in result.stderr


# -- the USD budget at concurrency 1 -----------------------------------------------------------


def test_max_usd_is_passed_by_at_most_one_request_at_concurrency_1(proj, tmp_path):
    pricing = tmp_path / "pricing.yaml"
    pricing.write_text("models:\n  openai-compat:\n    m: {input: 10.0, output: 50.0}\n")

    def answer(request):  # 100 prompt + 20 completion tokens: 0.002 USD each
        return Reply(body=chat_body(text="ok"))

    with FakeServer(handler=answer) as server:
        result = bench.evaluate("ecommerce", ["l3"], [f"openai-compat:m@{server.url}/v1"],
                                project=proj, run_id="b", limit=10, concurrency=1,
                                max_usd=0.005, pricing=str(pricing))
    assert result.status == "budget_exhausted"
    # Ledger.decision: with nothing in flight one more request goes while the limit is not
    # reached, so the run stops after the first request at or over it (3 x 0.002 USD)
    assert result.manifest.spent.billed_usd <= 0.005 + 0.002
    assert len(result.rows) == 3
