"""Precision and recall of the paraphrase leak check on the hand-labelled pairs.

Reads ``tests/data/leak_pairs.jsonl`` (mirror / not_mirror pairs of a test query and an l50
description unit, labelled by reading; how: ``tests/data/README.md#leak-pairs``), scores each
pair with the check's similarity (multilingual-e5-small cosine, the highest over the query's
messages: :mod:`bench.descriptions.paraphrase`) and, for comparison, with the lexical
checker's Jaccard similarity of masked tokens (:func:`bench.descriptions.leaks.tokens`), and
prints precision, recall and F1 at the shipped threshold and around it, plus how many of the
mirrors the lexical signals alone find.

Run: ``python benchmarks/paraphrase_check.py`` (needs the ``paraphrase`` extra; embeddings are
cached in ``<cache>/embeddings.sqlite``). ``--embedder llama`` scores with the embedded Qwen
model's mean-pooled vectors instead (wrap in ``flock /tmp/bench-model.lock``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.descriptions.leaks import jaccard, tokens  # noqa: E402
from bench.descriptions.paraphrase import LEXICAL_WEIGHT, THRESHOLD, E5Embedder  # noqa: E402

PAIRS = ROOT / "tests" / "data" / "leak_pairs.jsonl"


def scores(pairs: list[dict], embed) -> np.ndarray:  # noqa: ANN001 - a callable texts -> array
    """Per pair, the highest cosine of the query's lines with the unit."""
    lines = [p["query"].split("\n") for p in pairs]
    texts = sorted({t for ls in lines for t in ls} | {p["unit"] for p in pairs})
    index = {t: i for i, t in enumerate(texts)}
    vectors = embed(texts)
    return np.array([max(float(vectors[index[q]] @ vectors[index[p["unit"]]]) for q in ls)
                     for p, ls in zip(pairs, lines)])


def prf(predicted: np.ndarray, truth: np.ndarray) -> tuple[float, float, float, int, int]:
    """(precision, recall, F1, true positives, predicted positives)."""
    tp = int((predicted & truth).sum())
    pp = int(predicted.sum())
    precision = tp / pp if pp else 1.0
    recall = tp / int(truth.sum()) if truth.sum() else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, tp, pp


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=("e5", "llama"), default="e5")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    truth = np.array([p["label"] == "mirror" for p in pairs])
    if args.embedder == "llama":
        from bench.toolspace.embedding import LlamaEmbedder
        embed = LlamaEmbedder().embed
    else:
        embed = E5Embedder().embed
    cos = scores(pairs, embed)
    lex = np.array([max(jaccard(tokens(q), tokens(p["unit"])) for q in p["query"].split("\n"))
                    for p in pairs])
    kinds = [p["kind"] for p in pairs]
    print(f"{len(pairs)} pairs: {int(truth.sum())} mirrors, "
          f"{kinds.count('hard_negative')} hard negatives, "
          f"{kinds.count('easy_negative')} easy negatives ({args.embedder} embeddings)")
    for kind in ("mirror", "hard_negative", "easy_negative"):
        values = cos[[k == kind for k in kinds]]
        print(f"  cosine of {kind:13s}: min {values.min():.3f}  median "
              f"{np.median(values):.3f}  max {values.max():.3f}")
    print("\nrule                              precision  recall   F1    flagged")
    for t in (0.86, 0.90, 0.93, 0.96):
        p, r, f, tp, pp = prf(cos >= t, truth)
        print(f"cosine >= {t:.2f}                     {p:6.2f}  {r:6.2f}  {f:5.2f}  {tp}/{pp}")
    for t in (0.3, 0.5):
        p, r, f, tp, pp = prf(lex >= t, truth)
        print(f"lexical Jaccard >= {t:.1f}             {p:6.2f}  {r:6.2f}  {f:5.2f}  {tp}/{pp}")
    score = cos + LEXICAL_WEIGHT * lex
    shipped = THRESHOLD if args.embedder == "e5" else None
    for t in sorted({1.00, 1.04, 1.08, 1.12, 1.16} | ({shipped} if shipped else set())):
        p, r, f, tp, pp = prf(score >= t, truth)
        mark = "  <- shipped" if t == shipped else ""
        print(f"cosine + {LEXICAL_WEIGHT} x Jaccard >= {t:.2f}      {p:6.2f}  {r:6.2f}  "
              f"{f:5.2f}  {tp}/{pp}{mark}")
    base = shipped or 1.16
    for lang in ("en", "zh", "mixed"):
        sel = np.array([p["lang"] == lang for p in pairs])
        p, r, f, tp, pp = prf((score >= base) & sel, truth & sel)
        print(f"  {lang:5s} at score >= {base:.2f}: precision {p:.2f}, recall {r:.2f} "
              f"({tp}/{int((truth & sel).sum())} mirrors)")


if __name__ == "__main__":
    main()
