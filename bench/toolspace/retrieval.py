"""Tool retrieval: pick the top-k tools of a catalog for a case's query.

What is matched:

- the **query** is the text of the case's user messages (:func:`query_text`);
- a tool's **document** is its name (split at ``_``, ``-``, ``.`` and camel case, and whole),
  its description as the variant renders it, and its argument names
  (:func:`tool_document`): what a retriever can see of a tool is what the variant says, so
  description length and wording change retrieval as they change selection.

Retrievers:

- :class:`Bm25Retriever`: Okapi BM25 (Robertson and Zaragoza, "The Probabilistic Relevance
  Framework: BM25 and Beyond", 2009) from the ``bm25s`` library (MIT; Lù, 2024,
  arXiv:2407.03618), its default parameters (``k1`` 1.5, ``b`` 0.75, Lucene's IDF), over
  :func:`tokenize`'s tokens.
- :class:`EmbeddingRetriever`: cosine similarity of mean-pooled embeddings
  (:mod:`bench.toolspace.embedding`).

Ties keep the catalog's order, so a retrieval is deterministic.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

from bench.models import Case, Message, Tool

if TYPE_CHECKING:
    from bench.vectors import Embedder

# CJK ideographs (Unified, Extension A, Compatibility, and Extensions B-H with the
# Compatibility Supplement in planes 2 and 3: U+20000-U+2FA1F, U+30000-U+323AF), kana and
# Hangul syllables: scripts written without spaces between words (Unicode blocks, The Unicode
# Standard 15.1 ch. 18). A plane-2 ideograph left out would glue its whole run into one token
# (``𠮷野家的订单`` matched as a word, so ``订单`` is never matched).
_CJK = ("\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
        "\U00020000-\U0002fa1f\U00030000-\U000323af")
# a CJK run, or a run of other letters and digits (never a CJK character: ``SKU订单`` is
# ``sku`` and the bigram ``订单``, not one token)
_TOKEN = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+", re.UNICODE)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def tokenize(text: str) -> list[str]:
    """Lower-cased tokens of ``text`` for BM25.

    Latin, Cyrillic and other spaced scripts: runs of letters and digits (after NFKC, so
    full-width ``ＡＢＣ`` reads as ``abc``), with camel case split (``searchOrders`` ->
    ``search``, ``orders``). Chinese, Japanese and Korean runs: overlapping character
    bigrams (``已经发货`` -> ``已经``, ``经发``, ``发货``), and the character itself for a
    one-character run, as Lucene's ``CJKAnalyzer`` indexes them: no dictionary and no
    segmenter to pin, deterministic, and on short queries within a few points of a
    dictionary segmenter (Kwok, "Comparing representations in Chinese information
    retrieval", SIGIR 1997: bigrams match or beat word segmentation for retrieval).
    """
    text = unicodedata.normalize("NFKC", text)
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        piece = match.group(0)
        if _CJK_RUN.fullmatch(piece):
            tokens.extend([piece] if len(piece) == 1 else
                          [piece[i:i + 2] for i in range(len(piece) - 1)])
        else:
            tokens.extend(part.lower() for part in _CAMEL.split(piece) if part)
    return tokens


def query_text(case: Case) -> str:
    """The text a retriever matches for ``case``: its user messages, joined by newlines."""
    return query_text_of_messages(case.messages)


def query_text_of_messages(messages: Iterable[Message]) -> str:
    """The user messages' text, joined by newlines (what :func:`query_text` matches)."""
    return "\n".join(m.content or "" for m in messages if m.role == "user")


def tool_document(tool: Tool) -> str:
    """The text a retriever indexes for ``tool``: name, name split into words, description
    and argument names (property names of its input schema)."""
    words = re.sub(r"[_\-.]+", " ", _CAMEL.sub(" ", tool.name))
    arguments = " ".join(str(k) for k in (tool.input_schema.get("properties") or {}))
    return f"{tool.name} {words}\n{tool.description}\n{arguments}"


class Retriever(Protocol):
    """Ranks a catalog's tools for a query."""

    name: str

    def rank(self, tools: Sequence[Tool], queries: Sequence[str]) -> list[list[int]]:
        """For each query, the indexes of ``tools`` best first (every tool ranked)."""
        ...


class Bm25Retriever:
    """BM25 over :func:`tokenize` tokens (``bm25s``, its default parameters)."""

    name = "bm25"

    def rank(self, tools: Sequence[Tool], queries: Sequence[str]) -> list[list[int]]:
        """For each query, every tool index by descending BM25 score (ties: catalog order)."""
        import bm25s
        import numpy as np

        corpus = [tokenize(tool_document(t)) or ["\u2205"] for t in tools]
        index = bm25s.BM25()
        index.index(corpus, show_progress=False)
        out = []
        for query in queries:
            tokens = tokenize(query)
            scores = np.asarray(index.get_scores(tokens), dtype=float) if tokens else \
                np.zeros(len(tools))
            # stable sort on -score: equal scores keep the catalog order
            out.append([int(i) for i in np.argsort(-scores, kind="stable")])
        return out


class EmbeddingRetriever:
    """Cosine similarity of embeddings (:class:`bench.vectors.Embedder`)."""

    name = "embedding"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def rank(self, tools: Sequence[Tool], queries: Sequence[str]) -> list[list[int]]:
        """For each query, every tool index by descending cosine similarity."""
        import numpy as np

        docs = self.embedder.embed([tool_document(t) for t in tools])
        asked = self.embedder.embed(list(queries))
        out = []
        for vector in asked:
            scores = docs @ vector
            out.append([int(i) for i in np.argsort(-scores, kind="stable")])
        return out


def expected_names(case: Case) -> list[str]:
    """The distinct tool names ``case``'s label expects, in label order ([] for no-call and
    ask cases; an episode's required calls)."""
    calls: Iterable[object] = case.expected.calls if case.kind != "episode" else \
        case.required_calls
    return list(dict.fromkeys(getattr(c, "name") for c in calls))


def recall_at_k(ranking: Sequence[int], tools: Sequence[Tool], expected: Sequence[str],
                k: int) -> float | None:
    """Fraction of ``expected`` tool names among the first ``k`` of ``ranking``; None when
    nothing is expected."""
    if not expected:
        return None
    top = {tools[i].name for i in ranking[:k]}
    return sum(1 for name in expected if name in top) / len(expected)
