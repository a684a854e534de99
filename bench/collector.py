"""The garbage collector's settings while ``bench run`` starts and runs.

A run's start-up (loading thousands of cases, variants, the providers' SDKs) makes objects
that live as long as the command, and CPython's cyclic collector scanned them again and again:
on 2,000 episode cases three full collections took 0.17-0.29 s before the first request, and
during the run 220 young-generation collections another 0.15-0.20 s, each a pause of the event
loop (``benchmarks/RESULTS.md``). So the collector is paused while the run starts, what start-up
made is frozen out of its sight (``gc.freeze``, as the Python docs advise for long-lived
objects), and during the run the young generation is collected every
:data:`RUN_THRESHOLD` net allocations instead of CPython's 700.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLD", "paused_until_the_run"]

RUN_THRESHOLD = 10_000
"""Net container allocations between young-generation collections during a run (CPython's
default is 700; the older generations keep their default ratios of 10). Measured on 2,000
two-step episodes: 8 collections and 0.02 s in all, against 223 and 0.15-0.20 s."""


@contextmanager
def paused_until_the_run() -> Iterator[Callable[[], None]]:
    """Pause the cyclic collector for the block; the callable it gives starts the run's
    setting (freeze what exists, young generation every :data:`RUN_THRESHOLD` allocations,
    collector on). On leaving, the collector's thresholds and on/off state are restored, so a
    caller in the same process (a test, a notebook) keeps its own settings."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.disable()

    def start_the_run() -> None:
        gc.freeze()
        gc.set_threshold(RUN_THRESHOLD, *thresholds[1:])
        gc.enable()

    try:
        yield start_the_run
    finally:
        gc.set_threshold(*thresholds)
        if enabled:
            gc.enable()
        else:
            gc.disable()
