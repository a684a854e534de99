"""docs/extending.md's "Add a metric" recipe stays true:

- your own metric is one ``register_metric`` call in your code (no file of bench): a real run
  then shows it in ``bench.evaluate``'s summary, the streamed terminal table of ``bench run``
  and ``bench show``, the report, ``bench compare`` and the gate;
- a metric shipped with bench and read from the row is one ``MetricSpec`` in
  bench/scoring/registry.py: every registered metric reaches every reader;
- a metric the scorer computes is three files: its ``CaseScore`` field and computation
  (bench/scoring/metrics.py), its typed ``RowMetrics`` field (bench/results/metrics.py) and its
  ``MetricSpec``: every value the scorer computes reaches the stored row, declared and
  registered."""

from __future__ import annotations

import dataclasses
import importlib
import sys

import pytest
from rich.console import Console

from bench import Project, evaluate, results_frame
from bench.gate.config import GateConfig
from bench.gate.core import evaluate as gate_verdicts
from bench.report.data import load_runs
from bench.report.markdown import render_markdown
from bench.report.table import summary_table
from bench.results.metrics import RowMetrics
from bench.scoring.metrics import CaseScore
from bench.scoring.registry import (comparable_metrics, gate_metrics, metric_names,
                                    metric_specs, unregister_metric)
from bench.stats.running import RunningSummary
from bench.stats.summary import rows_frame, summarize

# the recipe's first case, as a user writes it: a module of their own
MY_METRICS = '''
from bench import MetricSpec, register_metric


def one_call_at_most(row):
    """True when the decoded answer makes at most one call; None when it did not decode."""
    parsed = row.parsed
    if parsed is None:
        return True
    return None if parsed.error else len(parsed.calls or []) <= 1


register_metric(MetricSpec(name="one_call_at_most", title="answers with one call at most",
                           label="one call", value=one_call_at_most))
'''

# CaseScore fields that are details of a row, not figures: lists and maps
SCORE_DETAILS = {"argument_results", "lenient_repairs", "error_codes", "argument_errors"}


@pytest.fixture
def my_metrics(tmp_path, monkeypatch):
    """The user's module, written in a temporary folder and imported from there."""
    (tmp_path / "my_metrics.py").write_text(MY_METRICS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module("my_metrics")
    finally:
        unregister_metric("one_call_at_most")
        sys.modules.pop("my_metrics", None)


@pytest.mark.slow
def test_a_metric_registered_in_a_module_of_yours_shows_in_every_view(project, my_metrics):
    """A real oracle run of 12 ecommerce cases in two variants, after importing the user's
    module: the metric's counts are the rows' own, in each view."""
    result = evaluate("ecommerce", ["l3", "l10"], ["oracle"], project=project, run_id="mine",
                      limit=12, execute=False)
    assert result.status == "complete" and len(result.rows) == 24
    expected = {variant: sum(1 for row in result.rows if row.variant == variant
                             and len(row.parsed.calls or []) <= 1)
                for variant in ("l3", "l10")}
    assert 0 < expected["l3"] < 12  # the oracle makes multi-call answers too: a real figure

    # bench.evaluate's summary (the frame's table)
    table = result.summary.set_index("variant")
    assert {v: (table.loc[v, "one_call_at_most_k"], table.loc[v, "one_call_at_most_n"])
            for v in expected} == {v: (k, 12) for v, k in expected.items()}
    # the table bench run and bench show print, summed as the rows stream
    records = RunningSummary(["l3", "l10"]).add_all(result.rows).summary()
    assert {r["variant"]: r["one_call_at_most_k"] for r in records} == expected
    console = Console(width=400, record=True)
    console.print(summary_table(records))
    assert "one call" in console.export_text()
    # bench compare: tested, paired on the same cases
    tests = [t for t in result.compare("l3", "l10").tests if t.metric == "one_call_at_most"]
    assert len(tests) == 1 and tests[0].n == 12
    # the report
    runs = load_runs(["mine"], Project(project))
    assert "answers with one call at most" in render_markdown(runs, "t")
    # the gate: a gated metric, decided on the rows against its floor
    config = GateConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"],
                        metrics=["one_call_at_most"],
                        floors={"one_call_at_most": 0.1})
    verdicts = gate_verdicts(config, result.rows, baseline=None)
    assert [(v.metric, v.n, v.successes) for v in verdicts] == \
        [("one_call_at_most", 12, expected["l3"])]


@pytest.mark.slow
def test_every_registered_metric_reaches_every_reader(project):
    """One MetricSpec is the whole change for a metric read from the row: every registered
    metric that a real run's rows carry (its own reader, ``MetricSpec.row_value``, finds a
    value) has its column in the results frame, the summary and the streamed table take each
    such rate of their view, and compare tests each of its own (an oracle run, executed)."""
    result = evaluate("ecommerce", ["l3", "l10"], ["oracle"], project=project, run_id="all",
                      limit=8)
    carried = {spec.name for spec in metric_specs()
               if any(spec.row_value(row) is not None for row in result.rows)}
    assert {"selection_correct", "execution_success", "prompt_tokens"} <= carried
    assert carried <= set(results_frame(result.rows).columns)
    table_rates = [name for name in metric_names(kind="rate", view="table") if name in carried]
    wanted = {f"{name}_{part}" for name in table_rates for part in ("k", "n", "rate")}
    assert wanted <= set(summarize(rows_frame(result.rows)).columns)
    assert wanted <= set(RunningSummary(["l3", "l10"]).add_all(result.rows).summary()[0])
    tested = {t.metric for t in result.compare("l3", "l10").tests}
    assert tested == set(comparable_metrics()) & carried
    GateConfig(dataset="ecommerce", variants=["l3"], metrics=gate_metrics())  # all accepted


def test_every_value_the_scorer_computes_is_declared_on_the_row_and_registered(project):
    """A metric the scorer computes: its CaseScore field reaches every stored row through
    CaseScore.as_dict (a field it does not list fails here), and needs its typed RowMetrics
    field and its MetricSpec (a field missing either fails here)."""
    figures = {f.name for f in dataclasses.fields(CaseScore)} - SCORE_DETAILS
    assert figures - set(RowMetrics.model_fields) == set()
    registered = {name for spec in metric_specs() for name in (spec.name, *spec.aliases)}
    assert figures - registered == set()
    result = evaluate("ecommerce", ["l3"], ["oracle"], project=project, run_id="scored",
                      limit=4, execute=False)
    for row in result.rows:
        assert {f.name for f in dataclasses.fields(CaseScore)} <= row.metrics.model_fields_set
