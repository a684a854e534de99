"""A scripted ``function:`` model for the many-tools sweep (docs/many-tools.md): it reads every
tool it is sent and calls the one whose name and description share the most words with the
query, scored overlap / sqrt(document words); ties go to the tool sent first; no call when no
word is shared; never any arguments. It is lexical, like BM25, so a sweep with it checks the
machinery (catalogs, retrievers, metrics), not what an LLM would do.

    PYTHONPATH=benchmarks bench run --provider function:scripted:answer \\
        --variants l3,l30,l50 --tools 13,40,200 --retriever none,bm25 --top-k 5 --no-execute
"""

from __future__ import annotations

import math
from typing import Sequence

from bench.models import Message, Tool
from bench.toolspace.retrieval import query_text_of_messages, tokenize, tool_document


def answer(messages: Sequence[Message], tools: Sequence[Tool], trial: int) -> dict[str, object]:
    """The call of the best-overlapping tool: ``{"tool_calls": [{"name", "arguments": {}}]}``,
    or ``{"tool_calls": [], "text": ...}`` when no tool shares a word with the query."""
    query = set(tokenize(query_text_of_messages(messages)))
    best: Tool | None = None
    best_score = 0.0
    for tool in tools:
        words = tokenize(tool_document(tool))
        score = len(query & set(words)) / math.sqrt(len(words) or 1)
        if score > best_score:
            best, best_score = tool, score
    if best is None:
        return {"tool_calls": [], "text": "No tool fits."}
    return {"tool_calls": [{"name": best.name, "arguments": {}}]}
