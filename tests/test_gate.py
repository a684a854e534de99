"""Demonstration of issue 8: the "ASC" -> "asc" drift, caught by the gate in a real pytest run.

The analytics backend switches its accepted ``sort_order`` values from ``ASC``/``DESC`` to
``asc``/``desc`` (``$BENCH_ANALYTICS_SORT_ORDER``) while the tool description still lists the
upper-case values. The gate must fail on ``execution_success`` and name the affected cases;
changing the description to the new values makes it pass again.

The answers are HAND-WRITTEN FIXTURE ANSWERS, not model output: for each case, the labeled
call with the first acceptable value of every argument, with ``sort_order`` spelled exactly as
the description's enum lists it (the behaviour of a model that follows its description). They
are stored with bench's real response cache under the provider id
``fixture:follows-description`` and replayed by the real ``replay`` provider; the plugin, the
runner, the executor and the statistics all run for real inside ``pytester``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# Imported here so that pytester's in-process runs find them loaded: it removes modules
# first imported inside a run, and pyarrow / numpy refuse to be imported twice per process.
import datasets  # noqa: F401
import numpy.fft  # noqa: F401 - scipy.stats imports it during the gate's comparison
import pytest
import scipy.optimize  # noqa: F401
import scipy.stats  # noqa: F401
from typer.testing import CliRunner

import bench.executor.runhook  # noqa: F401
import bench.gate.core  # noqa: F401
import bench.runner  # noqa: F401
from bench.cli import app

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.parse import ParsedAnswer
from bench.models import ToolCall
from bench.providers.base import ProviderResponse
from bench.providers.cache import ResponseCache, request_key

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
SORT_CASES = [f"ana-{i:04d}" for i in range(1, 9)]  # query_metrics with sort_order
CONTROL_CASES = ["ana-0040", "ana-0041"]  # list_tables: no sort_order
FIXTURE_PROVIDER = "fixture:follows-description"

GATE = """
[tool.bench.gate]
dataset = "cases.jsonl"
variants = ["l10"]
providers = ["replay:answers.sqlite"]
split = "all"
metrics = ["execution_success"]
floors = {execution_success = 0.5}
margin = 0.0
alpha = 0.05
baseline = "gate/baseline.json"
"""


def _first(values: list) -> object:
    return next(v for v in values if v is not None)


def _label_following_answer(case, casing) -> ProviderResponse:  # noqa: ANN001
    """The hand-written fixture answer of one case (see the module docstring)."""
    calls = []
    for index, call in enumerate(case.expected.calls):
        arguments = {name: _first(values) for name, values in call.arguments.items()
                     if any(v is not None for v in values)}
        if "sort_order" in arguments:
            arguments["sort_order"] = casing(arguments["sort_order"])
        calls.append(ToolCall(id=f"call_{index}", name=call.name, arguments=arguments,
                              raw_arguments=json.dumps(arguments)))
    raw = json.dumps({"tool_calls": [{"name": c.name, "arguments": c.arguments}
                                     for c in calls]})
    return ProviderResponse(raw=raw, parsed=ParsedAnswer(calls=calls), finish_reason="stop",
                            latency_s=0.0, request={"fixture": "hand-written"})


def _record_fixture_answers(project: Path, casing) -> None:  # noqa: ANN001
    """Store the fixture answers for the project's current description into its cache."""
    dataset = load_dataset(str(project / "cases.jsonl"))
    variant = load_variant("analytics", "l10")
    cache = ResponseCache(project / "answers.sqlite", "write")
    try:
        for case in dataset.cases:
            key = request_key(FIXTURE_PROVIDER, {}, case.messages, variant.tools, 0)
            cache.put(key, _label_following_answer(case, casing), provider_id=FIXTURE_PROVIDER,
                      base_url=None, messages=case.messages, tools=variant.tools, trial=0)
    finally:
        cache.close()


