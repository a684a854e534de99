"""Regenerate the README's sample table with the current default embedded model.

Runs ``bench run --limit 20 --variants l3,l10 --run-id readme-sample-<date>`` (a stratified,
seeded sample of the ecommerce cases), then puts ``bench show``'s table, the command and the
wall time between the README's ``<!-- sample:begin -->`` and ``<!-- sample:end -->`` markers.

    python benchmarks/readme_sample.py            # run, then rewrite README.md
    python benchmarks/readme_sample.py --run-id X # rewrite from an existing run X
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- sample:begin -->", "<!-- sample:end -->"
COMMAND = ["run", "--limit", "20", "--variants", "l3,l10"]


def bench(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m bench ARGS`` from the repository root, 200 columns wide."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; exits 1 when the run or ``bench show`` fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-id", help="use this finished run instead of running one")
    args = parser.parse_args(argv)
    wall = None
    run_id = args.run_id
    if run_id is None:
        run_id = "readme-sample-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        started = time.perf_counter()
        result = bench(*COMMAND, "--run-id", run_id)
        wall = time.perf_counter() - started
        if result.returncode != 0:
            print(result.stderr, file=sys.stderr)
            return 1
    shown = bench("show", run_id)
    if shown.returncode != 0:
        print(shown.stderr, file=sys.stderr)
        return 1
    took = (f", {wall / 60:.1f} min wall time on {os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.1f} at the end" if wall else "")
    block = (f"`bench {' '.join(COMMAND)}`{took}; `bench show {run_id}`:\n\n```\n"
             + "\n".join(line.rstrip() for line in shown.stdout.rstrip().splitlines())
             + "\n```")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if (readme.count(BEGIN), readme.count(END)) != (1, 1) or \
            readme.index(BEGIN) > readme.index(END):
        print(f"README.md: needs one {BEGIN} line before one {END} line", file=sys.stderr)
        return 1
    head, _, rest = readme.partition(BEGIN)
    _, _, tail = rest.partition(END)
    (ROOT / "README.md").write_text(f"{head}{BEGIN}\n{block}\n{END}{tail}", encoding="utf-8")
    print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
