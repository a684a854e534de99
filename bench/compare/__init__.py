"""Paired comparison of two variants or runs (``bench compare``); the core is a library call:
:func:`bench.compare.core.compare_rows` returning a :class:`~bench.compare.core.Comparison`.

Names are imported lazily so that loading the CLI does not load pandas and scipy.
"""

from typing import Any

__all__ = ["Comparison", "Flip", "MetricComparison", "compare_frames", "compare_rows"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from bench.compare import core

        return getattr(core, name)
    raise AttributeError(f"module 'bench.compare' has no attribute '{name}'")
