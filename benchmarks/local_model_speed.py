"""Speed of the embedded model per description variant: first row, later rows, peak RSS.

Runs a fixed, spread sample of a dataset's cases (every k-th case in file order, so every tool
appears) through the ``local`` provider exactly as ``bench run`` builds it, one variant at a
time, and prints per variant: the first row's seconds (it reads the tools block), the median
and 90th percentile of the later rows, tokens, the share of answers that name the expected tool
and that parse into calls, and the peak RSS (MiB) of this process and its children.

    python benchmarks/local_model_speed.py --variants l3,l50 --cases 16
    python benchmarks/local_model_speed.py --model qwen2.5-coder-0.5b --cases 40

The estimate of a full run is ``sum over variants of first + (n_cases - 1) * mean(later)``.
Run it on idle cores (``uptime``): llama.cpp's threads spin-wait, so any other busy process
slows it several times.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.datasets.loader import load_dataset  # noqa: E402
from bench.descriptions.variants import load_variant  # noqa: E402
from bench.providers import make_provider  # noqa: E402


def spread(cases: list, count: int) -> list:
    """Every k-th case so that ``count`` cases span the whole file (which is sorted by tool)."""
    if count >= len(cases):
        return list(cases)
    step = len(cases) / count
    return [cases[int(i * step)] for i in range(count)]


def peak_rss_mib() -> float:
    """Peak resident set size in MiB of this process plus the largest waited-for child."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + kids) / 1024


def main(argv: list[str] | None = None) -> int:
    """Entry point; prints one line per variant and exits 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ecommerce")
    parser.add_argument("--variants", default="l3,l10,l30,l50")
    parser.add_argument("--cases", type=int, default=16, help="cases per variant (spread)")
    parser.add_argument("--model", default=None, help="model preset (bench run --model)")
    parser.add_argument("--model-path", default=None)
    args = parser.parse_args(argv)
    if args.cases < 2:
        parser.error("--cases must be at least 2 (the first row is reported apart)")

    dataset = load_dataset(args.dataset)
    cases = spread(list(dataset.cases), args.cases)
    options = {"model_path": args.model_path}
    if args.model:
        options["model"] = args.model
    started = time.perf_counter()
    provider = make_provider("local", **options)
    print(f"load: {time.perf_counter() - started:.2f} s; model {provider.model_id}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    print("variant  cases  first_s  p50_s  p90_s  mean_s  tok_in  tok_out  selection  parsed")
    total = 0.0
    try:
        for name in args.variants.split(","):
            variant = load_variant(dataset.toolsets[0], name)
            latencies, right, parsed, tok_in, tok_out = [], 0, 0, [], []
            for case in cases:
                t0 = time.perf_counter()
                response = provider.complete(case.messages, variant.tools, variant_key=name,
                                             trial=0)
                latencies.append(time.perf_counter() - t0)
                calls = response.parsed.calls if response.parsed else []
                parsed += bool(response.parsed and response.parsed.error is None)
                expected = {c.name for c in (case.expected.calls or [])}
                if case.expected.no_call:
                    right += not calls
                else:
                    right += bool(calls) and {c.name for c in calls} == expected
                tok_in.append(response.usage.prompt_tokens if response.usage else 0)
                tok_out.append(response.usage.completion_tokens if response.usage else 0)
            later = latencies[1:]
            deciles = statistics.quantiles(later, n=10) if len(later) > 1 else later * 9
            total += latencies[0] + (len(dataset.cases) - 1) * statistics.fmean(later)
            print(f"{name:7s}  {len(cases):5d}  {latencies[0]:7.2f}  {statistics.median(later):5.2f}"
                  f"  {deciles[-1]:5.2f}  {statistics.fmean(later):6.2f}"
                  f"  {statistics.median(tok_in):6.0f}  {statistics.median(tok_out):7.0f}"
                  f"  {right:4d}/{len(cases):<4d}  {parsed:3d}/{len(cases)}", flush=True)
    finally:
        provider.close()
    print(f"estimated full run of {len(dataset.cases)} cases x {args.variants}: "
          f"{total / 60:.1f} min; peak RSS {peak_rss_mib():.0f} MiB; "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
