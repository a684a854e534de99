"""Where an embedded-model row's time goes: llama.cpp's evaluations against the rest.

Loads the ``local`` engine once in this process (as the provider's worker builds it: default
model, context window, seed, no-call layout and threads) and answers a fixed, spread sample of
a dataset's cases (the selection of ``benchmarks/local_model_speed.py``) per variant, the KV
cache cut back to the tools block before each answer (so each reads its case's own tokens, as
a row of ``bench run`` does). The variant's first answer (it reads the tools block) is not
timed. Every ``Llama.eval`` call is timed, so each row splits into:

- ``case eval``: reading the case's own prompt tokens (one batch);
- ``steps``: the other evaluations, one per chosen token or written piece of JSON punctuation
  (each a full pass of the model over one position, attending to the whole context);
- ``other``: everything else (grammar sampling, detokenising, bench's Python).

Prints per variant the medians of each, the evaluation count and the per-step milliseconds.
The floor of a row on this machine is its evaluations: ``case eval + steps x step ms``; what
bench can still win is ``other`` and the count of steps.

    python benchmarks/local_floor.py --variants l3,l10,l30,l50 --cases 12

Run it on idle cores (``uptime``): llama.cpp's threads spin-wait, so any other busy process
slows it several times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.local_model_speed import spread  # noqa: E402
from bench.datasets.loader import load_dataset  # noqa: E402
from bench.descriptions.variants import load_variant  # noqa: E402
from bench.providers.local import (DEFAULT_MAX_TOKENS, DEFAULT_N_CTX,  # noqa: E402
                                   DEFAULT_NO_CALL_LAYOUT, DEFAULT_SEED, NO_CALL_LAYOUTS,
                                   resolve_model_path, resolve_threads)


class EvalClock:
    """Wraps ``llm.eval``: records (tokens, seconds) of every call while ``calls`` is a list."""

    def __init__(self, llm) -> None:
        self.inner = llm.eval
        self.calls: list[tuple[int, float]] = []
        llm.eval = self

    def __call__(self, tokens) -> None:
        started = time.perf_counter()
        self.inner(tokens)
        self.calls.append((len(tokens), time.perf_counter() - started))


def main(argv: list[str] | None = None) -> int:
    """Entry point; prints one line per variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ecommerce")
    parser.add_argument("--variants", default="l3,l10,l30,l50")
    parser.add_argument("--cases", type=int, default=12, help="cases per variant (spread)")
    parser.add_argument("--model", default=None, help="model preset (bench run --model)")
    parser.add_argument("--model-path", default=None)
    args = parser.parse_args(argv)
    if args.cases < 2:
        parser.error("--cases must be at least 2")

    from bench.providers.local.engine import LocalEngine  # imports llama_cpp
    dataset = load_dataset(args.dataset)
    cases = spread([c for c in dataset.cases if c.kind != "episode"], args.cases)
    started = time.perf_counter()
    engine = LocalEngine(resolve_model_path(args.model_path, args.model), n_ctx=DEFAULT_N_CTX,
                         threads=resolve_threads(None), seed=DEFAULT_SEED,
                         layout=NO_CALL_LAYOUTS[DEFAULT_NO_CALL_LAYOUT], speculative=False)
    clock = EvalClock(engine.llm)
    print(f"load: {time.perf_counter() - started:.2f} s; model {engine.model_path.name}; "
          f"threads {engine.threads}; load average {os.getloadavg()[0]:.2f}", flush=True)
    print("variant  context  cases  row_s  case_eval_s  case_tokens  steps  step_ms  "
          "steps_s  other_s  chosen  eval_share")
    try:
        for name in args.variants.split(","):
            variant = load_variant(dataset.toolsets[0], name)
            engine.complete(cases[0].messages, variant.tools, variant_key=name,
                            max_tokens=DEFAULT_MAX_TOKENS)  # reads the tools block: untimed
            context = engine.llm.n_tokens
            rows: list[dict[str, float]] = []
            for case in cases:
                engine.forget_case()
                clock.calls = []
                begun = time.perf_counter()
                answer = engine.complete(case.messages, variant.tools, variant_key=name,
                                         max_tokens=DEFAULT_MAX_TOKENS)
                total = time.perf_counter() - begun
                (case_tokens, case_s), *steps = clock.calls
                steps_s = sum(s for _, s in steps)
                rows.append({"row": total, "case_s": case_s, "case_tokens": case_tokens,
                             "steps": len(steps), "steps_s": steps_s,
                             "step_ms": 1000 * steps_s / max(1, len(steps)),
                             "other": total - case_s - steps_s,
                             "chosen": answer.sampled_tokens,
                             "share": (case_s + steps_s) / total})
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            print(f"{name:7s}  {context:7d}  {len(rows):5d}  {med['row']:5.2f}  "
                  f"{med['case_s']:11.2f}  {med['case_tokens']:11.0f}  {med['steps']:5.0f}  "
                  f"{med['step_ms']:7.1f}  {med['steps_s']:7.2f}  {med['other']:7.2f}  "
                  f"{med['chosen']:6.0f}  {med['share']:10.2f}", flush=True)
    finally:
        engine.close()
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
