"""How the position and wording of the "no tool fits" option bias the embedded model.

For each layout in ``bench.providers.local.NO_CALL_LAYOUTS`` this runs the dataset's cases on one
variant and prints, per layout:

- decline rate on cases that expect calls (false no-call: the option swallows real requests),
- decline rate on cases that expect no call (no-call recall),
- bias = decline rate overall minus the true no-call share (positive: declines too often),
- balanced accuracy = mean of call-case "did call" and no-call-case "did decline" rates,
- tool-selection accuracy over all cases.

The least biased layout is the one with the highest balanced accuracy (ties: smallest |bias|).

Usage: python benchmarks/no_call_layout.py [--dataset ecommerce] [--variant l10] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console
from rich.table import Table

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.providers.local import NO_CALL_LAYOUTS, LocalProvider
from bench.scoring import score_case


def measure(layout: str, cases, variant) -> dict[str, float]:
    """Run ``cases`` under one layout; return the rates described in the module docstring."""
    provider = LocalProvider(no_call_layout=layout)
    declined_call = declined_none = n_call = n_none = selected = 0
    started = time.perf_counter()
    try:
        for case in cases:
            response = provider.complete(case.messages, variant.tools, variant_key=variant.sha256,
                                         trial=0)
            answer = response.parsed
            declined = answer.error is None and not answer.calls
            score = score_case(case.expected, answer, variant.tools)
            selected += score.selection_correct
            if case.expected.no_call:
                n_none += 1
                declined_none += declined
            else:
                n_call += 1
                declined_call += declined
    finally:
        provider.close()
    total = n_call + n_none
    false_decline = declined_call / n_call if n_call else 0.0
    recall = declined_none / n_none if n_none else 0.0
    return {
        "false_no_call": false_decline,
        "no_call_recall": recall,
        "bias": (declined_call + declined_none) / total - n_none / total,
        "balanced_accuracy": ((1 - false_decline) + recall) / 2,
        "selection": selected / total,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    """Parse arguments, measure every layout, print the table and the least biased layout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ecommerce")
    parser.add_argument("--variant", default="l10")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    cases = list(dataset.cases)[: args.limit] if args.limit else list(dataset.cases)
    variant = load_variant(dataset.toolsets[0], args.variant)
    results = {}
    for name in NO_CALL_LAYOUTS:
        results[name] = measure(name, cases, variant)
        print(f"{name}: {results[name]}", file=sys.stderr, flush=True)

    table = Table(title=f"no-call layouts: {args.dataset}, {args.variant}, {len(cases)} cases "
                        f"({sum(c.expected.no_call for c in cases)} expect no call)")
    for column in ("layout", "false no-call", "no-call recall", "bias", "balanced acc",
                   "selection acc", "seconds"):
        table.add_column(column, justify="left" if column == "layout" else "right")
    for name, r in results.items():
        table.add_row(name, f"{r['false_no_call']:.1%}", f"{r['no_call_recall']:.1%}",
                      f"{r['bias']:+.1%}", f"{r['balanced_accuracy']:.1%}",
                      f"{r['selection']:.1%}", f"{r['seconds']:.0f}")
    console = Console()
    console.print(table)
    best = max(results, key=lambda n: (results[n]["balanced_accuracy"], -abs(results[n]["bias"])))
    console.print(f"least biased layout: {best}")


if __name__ == "__main__":
    main()
