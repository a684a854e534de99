"""bench report: HTML safety and content, Markdown, JUnit, the CLI (no browser here)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.errors import BenchError
from bench.report.paths import compare_suffix
from bench.report.comparison import choose_comparison
from bench.report.data import load_runs, row_outcome
from bench.report.html import render_html, script_json
from bench.report.junit import render_junit, xml_text
from bench.results import Manifest, Row
from bench.report.markdown import md_cell, render_markdown
from bench.store import RunStore
from bench.stats.codes import error_code_counts
from bench.stats.frontier import pareto_frontier
from tests.report_runs import HOSTILE, expected_answer, hostile_answer, make_run, mixed_answer
from tests.stored import row_dicts


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of each <script>."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False if tag == "script" else self._in_script

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


@pytest.fixture
def hostile_run(project):
    make_run("hostile", hostile_answer, limit=6)
    return project


def test_script_json_escapes_everything_that_could_end_the_element():
    data = {"a": "</script><!--<script>&amp;\u2028\u2029", "b": "\ud800"}
    text = str(script_json(data))
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    text.encode("utf-8")  # a lone surrogate travels as an escape: the file stays UTF-8
    assert json.loads(text) == data


@pytest.mark.slow
def test_hostile_model_output_is_inert_in_the_html_text(hostile_run):
    html = render_html(load_runs(["hostile"]), "t")
    for hostile in HOSTILE:
        assert hostile not in html
    parser = Elements()
    parser.feed(html)
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert scripts == [{"type": "application/json", "id": "report-data"}, {}]
    images = [attrs["src"] for tag, attrs in parser.tags if tag == "img"]
    assert images and all(src.startswith("data:image/svg+xml;base64,") for src in images)
    links = [attrs.get("href", "") for tag, attrs in parser.tags if tag == "a"]
    assert links and all(href.startswith("#") for href in links)
    handlers = [(tag, name) for tag, attrs in parser.tags for name in attrs
                if name.startswith("on")]
    assert handlers == []
    # the data still carries the answers unchanged, for the page to show as text
    payload = json.loads(parser.scripts[0])
    fields = payload["fields"]
    first = payload["rows"][0]  # ecom-0001: parsed calls with hostile arguments
    assert first[fields.index("calls")][0][1]["order_id"] == HOSTILE[2]
    assert first[fields.index("calls")][1][0] == HOSTILE[1].replace('"', "'")
    prose = payload["rows"][2]  # ecom-0003: hostile prose, unparseable
    assert all(h in prose[fields.index("raw")] for h in HOSTILE[:4])
    assert not any(sink in parser.scripts[1] for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("))


@pytest.mark.slow
def test_page_allows_no_network_and_only_its_own_script(hostile_run):
    html = render_html(load_runs(["hostile"]), "t")
    parser = Elements()
    parser.feed(html)
    csp = next(a["content"] for t, a in parser.tags
               if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "img-src data:" in csp
    assert "unsafe-inline" not in csp and "http" not in csp


@pytest.mark.slow
def test_report_shows_headline_charts_groups_and_metadata(project):
    make_run("good", mixed_answer, limit=10)
    html = render_html(load_runs(["good"]), "report <title>")
    assert "report &lt;title&gt;" in html
    for section in ("headline", "ablation", "groups", "errors", "cases", "metadata"):
        assert f'id="{section}"' in html
    for chart in ("chart-lines", "chart-tokens", "chart-pareto"):
        assert f'id="{chart}"' in html
    assert html.count('alt="confusion matrix local · l') == 2  # one per variant
    # two variants: the comparison section; the same answers under both, so nothing flips
    assert 'id="comparison"' not in html  # no comparison passed in
    with_comparison = render_html(load_runs(["good"]), "t",
                                  choose_comparison(load_runs(["good"])))
    assert "Comparison: l3 (A) vs l10 (B)" in with_comparison
    assert "Flipped (case, trial, metric) pairs (0)" in with_comparison
    assert "scripted &lt;b&gt;model&lt;/b&gt;" in html  # manifest text is escaped too
    rows = load_runs(["good"])[0].rows
    passed = {r.case_id for r in rows if row_outcome(r) == "pass"}
    failed = {r.case_id for r in rows if row_outcome(r) == "fail"}
    assert passed == {f"ecom-{i:04d}" for i in (2, 4, 6, 8, 10)}
    assert failed == {f"ecom-{i:04d}" for i in (1, 3, 5, 7, 9)}


def test_a_run_of_no_call_cases_only_has_a_report(project):
    # No row has an argument rate (no case expects calls; e.g. a BFCL irrelevance import):
    # the ablation chart raised KeyError 'arguments_correct_rate', so `bench report` failed.
    from bench.datasets import load_dataset

    no_call = [c.id for c in load_dataset("ecommerce").cases if c.expected.no_call][:3]
    make_run("nocall", mixed_answer, case_ids=no_call, limit=None)
    html = render_html(load_runs(["nocall"]), "no-call only")
    assert 'id="chart-lines"' in html and 'id="headline"' in html


def test_two_runs_with_the_same_variants_stay_apart(project):
    make_run("a", expected_answer, variants=("l3",), limit=4)
    make_run("b", hostile_answer, variants=("l3",), limit=4)
    runs = load_runs(["a", "b"])
    labels = {row.variant for run in runs for row in run.rows}
    assert labels == {"a/l3", "b/l3"}
    markdown = render_markdown(runs, "t")
    assert "| local | a/l3 | 4 |" in markdown and "| local | b/l3 | 4 |" in markdown


@pytest.mark.slow
def test_two_runs_are_compared_variant_by_variant_with_their_flips(project):
    make_run("right", expected_answer, limit=6)
    make_run("half", mixed_answer, limit=6)
    runs = load_runs(["right", "half"])
    comparison = choose_comparison(runs)
    assert (comparison.label_a, comparison.label_b) == ("right", "half")
    lost = {(f.case_id, f.group) for f in comparison.flips
            if f.metric == "selection_correct" and f.direction == "lost"}
    odd = {"ecom-0001", "ecom-0003", "ecom-0005"}  # 'half' makes no call on these
    assert lost == {(case, f"local/{v}") for case in odd for v in ("l3", "l10")}
    html = render_html(runs, "t", comparison)
    assert f"Flipped (case, trial, metric) pairs ({len(comparison.flips)})" in html
    assert html.count("A right, B wrong") == sum(f.direction == "lost" for f in comparison.flips)
    markdown = render_markdown(runs, "t", comparison=comparison)
    assert "**Comparison: right (A) vs half (B)**" in markdown
    with pytest.raises(BenchError, match="no variant 'l99'"):
        choose_comparison(runs, ["right/l3", "l99"])


def test_pareto_frontier_keeps_only_undominated_points():
    costs = [100, 200, 300, 400, 150, float("nan")]
    accs = [0.5, 0.7, 0.7, 0.9, 0.4, 0.99]
    assert pareto_frontier(costs, accs) == [True, True, False, True, False, False]
    with pytest.raises(ValueError):
        pareto_frontier([1], [])


def test_error_code_counts_count_rows_once_per_code():
    def row(key, codes):
        return Row(key=key, case_id=key, toolset="t", provider="p", variant="v", trial=0,
                   lang="en", metrics={"error_codes": codes}, usage=None, latency_s=None)
    rows = [row("1", ["wrong_tool", "missing_call"]), row("1", ["x"]), row("2", [])]
    assert error_code_counts(rows) == [{"provider": "p", "variant": "v", "rows": 2,
                                        "counts": {"wrong_tool": 1, "missing_call": 1}}]


def test_markdown_summary_escapes_and_counts(hostile_run):
    runs = load_runs(["hostile"])
    text = render_markdown(runs, "<b>title</b> | x")
    assert "&lt;b&gt;title&lt;/b&gt; \\| x" in text
    assert "| local | l3 | 6 |" in text
    assert md_cell("a|b\n<i>") == "a\\|b &lt;i&gt;"
    outcomes = [row_outcome(r) for r in runs[0].rows if r.variant == "l3"]
    counts = f"{outcomes.count('pass')} / {outcomes.count('fail')} / {outcomes.count('unparseable')}"
    assert counts in next(line for line in text.splitlines() if line.startswith("| local | l3 |"))


def test_reports_state_each_runs_split_and_show_the_buckets(project):
    make_run("held", mixed_answer, limit=8, variants=("l3", "l10"))
    runs = load_runs(["held"])
    split = runs[0].manifest.config.get("split") or "all"
    statement = f"Cases: run held: ecommerce, {split} split (8 cases)."
    markdown = render_markdown(runs, "t")
    assert markdown.splitlines()[2].startswith(statement)
    html = render_html(runs, "t")
    assert f'<p class="split" id="split">{statement}' in html
    assert 'id="buckets"' in html
    buckets = {r.info for r in runs[0].rows}
    for bucket in buckets - {None}:  # every bucket of the run has a row in both reports
        assert f"<td class=\"text\">{bucket}</td>" in html
        assert f"| local | l3 | {bucket} |" in markdown


def test_a_report_on_a_dataset_without_splits_says_none_of_its_cases_is_held_out(project):
    """A dataset never split has no test split: the report does not claim one is held out."""
    cases = project / "datasets" / "ecommerce" / "cases.jsonl"
    lines = [json.loads(line) for line in cases.read_text(encoding="utf-8").splitlines()]
    cases.write_text("".join(json.dumps({k: v for k, v in case.items() if k != "split"},
                                        ensure_ascii=False) + "\n" for case in lines),
                     encoding="utf-8")
    make_run("plain", mixed_answer, limit=4)
    runs = load_runs(["plain"])
    assert runs[0].manifest.dataset.splits is False
    said = ("Cases: run plain: ecommerce, all split (4 cases). No case of ecommerce is held "
            "out: it has no dev/test split, so any case may have informed the descriptions "
            "(bench split ecommerce assigns one).")
    markdown = render_markdown(runs, "t")
    assert markdown.splitlines()[2] == said
    assert "Only the test split is held out" not in markdown
    assert f'<p class="split" id="split">{said}' in render_html(runs, "t")


def test_junit_has_one_testcase_per_row_and_failures_carry_codes(hostile_run):
    runs = load_runs(["hostile"])
    root = ET.fromstring(render_junit(runs, "t").encode("utf-8"))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(runs[0].rows) == 12
    assert {s.get("name") for s in root.findall("testsuite")} == {"local · l3", "local · l10"}
    failures = [c.find("failure") for c in cases]
    assert all(f is not None for f in failures)  # every hostile answer is wrong
    row = next(r for r in runs[0].rows if r.variant == "l3")
    first = next(c for c in cases if c.get("classname") == "bench.local.l3")
    assert first.find("failure").get("message") == ", ".join(row.metrics.error_codes)
    assert root.get("failures") == "12"
    assert xml_text("a\x00b\ud800c") == "a\ufffdb\ufffdc"


@pytest.mark.slow
def test_cli_writes_each_format_and_rejects_bad_input(hostile_run, run_bench):
    result = run_bench("report", "hostile", "--name", "r1")
    assert result.returncode == 0, result.stderr
    assert (hostile_run / "reports" / "r1" / "index.html").is_file()
    missing = run_bench("report", "hostile", "nope")
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr
    # the other paths in process (each subprocess pays seconds of pandas/scipy imports)
    cli = CliRunner()
    for fmt, file in (("md", "summary.md"), ("junit", "junit.xml")):
        assert cli.invoke(app, ["report", "hostile", "--format", fmt, "--name", "r1"]).exit_code == 0
        assert (hostile_run / "reports" / "r1" / file).is_file()
    printed = cli.invoke(app, ["report", "hostile", "-f", "md", "--name", "r1", "-o", "-"])
    assert printed.stdout.startswith("### bench report: hostile")
    assert "Full report: `reports/r1/index.html`" in printed.stdout  # the HTML written above
    assert cli.invoke(app, ["report", "hostile", "--format", "pdf"]).exit_code == 2
    bad_name = cli.invoke(app, ["report", "hostile", "--name", "../up"])
    assert isinstance(bad_name.exception, BenchError) and "invalid report name" in str(
        bad_name.exception)


def test_load_runs_errors_are_bench_errors(project):
    with pytest.raises(BenchError, match="at least one run"):
        load_runs([])


@pytest.mark.slow
def test_cost_execution_and_cache_show_when_rows_carry_them(project):
    make_run("plain", mixed_answer, variants=("l3",), limit=4)
    plain = render_html(load_runs(["plain"]), "t")
    assert "execution success" not in plain and "<th>cost USD</th>" not in plain
    # what the executor and throughput branches add: per-row execution outcomes and cost,
    # and cache counts in the manifest
    store = RunStore(project / "reports" / "runs", "plain")
    rows = row_dicts(store)
    store.results_path.unlink()
    for index, row in enumerate(rows):
        row["metrics"]["execution_success"] = index % 2 == 0
        row["cost_usd"] = 0.25
        store.append(Row.model_validate(row))
    manifest = store.load_manifest().to_json_dict()
    manifest["cache"] = {"hits": 3, "misses": 1, "writes": 1}
    store.write_manifest(Manifest.model_validate(manifest))
    html = render_html(load_runs(["plain"]), "t")
    assert "<th>execution success</th>" in html and "50.0% [15.0-85.0]" in html
    assert "<th>cost USD</th>" in html and "<td>1.0000</td>" in html  # 4 rows x 0.25 USD
    assert '<span class="kv">hits: 3</span>' in html
    markdown = render_markdown(load_runs(["plain"]), "t")
    assert "| cost USD |" in markdown.splitlines()[4] and "| 1.0000 |" in markdown


@pytest.mark.slow
def test_trials_name_junit_cases_and_switch_to_bootstrap_intervals(project):
    make_run("trials", mixed_answer, variants=("l3",), limit=3, trials=2)
    runs = load_runs(["trials"])
    root = ET.fromstring(render_junit(runs, "t").encode("utf-8"))
    names = sorted(c.get("name") for c in root.iter("testcase"))
    assert names == [f"ecom-000{i}#{t}" for i in (1, 2, 3) for t in (0, 1)]
    html = render_html(runs, "t")
    assert "95% case-clustered bootstrap intervals (several trials per case)" in html


@pytest.mark.slow
def test_two_runs_with_different_variant_sets_are_compared_on_the_shared_ones(project):
    make_run("both", expected_answer, variants=("l3", "l10"), limit=4)
    make_run("one", mixed_answer, variants=("l3",), limit=4)
    comparison = choose_comparison(load_runs(["both", "one"]))
    assert comparison is not None
    assert {t.group for t in comparison.tests} == {"local/l3"}
    assert {f.group for f in comparison.flips} == {"local/l3"}
    make_run("other", mixed_answer, variants=("l30",), limit=4)
    assert choose_comparison(load_runs(["both", "other"])) is None  # nothing shared


def test_runs_without_shared_cases_get_no_comparison_unless_asked(project):
    make_run("first", mixed_answer, variants=("l3",), limit=2)
    make_run("other", mixed_answer, variants=("l3",), limit=None,
             case_ids=["ecom-0005", "ecom-0006"])
    runs = load_runs(["first", "other"])
    assert choose_comparison(runs) is None
    with pytest.raises(BenchError, match="share no"):
        choose_comparison(runs, ["first/l3", "other/l3"])


def test_report_of_two_runs_needs_no_name_and_says_why_it_has_no_comparison(project):
    make_run("first", mixed_answer, variants=("l3",), limit=2)
    make_run("other", mixed_answer, variants=("l3",), limit=None,
             case_ids=["ecom-0005", "ecom-0006"])
    result = CliRunner().invoke(app, ["report", "first", "other", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert (project / "reports" / "first+other" / "summary.md").is_file()
    assert "no (provider, case, trial) in common on the variants both have (l3)" in result.output
    printed = CliRunner().invoke(app, ["report", "first", "--name", "a/b", "-f", "md", "-o", "-"])
    assert printed.exit_code == 0 and "Full report" not in printed.stdout  # -o: no name needed


@pytest.mark.slow
def test_a_report_with_compare_gets_its_own_folder_and_keeps_the_plain_one(project):
    make_run("pair", mixed_answer, variants=("l3", "l10"), limit=3)
    cli = CliRunner()
    assert cli.invoke(app, ["report", "pair", "-f", "md"]).exit_code == 0
    plain = project / "reports" / "pair" / "summary.md"
    before = plain.read_text()
    result = cli.invoke(app, ["report", "pair", "-f", "md", "--compare", "l10,l3"])
    assert result.exit_code == 0, result.output
    assert plain.read_text() == before
    compared = project / "reports" / "pair.l10+l3" / "summary.md"
    assert compared.is_file() and compared.read_text() != before
    make_run("other", mixed_answer, variants=("l3",), limit=3)
    result = cli.invoke(app, ["report", "pair", "other", "-f", "md", "--compare",
                              "pair/l3,other/l3"])
    assert result.exit_code == 0, result.output
    (folder,) = (project / "reports").glob("pair+other.pair_l3-other_l3-*")
    assert (folder / "summary.md").is_file()
    long_ids = ["a" * 100, "b" * 100]
    for run_id in long_ids:
        make_run(run_id, mixed_answer, variants=("l3",), limit=3)
    result = cli.invoke(app, ["report", *long_ids, "-f", "md", "--compare",
                              f"{long_ids[0]}/l3,{long_ids[1]}/l3"])
    assert result.exit_code == 0, result.output
    suffixes = [compare_suffix(p) for p in (["é", "x"], ["ü", "x"], ["a", "b-vs-c"],
                                            ["a-vs-b", "c"], ["r1/l3", "r1/l30"],
                                            ["r1_l3", "r1_l30"], ["x" * 60, "y"])]
    assert len(set(suffixes)) == len(suffixes) and max(map(len, suffixes)) <= 53
    assert cli.invoke(app, ["report", "pair", "-f", "junit", "--compare", "l3,l10"]
                      ).exit_code == 0
    assert (project / "reports" / "pair" / "junit.xml").is_file()  # junit compares nothing


def test_a_disk_full_fsync_fails_the_run_with_its_manifest_written(project, monkeypatch):
    import errno
    import os

    import bench.store.writer as runstore
    real_fsync = os.fsync

    def full(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("results.jsonl"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)
    monkeypatch.setattr(runstore.os, "fsync", full)
    with pytest.raises(BenchError, match="results.jsonl: No space .*bench run --resume full"):
        make_run("full", expected_answer, variants=("l3",), limit=3)
    manifest = RunStore(project / "reports" / "runs", "full").load_manifest().to_json_dict()
    assert manifest["status"] == "failed" and "No space" in manifest["error"]


def test_charts_without_token_counts_say_so_instead_of_warning(project):
    import warnings

    from bench.report import charts
    from bench.report.data import frame_of
    from bench.report.rates import headline

    make_run("notokens", mixed_answer, limit=4)
    runs = load_runs(["notokens"])
    summary = headline(runs, frame_of(runs))
    summary["tool_definition_tokens"] = float("nan")  # e.g. rows from a provider that gives none
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "No artists with labels" warning
        ablation = charts.ablation_chart(summary, "tool_definition_tokens",
                                         "tool-definition tokens")
        pareto = charts.pareto_chart(summary)
        lines = charts.ablation_chart(summary, "mean_lines", "lines per tool")
    assert "no rows with tool-definition tokens" in ablation
    assert "no rows with tool-definition tokens" in pareto
    assert "no rows with" not in lines


@pytest.mark.slow
def test_the_drilldown_is_the_same_whatever_the_hash_seed(project):
    """Two renders of the same runs give the same drill-down data: its tool list was built
    from a set, whose order follows the process's string-hash seed."""
    import os
    import subprocess
    import sys

    from conftest import REPO
    def two_tools(case):  # rows naming several tools: expected ones and others
        answer = json.loads(expected_answer(case))
        answer["tool_calls"] += [{"name": name, "arguments": {}}
                                 for name in ("get_order", "search_products", "zz_unknown")]
        return json.dumps(answer)

    make_run("seeded", two_tools, variants=("l3",), limit=12)
    script = ("import json\n"
              "from bench.report.data import load_runs\n"
              "from bench.report.drilldown import drilldown\n"
              "print(json.dumps(drilldown(load_runs(['seeded']))))\n")
    outputs = {subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        env={**os.environ, "BENCH_HOME": str(project), "PYTHONHASHSEED": seed,
             "PYTHONPATH": str(REPO)}).stdout for seed in ("1", "2", "3", "4")}
    assert len(outputs) == 1
    assert len(json.loads(outputs.pop())["tools"]) >= 3


