"""CPU seconds of ``bench run`` before its first request and in all, in this process.

Prints ``cpu_s_before_first_request`` (from the interpreter's start to the scheduler's first
dispatch: imports, dataset, variants, plan, providers, executor) and ``cpu_s_total`` (the end
table included). Run it in a project folder, with bench run's arguments:

    python benchmarks/startup_cpu.py run --provider oracle --variants l3 --limit 1 --split all

Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import sys
import time

import bench.runner.scheduler as scheduler

_loop = scheduler.Scheduler._loop


async def _timed_loop(self: scheduler.Scheduler, todo: list) -> None:  # type: ignore[type-arg]
    """The scheduler's loop, after printing the CPU spent so far."""
    print(f"cpu_s_before_first_request {time.process_time():.3f}", file=sys.stderr)
    await _loop(self, todo)


def main() -> None:
    """Run ``bench`` with this script's arguments and print the CPU figures."""
    scheduler.Scheduler._loop = _timed_loop  # type: ignore[method-assign]
    from bench.cli import main as bench_main
    sys.argv = ["bench", *sys.argv[1:]]
    try:
        bench_main()
    finally:
        print(f"cpu_s_total {time.process_time():.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
