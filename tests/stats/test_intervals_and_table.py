"""Wilson intervals, the per-variant summary and its table."""

import math

import pandas as pd
import pytest

from bench.report.table import format_rate, summary_table
from bench.stats.intervals import wilson_interval
from bench.stats.summary import rows_frame, summarize, summary_frame


def test_wilson_matches_closed_form():
    # Wilson (1927): (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    k, n, z = 8, 10, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(centre - half, abs=1e-9)
    assert high == pytest.approx(centre + half, abs=1e-9)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == pytest.approx(1.0)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def row(case, variant, selection, arguments, no_call, latency, prompt=100, cached=0):
    return {"key": f"{case}|{variant}", "case_id": case, "toolset": "t", "variant": variant, "provider": "local", "trial": 0,
            "lang": "en", "latency_s": latency, "tool_definition_tokens": 50 if variant == "a"
            else 90, "usage": {"prompt_tokens": prompt, "completion_tokens": 5,
                               "cached_tokens": cached},
            "metrics": {"selection_correct": selection, "arguments_correct": arguments,
                        "schema_valid": True if arguments is not None else None,
                        "no_call_correct": no_call}}


def test_summary_denominators_follow_metric_applicability():
    rows = [row("c1", "a", True, True, None, 3.0), row("c2", "a", False, False, None, 1.0),
            row("c3", "a", True, None, True, 2.0), row("c1", "b", True, True, None, 1.0)]
    summary = summarize(rows_frame(rows), ["a", "b"])
    a = summary.set_index("variant").loc["a"]
    assert (a["cases"], a["selection_correct_k"], a["selection_correct_n"]) == (3, 2, 3)
    assert (a["arguments_correct_k"], a["arguments_correct_n"]) == (1, 2)
    assert (a["no_call_correct_k"], a["no_call_correct_n"]) == (1, 1)
    assert a["p50_latency_s"] == 2.0
    assert a["cases_per_s"] == pytest.approx(1 / 1.5)  # the first (cold) row is excluded
    assert a["tool_definition_tokens"] == 50
    b = summary.set_index("variant").loc["b"]
    assert b["no_call_correct_n"] == 0 and math.isnan(b["no_call_correct_rate"])


def test_variant_order_is_kept_and_table_renders():
    rows = [row("c1", "l10", True, True, None, 1.0), row("c1", "l3", False, False, None, 1.0)]
    summary = summarize(rows_frame(rows), ["l3", "l10"])
    assert list(summary["variant"]) == ["l3", "l10"]
    table = summary_table(summary)
    assert table.row_count == 2
    assert format_rate(0.5, 0.2, 0.8, 4) == "50.0% [20.0-80.0]"
    assert format_rate(float("nan"), 0, 0, 0) == "-"


def test_duplicate_rows_count_once():
    rows = [row("c1", "a", True, True, None, 1.0)] * 3 + [row("c2", "a", False, False, None, 1.0)]
    summary = summarize(rows_frame(rows))
    assert (summary.loc[0, "selection_correct_k"], summary.loc[0, "selection_correct_n"]) == (1, 2)


def test_summary_frame_in_chunks_gives_the_whole_frames_summary():
    rows = [row(f"c{i}", v, i % 3 == 0, (i % 2 == 0) if i % 5 else None, None if i % 5 else
                i % 4 == 0, 0.5 + i / 10, prompt=100 + i) for i in range(11) for v in "ab"]
    rows += rows[:4]  # copies of rows of the first chunk count once
    rows[-5]["metrics"]["execution_success"] = True  # a metric only a late chunk carries
    whole = summarize(rows_frame(rows), ["a", "b"])
    chunked = summarize(summary_frame(rows, chunk_rows=3), ["a", "b"])
    assert "execution_success_n" in whole and chunked["execution_success_n"].tolist() == \
        whole["execution_success_n"].tolist()
    pd.testing.assert_frame_equal(chunked, whole, check_dtype=False)
    assert summary_frame([]).empty


RUN_ID = "replay:20261130-050032-973d"
CACHE = "replay:/home/someone/project/reports/cache/responses-20261130.sqlite"


@pytest.mark.parametrize("width", [100, 150, 200])
def test_provider_ids_are_never_cut_in_the_terminal_table(width):
    """A replay id used to show as `replay:202612…`: the provider column folds an id it
    cannot fit onto more lines, and a replay file path keeps its file name."""
    from rich.console import Console

    rows = [{**row(f"c{i}", "l3", True, i == 0, None, 1.0), "provider": provider,
             "key": f"c{i}|l3|{provider}"}
            for provider in (RUN_ID, CACHE, "local") for i in range(3)]
    console = Console(width=width, record=True)
    console.print(summary_table(summarize(rows_frame(rows), ["l3"])))
    lines = console.export_text().splitlines()
    body = [line for line in lines if line.startswith("│")]
    column = "".join(line.split("│")[1].strip() for line in body)  # the provider cells
    assert RUN_ID in column and "local" in column
    assert "replay:…/responses-20261130.sqlite" in column
    assert "…" not in column.replace("replay:…/", "")  # nothing else is cut


