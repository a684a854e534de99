"""Scoring: per-case metrics and error codes."""

from bench.scoring.metrics import CaseScore, match_calls, score_case

__all__ = ["CaseScore", "match_calls", "score_case"]
