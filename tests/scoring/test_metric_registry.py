"""The metric registry: one registered MetricSpec shows in the terminal table, the report,
``bench compare`` and the gate, with no other file touched."""

from __future__ import annotations

import pytest
from rich.console import Console

from bench.compare.core import compare_rows
from bench.gate.config import GateConfig
from bench.gate.core import evaluate
from bench.report.data import load_runs
from bench.report.html import render_html
from bench.report.markdown import render_markdown
from bench.report.table import summary_table
from bench.results import Row
from bench.scoring.registry import (MetricSpec, comparable_metrics, gate_metrics,
                                    metric_specs, register_metric, unregister_metric)
from bench.stats.summary import rows_frame, summarize
from tests.report_runs import expected_answer, make_run, mixed_answer


def _one_call_at_most(row: Row) -> bool | None:
    """True when the decoded answer has at most one call; None when it could not be decoded."""
    parsed = row.parsed
    if parsed is None:
        return True
    return None if parsed.error else len(parsed.calls or []) <= 1


@pytest.fixture
def single_call():
    """A metric computed from the row itself (the scorer knows nothing of it)."""
    spec = register_metric(MetricSpec(
        name="single_call", title="at most one call <i>", label="single call",
        value=_one_call_at_most))
    yield spec
    unregister_metric(spec.name)


def test_a_registered_metric_shows_in_table_report_compare_and_gate(project, single_call):
    make_run("a", expected_answer, variants=("l3",), limit=10)
    make_run("b", mixed_answer, variants=("l3",), limit=10)
    rows_a = load_runs(["a"])[0].rows
    rows_b = load_runs(["b"])[0].rows

    # terminal table: a column headed by the short label, with the rate of 10/10 rows
    summary = summarize(rows_frame(rows_a))
    assert (summary.loc[0, "single_call_k"], summary.loc[0, "single_call_n"]) == (10, 10)
    console = Console(width=400, record=True)
    console.print(summary_table(summary))
    text = console.export_text()
    assert "single call" in text and "100.0% [72.2-100.0]" in text

    # report: the headline column, titled (and escaped) in HTML and Markdown
    html = render_html(load_runs(["a"]), "t")
    assert "at most one call &lt;i&gt;" in html
    assert "at most one call &lt;i&gt; (95% CI)" in render_markdown(load_runs(["a"]), "t")

    # compare: tested by default, paired on the same cases
    comparison = compare_rows(rows_a, rows_b)
    tests = [t for t in comparison.tests if t.metric == "single_call"]
    assert len(tests) == 1 and tests[0].n == 10 and tests[0].rate_a == 1.0

    # gate: accepted as a gated metric and decided against its floor
    config = GateConfig(dataset="ecommerce", variants=["l3"], metrics=["single_call"],
                        floors={"single_call": 0.5})
    verdicts = evaluate(config, rows_a, baseline=None)
    assert [(v.metric, v.n, v.successes, v.passed) for v in verdicts] == \
        [("single_call", 10, 10, True)]


def test_registration_is_checked_and_undone():
    assert "single_call" not in comparable_metrics()
    spec = register_metric(MetricSpec("single_call", "t", "t", polarity="lower"))
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_metric(MetricSpec("single_call", "t", "t"))
        # a lower-is-better rate is compared, but the gate (whose floors are minimums) refuses it
        assert "single_call" in comparable_metrics() and "single_call" not in gate_metrics()
        with pytest.raises(ValueError, match="unknown metric 'single_call'"):
            GateConfig(dataset="d", variants=["l3"], metrics=["single_call"])
    finally:
        unregister_metric(spec.name)
    assert "single_call" not in [s.name for s in metric_specs()]
    with pytest.raises(ValueError, match="only rates"):
        MetricSpec("mean_calls", "t", "t", kind="mean", views=frozenset({"report"}))
    with pytest.raises(ValueError, match="polarity"):
        MetricSpec("x", "t", "t", polarity="up")  # type: ignore[arg-type]


def test_a_lower_is_better_rate_counts_a_rise_as_the_loss(project):
    """Polarity: for a failure flag, B being True where A was False is a loss for B."""
    spec = register_metric(MetricSpec("made_no_call", "no call made", "no call",
                                      polarity="lower", value=lambda row: not (
                                          row.parsed and row.parsed.calls)))
    try:
        make_run("a", expected_answer, variants=("l3",), limit=10)
        make_run("b", mixed_answer, variants=("l3",), limit=10)
        comparison = compare_rows(load_runs(["a"])[0].rows, load_runs(["b"])[0].rows,
                                  metrics=["made_no_call"])
        test, = comparison.tests
        assert test.rate_b > test.rate_a and test.a_only > 0 and test.b_only == 0
        assert {f.direction for f in comparison.flips} == {"lost"}
    finally:
        unregister_metric(spec.name)
