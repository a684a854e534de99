"""Results frame, aggregation by group, cluster bootstrap, pass@k / pass^k, top argument
errors and the selection confusion matrix."""

import math

import pytest

from bench.stats.aggregate import aggregate, pass_k_table, selection_confusion, \
    top_argument_errors
from bench.stats.frame import NO_CALL, UNPARSEABLE, results_frame
from bench.stats.intervals import (cluster_bootstrap_interval, pass_at_k, pass_hat_k,
                                   wilson_interval)


def row(case, variant="a", trial=0, ok=True, tags=("simple",), lang="en", expected=("t1",),
        predicted=("t1",), metrics=None, arg_errors=()):
    calls = [{"name": n, "arguments": {}} for n in expected]
    parsed = {"calls": [{"name": n, "arguments": {}} for n in predicted or ()],
              "error": None if predicted is not None else "truncated"}
    base = {"selection_correct": ok, "arguments_correct": ok if expected else None,
            "no_call_correct": None if expected else ok, "argument_errors": list(arg_errors)}
    return {"key": f"{case}|{variant}|p|{trial}", "run_id": "r", "case_id": case,
            "toolset": "ts", "variant": variant, "provider": "p", "trial": trial, "lang": lang,
            "tags": list(tags), "query": f"query {case}",
            "expected": {"calls": calls} if expected else {"no_call": True},
            "parsed": parsed, "metrics": {**base, **(metrics or {})},
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": 0},
            "tool_definition_tokens": 5, "latency_s": 0.5}


def test_frame_schema_and_absent_metrics_are_not_columns():
    frame = results_frame([row("c1"), row("c2", ok=False)])
    assert str(frame["selection_correct"].dtype) == "boolean"
    assert "execution_success" not in frame and "schema_valid" not in frame
    assert frame.loc[0, "expected_tools"] == ("t1",) and frame.loc[0, "tags"] == ("simple",)
    with_exec = results_frame([row("c1", metrics={"exec_success": True, "exec_match": None})])
    assert bool(with_exec.loc[0, "execution_success"]) is True
    assert "execution_match" not in with_exec  # only None everywhere: not shown


def test_aggregate_by_tag_tool_and_language_counts_each_group():
    rows = [row("c1", tags=("enum", "date"), lang="zh"), row("c2", ok=False, tags=("enum",)),
            row("c3", expected=(), predicted=(), tags=())]
    by_tag = aggregate(results_frame(rows), by=["tag"]).set_index("tag")
    assert by_tag.loc["enum", "selection_correct_k"] == 1
    assert by_tag.loc["enum", "selection_correct_n"] == 2
    assert by_tag.loc["(untagged)", "rows"] == 1
    by_tool = aggregate(results_frame(rows), by=["tool"]).set_index("tool")
    assert by_tool.loc[NO_CALL, "no_call_correct_n"] == 1
    assert by_tool.loc["t1", "arguments_correct_n"] == 2
    by_lang = aggregate(results_frame(rows), by=["language"]).set_index("lang")
    low, high = wilson_interval(1, 2)
    assert by_lang.loc["en", "selection_correct_rate"] == 0.5
    assert by_lang.loc["en", "selection_correct_low"] == pytest.approx(low)
    assert by_lang.loc["en", "selection_correct_high"] == pytest.approx(high)
    assert "selection_correct_boot_low" not in by_lang  # one trial: no bootstrap
    with pytest.raises(ValueError):
        aggregate(results_frame(rows), by=["colour"])


def test_bootstrap_is_clustered_by_case_with_trials():
    # 10 cases x 4 trials; each case is all right or all wrong: the clustered interval must be
    # as wide as 10 independent cases, far wider than 40 independent rows.
    rows = [row(f"c{i}", trial=t, ok=i < 5) for i in range(10) for t in range(4)]
    out = aggregate(results_frame(rows), by=["variant"], n_boot=2000).iloc[0]
    clustered = out["selection_correct_boot_high"] - out["selection_correct_boot_low"]
    naive = out["selection_correct_high"] - out["selection_correct_low"]
    assert clustered > naive
    assert all(math.isnan(x) for x in cluster_bootstrap_interval([], []))


