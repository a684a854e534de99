"""Episodes per second of ``bench run`` against the loopback fake server (C = 32, L = 100 ms).

Each episode is two steps: the server answers the first request of an episode with a call of
``get_order_status`` (run by the reference executor on the episode's private copy of the shop
database, its result sent back as a ``tool`` message) and the second, which carries that
result, with a final text answer. So the limit is C / (2 L) = 160 episodes/s. The figures
count from the command's start (imports, dataset, the label checks that run each episode's
state queries on a fresh database copy, the final table), like
``benchmarks/provider_throughput.py``, whose fake server and timing this reuses. Figures go to
benchmarks/RESULTS.md.

    python benchmarks/episode_throughput.py [--episodes 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provider_throughput import REPO, compile_bench, timed  # noqa: E402 - the sibling's timer

SERVER = """
import sys, json
sys.path.insert(0, {tests!r})
from fakeserver import FakeServer, Reply, chat_body

def answer(request):
    messages = request.body.get("messages", [])
    if any(m.get("role") == "tool" for m in messages):
        return Reply(body=chat_body(text="Order ORD20250142 is paid."))
    return Reply(body=chat_body(calls=[("get_order_status", {{"order_id": "ORD20250142"}})]))

server = FakeServer(latency_s={latency}, handler=answer, record=False).start()
print(server.url, flush=True)
sys.stdin.read()
"""

EPISODE = {"toolset": "ecommerce", "lang": "en", "kind": "episode",
           "messages": [{"role": "user", "content": "What is the status of ORD20250142?"}],
           "success": {"state_checks": [{"sql": "SELECT status FROM orders WHERE "
                                                "order_id='ORD20250142'", "expect": [["paid"]]}],
                       "answer_facts": [["paid"]]},
           "required_calls": [{"name": "get_order_status",
                               "arguments": {"order_id": ["ORD20250142"]}}],
           "max_steps": 4}


def main() -> None:
    """Run one episode benchmark and print its figures as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds")
    args = parser.parse_args()
    compile_bench()
    project = Path(tempfile.mkdtemp(prefix="bench-episodes-"))
    shutil.copytree(REPO / "descriptions", project / "descriptions")
    dataset = project / "episodes.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"ep-{i}", **EPISODE}) + "\n"
                               for i in range(args.episodes)))
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(
        tests=str(REPO / "tests"), latency=args.latency)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    try:
        run = timed([sys.executable, "-m", "bench", "run", "--provider",
                     f"openai-compat:fake@{url}/v1", "--dataset", str(dataset), "--variants",
                     "l3", "--concurrency", str(args.concurrency), "--cache", "off",
                     "--run-id", "episodes"], project)
        rows = [json.loads(line) for line in
                (project / "reports" / "runs" / "episodes" / "results.jsonl").open()]
        assert len(rows) == args.episodes, f"{len(rows)} rows, {args.episodes} planned"
        success = sum(bool(r["metrics"]["task_success"]) for r in rows)
        limit = args.concurrency / (2 * args.latency)
        print(json.dumps({
            "episodes": args.episodes, "concurrency": args.concurrency,
            "latency_s": args.latency, "limit_episodes_per_s": limit,
            "episodes_per_s": round(args.episodes / run["wall_s"], 1),
            "share_of_limit_pct": round(100 * args.episodes / run["wall_s"] / limit, 1),
            "requests_per_s": round(2 * args.episodes / run["wall_s"], 1),
            "cpu_ms_per_episode": round(run["cpu_s"] * 1000 / args.episodes, 2),
            "cpu_ms_per_step": round(run["cpu_s"] * 1000 / (2 * args.episodes), 2),
            "peak_rss_mib": round(run["peak_rss_mib"], 1), "wall_s": round(run["wall_s"], 1),
            "task_success": f"{success}/{len(rows)}"}), flush=True)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        shutil.rmtree(project, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
