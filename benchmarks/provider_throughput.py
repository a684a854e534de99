"""Runner throughput, harness CPU per request and memory against the loopback fake server.

Targets (issue 5): with the fake server answering 100 ms after each request arrives (its own
JSON work inside those 100 ms), concurrency 32 over 2,000 requests reaches >= 90% of
32 / 0.1 s = 320 requests/s, and the harness's own CPU time per request (this process but the
SDK call: parsing, scoring, executing, cache-off row writing) stays under 2 ms. Also reports
the peak resident memory of a 20,000-row run.

The fake server (tests/fakeserver.py) runs in a separate process so that its CPU is not
counted. Two ceilings are printed beside bench's figures: hand-written HTTP with no client
library (what the server and this machine allow) and the openai SDK alone (what the SDK that
bench must call allows), so that the gap can be told apart. Each scenario runs in a fresh subprocess so that peak memory is its own.

    python benchmarks/provider_throughput.py                 # 3 x 2,000 then 20,000 rows
    python benchmarks/provider_throughput.py --rows 20000 --latency 0.1   # one, by hand
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
SERVER = """
import sys, time
sys.path.insert(0, {tests!r})
from fakeserver import FakeServer
server = FakeServer(latency_s={latency}, record=False).start()
print(server.url, flush=True)
sys.stdin.read()
"""


def start_server(latency_s: float) -> tuple[subprocess.Popen, str]:
    """The fake server in a child process; returns (process, base URL)."""
    process = subprocess.Popen([sys.executable, "-c", SERVER.format(
        tests=str(REPO / "tests"), latency=latency_s)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    url = process.stdout.readline().strip()
    return process, url


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RSSWatch:
    """The largest resident set (kB) any of ``pids`` reached, from ``/proc/<pid>/status``
    (``VmHWM``, the peak), read every 0.2 s until :meth:`stop`."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.peak_kb = pids, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while True:
            for pid in self.pids:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:  # exited
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            if self._done.wait(0.2):
                return

    def stop(self) -> None:
        """Stop watching (after one last read)."""
        self._done.set()
        self._thread.join()


def scenario(rows: int, latency_s: float, concurrency: int,
             sender_processes: int | None = None) -> dict:
    """Run ``rows`` requests through :class:`bench.runner.Runner` in this process
    (``sender_processes``: the runner's setting; None: its default)."""
    sys.path.insert(0, str(REPO))
    from bench.runner import RunConfig, Runner

    home = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    os.symlink(REPO / "datasets", home / "datasets")
    os.symlink(REPO / "descriptions", home / "descriptions")
    os.environ["BENCH_HOME"] = str(home)
    # A user's second run finds the executor's shop database cached; generating it
    # (1-2 s, once per machine) is not request throughput.
    from bench.executor.backends.shopdb import shop_db_path
    shop_db_path()
    server, url = start_server(latency_s)
    try:
        cases = 125
        trials = max(1, rows // cases)
        config = RunConfig(dataset="ecommerce", variants=["l3"], limit=cases, trials=trials,
                           providers=[f"openai-compat:fake@{url}/v1"], concurrency=concurrency,
                           sender_processes=sender_processes)
        runner = Runner(config, run_id="bench", command=[])
        planned = len(runner.plan)
        cpu0, wall0, main0 = time.process_time(), time.perf_counter(), time.thread_time()
        runner.open_providers()  # the SDK client; the sender processes start here
        opened = time.perf_counter() - wall0
        senders = runner.sender_processes(runner.config.providers[0])
        sender_rss = RSSWatch([pid for pool in runner.senders.values() for pid in pool.pids])
        wall1 = time.perf_counter()
        manifest = runner.run()  # joins the sender processes at its end
        sender_rss.stop()
        wall = time.perf_counter() - wall1
        main_cpu = time.thread_time() - main0  # scoring, execution, row writing, dispatch
        cpu = time.process_time() - cpu0
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the senders: server runs on
        latencies = [row["latency_s"] for row in runner.store.rows()]
    finally:
        server_cpu = _cpu_s(server.pid)
        server.stdin.close()
        server.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)
    assert manifest["status"] == "complete" and manifest["rows_done"] == planned
    sender_cpu = children.ru_utime + children.ru_stime
    quantiles = statistics.quantiles(latencies, n=100)
    return {"rows": planned, "latency_s": latency_s, "concurrency": concurrency,
            "sender_processes": senders,
            "open_s": round(opened, 3), "wall_s": round(wall, 3),
            "requests_per_s": round(planned / wall, 1),
            "requests_per_s_with_open": round(planned / (wall + opened), 1),
            "limit_per_s": round(concurrency / latency_s, 1) if latency_s else None,
            # this process: bench's own work, plus the SDK calls when there are no senders
            "process_cpu_ms_per_request": round(cpu * 1000 / planned, 3),
            "main_thread_cpu_ms_per_request": round(main_cpu * 1000 / planned, 3),
            "sender_cpu_ms_per_request": round(sender_cpu * 1000 / planned, 3),
            "server_cpu_ms_per_request": round(server_cpu * 1000 / planned, 3),
            "latency_ms": {"p50": round(1000 * quantiles[49], 1),
                           "p90": round(1000 * quantiles[89], 1),
                           "p99": round(1000 * quantiles[98], 1),
                           "mean": round(1000 * statistics.fmean(latencies), 1)},
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "sender_peak_rss_mb": round(sender_rss.peak_kb / 1024, 1)}  # the largest sender


