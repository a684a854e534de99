"""``--limit N``: a seeded sample stratified by expected tool, not the first N cases (the
datasets are written tool by tool: the first 17 ecommerce cases all expect search_orders)."""

import pytest
import json

from bench.datasets import load_dataset
from bench.datasets.sample import NO_CALL, stratified_order, stratified_sample, stratum
from bench.runner import RunConfig, Runner, select_cases
from bench.results import Manifest
from bench.store import RunStore
from tests.stored import row_dicts


def test_limit_takes_a_stratified_seeded_nested_sample_in_dataset_order(project):
    dataset = load_dataset("ecommerce")
    ids = [c.id for c in dataset.cases]
    five = select_cases(dataset, RunConfig(limit=5))
    assert len({stratum(c) for c in five}) == 5  # five strata, not five search_orders cases
    assert NO_CALL in {stratum(c) for c in five}  # the largest stratum comes first
    assert [c.id for c in five] == sorted((c.id for c in five), key=ids.index)
    assert [c.id for c in select_cases(dataset, RunConfig(limit=5))] == [c.id for c in five]
    other_seed = select_cases(dataset, RunConfig(limit=5, seed=7))
    assert {c.id for c in other_seed} != {c.id for c in five}
    for n in (1, 12, 40):  # nested: N + 1 keeps the N
        assert {c.id for c in stratified_sample(dataset.cases, n, 1234)} <= \
            {c.id for c in stratified_sample(dataset.cases, n + 1, 1234)}
    # proportional: 40 of 279 cases take about 40 x 41/279 = 5.9 no-call cases
    forty = stratified_sample(dataset.cases, 40, 1234)
    assert sum(stratum(c) == NO_CALL for c in forty) == 6
    assert sorted(c.id for c in stratified_order(dataset.cases, 1234)) == sorted(ids)
    assert len(stratified_sample(dataset.cases, 10_000, 1234)) == len(ids)
    wanted = ids[-1:] + ids[:17]  # --cases first, then --limit samples among them
    chosen = [c.id for c in select_cases(dataset, RunConfig(limit=3, case_ids=wanted))]
    assert len(chosen) == 3 and set(chosen) <= set(wanted)
    assert chosen == sorted(chosen, key=ids.index)


@pytest.mark.slow
def test_resume_picks_the_cases_the_run_started_with(project):
    from bench.paths import runs_dir
    from tests.report_runs import expected_answer, make_run

    make_run("sampled", expected_answer, variants=("l3",), limit=6, first=False)
    store = RunStore(runs_dir(), "sampled")
    written = [r["case_id"] for r in row_dicts(store)]
    assert Runner.resume("sampled").cases == Runner(RunConfig(variants=["l3"], limit=6)).cases
    assert [c.id for c in Runner.resume("sampled").cases] == written
    # a run recorded before --limit sampled (no limit_sampling stored) keeps its first N
    manifest = store.load_manifest().to_json_dict()
    del manifest["config"]["limit_sampling"]
    store.write_manifest(Manifest.model_validate(manifest))
    first = [c.id for c in load_dataset("ecommerce").cases if c.split == "test"][:6]
    assert [c.id for c in Runner.resume("sampled").cases] == first


@pytest.mark.slow
def test_cli_limit_samples_and_says_so(run_bench, project):
    from tests.report_runs import expected_answer, make_run

    make_run("rec", expected_answer, variants=("l3",), limit=5, first=False)
    result = run_bench("run", "--limit", "5", "--variants", "l3", "--provider", "replay:rec",
                       "--run-id", "five")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in
            (project / "reports/runs/five/results.jsonl").read_text().splitlines()]
    expected_tools = {tuple(sorted({c["name"] for c in r["expected"]["calls"]}))
                      for r in rows}
    assert len(rows) == 5 and len(expected_tools) >= 3  # calls of several tools, no-call: ()
    help_text = " ".join(run_bench("run", "--help").stdout.split())
    assert "stratified by expected tool" in help_text and "seeded by --seed" in help_text
