"""The HTML report as a person sees it: headless Chromium through Playwright.

Needs Debian's ``chromium`` (``apt-get install -y chromium``; ``.ci/run`` installs it) and the
``playwright`` Python package; no browser is downloaded. Skipped with a message otherwise.
The screenshot is written to ``$BENCH_ARTIFACTS`` (default: pytest's tmp folder) and its path
printed.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from bench.report.data import load_runs, row_outcome
from bench.report.html import render_html
from conftest import REPO
from tests.report_runs import SCRIPT, expected_answer, hostile_answer, make_run
from tests.stored import row_dicts

CHROMIUM = os.environ.get("BENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason=f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set BENCH_CHROMIUM)")]


def half_hostile(case):
    """Right answers for even case numbers, hostile output for odd ones."""
    number = int("".join(ch for ch in case.id if ch.isdigit()))
    return expected_answer(case) if number % 2 == 0 else hostile_answer(case)


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    """One run (30 cases x 2 variants) and its report, shared by this module's tests."""
    root = tmp_path_factory.mktemp("browser") / "project"
    shutil.copytree(REPO / "datasets", root / "datasets")
    shutil.copytree(REPO / "descriptions", root / "descriptions")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_HOME", str(root))
        make_run("web", half_hostile, limit=30)
        runs = load_runs(["web"])
    path = root / "reports" / "web" / "index.html"
    path.parent.mkdir(parents=True)
    path.write_text(render_html(runs, "browser test"), encoding="utf-8")
    return path, runs


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(report_file, browser):
    path, runs = report_file
    tab = browser.new_page(viewport={"width": 1300, "height": 900})
    tab.problems, tab.requests = [], []
    tab.on("console", lambda m: tab.problems.append(m.text) if m.type in (
        "error", "warning") else None)
    tab.on("pageerror", lambda e: tab.problems.append(str(e)))
    tab.on("request", lambda r: tab.requests.append(r.url))
    tab.goto(path.as_uri())
    tab.runs = runs
    yield tab
    tab.close()


def test_page_loads_clean_with_charts_and_no_network(page, tmp_path):
    assert page.problems == []
    assert all(url.startswith(("file:", "data:")) for url in page.requests)
    widths = page.eval_on_selector_all("img.chart", "imgs => imgs.map(i => i.naturalWidth)")
    assert len(widths) == 5 and min(widths) > 200  # 3 ablation charts, 2 confusion matrices
    assert page.inner_text("#count") == "60 of 60 rows match"
    assert page.inner_text("#page") == "page 1 of 2"
    artifacts = Path(os.environ.get("BENCH_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000


def test_filters_search_and_pages(page):
    rows = page.runs[0].rows
    passing = sum(row_outcome(r) == "pass" for r in rows)
    page.select_option("#f-outcome", label="pass")
    assert page.inner_text("#count") == f"{passing} of 60 rows match"
    shown = page.eval_on_selector_all("td.outcome", "cells => cells.map(c => c.textContent)")
    assert shown and set(shown) == {"pass"}
    page.select_option("#f-outcome", label="all")
    page.select_option("#f-variant", label="l10")
    page.select_option("#f-tag", label="enum")
    want = sum(r.variant == "l10" and "enum" in r.tags for r in rows)
    assert page.inner_text("#count") == f"{want} of 60 rows match"
    page.select_option("#f-variant", label="all")
    page.select_option("#f-tag", label="all")
    page.fill("#f-search", "ecom-0007")
    sync_api.expect(page.locator("#count")).to_have_text(re.compile(r"^2 of"))
    page.fill("#f-search", "")
    sync_api.expect(page.locator("#count")).to_have_text(re.compile(r"^60 of"))
    page.click("#next")
    assert page.inner_text("#page") == "page 2 of 2"
    assert page.locator("tr.case").count() == 10


def test_hostile_output_shows_as_text_and_never_runs(page):
    page.fill("#f-search", "onerror")
    sync_api.expect(page.locator("#count")).to_have_text(re.compile(r"^30 of"))
    page.click("tr.case >> nth=0")
    details = page.eval_on_selector_all(".detail pre", "els => els.map(e => e.textContent)")
    assert any(SCRIPT in text for text in details)  # shown literally
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == page.locator("img.chart").count() == 5  # charts only
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.locator("main script, .detail *:is(script, img, a, iframe)").count() == 0
    assert page.problems == []


def test_headline_fits_a_1400_px_window(browser, project):
    """All eight rates, cost and a long provider id at 1400 px: the page never scrolls
    sideways and the headline fits its box (which would scroll it otherwise)."""
    from bench.results import Row
    from bench.store import RunStore

    make_run("wide", half_hostile, limit=12, execute=True, first=False,  # no-call, ask too
             providers=("openai-compat:qwen2.5-7b-instruct@http://127.0.0.1:8080/v1",))
    store = RunStore(project / "reports" / "runs", "wide")
    rows = row_dicts(store)
    store.results_path.unlink()
    for row in rows:
        row["cost_usd"] = 0.001
        store.append(Row.model_validate(row))
    path = project / "reports" / "wide" / "index.html"
    path.parent.mkdir(parents=True)
    path.write_text(render_html(load_runs(["wide"]), "wide"), encoding="utf-8")
    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        tab.goto(path.as_uri())
        assert tab.locator("table.headline th").count() >= 3 + 8 + 5
        page_width = tab.evaluate("document.documentElement.scrollWidth")
        box = tab.evaluate("(() => { const s = document.getElementById('headline-scroll');"
                           " return [s.clientWidth, s.scrollWidth,"
                           " s.getBoundingClientRect().right]; })()")
        assert page_width <= 1400, page_width
        assert box[1] <= box[0] and box[2] <= 1400, box
    finally:
        tab.close()
