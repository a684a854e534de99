"""Prompt-lookup guesses for speculative decoding of the embedded model (used by
:class:`bench.providers.local.decoding.Decoding` when ``draft_tokens > 0``): tool names and
argument values are mostly copied from the prompt, so the next tokens are guessed from an earlier
occurrence of the answer's last n-gram."""

from __future__ import annotations

from typing import Sequence

import numpy as np

# Prompt lookup: longest and shortest n-gram of the answer's end looked up in the context (llama-
# cpp-python's LlamaPromptLookupDecoding: 2..1; 3..2 guessed right more often, RESULTS.md).
DRAFT_MAX_NGRAM = 3
DRAFT_MIN_NGRAM = 2


def propose_draft(history: Sequence[int] | np.ndarray, max_tokens: int, *,
                  max_ngram: int = DRAFT_MAX_NGRAM, min_ngram: int = DRAFT_MIN_NGRAM
                  ) -> list[int]:
    """Guess the tokens after ``history`` by prompt lookup: the tokens that followed the most
    recent earlier occurrence of its last n-gram, trying the longest n-gram first.

    Args:
        history: the context's tokens so far (prompt, then answer), a 1-d integer sequence.
        max_tokens: the most tokens guessed (0 or less: none).
        max_ngram / min_ngram: n-gram sizes tried, longest first (both at least 1).

    Returns:
        Up to ``max_tokens`` token ids (fewer when the occurrence is near the end of
        ``history``); empty when no n-gram of the end occurs earlier.

    Source: prompt-lookup decoding (github.com/apoorvumang/prompt-lookup-decoding), as in
    llama-cpp-python's ``LlamaPromptLookupDecoding.find_candidate_pred_tokens``, except that
    the most recent occurrence is used (the user's message and the answer so far come last,
    and arguments are copied from them) where llama-cpp-python takes the first.
    """
    ids = np.asarray(history, dtype=np.int64)
    size = int(ids.shape[0])
    if max_tokens <= 0 or size < 2:
        return []
    for ngram in range(min(max_ngram, size - 1), max(1, min_ngram) - 1, -1):
        tail = ids[size - ngram:]
        # every window that starts and ends before the tail's own position
        windows = np.lib.stride_tricks.sliding_window_view(ids[:size - 1], ngram)
        hits = np.flatnonzero((windows == tail).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + ngram
            return [int(t) for t in ids[start:start + max_tokens]]
    return []
