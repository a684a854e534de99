"""Paired comparison of two variants or runs (``bench compare``); the core is a library call:
:func:`bench.compare.core.compare_rows`."""

from bench.compare.core import Comparison, Flip, MetricComparison, compare_frames, compare_rows

__all__ = ["Comparison", "Flip", "MetricComparison", "compare_frames", "compare_rows"]
