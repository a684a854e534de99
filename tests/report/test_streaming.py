"""Reports of large runs are made in pieces: the frame in chunks with repeated values stored
once, the page's drill-down rows and the JUnit testcases written as they are made, and the
file replaced atomically (``benchmarks/report_memory.py`` measures the memory this saves)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from bench.errors import BenchError
from bench.report.data import load_runs
from bench.report.drilldown import drilldown
from bench.report.html import drilldown_json, render_html
from bench.report.junit import render_junit
from bench.store import RowsRead, RunStore
from bench.store.files import atomic_writer
from bench.stats.frame import compact_frame, results_frame
from tests.report_runs import hostile_answer, make_run, mixed_answer


@pytest.fixture
def two_trials(project):
    make_run("two", mixed_answer, limit=9, variants=("l3", "l10"), trials=2)
    make_run("hostile", hostile_answer, limit=6)
    return project


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert sorted(a.columns) == sorted(b.columns)
    pd.testing.assert_frame_equal(a[sorted(a.columns)], b[sorted(b.columns)])


def test_compact_frame_in_chunks_equals_the_whole_frame(two_trials):
    rows = list(load_runs(["two"])[0].rows)
    whole = results_frame(rows)
    for chunk_rows in (1, 5, 7, len(rows) + 1):
        _same(compact_frame(rows, chunk_rows=chunk_rows), whole)
    # a row given twice counts once, across chunks too
    _same(compact_frame([*rows, *rows[:4]], chunk_rows=5), whole)


def test_compact_frame_stores_each_repeated_value_once(two_trials):
    rows = list(load_runs(["two"])[0].rows)
    frame = compact_frame(rows, chunk_rows=5)
    by_case = frame.groupby("case_id")
    for _, group in by_case:  # 2 variants x 2 trials of one case: one tuple object each
        assert len(group) == 4
        assert len({id(t) for t in group["expected_tools"]}) == 1
        assert len({id(t) for t in group["tags"]}) == 1


def test_compact_frame_keeps_only_the_asked_columns(two_trials):
    rows = list(load_runs(["two"])[0].rows)
    frame = compact_frame(rows, ["provider", "variant", "selection_correct"], chunk_rows=3)
    assert list(frame.columns) == ["variant", "provider", "selection_correct"]
    assert str(frame["selection_correct"].dtype) == "boolean"


def test_compact_frame_of_chunks_lacking_a_metric_keeps_it_boolean(project):
    # rows 0-2 carry no arguments_correct (no-call cases) and rows 3-5 do: across chunks of 3
    make_run("m", mixed_answer, limit=12, variants=("l3",))
    rows = list(load_runs(["m"])[0].rows)
    ordered = sorted(rows, key=lambda r: r.metrics.arguments_correct is not None)
    frame = compact_frame(ordered, chunk_rows=3)
    assert str(frame["arguments_correct"].dtype) == "boolean"
    _same(frame, results_frame(ordered))


@pytest.mark.parametrize("piece_rows", [1, 4, 1000])
def test_streamed_drilldown_is_the_drilldown_and_script_safe(two_trials, piece_rows):
    for run_id in ("two", "hostile"):
        runs = load_runs([run_id])
        pieces = list(drilldown_json(runs, piece_rows=piece_rows))
        assert not any(c in piece for piece in pieces for c in "<>&\u2028\u2029")
        assert json.loads("".join(pieces)) == json.loads(json.dumps(drilldown(runs)))


def test_page_embeds_the_streamed_rows_once(two_trials):
    runs = load_runs(["two"])
    html = render_html(runs, "t")
    tag = '<script type="application/json" id="report-data">'
    start = html.index(tag) + len(tag)
    data = json.loads(html[start:html.index("</script>", start)])
    assert len(data["rows"]) == len(runs[0].rows) == 9 * 2 * 2
    assert "bench-drilldown-" not in html  # the placeholder is gone


def test_streamed_junit_counts_each_suite(two_trials):
    runs = load_runs(["two"])
    root = ET.fromstring(render_junit(runs, "t").encode("utf-8"))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["local · l3", "local · l10"]
    for suite in suites:
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases) == 18
        assert int(suite.get("failures")) == len([c for c in cases if c.find("failure")
                                                  is not None]) > 0
    assert int(root.get("tests")) == 36


def test_atomic_writer_leaves_the_old_file_when_writing_fails(tmp_path: Path):
    target = tmp_path / "index.html"
    target.write_text("old report", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with atomic_writer(target) as handle:
            handle.write("half of a new ")
            raise RuntimeError("the renderer failed")
    assert target.read_text(encoding="utf-8") == "old report"
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]  # no temporary file left
    with atomic_writer(target) as handle:
        handle.write("new ")
        handle.write("report")
    assert target.read_text(encoding="utf-8") == "new report"
    assert target.stat().st_mode & 0o777 == 0o644


def test_streamed_read_tells_identical_copies_from_conflicts(project):
    make_run("dup", mixed_answer, limit=4, variants=("l3",))
    store = RunStore(project / "reports" / "runs", "dup")
    lines = store.results_path.read_bytes().splitlines(keepends=True)
    first = json.loads(lines[0])
    same = json.dumps(dict(reversed(list(first.items()))), ensure_ascii=False)  # other bytes
    changed = {**first, "latency_s": 99.0}
    with store.results_path.open("a", encoding="utf-8") as handle:
        handle.write(same + "\n" + json.dumps(changed) + "\n")
    read = RowsRead(store.results_path)
    rows = list(store.iter_read(store.load_manifest(), into=read))
    assert len(rows) == read.counted == 4
    assert rows[0].latency_s == first["latency_s"]  # the first copy counts
    assert read.identical_copies == 1
    assert read.conflicts == [(first["key"], [1, 6])]


def test_every_pass_of_a_report_reads_the_rows_the_first_pass_read(project):
    make_run("grow", mixed_answer, limit=4, variants=("l3",))
    runs = load_runs(["grow"])
    store = RunStore(project / "reports" / "runs", "grow")
    extra = json.loads(store.results_path.read_bytes().splitlines()[0])
    extra.update(trial=0, case_id="ecom-9999", key="ecom-9999|l3|local|0")
    with store.results_path.open("a", encoding="utf-8") as handle:  # a run still writing
        handle.write(json.dumps(extra) + "\n")
    assert len(runs[0].rows) == 4
    assert [r.case_id for r in runs[0].rows] == [r.case_id for r in runs[0].rows]
    assert "ecom-9999" not in {r.case_id for r in runs[0].rows}
    assert "ecom-9999" in {r.case_id for r in load_runs(["grow"])[0].rows}


@pytest.mark.parametrize("change", ["removed", "cut"])
def test_a_results_file_removed_or_cut_between_passes_is_one_error(project, change):
    make_run("gone", mixed_answer, limit=4, variants=("l3",))
    runs = load_runs(["gone"])
    path = project / "reports" / "runs" / "gone" / "results.jsonl"
    if change == "removed":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(BenchError, match="removed, cut or replaced while it was being read"):
        render_html(runs, "t")


def test_a_manifest_variant_without_a_name_still_reports(project):
    make_run("noname", mixed_answer, limit=3, variants=("l3", "l10"))
    path = project / "reports" / "runs" / "noname" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    for key in ("name", "mean_lines_per_tool", "toolset"):  # l10's rows are then stray
        manifest["variants"][1].pop(key, None)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    html = render_html(load_runs(["noname"]), "t")
    assert '<span class="kv">? (?, ? lines/tool' in html
