"""Prompt-lookup speculative decoding of the embedded model: speed with it off and on, and
whether any answer changes.

Loads the ``local`` engine once in this process (as the provider's worker builds it: default
model, context window, seed, no-call layout and threads) and answers a fixed, spread sample of
a dataset's cases (the selection of ``benchmarks/local_model_speed.py``) per variant, each case
once with speculation off and once on, in alternating order, the KV cache cut back to the
tools block before each answer so that both read the case's own tokens. The variant's first
answer (it reads the tools block) is not timed. Prints per variant: the per-row median (p50)
and mean seconds off and on, the speed ratio (p50 off / p50 on), the tokens guessed and kept,
and the count of rows whose answers differ; then, when the l3 variant was run, how many of the
recorded answers of ``tests/data/local_golden.json`` each setting reproduces.

    python benchmarks/speculative_decoding.py --variants l3,l50 --cases 16

Exits 1 when any answer differs. Run it on idle cores (``uptime``): llama.cpp's threads
spin-wait, so any other busy process slows it several times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.local_model_speed import spread  # noqa: E402
from bench.datasets.loader import load_dataset  # noqa: E402
from bench.descriptions.variants import load_variant  # noqa: E402
from bench.models import Message  # noqa: E402
from bench.providers.local import (DEFAULT_MAX_TOKENS, DEFAULT_N_CTX,  # noqa: E402
                                   DEFAULT_NO_CALL_LAYOUT, DEFAULT_SEED, NO_CALL_LAYOUTS,
                                   resolve_model_path, resolve_threads)
from bench.providers.local.settings import DEFAULT_DRAFT_TOKENS  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "data" / "local_golden.json"


def timed(engine, messages, tools, key: str, draft_tokens: int) -> tuple[float, object]:
    """One answer with ``draft_tokens`` guessed per step (0: off): (seconds, EngineAnswer).
    The KV cache keeps only the tools block first, so the case's tokens are read again."""
    engine.draft_tokens = draft_tokens
    engine.forget_case()
    started = time.perf_counter()
    answer = engine.complete(messages, tools, variant_key=key, max_tokens=DEFAULT_MAX_TOKENS)
    return time.perf_counter() - started, answer


def main(argv: list[str] | None = None) -> int:
    """Entry point; prints one line per variant; exits 1 when an answer differs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ecommerce")
    parser.add_argument("--variants", default="l3,l50")
    parser.add_argument("--cases", type=int, default=16, help="cases per variant (spread)")
    parser.add_argument("--draft-tokens", type=int, default=DEFAULT_DRAFT_TOKENS,
                        help="tokens guessed per step when on")
    parser.add_argument("--model", default=None, help="model preset (bench run --model)")
    parser.add_argument("--model-path", default=None)
    args = parser.parse_args(argv)
    if args.cases < 2 or args.draft_tokens < 1:
        parser.error("--cases must be at least 2 and --draft-tokens at least 1")

    from bench.providers.local.engine import LocalEngine  # imports llama_cpp
    dataset = load_dataset(args.dataset)
    cases = spread(list(dataset.cases), args.cases)
    started = time.perf_counter()
    engine = LocalEngine(resolve_model_path(args.model_path, args.model), n_ctx=DEFAULT_N_CTX,
                         threads=resolve_threads(None), seed=DEFAULT_SEED,
                         layout=NO_CALL_LAYOUTS[DEFAULT_NO_CALL_LAYOUT], speculative=False)
    print(f"load: {time.perf_counter() - started:.2f} s; model {engine.model_path.name}; "
          f"threads {engine.threads}; draft tokens {args.draft_tokens}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    print("variant  cases  p50_off  p50_on  ratio  mean_off  mean_on  drafted  kept  differ")
    differ_total = 0
    try:
        for name in args.variants.split(","):
            variant = load_variant(dataset.toolsets[0], name)
            engine.draft_tokens = 0
            engine.complete(cases[0].messages, variant.tools, variant_key=name,
                            max_tokens=DEFAULT_MAX_TOKENS)  # reads the tools block: untimed
            off, on, differ, drafted, kept = [], [], 0, 0, 0
            for index, case in enumerate(cases):
                order = (0, args.draft_tokens) if index % 2 == 0 else (args.draft_tokens, 0)
                results = {}
                for draft in order:
                    results[draft] = timed(engine, case.messages, variant.tools, name, draft)
                (t_off, a_off), (t_on, a_on) = results[0], results[args.draft_tokens]
                off.append(t_off)
                on.append(t_on)
                drafted += a_on.drafted_tokens
                kept += a_on.accepted_tokens
                if (a_off.text, a_off.finish_reason) != (a_on.text, a_on.finish_reason):
                    differ += 1
                    print(f"  differs: {case.id}\n    off: {a_off.text}\n    on:  {a_on.text}",
                          flush=True)
            differ_total += differ
            p50_off, p50_on = statistics.median(off), statistics.median(on)
            print(f"{name:7s}  {len(cases):5d}  {p50_off:7.2f}  {p50_on:6.2f}  "
                  f"{p50_off / p50_on:5.2f}  {statistics.fmean(off):8.2f}  "
                  f"{statistics.fmean(on):7.2f}  {drafted:7d}  {kept:4d}  {differ:6d}",
                  flush=True)
            if name == "l3" and GOLDEN.is_file():
                recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]
                same = {0: 0, args.draft_tokens: 0}
                for item in recorded.values():
                    messages = [Message.model_validate(m) for m in item["messages"]]
                    for draft in same:
                        _, answer = timed(engine, messages, variant.tools, name, draft)
                        same[draft] += answer.text == item["answer"]
                print(f"  golden answers reproduced (tests/data/local_golden.json, l3): "
                      f"off {same[0]}/{len(recorded)}, on {same[args.draft_tokens]}/"
                      f"{len(recorded)}", flush=True)
    finally:
        engine.close()
    print(f"rows that differ: {differ_total}; load average {os.getloadavg()[0]:.2f}")
    return 1 if differ_total else 0


if __name__ == "__main__":
    raise SystemExit(main())