def test_shown_replay_paths_keep_the_parts_that_tell_them_apart():
    from bench.report.table import shown_provider_ids
    shown = shown_provider_ids(["replay:/x/a/r.sqlite", "replay:/y/a/r.sqlite#local",
                                "replay:/z/b/r.sqlite", "replay:/y/a/r.sqlite", RUN_ID,
                                "replay:c.sqlite", "local"])
    assert shown == {"replay:/x/a/r.sqlite": "replay:/x/a/r.sqlite",  # nothing left to cut
                     "replay:/y/a/r.sqlite#local": "replay:…/r.sqlite#local",
                     "replay:/z/b/r.sqlite": "replay:…/b/r.sqlite",
                     "replay:/y/a/r.sqlite": "replay:/y/a/r.sqlite",
                     RUN_ID: RUN_ID, "replay:c.sqlite": "replay:c.sqlite", "local": "local"}
    assert len(set(shown.values())) == len(shown)


def _with_reasoning(case, variant, reasoning):
    record = row(case, variant, True, True, None, 1.0)
    record["usage"]["reasoning_tokens"] = reasoning
    return record


def test_mean_reasoning_tokens_leaves_out_rows_that_report_none():
    """null reasoning_tokens means 'not reported' (a provider error row, a model that does
    not count them): such rows are not averaged in as 0, in the table or the HTML report."""
    from rich.console import Console

    rows = ([_with_reasoning(f"c{i}", "a", 12) for i in range(8)]
            + [_with_reasoning(f"e{i}", "a", None) for i in range(4)]
            + [_with_reasoning("c1", "b", None)])
    summary = summarize(rows_frame(rows), ["a", "b"]).set_index("variant")
    assert summary.loc["a", "mean_reasoning_tokens"] == 12
    assert math.isnan(summary.loc["b", "mean_reasoning_tokens"])  # none reported
    console = Console(width=250, record=True)
    console.print(summary_table(summarize(rows_frame(rows), ["a", "b"])))
    lines = console.export_text().splitlines()
    header = [cell.strip() for cell in lines[1].split("┃")]
    column = header.index("mean reasoning tokens")
    cells = {cells[2]: cells[column] for cells in
             ([c.strip() for c in line.split("│")] for line in lines if line.startswith("│"))}
    assert cells == {"a": "12", "b": "-"}


def test_the_caption_claims_no_bootstrap_the_table_does_not_compute():
    """The terminal table's intervals are Wilson intervals over rows; with one trial the
    caption says only that, with several it says that trials count as independent rows."""
    summary = summarize(rows_frame([row("c1", "a", True, True, None, 1.0)]))
    one = str(summary_table(summary).caption)
    assert "Wilson" in one and "bootstrap" not in one and "trials" not in one
    several = str(summary_table(summary, trials=3).caption)
    assert "3 trials per case counted as independent rows" in several


def test_refused_writes_get_their_own_column_and_leave_exec_success(tmp_path):
    """A row whose only call the run's permissions refused carries write_refused and no
    execution_success: the table shows "writes refused" beside an exec success rate over the
    rows whose calls ran, and the note says a refusal is not an execution failure."""
    import json

    from rich.console import Console

    from bench.report.execution import execution_notes

    rows = [row("c1", "a", True, True, None, 1.0), row("c2", "a", True, True, None, 1.0),
            row("c3", "a", False, False, None, 1.0)]
    for r, success, refused in zip(rows, (True, None, False), (False, True, False)):
        r["metrics"].update(execution_success=success, write_refused=refused)
    a = summarize(rows_frame(rows), ["a"]).iloc[0]
    assert (a["execution_success_k"], a["execution_success_n"]) == (1, 2)
    assert (a["write_refused_k"], a["write_refused_n"]) == (1, 3)
    console = Console(width=400, record=True)
    console.print(summary_table(summarize(rows_frame(rows), ["a"])))
    text = console.export_text()
    assert "writes refused" in text and "33.3% [6.1-79.2]" in text  # 1 of 3
    assert "50.0% [9.5-90.5]" in text  # exec success: 1 of the 2 rows whose calls ran
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps({"schema_version": 1, "tool": "cancel_order", "attempt": 0,
                                  "status": "rejected", "final": True,
                                  "error_code": "permission_denied"}) + "\n", encoding="utf-8")
    note = " ".join(execution_notes({}, tmp_path))
    assert "cancel_order 1" in note and "not an execution failure" in note
    assert "counts as an execution failure" not in note