def test_headline_table_scrolls_in_its_box_with_each_interval_on_its_own_line(project):
    """A headline with a column per metric fits a 1400 px window: its headers wrap, each
    interval sits on its own line under the rate (no cell holds "x% [low-high]" on one
    unbreakable line), and the table sits in a box that scrolls sideways when it is still
    too wide (tests/report/test_browser.py measures it in Chromium)."""
    import re
    from importlib import resources

    make_run("wide", mixed_answer, variants=("l3",), limit=4)
    html = render_html(load_runs(["wide"]), "t")
    headline = html.split('<section id="headline">')[1].split("</section>")[0]
    assert '<div class="scroll" id="headline-scroll"><table class="num headline">' in headline
    assert not re.search(r"\d% \[", headline)  # rate and interval never share a line
    cells = re.findall(r"<td>([\d.]+%)<span class=\"ci\">(\[[\d.]+-[\d.]+\])</span>", headline)
    assert len(cells) >= 4
    css = resources.files("bench.report").joinpath("templates", "report.css").read_text()
    assert ".scroll { overflow-x: auto; }" in css
    assert "table.headline th { white-space: normal;" in css
    assert ".ci { display: block;" in css


@pytest.mark.slow
def test_a_heatmap_with_one_value_has_no_colour_scale(project):
    """A colour bar over one value (a one-cell confusion matrix, or all cells equal) means
    nothing: such heatmaps have none; a matrix with several values keeps it. In a run with one
    expected tool, all answered right, the report's confusion chart is that one cell."""
    import base64
    import re

    import pandas as pd

    from bench.report.charts import heatmap

    def axes(svg):  # matplotlib writes each axes, the colour bar's too, as <g id="axes_N">
        return re.findall(r'<g id="(axes_\d+)"', svg)

    assert axes(heatmap(pd.DataFrame([[7]], index=["a"], columns=["a"]), "t", "x", "y")) \
        == ["axes_1"]
    assert len(axes(heatmap(pd.DataFrame([[2, 2], [2, 2]]), "t", "x", "y"))) == 1
    assert len(axes(heatmap(pd.DataFrame([[7, 1], [0, 3]]), "t", "x", "y"))) == 2
    make_run("one-cell", expected_answer, variants=("l3",), limit=3)  # all search_orders
    html = render_html(load_runs(["one-cell"]), "t")
    (uri,) = re.findall(r'alt="confusion matrix [^"]*" src="data:image/svg\+xml;base64,([^"]+)"',
                        html)
    assert axes(base64.b64decode(uri).decode("utf-8")) == ["axes_1"]


