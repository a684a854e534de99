"""Retries, circuit breaker, rate limits and fault injection (simulated time where it waits)."""

from __future__ import annotations

import concurrent.futures
import json
import threading

import pytest

from bench.descriptions import load_variant
from bench.executor.backends import ReferenceBackends
from bench.executor.backends.base import Handler
from bench.executor.clock import FakeClock
from bench.executor.faults import FaultConfig, FaultRule
from bench.executor.outcome import RunContext, ToolError
from bench.executor.pipeline import Executor, ExecutorConfig
from bench.executor.safeguards import CircuitBreaker, RateLimit, RateLimiter, TokenBucket
from bench.executor.traces import TraceWriter, read_traces
from bench.models import Tool, ToolCall

READ = Tool(name="lookup", description="", input_schema={
    "type": "object", "properties": {"key": {"type": "string"}}})
WRITE = Tool(name="store", description="", permission="write", input_schema={
    "type": "object", "properties": {"key": {"type": "string"}}})
ALLOW = RunContext(allow_writes=True)


def flaky(failures: list[ToolError]):
    """A handler that raises the queued errors first, then answers."""
    lock = threading.Lock()
    calls = []

    def run(args, ctx):
        with lock:
            calls.append(ctx.attempt)
            if failures:
                raise failures.pop(0)
        return {"key": args.get("key"), "attempt": ctx.attempt}
    run.calls = calls
    return run


def make(handlers, clock=None, **config):
    return Executor({"t": handlers}, ExecutorConfig(**config), clock=clock or FakeClock())


def call(name, call_id="c1", **arguments):
    return ToolCall(id=call_id, name=name, arguments=arguments)


def test_transient_read_errors_are_retried_with_full_jitter_backoff():
    clock = FakeClock()
    handler = flaky([ToolError("transient", "http_500", "HTTP 500")] * 3)
    ex = make({"lookup": Handler(handler)}, clock, max_retries=3, backoff_base_s=0.5,
              backoff_cap_s=3.0)
    outcome = ex.execute(call("lookup", key="a"), [READ], "t")
    assert outcome.success and outcome.data["attempt"] == 3 and outcome.retries == 3
    assert handler.calls == [0, 1, 2, 3]
    for retry, waited in enumerate(clock.slept):
        assert 0.0 <= waited <= min(3.0, 0.5 * 2 ** retry)
    assert len(set(clock.slept)) == 3  # jittered, not a fixed ladder


def test_retries_are_bounded_and_the_error_says_so():
    handler = flaky([ToolError("transient", "http_500", "HTTP 500")] * 50)
    ex = make({"lookup": Handler(handler)}, max_retries=2)
    outcome = ex.execute(call("lookup"), [READ], "t")
    assert not outcome.success and len(handler.calls) == 3
    assert outcome.error_class == "transient" and "after 3 attempts" in outcome.error


def test_writes_and_permanent_errors_are_never_retried():
    write = flaky([ToolError("transient", "http_500", "HTTP 500")])
    ex = make({"store": Handler(write, permission="write")})
    assert not ex.execute(call("store"), [WRITE], "t", ALLOW).success
    assert write.calls == [0]
    missing = flaky([ToolError("permanent", "not_found", "no such key")])
    ex = make({"lookup": Handler(missing)})
    assert ex.execute(call("lookup"), [READ], "t").error_code == "not_found"
    assert missing.calls == [0]


def test_rate_limited_calls_honour_retry_after_within_the_budget():
    clock = FakeClock()
    handler = flaky([ToolError("rate_limited", "http_429", "429", retry_after_s=2.5)])
    ex = make({"lookup": Handler(handler)}, clock)
    assert ex.execute(call("lookup"), [READ], "t").success
    assert clock.slept == [2.5]
    slow = flaky([ToolError("rate_limited", "http_429", "429", retry_after_s=60)])
    ex = make({"lookup": Handler(slow)}, clock, retry_budget_s=10)
    outcome = ex.execute(call("lookup"), [READ], "t")
    assert outcome.error_class == "rate_limited" and "retry budget" in outcome.error
    assert slow.calls == [0]


def test_circuit_breaker_opens_probes_and_recovers():
    clock = FakeClock()
    breaker = CircuitBreaker(failures=3, window_s=10, cooldown_s=5, clock=clock)
    for _ in range(3):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow()
    clock.advance(5)
    assert breaker.state == "half_open"
    assert breaker.allow() and not breaker.allow()  # one probe only
    breaker.record_failure()
    assert breaker.state == "open"
    clock.advance(5)
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state == "closed"
    assert breaker.transitions == [("closed", "open"), ("open", "half_open"),
                                   ("half_open", "open"), ("open", "half_open"),
                                   ("half_open", "closed")]


