"""What the worker process of ``function:<module>:<callable>`` costs per request.

Times ``complete()`` of a function that answers at once (``[]``) in this process
(:class:`bench.providers.function.FunctionProvider`, a thread per call) and in the worker
process (:class:`bench.providers.function.ModuleFunctionProvider`: the messages pickled to
it, the answer text back; the tools cross once per variant), one request at a time and with
``--concurrency`` requests in flight, on the ecommerce cases and the l50 variant (its largest
tool descriptions). The two alternate for ``--rounds`` rounds and the median round is printed
(a shared machine's load moves single rounds). Also prints the worker's start (spawn and
import) time. Run from the repository root:

    python benchmarks/function_overhead.py [--requests 2000] [--concurrency 4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.datasets import load_dataset  # noqa: E402
from bench.descriptions import load_variant  # noqa: E402
from bench.providers.base import Provider  # noqa: E402
from bench.providers.function import FunctionProvider, ModuleFunctionProvider  # noqa: E402

MODULE = "def answer(messages, tools, trial):\n    return []\n"


async def per_request_ms(provider: Provider, requests: int, concurrency: int) -> float:
    """Wall milliseconds per request for ``requests`` calls, ``concurrency`` in flight."""
    cases = load_dataset("ecommerce").cases
    variant = load_variant("ecommerce", "l50")
    await provider.complete(cases[0].messages, variant.tools, variant_key=variant.sha256,
                            trial=0)  # the tools cross to a worker once: not timed
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        async with gate:
            await provider.complete(cases[index % len(cases)].messages, variant.tools,
                                    variant_key=variant.sha256, trial=0)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(requests)))
    return (time.perf_counter() - started) / requests * 1000


def main() -> None:
    """Print ms per request in this process and in the worker, and the worker's start."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "instant_answer.py").write_text(MODULE, encoding="utf-8")
        sys.path.insert(0, folder)
        from instant_answer import answer  # type: ignore[import-not-found]
        started = time.perf_counter()
        worker = ModuleFunctionProvider("instant_answer:answer",
                                        provider_id="function:instant_answer:answer")
        print(f"worker start (spawn + import): {time.perf_counter() - started:.2f} s")
        here = FunctionProvider(answer, provider_id="function:instant")
        try:
            for concurrency in sorted({1, args.concurrency}):
                rounds: dict[str, list[float]] = {"in process": [], "worker process": []}
                for _ in range(args.rounds):
                    for name, provider in (("in process", here), ("worker process", worker)):
                        rounds[name].append(asyncio.run(
                            per_request_ms(provider, args.requests, concurrency)))
                for name, times in rounds.items():
                    print(f"{name}, {concurrency} in flight: {statistics.median(times):.3f} ms "
                          f"per request (median of {args.rounds} rounds of {args.requests} "
                          f"requests, variant l50; range {min(times):.3f}-{max(times):.3f})")
        finally:
            worker.close()


if __name__ == "__main__":
    main()
