"""Rows per second of the embedded model with B answers decoded at once, and the share of
answers identical to single-case decoding.

For each variant and each batch size B, a fresh process (so its peak RSS is its own) loads the
``local`` engine as the provider's worker builds it (``LocalEngine(batch=B)``: default model,
context window, seed, no-call layout, threads; speculation off), puts the variant's tools
block in the KV cache (read, or loaded from a saved state: untimed), then answers a fixed,
spread sample of the dataset's cases (the selection of ``benchmarks/local_model_speed.py``):

- B = 1: one case after another with :meth:`LocalEngine.complete`, as a run did before
  batching (each case reuses what the KV cache holds, as rows of ``bench run`` do);
- B > 1: through :class:`~bench.providers.local.batching.BatchDecoder`, B cases in flight, a
  finished one's slot refilled with the next case (continuous batching).

Prints one JSON line per variant and B: ``variant``, ``batch``, ``cases``, ``rows_per_s``,
``speedup`` (against B = 1 of the same variant, same invocation), ``steps`` (llama.cpp
evaluations), ``ms_per_step``, ``identical_share`` (answers byte-identical to B = 1's),
``differing`` (case ids), ``peak_rss_mib`` and the load average.

    python benchmarks/local_batching.py --variants l3,l50 --batches 1,2,4,8 --cases 50

Run it under ``flock /tmp/bench-model.lock`` on idle cores (``uptime``): llama.cpp's threads
spin-wait, so another busy process slows it several times (ratios within one invocation hold
better than absolute figures).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.local_model_speed import spread  # noqa: E402


def measure(dataset_name: str, variant_name: str, batch: int, count: int,
            model: str | None, model_path: str | None) -> dict[str, Any]:
    """In this process: load the engine with ``batch``, answer ``count`` cases of the variant;
    return rows/s, evaluations, answers by case id and peak RSS (MiB)."""
    import resource

    from bench.datasets.loader import load_dataset
    from bench.descriptions.variants import load_variant
    from bench.providers.local import (DEFAULT_MAX_TOKENS, DEFAULT_N_CTX,
                                       DEFAULT_NO_CALL_LAYOUT, DEFAULT_SEED, NO_CALL_LAYOUTS,
                                       resolve_model_path, resolve_threads)
    from bench.providers.local.engine import LocalEngine

    dataset = load_dataset(dataset_name)
    cases = spread([c for c in dataset.cases if c.kind != "episode"], count)
    variant = load_variant(dataset.toolsets[0], variant_name)
    engine = LocalEngine(resolve_model_path(model_path, model), n_ctx=DEFAULT_N_CTX,
                         threads=resolve_threads(None), seed=DEFAULT_SEED,
                         layout=NO_CALL_LAYOUTS[DEFAULT_NO_CALL_LAYOUT], speculative=False,
                         batch=batch)
    try:
        prepared = engine.variant_for(variant.tools, variant_name)
        engine.hold_prefix(prepared)  # the tools block: untimed
        answers: dict[str, str] = {}
        evaluations = 0
        started = time.perf_counter()
        if engine.batcher is None:
            inner = engine.llm.eval

            def counted(tokens: Any) -> None:
                nonlocal evaluations
                evaluations += 1
                inner(tokens)
            engine.llm.eval = counted  # type: ignore[method-assign]
            for case in cases:
                answer = engine.complete(case.messages, variant.tools, variant_key=variant_name,
                                         max_tokens=DEFAULT_MAX_TOKENS)
                answers[case.id] = answer.text
        else:
            batcher, queue = engine.batcher, list(cases)
            while queue or batcher.active:
                while queue and batcher.admit(queue[0].id, queue[0].messages, variant.tools,
                                              variant_key=variant_name,
                                              max_tokens=DEFAULT_MAX_TOKENS):
                    queue.pop(0)
                for key, answer in batcher.step():
                    answers[str(key)] = answer.text
            evaluations = batcher.steps
        elapsed = time.perf_counter() - started
    finally:
        engine.close()
    return {"seconds": elapsed, "steps": evaluations, "answers": answers,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(conn: Any, args: tuple[Any, ...]) -> None:
    conn.send(measure(*args))
    conn.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; prints one JSON line per variant and batch size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ecommerce")
    parser.add_argument("--variants", default="l3,l50")
    parser.add_argument("--batches", default="1,2,4,8", help="batch sizes; 1 is always run")
    parser.add_argument("--cases", type=int, default=50, help="cases per variant (spread)")
    parser.add_argument("--model", default=None, help="model preset (bench run --model)")
    parser.add_argument("--model-path", default=None)
    args = parser.parse_args(argv)
    batches = sorted({1, *(int(b) for b in args.batches.split(","))})
    context = multiprocessing.get_context("spawn")
    for variant in args.variants.split(","):
        reference: dict[str, Any] | None = None
        for batch in batches:
            ours, theirs = context.Pipe()
            process = context.Process(target=_child, args=(theirs, (
                args.dataset, variant, batch, args.cases, args.model, args.model_path)))
            process.start()
            theirs.close()
            result = ours.recv()
            process.join()
            if reference is None:
                reference = result
            same = [k for k, text in result["answers"].items()
                    if reference["answers"].get(k) == text]
            rows = len(result["answers"])
            print(json.dumps({
                "variant": variant, "batch": batch, "cases": rows,
                "rows_per_s": round(rows / result["seconds"], 3),
                "speedup": round(reference["seconds"] / result["seconds"], 2),
                "steps": result["steps"],
                "ms_per_step": round(1000 * result["seconds"] / max(1, result["steps"]), 1),
                "identical_share": round(len(same) / max(1, rows), 3),
                "differing": sorted(set(result["answers"]) - set(same)),
                "peak_rss_mib": round(result["peak_rss_mib"], 1),
                "load_average": round(os.getloadavg()[0], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
