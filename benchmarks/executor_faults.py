"""Fault-injection outcomes table: what the executor does when tools misbehave.

Usage: ``python benchmarks/executor_faults.py [--calls 200] [--rate 0.3] [--interval 1]``

For each fault kind, ``--calls`` get_weather calls run with that fault injected at ``--rate``
per attempt (seed 7, simulated clock for backoff, timeout 0.05 s, 3 retries, breaker 5
failures / 30 s / 10 s cool-down; one call every ``--interval`` simulated seconds) and a
table shows the outcomes: succeeded, failed by error
class, attempts, capped results, breaker state at the end. A "no fault" row is the baseline.
"""

from __future__ import annotations

import argparse
from collections import Counter

from bench.descriptions import load_variant
from bench.executor.backends import ReferenceBackends
from bench.executor.clock import FakeClock
from bench.executor.faults import FaultConfig, FaultRule
from bench.executor.outcome import RunContext
from bench.executor.pipeline import Executor, ExecutorConfig
from bench.models import ToolCall

KINDS = ("none", "timeout", "rate_limit", "server_error", "oversized", "malformed")


def row(kind: str, calls: int, rate: float, interval: float,
        backends: ReferenceBackends) -> str:
    rules = [] if kind == "none" else [FaultRule(kind=kind, rate=rate, retry_after_s=0.5)]
    clock = FakeClock()
    executor = Executor(backends, ExecutorConfig(timeout_s=0.05, max_retries=3,
                                                 faults=FaultConfig(seed=7, rules=rules)),
                        clock=clock)
    tools = load_variant("ecommerce", "l10").tools
    outcomes = []
    for i in range(calls):
        outcomes.append(executor.execute(ToolCall(id=f"{kind}-{i}", name="get_weather",
                                                  arguments={"city": "上海", "days": 2}),
                                         tools, "ecommerce", RunContext()))
        clock.advance(interval)
    state = executor.breaker("ecommerce", "get_weather").state
    opened = sum(1 for t in executor.breaker("ecommerce", "get_weather").transitions
                 if t[1] == "open")
    executor.close()
    classes = Counter(o.error_class for o in outcomes if not o.success)
    attempts = [len(o.attempts) for o in outcomes]
    reached = sum(1 for o in outcomes for a in o.attempts if a.error_code != "circuit_open")
    return (f"| {kind} | {calls} | {sum(o.success for o in outcomes)} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(classes.items())) or '-'} | "
            f"{sum(attempts) / calls:.2f} | {max(attempts)} | {reached} | "
            f"{sum(o.truncated for o in outcomes)} | {opened} | {state} | "
            f"{sum(clock.slept):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rate", type=float, default=0.3)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    backends = ReferenceBackends()
    print(f"fault rate {args.rate} per attempt, {args.calls} calls per row, one call every "
          f"{args.interval:g} s")
    print("| fault | calls | succeeded | failed (by class) | mean attempts | max attempts | "
          "attempts reaching the tool | capped | breaker opened | breaker at end | "
          "simulated wait s |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---|---:|")
    for kind in KINDS:
        print(row(kind, args.calls, args.rate, args.interval, backends), flush=True)


if __name__ == "__main__":
    main()
