"""The results contract (bench.results) and the Project that replaces the path globals.

``tests/data/runs-v0/legacy`` is a run written by the release before the contract (rows,
manifest and traces without ``schema_version``), produced by that release's real runner
(``tests/report_runs.make_run``, ecommerce, l3 + l10, 4 cases, 2 trials, executor on).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from bench.errors import BenchError
from bench.executor.traces import read_traces
from bench.project import Project, current_project
from bench.results import SCHEMA_VERSION, Manifest, Row
from bench.store import RunStore

LEGACY = Path(__file__).parents[1] / "data" / "runs-v0" / "legacy"


@pytest.fixture
def legacy_run(project: Path) -> Path:
    """The previous release's run copied into the test project's runs folder."""
    target = project / "reports" / "runs" / "legacy"
    shutil.copytree(LEGACY, target)
    return target


def test_a_row_built_by_the_runner_round_trips_through_the_store(tmp_path):
    from bench.datasets import load_dataset
    from bench.descriptions import load_variant
    from bench.parse import parse_json_tool_calls
    from bench.providers.base import ProviderResponse, Usage
    from bench.runner import PlanItem, build_row

    case = load_dataset("ecommerce").cases[0]
    variant = load_variant(case.toolset, "l3")
    text = json.dumps({"tool_calls": [{"name": "search_orders", "arguments": {"page": 1}}]})
    response = ProviderResponse(raw=text, parsed=parse_json_tool_calls(text, "stop"),
                                finish_reason="stop", latency_s=0.25,
                                usage=Usage(prompt_tokens=120, completion_tokens=9))
    row = build_row(PlanItem(case, variant, "local", 1), "r1", response, cost_usd=0.0012)
    assert row.schema_version == SCHEMA_VERSION and row.usage.prompt_tokens == 120
    assert row.calls()[0].name == "search_orders" and row.cost_usd == 0.0012
    store = RunStore(tmp_path, "r1")
    store.append(row)
    store.append(Row.model_validate(row.to_json_dict()))  # read back, written again
    first, second = store.load_rows()
    assert first == row and second == row
    with pytest.raises(TypeError, match="bench.results.Row, not dict"):
        store.append(row.to_json_dict())  # a dict is built into a Row first
    lines = store.results_path.read_text(encoding="utf-8").splitlines()
    assert all(json.loads(line)["schema_version"] == SCHEMA_VERSION for line in lines)


def test_a_run_of_the_previous_release_is_migrated_on_read(legacy_run: Path, project: Path):
    before = {p.name: p.read_bytes() for p in legacy_run.iterdir()}
    assert "schema_version" not in before["manifest.json"].decode()
    store = project_store(project, "legacy")
    manifest = store.load_manifest()
    rows = list(store.load_rows(manifest))
    assert manifest.schema_version == SCHEMA_VERSION and manifest.status == "complete"
    assert [v.name for v in manifest.variants] == ["l3", "l10"]
    assert len(rows) == manifest.rows_planned == 16
    assert {r.schema_version for r in rows} == {SCHEMA_VERSION}
    assert all(r.metrics.execution_success is not None or not r.calls() for r in rows)
    traces = read_traces(legacy_run / "traces.jsonl")
    assert traces and {t.schema_version for t in traces} == {SCHEMA_VERSION}
    # every reader takes it: show, report, compare, traces
    runner = CliRunner()
    for args in (["show", "legacy"], ["report", "legacy", "--format", "md", "-o", "-"],
                 ["compare", "l3", "l10", "--run", "legacy"], ["traces", "legacy"]):
        result = runner.invoke(_app(), args)
        assert result.exit_code in (0, 1), (args, result.output)  # compare: 1 = regression
        assert "Traceback" not in result.output
    # read, never rewritten
    assert {p.name: p.read_bytes() for p in legacy_run.iterdir()} == before


def test_an_old_row_names_its_early_execution_metrics_as_today():
    old = json.loads(LEGACY.joinpath("results.jsonl").read_text(encoding="utf-8")
                     .splitlines()[0])
    metrics = {k: v for k, v in old["metrics"].items() if not k.startswith("execution_")}
    old["metrics"] = {**metrics, "exec_success": True, "exec_match": False}
    row = Row.model_validate(old)
    assert (row.metrics.execution_success, row.metrics.execution_match) == (True, False)


@pytest.mark.parametrize("name", ["results.jsonl", "manifest.json", "traces.jsonl"])
def test_a_newer_schema_is_refused_in_one_line(legacy_run: Path, project: Path, name: str):
    path = legacy_run / name
    if name == "manifest.json":
        data = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**data, "schema_version": SCHEMA_VERSION + 1}))
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[1] = json.dumps({**json.loads(lines[1]), "schema_version": SCHEMA_VERSION + 1})
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = project_store(project, "legacy")
    with pytest.raises(BenchError) as raised:
        if name == "traces.jsonl":
            read_traces(path)
        else:
            list(store.load_rows(store.load_manifest()))
    message = str(raised.value)
    assert "\n" not in message and "upgrade bench" in message
    assert f"schema_version {SCHEMA_VERSION + 1}" in message and name in message
    if name != "manifest.json":
        assert raised.value.line == 2
    if name != "traces.jsonl":
        result = CliRunner().invoke(_app(), ["show", "legacy"])
        assert result.exit_code != 0 and "upgrade bench" in str(result.exception or "")


def test_a_row_of_the_wrong_type_is_named_by_field(tmp_path):
    store = RunStore(tmp_path, "r")
    row = json.loads(LEGACY.joinpath("results.jsonl").read_text(encoding="utf-8")
                     .splitlines()[0])
    store.make_dir()  # the writer takes rows of the contract: this one is written as text
    store.results_path.write_text(json.dumps(
        {**row, "usage": {**row["usage"], "prompt_tokens": "113"}}) + "\n", encoding="utf-8")
    with pytest.raises(BenchError) as raised:
        list(store.load_rows())
    assert raised.value.field == "usage.prompt_tokens" and raised.value.line == 1


def test_the_manifest_model_keeps_fields_it_does_not_know():
    data = json.loads(LEGACY.joinpath("manifest.json").read_text(encoding="utf-8"))
    manifest = Manifest.model_validate({**data, "shard": "1/4"})
    assert manifest.to_json_dict()["shard"] == "1/4"
    assert manifest.spent.billed_tokens == 2128 and manifest.dataset.cases == 4


def test_two_projects_in_one_process_have_their_own_paths(tmp_path):
    one, two = Project(tmp_path / "one"), Project(tmp_path / "two", cache_root=tmp_path / "c")
    assert one.runs_dir == tmp_path / "one" / "reports" / "runs"
    assert two.runs_dir == tmp_path / "two" / "reports" / "runs"
    assert one.datasets_dir != two.datasets_dir and one.pricing_file != two.pricing_file
    assert one.cache_dir == tmp_path / "one" / "reports" / ".cache"
    assert two.cache_dir == tmp_path / "c"
    assert one.store("x").dir != two.store("x").dir
    seen: dict[str, Path] = {}
    barrier = threading.Barrier(2)

    def use(project: Project, name: str) -> None:
        from bench.paths import runs_dir
        with project.activate():
            barrier.wait()  # both threads are inside their own project at once
            seen[name] = runs_dir()

    threads = [threading.Thread(target=use, args=(p, n)) for p, n in ((one, "one"),
                                                                     (two, "two"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"one": one.runs_dir, "two": two.runs_dir}


def test_project_from_env_is_read_only_at_the_edge(tmp_path):
    (tmp_path / "datasets").mkdir()
    (tmp_path / "descriptions").mkdir()
    assert Project.from_env({}, cwd=tmp_path).root == tmp_path.resolve()
    home = Project.from_env({"BENCH_HOME": str(tmp_path / "h"), "BENCH_CACHE_DIR": "/c"})
    assert home.root == (tmp_path / "h").resolve() and home.cache_dir == Path("/c")


def test_the_gate_changes_no_cwd_and_no_environment(tmp_path, monkeypatch):
    """A gate of a project elsewhere runs from another cwd and under another BENCH_HOME:
    it finds its own datasets, descriptions and replay file, stores its run in its own
    project, and leaves the process's cwd and environment as they were."""
    from tests.gate import test_gate
    from bench.gate.config import load_gate_config
    from bench.gate.run import run_gate

    root = tmp_path / "team"
    root.mkdir()
    repo = test_gate.REPO
    # the built-in l3..l50 templates are found without a copy
    shutil.copytree(repo / "descriptions/analytics/specs", root / "descriptions/analytics/specs")
    wanted = set(test_gate.SORT_CASES[:3] + test_gate.CONTROL_CASES)
    lines = [line for line in (repo / "datasets/analytics/cases.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip() and json.loads(line)["id"] in wanted]
    (root / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "pyproject.toml").write_text(test_gate.GATE, encoding="utf-8")
    (root / "datasets").mkdir()
    with Project(root).activate():  # records the answers with the team's descriptions
        test_gate._record_fixture_answers(root, str)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("BENCH_HOME", str(elsewhere))
    cwd, environ = os.getcwd(), dict(os.environ)
    result = run_gate(load_gate_config(root / "pyproject.toml"), run_id="gate-cwd")
    assert os.getcwd() == cwd and dict(os.environ) == environ
    assert current_project().root == elsewhere.resolve()
    assert (root / "reports" / "runs" / "gate-cwd" / "results.jsonl").is_file()
    assert not (elsewhere / "reports").exists()
    assert len(result.rows) == len(wanted) and result.manifest.status == "complete"
    assert all(isinstance(r, Row) for r in result.rows)


def project_store(project: Path, run_id: str) -> RunStore:
    """The run ``run_id`` of the test project."""
    return Project(project).store(run_id)


def _app():  # noqa: ANN202
    from bench.cli import app
    return app


@pytest.mark.parametrize("field, text", [("latency_s", "Infinity"), ("cost_usd", "NaN"),
                                         ("billed_usd", "-Infinity")])
def test_a_non_finite_number_is_named_by_field(legacy_run: Path, project: Path, field: str,
                                                text: str):
    # a hand-edited Infinity passed ``ge=0`` and then broke `bench report` with a traceback
    path = legacy_run / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    row = {key: value for key, value in json.loads(lines[1]).items() if key != field}
    lines[1] = json.dumps(row)[:-1] + f', "{field}": {text}}}'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = project_store(project, "legacy")
    with pytest.raises(BenchError) as raised:
        list(store.load_rows(store.load_manifest()))
    assert (raised.value.field, raised.value.line) == (field, 2)
    assert "finite" in str(raised.value)
    result = CliRunner().invoke(_app(), ["report", "legacy", "--format", "md", "-o", "-"])
    assert result.exit_code != 0 and "finite" in str(result.exception or result.output)


def test_an_explicit_version_0_is_migrated_and_a_negative_one_refused():
    # an explicit 0 skipped the migration (exec_success was dropped, not renamed) and -5 was
    # kept, and written back by bench merge
    old = json.loads(LEGACY.joinpath("results.jsonl").read_text(encoding="utf-8")
                     .splitlines()[0])
    metrics = {k: v for k, v in old["metrics"].items() if not k.startswith("execution_")}
    row = Row.model_validate({**old, "schema_version": 0,
                              "metrics": {**metrics, "exec_success": True}})
    assert row.schema_version == SCHEMA_VERSION and row.metrics.execution_success is True
    for version in (-1, -5):
        with pytest.raises(ValidationError, match=f"schema_version {version} is not a version"):
            Row.model_validate({**old, "schema_version": version})


def test_every_metric_scoring_computes_is_declared_on_the_row():
    """A CaseScore field or built-in metric missing from RowMetrics would land in the row's
    ``model_extra`` unchecked (no type, no range) and unseen by typed readers."""
    import dataclasses

    from bench.results.metrics import RowMetrics
    from bench.scoring.metrics import CaseScore
    from bench.scoring.registry import metric_specs

    declared = set(RowMetrics.model_fields)
    assert {f.name for f in dataclasses.fields(CaseScore)} - declared == set()
    # built-in metrics read from row.metrics (the others read usage, latency, cost)
    in_metrics = {s.name for s in metric_specs() if s.value is None and s.path == ()}
    assert in_metrics and in_metrics - declared == set()


@pytest.mark.slow
def test_rows_of_answers_episodes_and_retrieval_carry_only_declared_metrics(project):
    """Single answers executed on the reference backends, episodes, and a retrieval
    condition, each scored by the oracle: every metric the runner writes is a declared
    RowMetrics field (``model_extra`` holds only metrics a user registers)."""
    from bench import evaluate

    runs = [evaluate("ecommerce", ["l3"], ["oracle"], project=project, limit=4),
            evaluate("ecommerce-episodes", ["l3"], ["oracle"], project=project, limit=2),
            evaluate("ecommerce", ["l3"], ["oracle"], project=project, limit=4,
                     tools=[20], retrievers=["bm25"], execute=False)]
    for result in runs:
        assert result.rows
        for row in result.rows:
            assert row.metrics.model_extra in (None, {}), (row.key, row.metrics.model_extra)
    assert any(row.metrics.execution_success is not None for row in runs[0].rows)
    assert any(row.metrics.task_success is not None for row in runs[1].rows)
    assert any(row.metrics.retrieval_recall is not None for row in runs[2].rows)