def _ceiling(rows: int, latency_s: float,
             send_all: Callable[[str, list[dict[str, Any]]], None]) -> dict:
    """Time ``send_all(base URL, bodies)`` against a fresh fake server: ``bodies`` are the
    125 ecommerce cases' Chat Completions requests as bench builds them (variant l3).
    Returns rows, requests/s and this process's CPU ms per request."""
    sys.path.insert(0, str(REPO))
    from bench.datasets import load_dataset
    from bench.descriptions import load_variant
    from bench.providers import make_provider

    cases = load_dataset("ecommerce").cases[:125]
    tools = load_variant("ecommerce", "l3").tools
    server, url = start_server(latency_s)
    try:
        adapter = make_provider(f"openai-compat:fake@{url}/v1")
        bodies = [adapter.build_request(c.messages, tools, trial=0) for c in cases]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        send_all(url, bodies)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    return {"rows": rows, "requests_per_s": round(rows / wall, 1),
            "cpu_ms_per_request": round(cpu * 1000 / rows, 3)}


def sdk_only(rows: int, latency_s: float, concurrency: int) -> dict:
    """The ceiling on this machine now: ``rows`` requests of the same bodies sent straight
    through the openai SDK (``concurrency`` threads, nothing parsed, scored or written)."""
    from concurrent.futures import ThreadPoolExecutor

    import openai

    def send_all(url: str, bodies: list[dict[str, Any]]) -> None:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)

        def one(index: int) -> None:
            client.post("/chat/completions", body=bodies[index % len(bodies)], cast_to=object)

        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, range(rows)))

    return _ceiling(rows, latency_s, send_all)


def raw_http(rows: int, latency_s: float, concurrency: int) -> dict:
    """The server and machine without any client library: ``rows`` HTTP/1.1 requests of the
    same bodies written and read by hand on ``concurrency`` keep-alive connections (asyncio
    streams). What is left between this and :func:`sdk_only` is the SDK's own cost."""
    import asyncio

    def send_all(url: str, bodies: list[dict[str, Any]]) -> None:
        host, port = url.removeprefix("http://").split(":")
        requests = []
        for body in bodies:
            data = json.dumps(body).encode()
            requests.append(b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s\r\n"
                            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n"
                            % (f"{host}:{port}".encode(), len(data)) + data)

        async def connection(count: int, offset: int) -> None:
            reader, writer = await asyncio.open_connection(host, int(port))
            for index in range(count):
                writer.write(requests[(offset + index) % len(requests)])
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
            writer.close()

        async def everything() -> None:
            share, extra = divmod(rows, concurrency)
            await asyncio.gather(*(connection(share + (i < extra), i)
                                   for i in range(concurrency)))

        asyncio.run(everything())

    return _ceiling(rows, latency_s, send_all)


