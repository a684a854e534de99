"""How big and how fast the HTML report is for a large run.

Builds a synthetic run of N rows (default 20,000) by repeating the rows of a real run under
several provider ids and trials, renders ``bench report`` for it and prints the file size, the
render time and, when Chromium and Playwright are installed, the time the page takes to load,
to filter and to search.

    python benchmarks/report_scale.py --source reports/runs/full-1 --rows 20000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.results import Manifest
from bench.store import RunStore


def build_run(source: Path, home: Path, rows: int, providers: int) -> int:
    """Write run ``scale`` under ``home/reports/runs`` with ``rows`` rows; returns the count."""
    manifest = json.loads((source / "manifest.json").read_text(encoding="utf-8"))
    base = [json.loads(line) for line in (source / "results.jsonl").open(encoding="utf-8")]
    store = RunStore(home / "reports" / "runs", "scale")
    store.dir.mkdir(parents=True)
    written = trials = 0
    with store.results_path.open("w", encoding="utf-8") as handle:
        copy = 0
        while written < rows:
            provider, trial = f"p{copy % providers}", copy // providers
            for row in base:
                if written == rows:
                    break
                row = {**row, "provider": provider, "trial": trial, "run_id": "scale",
                       "key": f"{row['case_id']}|{row['variant']}|{provider}|{trial}"}
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                written += 1
                trials = max(trials, trial + 1)
            copy += 1
    # the config plans the copies: readers refuse rows outside a run's plan
    config = {**manifest["config"], "providers": [f"p{i}" for i in range(providers)],
              "trials": trials}
    manifest.update(run_id="scale", rows_planned=written, rows_done=written, config=config,
                    providers=[{"provider": f"p{i}", "model": "copy"} for i in range(providers)])
    store.write_manifest(Manifest.model_validate(manifest))
    return written


def browser_timings(path: Path, chromium: str) -> None:
    """Print load, filter and search times of the page in headless Chromium (ms)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("browser: playwright not installed, skipped")
        return
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_selector("tr.case")
        print(f"browser: page load until the first rows show {1000 * (time.perf_counter() - start):.0f} ms")
        for label, action in (
                ("filter outcome=pass", lambda: page.select_option("#f-outcome", label="pass")),
                ("filter variant=l30", lambda: page.select_option("#f-variant", label="l30")),
                ("clear filters", lambda: (page.select_option("#f-outcome", label="all"),
                                           page.select_option("#f-variant", label="all"))),
                ("search 'ORD2026' (first search builds the index)",
                 lambda: page.fill("#f-search", "ORD2026")),
                ("search 'wrong_tool'", lambda: page.fill("#f-search", "wrong_tool"))):
            before = page.inner_text("#count")
            start = time.perf_counter()
            action()
            page.wait_for_function(  # the count changes when the (debounced) filter ran
                "b => document.getElementById('count').textContent !== b", arg=before,
                polling=5) if "search" in label else None
            took = 1000 * (time.perf_counter() - start)
            extra = " (includes the 150 ms typing debounce)" if "search" in label else ""
            print(f"browser: {label}: {took:.0f} ms{extra} -> {page.inner_text('#count')}")
        print(f"browser: page errors: {errors or 'none'}")
        browser.close()


def main() -> None:
    """Parse the options, build the run, render it and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("reports/runs/full-1"),
                        help="a run folder whose rows are repeated")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--providers", type=int, default=5)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if not (args.source / "results.jsonl").is_file():
        sys.exit(f"error: {args.source}: no results.jsonl (run `bench run` first)")
    home = Path(tempfile.mkdtemp(prefix="bench-report-scale-"))
    os.environ["BENCH_HOME"] = str(home)
    from bench.report.data import load_runs
    from bench.report.html import render_html

    rows = build_run(args.source, home, args.rows, args.providers)
    start = time.perf_counter()
    runs = load_runs(["scale"])
    loaded = time.perf_counter()
    html = render_html(runs, "scale")
    rendered = time.perf_counter()
    path = home / "reports" / "scale" / "index.html"
    path.parent.mkdir(parents=True)
    path.write_text(html, encoding="utf-8")
    size = path.stat().st_size
    print(f"rows: {rows:,} ({args.providers} providers, source {args.source})")
    print(f"read rows: {loaded - start:.2f} s; render HTML: {rendered - loaded:.2f} s")
    print(f"file size: {size:,} bytes ({size / 2**20:.2f} MiB)")
    if Path(args.chromium).is_file():
        browser_timings(path, args.chromium)
    else:
        print(f"browser: no Chromium at {args.chromium}, skipped")
    if args.keep:
        print(f"kept: {path}")
    else:
        shutil.rmtree(home)


if __name__ == "__main__":
    main()
