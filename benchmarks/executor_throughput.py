"""Executor figures: overhead per call, calls/s through the pipeline, database generation time.

Usage: ``python benchmarks/executor_throughput.py [--calls 10000]``

- overhead: 10,000 calls of a tool whose handler does no work (it returns a constant), with the
  ``search_orders`` schema; per-call time = validation + lenient-repair scan + permission +
  breaker + dispatch + normalisation + capping check, in microseconds; once with the handler
  run in the caller's thread (cooperative, as the reference backends are) and once on a
  worker thread (what an MCP or other blocking handler costs).
- calls/s: real reference-backend calls (get_order_status, get_weather, search_products,
  query_database), sequential and from 8 threads.
- database generation: a fresh shop database into a temporary folder, 3 times.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import tempfile
import time
from pathlib import Path

from bench.descriptions import load_variant
from bench.executor.backends import ReferenceBackends
from bench.executor.backends.base import Handler
from bench.executor.backends.shopdb import generate
from bench.executor.outcome import RunContext
from bench.executor.pipeline import Executor
from bench.models import ToolCall


def overhead(calls: int, cooperative: bool) -> None:
    tools = load_variant("ecommerce", "l10").tools
    handler = Handler(lambda a, c: {"ok": 1}, cooperative=cooperative)
    executor = Executor({"ecommerce": {"search_orders": handler}})
    call = ToolCall(id="b", name="search_orders",
                    arguments={"keyword": "耳机", "status": "shipped", "date_from": "2026-11-01",
                               "page": 1})
    by_name = {t.name: t for t in tools}
    run = RunContext()
    for _ in range(200):  # warm caches (compiled validators, threads)
        executor.execute(call, by_name, "ecommerce", run)
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        executor.execute(call, by_name, "ecommerce", run)
        samples.append((time.perf_counter() - t0) * 1e6)
    executor.close()
    samples.sort()
    mode = "in the caller's thread (cooperative)" if cooperative else "on a worker thread"
    print(f"executor overhead over {calls} calls, no-op handler {mode}: "
          f"mean {statistics.fmean(samples):.1f} us, p50 {samples[len(samples) // 2]:.1f} us, "
          f"p99 {samples[int(len(samples) * 0.99)]:.1f} us")


def throughput(calls: int) -> None:
    tools = load_variant("ecommerce", "l10").tools
    executor = Executor(ReferenceBackends())
    kinds = [("get_order_status", {"order_id": "ORD20261105"}),
             ("get_weather", {"city": "北京", "days": 3}),
             ("search_products", {"query": "耳机", "max_price": 500}),
             ("query_database", {"sql": "SELECT status, COUNT(*) FROM orders GROUP BY 1"})]
    batch = [ToolCall(id=f"c{i}", name=kinds[i % 4][0], arguments=kinds[i % 4][1])
             for i in range(calls)]
    executor.execute(batch[0], tools, "ecommerce")  # builds the database if needed
    for threads in (1, 8):
        t0 = time.perf_counter()
        if threads == 1:
            outcomes = [executor.execute(c, tools, "ecommerce") for c in batch]
        else:
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                outcomes = list(pool.map(lambda c: executor.execute(c, tools, "ecommerce"),
                                         batch))
        elapsed = time.perf_counter() - t0
        assert all(o.success for o in outcomes)
        print(f"reference backend, {calls} mixed read calls, {threads} thread(s): "
              f"{calls / elapsed:.0f} calls/s")
    executor.close()


def database_generation() -> None:
    times = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as folder:
            t0 = time.perf_counter()
            generate(Path(folder) / "shop.sqlite")
            times.append(time.perf_counter() - t0)
    print(f"shop database generation: {', '.join(f'{t:.2f}' for t in times)} s "
          f"(median {statistics.median(times):.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    args = parser.parse_args()
    overhead(args.calls, cooperative=True)
    overhead(args.calls, cooperative=False)
    throughput(min(args.calls, 4000))
    database_generation()


if __name__ == "__main__":
    main()