@pytest.mark.slow
@pytest.mark.parametrize("status", ["interrupted", "failed", "budget_exhausted", "partial",
                                    "crashed"])
def test_an_incomplete_run_says_so_at_the_top_of_the_report(project, status):
    """Figures of a run that did not finish cover only its rows: the HTML page opens with a
    banner and the Markdown summary with a line, both with rows done / planned."""
    make_run("cut", mixed_answer, variants=("l3",), limit=6)
    store = RunStore(project / "reports" / "runs", "cut")
    manifest = store.load_manifest().to_json_dict()
    rows = row_dicts(store)
    store.results_path.unlink()
    for row in rows[:4]:
        store.append(Row.model_validate(row))
    stored = "running" if status == "crashed" else status  # what a dead process leaves
    store.write_manifest(Manifest.model_validate(
        {**manifest, "status": stored, "rows_done": 4, "error": "boom",
         "providers_skipped": [{"provider": "openai:x", "reason": "no key"}]}))
    html = render_html(load_runs(["cut"]), "t")
    body = html.split("<body>", 1)[1].lstrip()
    assert body.startswith('<div class="banner incomplete" role="alert"><strong>Incomplete '
                           'run: 4 of 6 planned rows.</strong> Run cut is ' + status)
    assert "bench run --resume cut" in body.split("</div>", 1)[0]
    lines = render_markdown(load_runs(["cut"]), "t").splitlines()
    assert lines[2].startswith(f"> **Incomplete run: 4 of 6 planned rows.** Run cut is {status}")
    assert ("openai:x" in lines[2]) == (status == "partial")
    assert ("boom" in lines[2]) == (status == "failed")


@pytest.mark.slow
def test_a_complete_run_has_no_incomplete_banner(project):
    make_run("done", mixed_answer, variants=("l3",), limit=3)
    html = render_html(load_runs(["done"]), "t")
    assert html.split("<body>", 1)[1].lstrip().startswith("<header>")
    assert 'class="banner' not in html
    assert "Incomplete" not in render_markdown(load_runs(["done"]), "t")