def test_pass_at_k_and_pass_hat_k_match_the_closed_forms():
    # n=5 trials, c=2 right: pass@2 = 1 - C(3,2)/C(5,2) = 0.7; pass^2 = C(2,2)/C(5,2) = 0.1
    assert pass_at_k([5], [2], 2)[0] == pytest.approx(0.7)
    assert pass_hat_k([5], [2], 2)[0] == pytest.approx(0.1)
    assert pass_at_k([5, 5], [0, 5], 3).tolist() == [0.0, 1.0]
    assert pass_at_k([4], [1], 1)[0] == pytest.approx(0.25)
    with pytest.raises(ValueError):
        pass_at_k([1], [1], 2)
    rows = [row("c1", trial=t, ok=t < 2) for t in range(5)] + \
        [row("c2", trial=t, ok=True) for t in range(5)]
    table = pass_k_table(results_frame(rows), ks=(1, 2)).iloc[0]
    assert table["pass@1"] == pytest.approx((0.4 + 1.0) / 2)
    assert table["pass@2"] == pytest.approx((0.7 + 1.0) / 2)
    assert table["pass^2"] == pytest.approx((0.1 + 1.0) / 2)


def test_top_argument_errors_counts_and_orders():
    rows = [row("c1", arg_errors=["t1.x: 1 -> 2", "t1.y: 'a' -> (omitted)"]),
            row("c2", arg_errors=["t1.x: 1 -> 2"]), row("c3")]
    top = top_argument_errors(results_frame(rows), limit=1)
    assert top.to_dict("records") == [{"argument_error": "t1.x: 1 -> 2", "count": 2}]


def test_selection_confusion_pairs_multisets_and_marks_no_call():
    rows = [row("c1", expected=("t1", "t2"), predicted=("t2", "t3")),
            row("c2", expected=("t1",), predicted=()),
            row("c3", expected=(), predicted=("t2",)),
            row("c4", expected=(), predicted=()),
            row("c5", expected=("t1",), predicted=None)]
    matrix = selection_confusion(results_frame(rows))
    assert matrix.loc["t2", "t2"] == 1 and matrix.loc["t1", "t3"] == 1
    assert matrix.loc["t1", NO_CALL] == 1 and matrix.loc[NO_CALL, "t2"] == 1
    assert matrix.loc[NO_CALL, NO_CALL] == 1 and matrix.loc["t1", UNPARSEABLE] == 1
    assert int(matrix.to_numpy().sum()) == 6
    assert list(matrix.columns)[-2:] == [NO_CALL, UNPARSEABLE]


def test_a_group_without_a_value_keeps_its_bootstrap_and_missing_metrics_give_empty_pass_k():
    """Rows without a language (None) form their own group, also in the case-clustered
    bootstrap (trials > 1); pass@k of a metric no row carries is an empty table."""
    from bench.stats.aggregate import aggregate, pass_k_table
    from bench.stats.frame import results_frame
    rows = [{"key": f"{case}|{trial}", "case_id": case, "toolset": "t", "variant": "l3",
             "provider": "p", "trial": trial, "lang": lang, "usage": None, "latency_s": None,
             "metrics": {"selection_correct": trial == 0}}
            for case, lang in (("a", "en"), ("b", None)) for trial in (0, 1)]
    table = aggregate(results_frame(rows), ("lang",))
    assert table["rows"].tolist() == [2, 2]
    assert table["selection_correct_boot_low"].notna().all()
    empty = pass_k_table(results_frame(rows), metric="execution_match", ks=(1,))
    assert empty.empty and {"pass@1", "pass^1"} <= set(empty.columns)