def test_failures_outside_the_window_do_not_open_the_circuit():
    clock = FakeClock()
    breaker = CircuitBreaker(failures=3, window_s=10, cooldown_s=5, clock=clock)
    for _ in range(5):
        breaker.record_failure()
        clock.advance(6)
    assert breaker.state == "closed"


def test_open_circuit_uses_the_fallback_and_stops_calling_the_tool():
    clock = FakeClock()
    handler = flaky([ToolError("transient", "http_503", "503")] * 100)
    fallback = Handler(handler, fallback=lambda args, ctx, err: {"cached": True,
                                                                 "why": err.code})
    ex = make({"lookup": fallback}, clock, max_retries=0, breaker_failures=2,
              breaker_cooldown_s=30)
    for i in range(2):
        ex.execute(call("lookup", f"c{i}"), [READ], "t")
    reached = len(handler.calls)
    outcome = ex.execute(call("lookup", "c9"), [READ], "t")
    assert len(handler.calls) == reached  # the open circuit kept the call away
    assert outcome.success and outcome.fallback_used
    assert outcome.data == {"cached": True, "why": "circuit_open"}


def test_token_bucket_is_safe_under_concurrency():
    clock = FakeClock()
    bucket = TokenBucket(rate=0.001, burst=10, clock=clock)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: bucket.try_take(), range(200)))
    assert sum(1 for r in results if r == 0.0) == 10


def test_rate_limits_apply_at_global_tool_and_user_level():
    clock = FakeClock()
    limiter = RateLimiter(clock, global_limit=RateLimit(100, 100), tool_limit=RateLimit(1, 2),
                          user_limit=RateLimit(1, 3), max_wait_s=0)
    limiter.acquire("a", "u1")
    limiter.acquire("a", "u1")
    with pytest.raises(ToolError) as tool_full:
        limiter.acquire("a", "u1")  # tool bucket empty
    assert tool_full.value.error_class == "rate_limited"
    limiter.acquire("b", "u1")
    with pytest.raises(ToolError):
        limiter.acquire("c", "u1")  # user bucket empty (3 used)
    limiter.acquire("c", "u2")  # another user is not affected
    waiting = RateLimiter(clock, tool_limit=RateLimit(2, 1), max_wait_s=5)
    waiting.acquire("a", "u")
    assert waiting.acquire("a", "u") == pytest.approx(0.5)  # waited for a refill


def test_timeouts_stop_the_attempt_and_are_retried_for_reads():
    started = []

    def hang(args, ctx):
        started.append(ctx.attempt)
        ctx.cancelled.wait(5)
        if ctx.cancelled.is_set():
            return None
        return {"late": True}

    ex = make({"lookup": Handler(hang)}, timeout_s=0.05, max_retries=1)
    outcome = ex.execute(call("lookup"), [READ], "t")  # each attempt cut at 0.05 s, not 5
    assert outcome.error_class == "timeout" and started == [0, 1]
    assert "did not answer within 0.05 s" in outcome.error
    ex.close()


FAULTS = [("timeout", "timeout"), ("rate_limit", "rate_limited"),
          ("server_error", "transient"), ("malformed", "transient")]


@pytest.mark.parametrize("kind, error_class", FAULTS)
def test_each_injected_fault_is_classified_and_retried_boundedly(tmp_path, kind, error_class):
    traces = TraceWriter(tmp_path / "traces.jsonl")
    ex = Executor(ReferenceBackends(), ExecutorConfig(
        timeout_s=0.05, max_retries=2, faults=FaultConfig(seed=1, rules=[
            FaultRule(kind=kind, tools=["get_weather"], rate=1.0, retry_after_s=0.5)])),
        clock=FakeClock(), traces=traces)
    tools = load_variant("ecommerce", "l10").tools
    outcome = ex.execute(call("get_weather", city="上海"), tools, "ecommerce", RunContext())
    other = ex.execute(call("get_order_status", "c2", order_id="ORD20261105"), tools,
                       "ecommerce", RunContext())
    ex.close()
    traces.close()
    assert not outcome.success and outcome.error_class == error_class
    assert len(outcome.attempts) == 3 and {a.fault for a in outcome.attempts} == {kind}
    assert other.success  # the rule targets get_weather only
    lines = read_traces(tmp_path / "traces.jsonl")
    assert len(lines) == 4 and [line.attempt for line in lines[:3]] == [0, 1, 2]
    assert [line.final for line in lines[:3]] == [False, False, True]