def main() -> None:
    """Run the scenarios in fresh subprocesses and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, help="run one scenario in this process")
    ceiling = parser.add_mutually_exclusive_group()
    ceiling.add_argument("--sdk-only", action="store_true",
                         help="with --rows: the SDK alone, no bench (the machine's ceiling)")
    ceiling.add_argument("--raw-http", action="store_true",
                         help="with --rows: hand-written HTTP, no SDK (the server's ceiling)")
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sender-processes", type=int,
                        help="the runner's --sender-processes (default: its own default)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of the 2,000-request scenario (this VM's speed drifts)")
    args = parser.parse_args()
    if args.rows is not None and args.rows < 1 or args.concurrency < 1 or args.repeat < 1:
        parser.error("--rows, --concurrency and --repeat must be at least 1")
    if (args.sdk_only or args.raw_http) and not args.rows:
        parser.error("--sdk-only and --raw-http need --rows")
    if args.rows is not None:
        if args.raw_http:
            figures = raw_http(args.rows, args.latency, args.concurrency)
        elif args.sdk_only:
            figures = sdk_only(args.rows, args.latency, args.concurrency)
        else:
            figures = scenario(args.rows, args.latency, args.concurrency, args.sender_processes)
        print(json.dumps(figures))
        return
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    common = ["--latency", str(args.latency), "--concurrency", str(args.concurrency)]
    if args.sender_processes is not None:
        common += ["--sender-processes", str(args.sender_processes)]
    shares, ceilings = [], []
    out = subprocess.run([sys.executable, __file__, "--rows", "2000", "--raw-http", *common],
                         capture_output=True, text=True, check=True)
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  hand-written HTTP, no SDK (the fake server's ceiling): {raw['requests_per_s']} "
          f"req/s, {raw['cpu_ms_per_request']} ms CPU/request", flush=True)
    for rows in [2000] * args.repeat + [20000]:
        if rows == 2000:  # the SDK alone just before: this VM's speed drifts
            out = subprocess.run([sys.executable, __file__, "--rows", str(rows), "--sdk-only",
                                  *common], capture_output=True, text=True, check=True)
            ceiling = json.loads(out.stdout.strip().splitlines()[-1])
            ceilings.append(ceiling["requests_per_s"])
            print(f"  the openai SDK alone, one process (no bench): "
                  f"{ceiling['requests_per_s']} req/s, {ceiling['cpu_ms_per_request']} ms "
                  "CPU/request", flush=True)
        out = subprocess.run([sys.executable, __file__, "--rows", str(rows), *common],
                             capture_output=True, text=True, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        share = 100 * figures["requests_per_s"] / figures["limit_per_s"]
        if rows == 2000:
            shares.append((share, figures["requests_per_s"] / ceilings[-1]))
        latency = figures["latency_ms"]
        print(f"{figures['rows']} requests, concurrency {figures['concurrency']}, latency "
              f"{figures['latency_s'] * 1000:.0f} ms, {figures['sender_processes']} sender "
              f"processes: {figures['requests_per_s']} req/s, {share:.1f}% of the "
              f"{figures['limit_per_s']:.0f}/s limit (open {figures['open_s']} s not counted; "
              f"counted: {figures['requests_per_s_with_open']} req/s); CPU per request: bench's "
              f"process {figures['process_cpu_ms_per_request']} ms (main thread "
              f"{figures['main_thread_cpu_ms_per_request']}), senders "
              f"{figures['sender_cpu_ms_per_request']} ms; request latency p50 "
              f"{latency['p50']} / p90 {latency['p90']} / p99 {latency['p99']} ms; peak RSS "
              f"{figures['peak_rss_mb']} MB (a sender: {figures['sender_peak_rss_mb']} MB); "
              f"wall {figures['wall_s']} s", flush=True)
    limit = sorted(share for share, _ in shares)
    relative = sorted(100 * ratio for _, ratio in shares)
    middle = len(shares) // 2
    print(f"2,000 requests: median {limit[middle]:.1f}% of the limit (min {limit[0]:.1f}%, "
          f"max {limit[-1]:.1f}%; target >= 90%); median {relative[middle]:.1f}% of what the "
          f"SDK alone reached just before (min {relative[0]:.1f}%, max {relative[-1]:.1f}%)")


if __name__ == "__main__":
    main()
