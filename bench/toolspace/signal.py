"""A fast signal: retrieval recall@k per variant, with no generation at all.

Descriptions that retrieve well are a first, cheap signal of descriptions that select well:
what a retriever matches is what the variant says. For each variant (and each retriever),
the share of the cases whose expected tools are all among the top k tools of the variant's
own toolset (no distractors). BM25 takes milliseconds; the embedding retriever embeds each
tool text and query once per model (cached on disk, :mod:`bench.toolspace.embedding`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from bench.descriptions import Variant
from bench.models import Case
from bench.stats.intervals import wilson_interval
from bench.toolspace.retrieval import (
    Bm25Retriever,
    EmbeddingRetriever,
    Retriever,
    expected_names,
    query_text,
)

SIGNAL_KS: tuple[int, ...] = (1, 3, 5)
"""The k of the signal's recall@k columns."""


def retrieval_signal(cases: Sequence[Case], variants: Sequence[Variant],
                     retrievers: Sequence[str] = ("bm25",), ks: Sequence[int] = SIGNAL_KS,
                     embedder: Callable[[], object] | None = None) -> list[dict[str, object]]:
    """Recall@k per variant name and retriever over the cases that expect a call.

    Args:
        cases: the run's cases (no-call and ask cases are left out: nothing to retrieve).
        variants: the run's variants (one per toolset and name; a name's cases are pooled
            over its toolsets).
        retrievers: ``bm25`` and/or ``embedding``.
        ks: the cut-offs.
        embedder: builds the embedding model (``embedding`` only).

    Returns:
        One record per (variant, retriever): ``variant``, ``retriever``, ``cases``, and per k
        ``recall@k`` (fraction of cases with every expected tool in the top k),
        ``recall@k_low`` / ``recall@k_high`` (95% Wilson interval).
    """
    records: list[dict[str, object]] = []
    for retriever_name in retrievers:
        retriever: Retriever
        if retriever_name == "bm25":
            retriever = Bm25Retriever()
        else:
            if embedder is None:
                from bench.toolspace.embedding import LlamaEmbedder
                embedder = LlamaEmbedder
            retriever = EmbeddingRetriever(embedder())  # type: ignore[arg-type]
        by_name: dict[str, list[list[bool]]] = {}
        for variant in variants:
            mine = [c for c in cases if c.toolset == variant.toolset and expected_names(c)]
            if not mine:
                continue
            rankings = retriever.rank(variant.tools, [query_text(c) for c in mine])
            rows = by_name.setdefault(variant.name, [])
            for case, ranking in zip(mine, rankings):
                names = [variant.tools[i].name for i in ranking]
                wanted = expected_names(case)
                rows.append([set(wanted) <= set(names[:k]) for k in ks])
        for name, rows in by_name.items():
            record: dict[str, object] = {"variant": name, "retriever": retriever_name,
                                         "cases": len(rows)}
            for j, k in enumerate(ks):
                hits = sum(r[j] for r in rows)
                low, high = wilson_interval(hits, len(rows))
                record.update({f"recall@{k}": hits / len(rows), f"recall@{k}_low": low,
                               f"recall@{k}_high": high})
            records.append(record)
    return records