@pytest.mark.slow
def test_oversized_results_are_capped():
    ex = Executor(ReferenceBackends(), ExecutorConfig(
        result_token_budget=1500, faults=FaultConfig(rules=[
            FaultRule(kind="oversized", rate=1.0)])))
    tools = load_variant("ecommerce", "l10").tools
    outcome = ex.execute(call("get_weather", city="上海"), tools, "ecommerce", RunContext())
    ex.close()
    assert outcome.success and outcome.truncated
    assert outcome.result_tokens > 8 * 1024 * 1024 // 4 * 0.9  # about 8 MB came back
    assert len(json.dumps(outcome.data, ensure_ascii=False).encode()) <= 1500 * 4
    assert outcome.data["truncation"]["total_items"] > 10_000


def test_fault_storm_run_records_every_outcome(tmp_path):
    """A seeded mix of faults over many concurrent calls: no crash, bounded attempts, the
    breaker opens, every attempt is traced, and the injected faults are reproducible."""

    def storm(seed: int):
        traces = TraceWriter(tmp_path / f"traces-{seed}.jsonl")
        rules = [FaultRule(kind="server_error", tools=["get_weather"], rate=0.5),
                 FaultRule(kind="rate_limit", tools=["search_products"], rate=0.3,
                           retry_after_s=0.2),
                 FaultRule(kind="malformed", tools=["get_order_status"], rate=0.2),
                 FaultRule(kind="timeout", tools=["track_shipment"], rate=0.2)]
        ex = Executor(ReferenceBackends(), ExecutorConfig(
            timeout_s=0.05, max_retries=2, breaker_failures=8, breaker_window_s=60,
            breaker_cooldown_s=1000, faults=FaultConfig(seed=seed, rules=rules)),
            clock=FakeClock(), traces=traces)
        tools = load_variant("ecommerce", "l10").tools
        calls = [call("get_weather", f"w{i}", city="北京") for i in range(40)] + \
            [call("search_products", f"s{i}", query="耳机") for i in range(20)] + \
            [call("get_order_status", f"o{i}", order_id="ORD20261105") for i in range(20)] + \
            [call("track_shipment", f"t{i}", tracking_number="SF1234567890")
             for i in range(10)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(
                lambda c: ex.execute(c, tools, "ecommerce", RunContext(run_id="storm")), calls))
        state = ex.breaker("ecommerce", "get_weather").state
        ex.close()
        traces.close()
        return outcomes, read_traces(tmp_path / f"traces-{seed}.jsonl"), state, ex.config.faults

    outcomes, lines, weather_state, faults = storm(3)
    assert len(outcomes) == 90 and all(len(o.attempts) <= 3 for o in outcomes)
    assert weather_state == "open"
    assert any(o.error_code == "circuit_open" for o in outcomes)
    assert len(lines) == sum(len(o.attempts) for o in outcomes)
    assert sum(1 for line in lines if line.final) == 90
    assert {line.call_id for line in lines} == {o.call_id for o in outcomes}
    # every attempt that reached the tool got exactly the fault its seed decides
    for outcome in outcomes:
        for attempt in outcome.attempts:
            if attempt.error_code in ("circuit_open",):
                continue
            rule = faults.pick(outcome.tool, outcome.call_id, attempt.attempt)
            assert attempt.fault == (rule.kind if rule else None)
    assert sum(1 for o in outcomes for a in o.attempts if a.fault) > 20


@pytest.mark.parametrize("line, field", [
    (b'{"tool": "x", "status": "ok", "duration_ms": "abc"}', "duration_ms"),
    (b'{"tool": "x", "status": "ok", "duration_ms": 1e400}', "duration_ms"),
    (b'{"tool": null, "status": "ok"}', "tool"),
    (b'\xff\xfe', None),
])
def test_corrupt_trace_lines_are_one_line_errors(tmp_path, line, field):
    from bench.errors import BenchError
    from bench.executor.traces import read_traces

    path = tmp_path / "traces.jsonl"
    path.write_bytes(b'{"tool": "ok_tool", "status": "ok", "duration_ms": 3.5}\n' + line + b"\n")
    with pytest.raises(BenchError) as raised:
        read_traces(path)
    assert raised.value.file == str(path)
    assert raised.value.field == field


def test_a_labels_failing_calls_never_open_the_circuit_for_the_models_call():
    clock = FakeClock()
    handler = flaky([ToolError("transient", "http_503", "503")] * 4)
    ex = make({"lookup": Handler(handler)}, clock, max_retries=0, breaker_failures=2,
              breaker_cooldown_s=30)
    label_side = RunContext(inject_faults=False, trace=False, label_side=True)
    for i in range(4):  # the label's call fails more often than the breaker tolerates
        assert not ex.execute(call("lookup", f"label{i}"), [READ], "t", label_side).success
    outcome = ex.execute(call("lookup", "model"), [READ], "t")
    assert outcome.success, outcome.error_code  # not circuit_open: the label's failures stay apart
    assert ex.breaker("t", "lookup").state == "closed"
