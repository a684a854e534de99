"""Run throughput, CPU per request and memory of ``bench run`` against the loopback fake server.

Targets: one ``bench run`` process (the asyncio run core), executor and scoring on, cache off:

- C = 32, L = 100 ms, 2,000 requests: >= 90% of the 320/s limit counted from the command's
  start (imports, dataset and variants loading, provider start-up and the final table
  included), and all of bench's CPU (user + system, every process of the command) <= 1.5 ms
  per request;
- C = 256, L = 1 s (a real API's latency), 10,000 requests: >= 95% of the 256/s limit;
- peak RSS flat from 2,000 to 100,000 rows.

With ``--only 32`` it prints, for 2,000 and 6,000 requests, bench's and the SDK alone's rate
(as a share of the C / L limit, and bench's as a ratio to the SDK alone's) and CPU per request
(and their ratio); bench's start-up CPU measured as a whole run of one request; and bench's
CPU per request past its start-up: the difference between the 2,000- and the 6,000-request
run, divided by the 4,000 requests between them.

Beside each bench figure, the openai SDK alone (``AsyncOpenAI``, the client bench uses, with its
default transport, C tasks posting the same bodies, built beforehand by bench's adapter and
read from a JSON file so that the process imports nothing of bench; nothing parsed, scored or
written) is measured in the same invocation
the same way, so that a slow machine shows in both. The fake server (tests/fakeserver.py)
answers ``L`` seconds after each request arrives and runs in its own process, so its CPU is not
counted. Figures go to benchmarks/RESULTS.md.

    python benchmarks/provider_throughput.py                    # every scenario
    python benchmarks/provider_throughput.py --only 32          # C = 32 only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = """
import sys
sys.path.insert(0, {tests!r})
from fakeserver import FakeServer
server = FakeServer(latency_s={latency}, record=False).start()
print(server.url, flush=True)
sys.stdin.read()
"""
CASES = 250  # ecommerce cases per trial; requests = CASES x trials
SDK_ONLY = """
import asyncio, json
import openai
url, rows, concurrency = {url!r}, {rows}, {concurrency}
with open({bodies!r}, encoding="utf-8") as handle:
    bodies = json.load(handle)