def _set_sort_values(project: Path, ascending: str, descending: str) -> None:
    """Rewrite the query_metrics spec and the labels to the given sort_order spelling."""
    spec = project / "descriptions/analytics/specs/query_metrics.yaml"
    text = spec.read_text(encoding="utf-8")
    for old, new in (("ASC", ascending), ("DESC", descending)):
        text = text.replace(f"[{old}, ", f"[{new}, ").replace(f", {old}]", f", {new}]")
        text = text.replace(f"sort_order: {old}", f"sort_order: {new}")
        text = text.replace(f"default: {old}", f"default: {new}")
        text = text.replace("exactly ASC or DESC", f"exactly {ascending} or {descending}")
    spec.write_text(text, encoding="utf-8")
    cases = project / "cases.jsonl"
    lines = cases.read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        case = json.loads(line)
        for call in case["expected"].get("calls", []):
            if "sort_order" in call["arguments"]:
                call["arguments"]["sort_order"] = [
                    {"ASC": ascending, "DESC": descending}.get(v, v) if isinstance(v, str)
                    else v for v in call["arguments"]["sort_order"]]
        out.append(json.dumps(case, ensure_ascii=False))
    cases.write_text("\n".join(out) + "\n", encoding="utf-8")


def _baseline_update():  # noqa: ANN202
    """``bench baseline update`` through the real CLI app, in this process (cwd: the project)."""
    return CliRunner().invoke(app, ["baseline", "update"])


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A team's project: analytics descriptions, 10 cases, the gate table, fixture answers."""
    root = pytester.path
    # the built-in l3..l50 templates are found without a copy
    shutil.copytree(REPO / "descriptions/analytics/specs", root / "descriptions/analytics/specs")
    wanted = set(SORT_CASES + CONTROL_CASES)
    lines = [line for line in (REPO / "datasets/analytics/cases.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip() and json.loads(line)["id"] in wanted]
    (root / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "pyproject.toml").write_text(GATE, encoding="utf-8")
    (root / "datasets").mkdir()  # with descriptions/: bench's project-root marker
    monkeypatch.setenv("BENCH_HOME", str(root))
    monkeypatch.setenv("BENCH_CACHE_DIR", str(REPO / "reports/.cache"))  # shop DB, reused
    monkeypatch.delenv("BENCH_ANALYTICS_SORT_ORDER", raising=False)
    _record_fixture_answers(root, str)
    return root


@pytest.mark.slow
def test_sort_order_drift_fails_the_gate_and_a_fixed_description_passes(
        project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Baseline on ASC/DESC; backend goes asc/desc: execution_success fails naming the sort
    cases; description (and labels) moved to asc/desc: the gate passes again."""
    update = _baseline_update()
    assert update.exit_code == 0, update.output
    baseline = json.loads((project / "gate/baseline.json").read_text(encoding="utf-8"))
    bits = baseline["outcomes"]["l10/replay:answers.sqlite"]
    assert {c: b["execution_success"] for c, b in bits.items()} == \
        {f"{c}#0": 1 for c in SORT_CASES + CONTROL_CASES}

    before = pytester.runpytest("-p", "bench.gate.plugin", "pyproject.toml",
                                "--junitxml=before.xml")
    before.assert_outcomes(passed=1)

    monkeypatch.setenv("BENCH_ANALYTICS_SORT_ORDER", "asc,desc")  # the backend drifts
    drifted = pytester.runpytest("-p", "bench.gate.plugin", "pyproject.toml",
                                 "--junitxml=drifted.xml")
    drifted.assert_outcomes(failed=1)
    text = drifted.stdout.str()
    assert "execution_success on variant l10, provider replay:answers.sqlite: FAIL" in text
    assert "below the floor 50.0%" in text
    assert "significantly worse than the baseline (-80.0 points" in text
    assert "lost 8, gained 0" in text
    shown = [c for c in SORT_CASES if f"{c} (trial 0)" in text]
    assert len(shown) == 5  # flips_shown default
    assert not any(f"{c} (trial 0)" in text for c in CONTROL_CASES)
    assert '"sort_order": "DESC"' in text  # the answer
    assert "executor: query_metrics: validation/invalid_sort_order" in text  # the backend
    junit = (project / "drifted.xml").read_text(encoding="utf-8")
    assert 'name="execution_success[l10|replay:answers.sqlite]"' in junit
    assert '<property name="verdict" value="fail"' in junit
    assert '<property name="baseline_rate" value="1.0000"' in junit

    _set_sort_values(project, "asc", "desc")  # the description follows the backend
    _record_fixture_answers(project, str)  # answers to the new description (lower-case)
    fixed = pytester.runpytest("-p", "bench.gate.plugin", "pyproject.toml", "-rP")
    fixed.assert_outcomes(passed=1)
    fixed.stdout.fnmatch_lines(["*the description of l10 changed since the baseline*"])


@pytest.mark.slow
def test_improvement_passes_and_says_the_baseline_can_be_updated(
        project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline recorded on the drifted backend, then the backend is fixed: the gate passes
    and its note says that the baseline can be updated."""
    monkeypatch.setenv("BENCH_ANALYTICS_SORT_ORDER", "asc,desc")
    assert _baseline_update().exit_code == 0
    monkeypatch.delenv("BENCH_ANALYTICS_SORT_ORDER")
    result = pytester.runpytest("-p", "bench.gate.plugin", "pyproject.toml", "-rP")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*significantly better than the baseline: update it with "
                                 "`bench baseline update`*"])


@pytest.mark.slow
def test_replay_miss_names_the_case_and_how_to_record_it(project: Path,
                                                         pytester: pytest.Pytester) -> None:
    """A case without a recorded answer fails the item with the case id and the command."""
    extra = json.loads((REPO / "datasets/analytics/cases.jsonl").read_text(
        encoding="utf-8").splitlines()[9])
    with (project / "cases.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(extra, ensure_ascii=False) + "\n")
    result = pytester.runpytest("-p", "bench.gate.plugin", "pyproject.toml")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert f"no recorded answer for 1 item of variant 'l10' (cases {extra['id']};" in text
    assert f"--cases {extra['id']}" in text and "--cache write --cache-path " in text
    assert "Traceback" not in text


@pytest.mark.slow
def test_fixtures_give_results_and_comparison_for_custom_assertions(
        project: Path, pytester: pytest.Pytester) -> None:
    """bench_results is the results frame; bench_compare compares with the baseline."""
    assert _baseline_update().exit_code == 0
    pytester.makepyfile(test_custom="""
        def test_custom(bench_results, bench_compare):
            assert len(bench_results) == 10
            assert set(bench_results["variant"]) == {"l10"}
            assert bench_results["execution_success"].all()
            comparison = bench_compare(metrics=["execution_success"])
            assert [t.verdict for t in comparison.tests] == ["no significant difference"]
            assert comparison.tests[0].n == 10
    """)
    result = pytester.runpytest("-p", "bench.gate.plugin", "test_custom.py")
    result.assert_outcomes(passed=1)


def test_plugin_is_inert_without_a_gate_table(pytester: pytest.Pytester) -> None:
    """A project whose pyproject.toml has no [tool.bench.gate] collects only its own tests,
    and the fixtures skip."""
    pytester.makepyprojecttoml("[tool.other]\nx = 1\n")
    pytester.makepyfile(test_plain="""
        def test_plain():
            assert True

        def test_fixture(bench_results):
            raise AssertionError("not reached")
    """)
    result = pytester.runpytest("-p", "bench.gate.plugin", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*no ?tool.bench.gate? in*"])


def test_bad_gate_table_is_a_one_line_collection_error(pytester: pytest.Pytester) -> None:
    """An unknown metric in floors names the file and the field, without a traceback."""
    pytester.makepyprojecttoml('[tool.bench.gate]\ndataset = "x"\nvariants = ["l10"]\n'
                               'floors = {selection = 0.5}\n')
    result = pytester.runpytest("-p", "bench.gate.plugin", "pyproject.toml")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*pyproject.toml: field 'tool.bench.gate.floors'*unknown metric "
                                 "'selection'*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_baseline_update_without_a_gate_table_is_a_one_line_error(
        pytester: pytest.Pytester) -> None:
    """``bench baseline update`` on a pyproject without the table: exit 2, one error line."""
    import subprocess
    import sys
    pytester.makepyprojecttoml("[tool.other]\nx = 1\n")
    result = subprocess.run([sys.executable, "-m", "bench", "baseline", "update"],
                            cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pyproject.toml" in lines[0] \
        and "no [tool.bench.gate] table" in lines[0], result.stderr
