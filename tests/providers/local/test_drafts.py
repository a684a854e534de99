"""Prompt-lookup guesses of the embedded model's speculative decoding (no model): the tokens
after the most recent earlier occurrence of the context's last n-gram, longest n-gram first;
and the switch that turns speculation on or off."""

from __future__ import annotations

import numpy as np
import pytest

from bench.errors import BenchError
from bench.providers.local.lookup import propose_draft
from bench.providers.local.settings import (DEFAULT_DRAFT_TOKENS, SPECULATIVE_ENV,
                                            resolve_draft_tokens)


def test_the_tokens_after_an_earlier_occurrence_of_the_last_ngram_are_guessed():
    # a value in the prompt (7 8 9 10) being copied: the answer has written "5 7" so far
    history = [1, 2, 5, 7, 8, 9, 10, 3, 4, 5, 7]
    assert propose_draft(history, 3) == [8, 9, 10]
    assert propose_draft(np.asarray(history, dtype=np.intc), 2) == [8, 9]


def test_the_most_recent_occurrence_wins_and_longer_ngrams_first():
    # "1 2" occurs twice; the later one is followed by 6
    assert propose_draft([1, 2, 5, 1, 2, 6, 0, 1, 2], 1, min_ngram=2) == [6]
    # the 3-gram "0 1 2" occurs once (followed by 9) and beats the more recent 2-gram "1 2"
    assert propose_draft([0, 1, 2, 9, 4, 1, 2, 7, 0, 1, 2], 1, max_ngram=3, min_ngram=2) == [9]


def test_nothing_is_guessed_without_an_earlier_occurrence_or_budget():
    assert propose_draft([1, 2, 3, 4], 4) == []  # "3 4" and "4" occur nowhere else
    assert propose_draft([1, 2, 1, 2], 0) == []
    assert propose_draft([7], 4) == []
    # a single matching token counts only when one-token n-grams are allowed
    assert propose_draft([4, 9, 4], 3, min_ngram=2) == []
    assert propose_draft([4, 9, 4], 3, min_ngram=1) == [9, 4]


def test_a_guess_near_the_end_is_cut_at_the_end_of_the_context():
    assert propose_draft([5, 6, 5, 6], 8, min_ngram=2) == [5, 6]


def test_the_switch_reads_the_option_then_the_environment(monkeypatch):
    monkeypatch.delenv(SPECULATIVE_ENV, raising=False)
    assert resolve_draft_tokens(True) == DEFAULT_DRAFT_TOKENS
    assert resolve_draft_tokens(False) == 0
    assert resolve_draft_tokens(5) == 5
    assert resolve_draft_tokens(None) == 0  # off unless asked (see benchmarks/RESULTS.md)
    for text, count in (("on", DEFAULT_DRAFT_TOKENS), ("1", DEFAULT_DRAFT_TOKENS),
                        ("off", 0), ("0", 0), ("6", 6)):
        monkeypatch.setenv(SPECULATIVE_ENV, text)
        assert resolve_draft_tokens(None) == count
    assert resolve_draft_tokens(False) == 0  # the option beats the environment
    monkeypatch.setenv(SPECULATIVE_ENV, "maybe")
    with pytest.raises(BenchError, match=SPECULATIVE_ENV):
        resolve_draft_tokens(None)
    with pytest.raises(BenchError, match="0 to 64"):
        resolve_draft_tokens(65)
