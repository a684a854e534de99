"""The distributions behind the leak checker's near-copy threshold
(:data:`bench.descriptions.leaks.NEAR_COPY_THRESHOLD`).

For every call case of the shipped single-answer datasets it prints the best Jaccard
similarity (IDs and numbers masked; words and CJK bigrams) between the case's user text and an
l50 example of

- the same tool (where mirrors live), and
- another tool (unrelated requests: the background a threshold must stay above),

as percentiles, and the same-tool pairs between 0.4 and the threshold + 0.1 for reading.

Then the containment signal's figures (:mod:`bench.descriptions.containment`), over the user
texts of every test case of every shipped dataset:

- for runs of k = 2..10 words (or CJK characters) of a test query, the share that occurs in
  the shipped descriptions (every variant of every toolset, all dev-derived) and in the dev
  queries: how often a query of that length is contained by chance, which sets the minimum
  length;
- for the queries at or above the minimum length, the best containment in any description
  text and in any dev query, as percentiles with the top pairs: the background the threshold
  must stay above.

    python benchmarks/leak_threshold.py
"""

from __future__ import annotations

from bench.datasets import available_datasets, load_dataset
from bench.descriptions import available_variants, load_variant
from bench.descriptions.containment import (CJK_N, CONTAINMENT_THRESHOLD, MIN_CJK, MIN_WORDS,
                                            WORD_N, ModelText, ngrams, units, weight)
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


def _said(case) -> list[str]:  # noqa: ANN001 - a Case
    return [m.content for m in case.messages if m.role == "user" and m.content] \
        + list(case.user_replies)


def _is_cjk(unit: str) -> bool:
    return len(unit) == 1 and ("\u3040" <= unit <= "\u9fff" or "\uf900" <= unit <= "\ufaff")


def containment() -> None:
    """Print the containment signal's figures (the module docstring)."""
    tests: list[tuple[str, str, str]] = []
    devs: list[str] = []
    for name in available_datasets():
        for case in load_dataset(name).cases:
            for text in _said(case):
                if case.split == "test":
                    tests.append((name, case.id, text))
                else:
                    devs.append(text)
    texts = [ModelText(s.tool, f"{toolset}/{variant} {s.section}", s.text)
             for toolset in ("ecommerce", "analytics", "logistics")
             for variant in available_variants(toolset)
             for s in snippets(load_variant(toolset, variant))]
    texts += [ModelText(t.name, f"{toolset}/{variant} description", t.description)
              for toolset in ("ecommerce", "analytics", "logistics")
              for variant in available_variants(toolset)
              for t in load_variant(toolset, variant).tools]
    print(f"\ncontainment: {len(tests)} test user texts of {len(available_datasets())} datasets, "
          f"{len(texts)} description texts, {len(devs)} dev user texts; minimum {MIN_WORDS} "
          f"words or {MIN_CJK} CJK characters, threshold {CONTAINMENT_THRESHOLD}")
    pools = {"descriptions": [units(t.text) for t in texts], "dev queries": [units(d) for d in devs]}
    print("share of a test query's k-unit runs found (words | CJK characters):")
    for k in range(2, 11):
        found = {label: ({g for seq in seqs for g in ngrams(seq, k)}) for label, seqs in pools.items()}
        row = []
        for kind in ("words", "cjk"):
            runs = [g for _, _, text in tests for g in ngrams(units(text), k)
                    if all(_is_cjk(u) == (kind == "cjk") for u in g)]
            shares = [sum(g in found[label] for g in runs) / max(len(runs), 1) for label in pools]
            row.append(f"{kind} n={len(runs)}: " + ", ".join(
                f"{label} {share:.3f}" for label, share in zip(pools, shares)))
        print(f"  k={k:2d}  " + " | ".join(row))
    for label, pool in (("description texts", texts),
                        ("dev queries", [ModelText("", "dev", d) for d in devs])):
        best: list[tuple[float, str, str, str]] = []
        for name, case_id, text in tests:
            seq = units(text)
            if weight(seq) < MIN_WORDS:
                continue
            n = CJK_N if sum(map(_is_cjk, seq)) > len(seq) / 2 else WORD_N
            grams = ngrams(seq, n)
            top = max(((len(grams & ngrams(units(t.text), n)) / len(grams), t.text)
                       for t in pool), default=(0.0, ""))
            best.append((top[0], case_id, text, top[1]))
        values = [b[0] for b in best]
        print(f"best containment of {len(values)} long enough test queries in {label}: "
              f"p50 {_pct(values, .5):.2f}, p90 {_pct(values, .9):.2f}, "
              f"p95 {_pct(values, .95):.2f}, p99 {_pct(values, .99):.2f}; at or above the "
              f"threshold {sum(v >= CONTAINMENT_THRESHOLD for v in values)}")
        for score, case_id, text, other in sorted(best, reverse=True)[:6]:
            print(f"  {score:.2f} {case_id}: {text[:60]!r} ~ {other[:60]!r}")


if __name__ == "__main__":
    main()
    containment()
