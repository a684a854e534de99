"""Scoring: per-case metrics, error codes, lenient repairs, and the BFCL-compatible checker
(:mod:`bench.scoring.bfcl`)."""

from bench.scoring.metrics import CaseScore, match_calls, repair_arguments, score_case

__all__ = ["CaseScore", "match_calls", "repair_arguments", "score_case"]
