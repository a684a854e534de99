"""The distributions behind the leak checker's near-copy threshold
(:data:`bench.descriptions.leaks.NEAR_COPY_THRESHOLD`).

For every call case of the shipped single-answer datasets it prints the best Jaccard
similarity (IDs and numbers masked; words and CJK bigrams) between the case's user text and an
l50 example of

- the same tool (where mirrors live), and
- another tool (unrelated requests: the background a threshold must stay above),

as percentiles, and the same-tool pairs between 0.4 and the threshold + 0.1 for reading.

    python benchmarks/leak_threshold.py
"""

from __future__ import annotations

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.descriptions.leaks import NEAR_COPY_THRESHOLD, case_text, jaccard, snippets, tokens


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    """Print the two distributions and the borderline pairs."""
    same: list[tuple[float, str, str, str]] = []
    other: list[float] = []
    for name in ("ecommerce", "analytics", "logistics"):
        dataset = load_dataset(name)
        examples = [s for s in snippets(load_variant(dataset.toolsets[0], "l50"))
                    if s.section == "Examples"]
        for case in dataset.cases:
            tools = {c.name for c in case.expected.calls}
            if not tools:
                continue
            said = tokens(case_text(case))
            other.append(max(jaccard(said, tokens(s.text)) for s in examples
                             if s.tool not in tools))
            best = max((s for s in examples if s.tool in tools),
                       key=lambda s: jaccard(said, tokens(s.text)), default=None)
            if best is not None:
                same.append((jaccard(said, tokens(best.text)), case.id,
                             case_text(case)[:60], best.text[:60]))
    print(f"threshold {NEAR_COPY_THRESHOLD}; {len(other)} call cases")
    for label, values in (("another tool's examples", other),
                          ("the same tool's examples", [s[0] for s in same])):
        print(f"best similarity to {label}: p50 {_pct(values, .5):.2f}, p90 {_pct(values, .9):.2f}, "
              f"p95 {_pct(values, .95):.2f}, p99 {_pct(values, .99):.2f}, "
              f"at or above the threshold {sum(v >= NEAR_COPY_THRESHOLD for v in values)}")
    print("same-tool pairs near the threshold:")
    for score, case_id, text, example in sorted(same, reverse=True):
        if 0.4 <= score < NEAR_COPY_THRESHOLD + 0.1:
            print(f"  {score:.2f} {case_id}: {text!r} ~ {example!r}")


if __name__ == "__main__":
    main()
