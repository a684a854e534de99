"""Per-tool figures: precision / recall / F1 with intervals, confusion pairs, required and
forbidden calls; the report's per-tool section and shared confusion columns; a passing row
whose execution failed shows the executor's error class."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bench.report.data import execution_codes, load_runs
from bench.report.answer_views import (MAX_CONFUSION_COLUMNS, confusion_layout,
                                       confusion_matrices)
from bench.report.html import render_html
from bench.results import Row
from bench.stats.intervals import wilson_interval
from bench.stats.pertool import call_checks, confusion_pairs, per_tool_table, row_counts
from tests.report_runs import expected_answer, make_run

REPO = Path(__file__).resolve().parents[2]


def _frame(rows: list[tuple[str, tuple[str, ...], tuple[str, ...] | None]],
           variant: str = "l10", kind: str | None = None) -> pd.DataFrame:
    """A results frame of (case, expected tools, predicted tools) rows, one provider."""
    return pd.DataFrame({
        "case_id": [r[0] for r in rows], "provider": "p", "variant": variant,
        "expected_tools": [r[1] for r in rows], "predicted_tools": [r[2] for r in rows],
        "expected_kind": [kind or ("calls" if r[1] else "no_call") for r in rows]})


# a: needed 4 times, made 3 times right, once replaced by b; b: needed once (made), called
# once wrongly for a and once on a no-call case; c: called once, never needed
ROWS = [("c1", ("a",), ("a",)), ("c2", ("a",), ("a",)), ("c3", ("a",), ("a",)),
        ("c4", ("a",), ("b",)), ("c5", ("b",), ("b",)), ("c6", (), ("b",)),
        ("c7", (), ()), ("c8", ("a", "a"), ("a", "c"))]


def test_row_counts_match_names_as_multisets():
    assert row_counts(("a", "a", "b"), ("a", "b", "b")) == \
        {"a": (1, 0, 1), "b": (1, 1, 0)}
    assert row_counts(("a",), None) == {"a": (0, 0, 1)}  # undecodable: the call is missed
    assert row_counts((), ("x",)) == {"x": (0, 1, 0)}


def test_precision_recall_f1_and_wilson_intervals_per_tool():
    table = per_tool_table(_frame(ROWS)).set_index("tool")
    a, b, c = table.loc["a"], table.loc["b"], table.loc["c"]
    assert (a["tp"], a["fp"], a["fn"]) == (4, 0, 2)  # c8: one of two a calls made
    assert (b["tp"], b["fp"], b["fn"]) == (1, 2, 0)
    assert (c["tp"], c["fp"], c["fn"]) == (0, 1, 0)
    assert a["precision"] == 1.0 and a["recall"] == 4 / 6
    assert a["f1"] == 2 * 4 / (2 * 4 + 0 + 2)
    assert b["precision"] == 1 / 3 and b["recall"] == 1.0
    assert np.isnan(c["recall"]) and c["precision"] == 0.0 and c["f1"] == 0.0
    assert (a["recall_low"], a["recall_high"]) == wilson_interval(4, 6)
    assert (b["precision_low"], b["precision_high"]) == wilson_interval(1, 3)


def test_f1_bootstrap_is_seeded_and_brackets_the_estimate():
    frame = _frame(ROWS)
    first = per_tool_table(frame, seed=7).set_index("tool")
    again = per_tool_table(frame, seed=7).set_index("tool")
    pd.testing.assert_frame_equal(first, again)
    for tool in ("a", "b"):
        row = first.loc[tool]
        assert row["f1_low"] <= row["f1"] <= row["f1_high"]
    # every case agreeing: F1 is 1 in every resample
    perfect = per_tool_table(_frame([("x1", ("a",), ("a",)), ("x2", ("b",), ("b",))]))
    assert perfect["f1_low"].tolist() == [1.0, 1.0] and perfect["f1_high"].tolist() == [1.0, 1.0]


def test_trials_of_one_case_are_resampled_together():
    """Two trials of one case are one cluster: with a single case the F1 interval collapses
    to the pooled value (every resample draws that case)."""
    frame = _frame([("only", ("a",), ("a",)), ("only", ("a",), ("b",))])
    row = per_tool_table(frame).set_index("tool").loc["a"]
    assert row["f1"] == row["f1_low"] == row["f1_high"] == 2 / 3


def test_confusion_pairs_count_wrong_picks_most_frequent_first():
    frame = pd.concat([_frame(ROWS, "l3"), _frame(ROWS[:4], "l50")])
    pairs = confusion_pairs(frame)
    top = pairs.iloc[0]
    assert (top["expected"], top["chosen"], top["count"]) == ("a", "b", 2)
    assert top["p · l3"] == 1 and top["p · l50"] == 1
    got = {(r["expected"], r["chosen"]): r["count"] for r in pairs.to_dict("records")}
    assert got == {("a", "b"): 2, ("(no call)", "b"): 1, ("a", "c"): 1}


def test_required_and_forbidden_calls_per_tool():
    checks = call_checks(_frame(ROWS)).set_index("tool")
    assert checks.loc["a", "required"] == 6 and checks.loc["a", "required_made"] == 4
    assert checks.loc["b", "forbidden_on_no_call"] == 1  # c6
    assert checks.loc["b", "forbidden_wrong_tool"] == 1  # c4
    assert checks.loc["c", "forbidden"] == 1


def test_confusion_columns_are_shared_and_never_fold_an_expected_tool():
    """Many made-up names in one panel: both panels get the same columns, every expected
    tool keeps its own column, and the made-up names beyond the limit are summed."""
    made_up = [(f"h{i}", ("a",), (f"zz_made_up_{i:02d}",)) for i in range(20)]
    l3 = _frame(made_up + [("k", ("zeta",), ("zeta",))], "l3")
    l50 = _frame([("k", ("zeta",), ("zeta",)), ("m", ("a",), ("a",))], "l50")
    frame = pd.concat([l3, l50], ignore_index=True)
    rows, columns, folded = confusion_layout(frame)
    assert "a" in columns and "zeta" in columns  # zeta sorts after every made-up name
    assert len(columns) + 1 == MAX_CONFUSION_COLUMNS and folded
    matrices = confusion_matrices(frame, ["l3", "l50"])
    assert [label for label, _ in matrices] == ["p · l3", "p · l50"]
    (_, first), (_, second) = matrices
    assert list(first.columns) == list(second.columns)
    assert list(first.index) == list(second.index)
    assert first.loc["zeta", "zeta"] == 1 and second.loc["a", "a"] == 1
    assert first[f"(other {len(folded)})"].sum() == len(folded)


def _row(**metrics) -> Row:
    return Row.model_validate({
        "key": "c|v|p|0", "run_id": "r", "case_id": "c", "variant": "v", "provider": "p",
        "trial": 0, "toolset": "shop", "lang": "en", "usage": {}, "latency_s": 0.1, "expected": {"calls": [{"name": "a", "arguments": {}}]},
        "parsed": {"calls": [{"id": "1", "name": "a", "arguments": {}, "raw_arguments": "{}"}]},
        "metrics": {"selection_correct": True, "arguments_correct": True, **metrics}})


def test_a_passing_row_whose_execution_failed_shows_the_error_class():
    failed = _row(execution_success=False, execution_errors={"validation": 1})
    assert execution_codes(failed) == ["execution_failed:validation"]
    assert execution_codes(_row(execution_success=False)) == ["execution_failed"]
    assert execution_codes(_row(execution_success=True)) == []
    assert execution_codes(_row()) == []  # execution did not run


def _confusing(case) -> str:  # noqa: ANN001 - a Case
    """Right for even case numbers; the odd ones call the first other tool of the toolset."""
    number = int("".join(ch for ch in case.id if ch.isdigit()) or 0)
    if number % 2 == 0 or not case.expected.calls:
        return expected_answer(case)
    other = "get_order" if case.expected.calls[0].name != "get_order" else "search_orders"
    return json.dumps({"tool_calls": [{"name": other, "arguments": {}}]})


def test_report_gives_per_tool_figures_and_confusion_pairs(project):
    make_run("pertool", _confusing, limit=12)
    page = render_html(load_runs(["pertool"]), "per tool")
    assert 'id="per-tool"' in page and "F1 [95% CI]" in page
    assert 'id="confusion-pairs"' in page and "chosen instead" in page
    assert page.count('class="per-tool-group"') == 2  # l3 and l10
    # search_orders: 12 needed, 6 made (the odd cases picked get_order)
    assert "50.0%<span class=\"ci\">[25.4-74.6]</span>" in page


@pytest.mark.parametrize("width", [80, 120, 160])
def test_show_per_tool_fits_the_terminal_without_cutting_a_figure(project, width):
    """bench show RUN --per-tool at 80-160 columns: no line is wider than the terminal, no
    cell is cut ("…"), every interval is printed whole (wrapped under its rate at worst)."""
    make_run("pertool", _confusing, limit=12)
    env = {**os.environ, "BENCH_HOME": str(project), "COLUMNS": str(width),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "bench", "show", "pertool", "--per-tool"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "per tool: local · l3" in text and "confusion pairs" in text
    assert all(len(line) <= width for line in text.splitlines())
    assert "…" not in text
    for interval in ("[25.4-74.6]", "[61.0-100.0]", "[40.0-85.7]", "[0.0-39.0]"):
        assert interval in text
    for word in ("selection", "arguments", "precision", "recall", "forbidden:"):
        assert word in text


# -- bench show --per-tool: a called name with control characters ------------------------------


def test_per_tool_tables_escape_control_characters_of_a_called_name():
    import io

    import pandas as pd
    from rich.console import Console

    from bench.report.pertool import per_tool_rich_tables

    evil = "\x1b]0;pwned\x07[/x]evil"
    frame = pd.DataFrame({"case_id": ["c1", "c2"], "provider": "p", "variant": "l10",
                          "expected_tools": [("a",), ("a",)],
                          "predicted_tools": [(evil,), ("a",)],
                          "expected_kind": ["calls", "calls"]})
    buffer = io.StringIO()
    console = Console(file=buffer, width=300, force_terminal=False)
    for table in per_tool_rich_tables(frame, ["l10"], {}, set()):
        console.print(table)
    text = buffer.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07[/x]evil" in text  # shown, escaped, not read as markup