async def main():
    client = openai.AsyncOpenAI(base_url=f"{{url}}/v1", api_key="x", max_retries=0)
    queue = list(range(rows))
    async def worker():
        while queue:
            index = queue.pop()
            await client.post("/chat/completions", body=bodies[index % len(bodies)],
                              cast_to=object)
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await client.close()
asyncio.run(main())
"""


def write_bodies(path: Path) -> None:
    """The request bodies bench sends (its ``openai-compat`` adapter, variant l3, the first
    ``CASES`` ecommerce cases of every split) as a JSON list at ``path``, built here so that
    the SDK-alone process imports nothing of bench."""
    sys.path.insert(0, str(REPO))
    from bench.datasets import load_dataset
    from bench.descriptions import load_variant
    from bench.providers import make_provider
    cases = load_dataset("ecommerce").cases[:CASES]
    tools = load_variant("ecommerce", "l3").tools
    adapter = make_provider("openai-compat:fake@http://127.0.0.1:1/v1")
    path.write_text(json.dumps([adapter.build_request(c.messages, tools, trial=0)
                                for c in cases]), encoding="utf-8")


def start_server(latency_s: float) -> tuple[subprocess.Popen, str]:
    """The fake server in a child process; returns (process, base URL)."""
    process = subprocess.Popen([sys.executable, "-c", SERVER.format(
        tests=str(REPO / "tests"), latency=latency_s)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def timed(argv: list[str], cwd: Path) -> dict:
    """Run ``argv`` to its end; wall seconds from the start of the command, CPU seconds of
    the process and all its children (``os.wait4`` rusage), peak RSS in MiB (the largest
    process, ``ru_maxrss``).

    Raises:
        RuntimeError: the command failed (its stderr's last lines).
    """
    env = {**os.environ, "BENCH_HOME": str(cwd), "PYTHONPATH": str(REPO),
           "OPENAI_COMPAT_API_KEY": "x"}
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {process.returncode}: "
                           + "\n".join(stderr.splitlines()[-5:]))
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024}


def scenario(concurrency: int, latency_s: float, rows: int, *, sdk: bool = True) -> dict:
    """One ``bench run`` of ``rows`` requests (and the SDK alone, unless ``sdk`` is False)
    against a fresh fake server; returns the figures of both."""
    trials, rest = divmod(rows, CASES)
    assert rest == 0, "rows must be a multiple of CASES"
    project = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    for folder in ("datasets", "descriptions"):
        shutil.copytree(REPO / folder, project / folder)
    server, url = start_server(latency_s)
    try:
        figures: dict = {"concurrency": concurrency, "latency_s": latency_s, "rows": rows,
                         "limit_per_s": concurrency / latency_s}
        if sdk:
            bodies = project / "bodies.json"
            write_bodies(bodies)
            alone = timed([sys.executable, "-c", SDK_ONLY.format(
                url=url, rows=rows, concurrency=concurrency, bodies=str(bodies))], project)
            figures["sdk_only"] = {"requests_per_s": round(rows / alone["wall_s"], 1),
                                   "share_of_limit_pct": round(
                                       100 * rows / alone["wall_s"] / figures["limit_per_s"],
                                       1),
                                   "cpu_ms_per_request": round(
                                       alone["cpu_s"] * 1000 / rows, 3)}
        # --split all: the 250 cases are the first of every split, as in the SDK-alone bodies
        run = timed([sys.executable, "-m", "bench", "run", "--provider",
                     f"openai-compat:fake@{url}/v1", "--dataset", "ecommerce", "--split", "all",
                     "--variants", "l3", "--limit", str(CASES), "--trials", str(trials),
                     "--concurrency", str(concurrency), "--cache", "off", "--run-id",
                     "throughput"], project)
        figures["bench"] = {"requests_per_s": round(rows / run["wall_s"], 1),
                            "share_of_limit_pct": round(
                                100 * rows / run["wall_s"] / figures["limit_per_s"], 1),
                            "cpu_ms_per_request": round(run["cpu_s"] * 1000 / rows, 3),
                            "peak_rss_mib": round(run["peak_rss_mib"], 1),
                            "wall_s": round(run["wall_s"], 1)}
        if sdk:
            figures["bench_vs_sdk"] = {
                "rate_ratio": round(figures["bench"]["requests_per_s"]
                                    / figures["sdk_only"]["requests_per_s"], 3),
                "cpu_ratio": round(figures["bench"]["cpu_ms_per_request"]
                                   / figures["sdk_only"]["cpu_ms_per_request"], 2)}
        done = sum(1 for _ in (project / "reports" / "runs" / "throughput" / "results.jsonl")
                   .open(encoding="utf-8"))
        assert done == rows, f"{done} rows written, {rows} planned"
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        shutil.rmtree(project, ignore_errors=True)
    return figures


def startup_cpu(latency_s: float) -> dict:
    """CPU and wall seconds of a ``bench run`` of one request (one case, one trial) against a
    fresh fake server: bench's fixed cost per command."""
    project = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    for folder in ("datasets", "descriptions"):
        shutil.copytree(REPO / folder, project / folder)
    server, url = start_server(latency_s)
    try:
        run = timed([sys.executable, "-m", "bench", "run", "--provider",
                     f"openai-compat:fake@{url}/v1", "--dataset", "ecommerce", "--split", "all",
                     "--variants", "l3", "--limit", "1", "--cache", "off", "--run-id",
                     "startup"], project)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        shutil.rmtree(project, ignore_errors=True)
    return {"cpu_s": round(run["cpu_s"], 2), "wall_s": round(run["wall_s"], 2),
            "peak_rss_mib": round(run["peak_rss_mib"], 1)}


def compile_bench() -> None:
    """Write bench's bytecode caches (``__pycache__``), as a user's first import does and as
    pip does for the SDK at install: where ``PYTHONDONTWRITEBYTECODE`` is set (this sandbox
    sets it), every run would otherwise compile bench's ~200 modules from source (about
    0.2 s of CPU) while the SDK alone reads its compiled files."""
    import compileall
    compileall.compile_dir(str(REPO / "bench"), quiet=1)


def main() -> None:
    """Run the scenarios and print one JSON line of figures each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["32", "256", "memory"],
                        help="one scenario (default: all)")
    args = parser.parse_args()
    compile_bench()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    if args.only in (None, "32"):
        # start-up: the CPU of a whole run of one request (imports, dataset and variants,
        # provider, executor's database, the final table)
        print(json.dumps({"startup": startup_cpu(0.1)}), flush=True)
        short = scenario(32, 0.1, 2_000)
        print(json.dumps(short), flush=True)
        long = scenario(32, 0.1, 6_000)
        print(json.dumps(long), flush=True)
        # CPU per request past start-up: the difference between two runs that differ only
        # in rows
        marginal = (long["bench"]["cpu_ms_per_request"] * 6_000
                    - short["bench"]["cpu_ms_per_request"] * 2_000) / 4_000
        print(json.dumps({"marginal_cpu_ms_per_request": round(marginal, 3),
                          "startup_cpu_s_from_difference": round(
                              (short["bench"]["cpu_ms_per_request"] - marginal) * 2, 2)}),
              flush=True)
    if args.only in (None, "256"):
        print(json.dumps(scenario(256, 1.0, 10_000)), flush=True)
    if args.only in (None, "memory"):
        for rows in (2_000, 100_000):  # no latency: as fast as the loop goes
            figures = scenario(64, 0.001, rows, sdk=False)
            print(json.dumps({"rows": rows, "peak_rss_mib": figures["bench"]["peak_rss_mib"],
                              "requests_per_s": figures["bench"]["requests_per_s"]}),
                  flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
