"""Peak memory of the commands that read a whole run: ``bench show``, ``bench report`` (HTML,
Markdown, JUnit) and ``bench compare``.

Builds a synthetic run of N rows (default 200,000) by repeating the rows of a real run under
several provider ids and trials (as ``benchmarks/report_scale.py`` does), then runs each command
in its own process and prints its peak resident set size (``ru_maxrss`` of that process, from
``os.wait4``), its wall time and its peak RSS as a multiple of ``bench show``'s: the target is
at most 1.5x for report and compare. Ratios from one invocation compare like with like on a
shared machine.

    python benchmarks/report_memory.py --source reports/runs/mem-src --rows 200000
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_scale import build_run  # noqa: E402  (a sibling script, not a package)


def peak_rss(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run ``command``; return (peak RSS in MiB, wall seconds, exit code)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    assert process.stderr is not None
    # wait4 gives this child's own rusage (RUSAGE_CHILDREN would be the max over all children)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if process.returncode not in (0, 1):  # compare exits 1 on a regression
        sys.stderr.write(stderr.decode(errors="replace")[-2000:])
    return usage.ru_maxrss / 1024, wall, process.returncode


def main() -> None:
    """Parse the options, build the run, measure each command and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("reports/runs/mem-src"),
                        help="a run folder whose rows are repeated (e.g. bench run --provider "
                             "oracle --split all --run-id mem-src)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--providers", type=int, default=5)
    parser.add_argument("--only", default="show,html,md,junit,compare",
                        help="comma-separated commands to measure")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if not (args.source / "results.jsonl").is_file():
        sys.exit(f"error: {args.source}: no results.jsonl (run `bench run` first)")
    home = Path(tempfile.mkdtemp(prefix="bench-report-memory-"))
    rows = build_run(args.source, home, args.rows, args.providers)
    size = (home / "reports" / "runs" / "scale" / "results.jsonl").stat().st_size
    print(f"rows: {rows:,}; results.jsonl {size / 2**20:,.1f} MiB (source {args.source})")
    env = {**os.environ, "BENCH_HOME": str(home), "COLUMNS": "200"}
    bench = [sys.executable, "-m", "bench"]
    commands = {
        "show": [*bench, "show", "scale"],
        "html": [*bench, "report", "scale", "-f", "html"],
        "md": [*bench, "report", "scale", "-f", "md"],
        "junit": [*bench, "report", "scale", "-f", "junit"],
        "compare": [*bench, "compare", "l3", "l30", "--run", "scale"],
    }
    wanted = [name.strip() for name in args.only.split(",") if name.strip()]
    show_mib = None
    for name in wanted:
        mib, wall, code = peak_rss(commands[name], env)
        show_mib = mib if name == "show" else show_mib
        ratio = f"{mib / show_mib:.2f}x show" if show_mib else "-"
        print(f"{name:8s} peak RSS {mib:8,.0f} MiB  ({ratio:>10s})  wall {wall:6.1f} s  "
              f"exit {code}")
    if args.keep:
        print(f"kept: {home}")
    else:
        shutil.rmtree(home)


if __name__ == "__main__":
    main()
