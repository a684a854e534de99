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
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Imported here so that pytester's in-process runs find them loaded: it removes modules
# first imported inside a run, and pyarrow / numpy refuse to be imported twice per process.
import datasets  # noqa: F401
import numpy.fft  # noqa: F401 - scipy.stats imports it during the gate's comparison
import pytest
import scipy.optimize  # noqa: F401
import scipy.stats  # noqa: F401
import yaml
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

REPO = Path(__file__).resolve().parents[2]
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
    # replayed answers are deterministic: the per-case rule fails too and lists every flip
    assert "8 cases right in the baseline are wrong now with deterministic answers" in text
    shown = [c for c in SORT_CASES if f"{c} (trial 0) execution_success: expected " in text]
    assert shown == SORT_CASES
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
    pytester.makepyprojecttoml("[tool.other]\nx = 1\n")
    result = subprocess.run([sys.executable, "-m", "bench", "baseline", "update"],
                            cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pyproject.toml" in lines[0] \
        and "no [tool.bench.gate] table" in lines[0], result.stderr


# -- the per-case rule, the gate's power and the floors of the first baseline ----------------
# A project made by `bench init --python` from two time tools worded after the reference MCP
# time server; 8 cases ask the time in 8 cities. The "model" is a deterministic function
# provider: while the timezone parameter's description says "IANA timezone name (e.g. ...)",
# it sends the IANA name for the 4 cities it knows (arguments 4/8), else the city's name
# (0/8 once the hint is stripped). Its answers are recorded into the gate's cache by a real
# `bench run --cache write` and replayed by the gate's `replay:` provider, as README step 4
# of a new project says.

TIME_TOOLS = REPO / "tests/data/own_tools/time_tools.py"
TZ_CITIES = [("Tokyo", "Asia/Tokyo"), ("Warsaw", "Europe/Warsaw"), ("Lima", "America/Lima"),
             ("Cairo", "Africa/Cairo"), ("Oslo", "Europe/Oslo"), ("Denver", "America/Denver"),
             ("Nairobi", "Africa/Nairobi"), ("Auckland", "Pacific/Auckland")]
TZ_KNOWN = 4  # the first 4 cities: named right while the description gives the hint
TZ_MODEL = '''
import json

KNOWN = {known!r}


def answer(messages, tools, trial):
    city = messages[-1].content.rsplit(" in ", 1)[1].rstrip("?")
    tool = next(t for t in tools if t.name == "get_current_time")
    hinted = "IANA" in tool.description + json.dumps(tool.input_schema)
    zone = KNOWN.get(city, city) if hinted else city
    return [{{"name": "get_current_time", "arguments": {{"timezone": zone}}}}]
'''


def _bench_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGS`` in the project ``root`` (this checkout's code)."""
    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(root)])}
    env.pop("BENCH_HOME", None)
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


def _pytest_gate(root: Path) -> subprocess.CompletedProcess[str]:
    """The gate as a user runs it: ``pytest -p bench.gate.plugin pyproject.toml`` in
    ``root``, in a process of its own."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    env.pop("BENCH_HOME", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "bench.gate.plugin",
                           "-p", "no:cacheprovider", "pyproject.toml"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


def _record(root: Path) -> None:
    """Record the function provider's answers to the current description into the cache."""
    done = _bench_in(root, "run", "--dataset", "tz", "--variants", "current", "--split", "all",
                     "--provider", "function:tz_model:answer", "--cache", "write",
                     "--cache-path", "gate/responses.sqlite")
    assert done.returncode == 0, done.stderr


def _set_gate(root: Path, old: str, new: str) -> None:
    path = root / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text, text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _drop_floors(root: Path) -> None:
    """Comment out the gate's floors line, if any (the rules below it decide alone)."""
    path = root / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("\nfloors = {", "\n# floors = {"), encoding="utf-8")


@pytest.fixture(scope="module")
def tz_baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The time project after `bench init`, 8 cases, recorded answers and the first
    `bench baseline update`: (root, pyproject text before the update, the update's stdout)."""
    base = tmp_path_factory.mktemp("tz")
    made = _bench_in(base, "init", "tz", "--python", str(TIME_TOOLS),
                     "--read-only", "get_current_time,convert_time")
    assert made.returncode == 0, made.stderr
    root = base / "tz"
    cases = [{"id": f"tz-{i:04d}", "toolset": "tz", "lang": "en",
              "messages": [{"role": "user", "content": f"What time is it in {city}?"}],
              "expected": {"calls": [{"name": "get_current_time",
                                      "arguments": {"timezone": [zone]}}]}}
             for i, (city, zone) in enumerate(TZ_CITIES, 1)]
    (root / "datasets/tz/cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    (root / "tz_model.py").write_text(
        TZ_MODEL.format(known=dict(TZ_CITIES[:TZ_KNOWN])), encoding="utf-8")
    _record(root)
    before = (root / "pyproject.toml").read_text(encoding="utf-8")
    update = _bench_in(root, "baseline", "update")
    assert update.returncode == 0, update.stderr
    return root, before, update.stdout


@pytest.fixture(scope="module")
def tz_regressed(tz_baseline: tuple[Path, str, str],
                 tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project whose timezone description lost its hint, answers recorded
    again for it (what the gate's replay miss tells a user to do)."""
    root = tmp_path_factory.mktemp("tz-regressed") / "tz"
    shutil.copytree(tz_baseline[0], root)
    variant = root / "descriptions/tz/variants/current.yaml"
    data = yaml.safe_load(variant.read_text(encoding="utf-8"))
    hinted = 0
    for tool in data["tools"]:
        for prop in tool["input_schema"]["properties"].values():
            if "IANA" in prop.get("description", ""):
                prop["description"] = "The timezone."
                hinted += 1
    assert hinted == 3  # timezone, source_timezone, target_timezone
    stripped = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    variant.write_text(stripped, encoding="utf-8")
    _record(root)
    return root


def _copy(root: Path, tmp_path: Path) -> Path:
    shutil.copytree(root, tmp_path / "tz")
    return tmp_path / "tz"


@pytest.mark.slow
def test_first_baseline_update_writes_floors_keeping_the_pyproject_as_it_was(
        tz_baseline: tuple[Path, str, str]) -> None:
    """`bench init`'s gate has no floors; the first `bench baseline update` adds one line,
    floors at the lower end of each rate's 99% Wilson interval rounded down to a percent,
    and leaves every other byte of pyproject.toml as it was; a second update keeps them."""
    import math

    from bench.gate.config import load_gate_config
    from bench.stats.intervals import wilson_interval

    root, before, output = tz_baseline
    assert "floors =" not in before.split("[tool.bench.gate]")[1].split("# floors")[0]
    after = (root / "pyproject.toml").read_text(encoding="utf-8")
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert len(added) == 1 and added[0].startswith("floors = {"), added
    assert after.replace(added[0] + "\n", "", 1) == before
    expected = {"selection_correct": math.floor(100 * wilson_interval(8, 8, 0.99)[0]) / 100,
                "arguments_correct": math.floor(100 * wilson_interval(4, 8, 0.99)[0]) / 100}
    assert expected == {"selection_correct": 0.54, "arguments_correct": 0.16}
    assert load_gate_config(root / "pyproject.toml").floors == expected
    assert "floors written to [tool.bench.gate] of pyproject.toml: selection_correct = 0.54, " \
        "arguments_correct = 0.16" in output
    again = _bench_in(root, "baseline", "update")
    assert again.returncode == 0, again.stderr
    assert "floors written" not in again.stdout
    assert (root / "pyproject.toml").read_text(encoding="utf-8") == after


@pytest.mark.slow
def test_a_4_of_8_argument_regression_with_deterministic_answers_fails_the_gate(
        tz_regressed: Path, tmp_path: Path) -> None:
    """Arguments 4/8 -> 0/8 after the timezone hint is stripped: McNemar p = 0.125 cannot
    see it, the per-case rule does; the failure names each flipped case with what it
    expected and what the model sent, one line each, and the summary prints the power."""
    from bench.compare.paired import minimum_detectable_difference

    root = _copy(tz_regressed, tmp_path)
    _drop_floors(root)  # the per-case rule on its own
    result = _pytest_gate(root)
    text = result.stdout
    assert result.returncode == 1, text
    assert "1 failed, 1 passed" in text
    provider = "replay:gate/responses.sqlite"
    assert f"arguments_correct on variant current, provider {provider}: FAIL" in text
    assert "McNemar exact p=0.125" in text and "lost 4, gained 0" in text
    assert "FAIL: 4 cases right in the baseline are wrong now with deterministic answers " \
        "(per-case rule;" in text
    for city, zone in TZ_CITIES[:TZ_KNOWN]:
        case = f"tz-{TZ_CITIES.index((city, zone)) + 1:04d}"
        assert (f'{case} (trial 0) arguments_correct: expected get_current_time(timezone='
                f'"{zone}"); the model: get_current_time({{"timezone": "{city}"}})') in text
    assert "significantly worse" not in text and "below the floor" not in text
    mdd = minimum_detectable_difference(8, 4 / 8, 0.05 / 2, 0.8)
    power = (f"the paired test detects a drop of {100 * mdd:.0f} points or more (8 pairs, "
             f"80% power, alpha 0.025 = 0.05 / 2 tests (Holm))")
    assert f"bench gate power: {root / 'pyproject.toml'}" in text
    assert f"arguments_correct[current|{provider}]: {power}; per-case rule on (replay " \
        "answers are deterministic" in text
    assert "WARNING" not in text  # the per-case rule covers what the test cannot see


@pytest.mark.slow
def test_with_the_per_case_rule_off_the_same_regression_passes_and_the_summary_warns(
        tz_regressed: Path, tmp_path: Path) -> None:
    """fail_on_flips = false and no floors: the paired test alone passes the 4/8 -> 0/8 drop
    (what a user saw before the rule), and the summary warns that 8 pairs cannot see it."""
    root = _copy(tz_regressed, tmp_path)
    _drop_floors(root)
    _set_gate(root, "margin = 0.0", "fail_on_flips = false\nmargin = 0.0")
    result = _pytest_gate(root)
    text = result.stdout
    assert result.returncode == 0, text
    assert "2 passed" in text
    assert "per-case rule off (fail_on_flips = false)" in text
    assert "WARNING: at 8 pairs the paired test detects only drops of 90 points or more with " \
        "80% power, while this gate is meant to catch any drop (margin 0): a smaller real " \
        "regression can pass unnoticed" in text

    # with the floors back: the warning measures against the floor's distance
    _set_gate(root, "\n# floors = {", "\nfloors = {")
    floored = _pytest_gate(root).stdout
    assert "arguments_correct[current|replay:gate/responses.sqlite]: the paired test detects " \
        "a drop of 90 points or more" in floored
    assert "WARNING: at 8 pairs the paired test detects only drops of 90 points or more with " \
        "80% power, more than the 34.0 points from the baseline down to the floor 16.0%: a " \
        "smaller drop, one the floor does not catch, can pass unnoticed; detecting 34.0 " \
        "points takes about 42 pairs" in floored


@pytest.mark.slow
def test_allowed_flips_pass_and_the_floor_still_catches_the_drop(
        tz_regressed: Path, tmp_path: Path) -> None:
    """allow_flips with the 4 flipped cases: the per-case rule lets them through (noted);
    the floor written by the first baseline (16%) still fails 0/8."""
    root = _copy(tz_regressed, tmp_path)
    allowed = ", ".join(f'"tz-{i:04d}"' for i in range(1, TZ_KNOWN + 1))
    _set_gate(root, "margin = 0.0", f"allow_flips = [{allowed}]\nmargin = 0.0")
    result = _pytest_gate(root)
    text = result.stdout
    assert result.returncode == 1, text
    assert "FAIL: 0.0% is below the floor 16.0%" in text
    assert "per-case rule" not in text.split("FAIL:")[-1].split("\n")[0]
    assert "note: flipped but in allow_flips: tz-0001, tz-0002, tz-0003, tz-0004" in text

    _drop_floors(root)
    passed = _pytest_gate(root)
    assert passed.returncode == 0, passed.stdout
    assert "2 passed" in passed.stdout


@pytest.mark.slow
def test_sampled_answers_keep_the_paired_test_and_say_the_per_case_rule_is_off(
        tz_regressed: Path) -> None:
    """The same rows and baseline under a hosted API's provider id (answers sampled): the
    per-case rule does not apply and says why; the paired test alone passes the drop at
    p = 0.125 and the verdict carries the power warning."""
    from bench.gate.config import load_gate_config
    from bench.gate.baseline import load_baseline
    from bench.gate.core import evaluate
    from bench.gate.run import run_gate

    config = load_gate_config(tz_regressed / "pyproject.toml")
    config = config.model_copy(update={"floors": {}})
    run = run_gate(config)
    hosted = "openai:gpt-4o-mini"
    rows = [r.model_copy(update={"provider": hosted, "key": r.key.replace(
        "replay:gate/responses.sqlite", hosted)}) for r in run.rows]
    baseline = load_baseline(config.baseline_path)
    baseline["outcomes"] = {g.replace("replay:gate/responses.sqlite", hosted): v
                            for g, v in baseline["outcomes"].items()}
    verdicts = {v.metric: v for v in evaluate(config.model_copy(update={"providers": [hosted]}),
                                              rows, baseline)}
    arguments = verdicts["arguments_correct"]
    assert arguments.passed and (arguments.lost, arguments.p_value) == (4, 0.125)
    assert not arguments.per_case
    assert arguments.per_case_why.startswith("openai answers are sampled: the same request "
                                             "can get another answer")
    assert arguments.warning is not None and "at 8 pairs" in arguments.warning
    assert "per-case  off: openai answers are sampled" in arguments.message()


def test_floors_are_added_after_the_gate_tables_last_key_and_nothing_else_moves(
        tmp_path: Path) -> None:
    """write_floors inserts one line after the gate table's last key (a multi-line array),
    before the blank line and the comment that lead to the next table; every other byte is
    kept. A gate written as an inline table gets the key inside it."""
    from bench.gate.config import load_gate_config, write_floors

    original = ('# team project\n[project]\nname = "x"   # keep this\n\n'
                '[tool.bench.gate]\ndataset = "tz"  # the cases\nvariants = ["current"]\n'
                'cases = ["tz-0001",\n         "tz-0002"]\n\n'
                '# the linter, next\n[tool.ruff]\nline-length = 100\n')
    path = tmp_path / "pyproject.toml"
    path.write_text(original, encoding="utf-8")
    write_floors(path, {"selection_correct": 0.54, "arguments_correct": 0.16}, "from x")
    line = "floors = {selection_correct = 0.54, arguments_correct = 0.16}  # from x\n"
    assert path.read_text(encoding="utf-8") == original.replace(
        '"tz-0002"]\n', '"tz-0002"]\n' + line)
    assert load_gate_config(path).floors == {"selection_correct": 0.54,
                                             "arguments_correct": 0.16}

    inline = tmp_path / "inline.toml"
    inline.write_text('[tool.bench]\ngate = {dataset = "tz", variants = ["current"]}\n',
                      encoding="utf-8")
    write_floors(inline, {"selection_correct": 0.5}, "from x")
    assert load_gate_config(inline).floors == {"selection_correct": 0.5}


def test_floors_keep_a_crlf_pyproject_crlf_and_its_mode_and_spare_a_read_only_one(
        tmp_path: Path) -> None:
    """A pyproject.toml written on Windows keeps its CRLF line ends (the new line too), a
    0600 file stays 0600, and a read-only file is not written: one line with the floors to
    add by hand."""
    import os

    from bench.errors import BenchError
    from bench.gate.config import load_gate_config, write_floors

    original = ('[project]\r\nname = "x"\r\n\r\n[tool.bench.gate]\r\ndataset = "tz"\r\n'
                'variants = ["current"]  # c\r\n\r\n# next\r\n[tool.ruff]\r\nline-length = 100\r\n')
    path = tmp_path / "pyproject.toml"
    path.write_bytes(original.encode("utf-8"))
    os.chmod(path, 0o600)
    write_floors(path, {"selection_correct": 0.5}, "from x")
    assert path.read_bytes() == original.replace(
        '# c\r\n', '# c\r\nfloors = {selection_correct = 0.5}  # from x\r\n').encode("utf-8")
    assert path.stat().st_mode & 0o7777 == 0o600
    assert load_gate_config(path).floors == {"selection_correct": 0.5}

    locked = tmp_path / "locked.toml"
    gate = '[tool.bench.gate]\ndataset = "tz"\nvariants = ["v"]\n'
    locked.write_text(gate, encoding="utf-8")
    os.chmod(locked, 0o444)
    with pytest.raises(BenchError, match=r"read-only: add the floors by hand: floors = "
                                         r"\{selection_correct = 0\.5\}"):
        write_floors(locked, {"selection_correct": 0.5}, "from x")
    assert locked.read_text(encoding="utf-8") == gate


@pytest.mark.parametrize("provider, applies", [
    ("local", True), ("oracle", True), ("function:tz_model:answer", True),
    ("replay:gate/responses.sqlite", True), ("openai:gpt-4o-mini", False),
    ("anthropic:claude-haiku-4-5", False), ("gemini:gemini-2.5-flash", False)])
def test_the_per_case_rule_applies_to_deterministic_providers_only(provider: str,
                                                                   applies: bool) -> None:
    """Greedy local decoding, the oracle, functions and replayed answers get the per-case
    rule; hosted APIs (sampled even at temperature 0) do not, and the reason says so;
    fail_on_flips = false turns it off for all."""
    from bench.gate.config import GateConfig
    from bench.gate.core import per_case_rule

    config = GateConfig(dataset="tz", variants=["current"], providers=[provider])
    on, why = per_case_rule(config, provider, has_baseline=True)
    assert on is applies
    assert ("deterministic" in why) if applies else ("answers are sampled" in why)
    off, why = per_case_rule(config.model_copy(update={"fail_on_flips": False}), provider, True)
    assert not off


def _gate_rows(root: Path) -> list[dict]:
    """The rows of the newest gate run in ``root``'s reports/runs."""
    runs = sorted((root / "reports/runs").glob("gate-*"), key=lambda p: p.stat().st_mtime)
    return [json.loads(line) for line in
            (runs[-1] / "results.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_a_gate_of_selection_and_arguments_never_calls_the_users_tools(
        tz_baseline: tuple[Path, str, str], tmp_path: Path) -> None:
    """The gate executes the replayed answers only when it gates an execution metric (or
    ``execute = true`` says so): a selection-and-arguments gate needs no server in CI and
    runs no write there."""
    root = _copy(tz_baseline[0], tmp_path)
    result = _pytest_gate(root)
    assert result.returncode == 0, result.stdout
    rows = _gate_rows(root)
    assert len(rows) == 8
    assert all(r["metrics"].get("execution_success") is None for r in rows)  # nothing ran
    _set_gate(root, "[tool.bench.gate]\n", "[tool.bench.gate]\nexecute = true\n")
    result = _pytest_gate(root)
    assert result.returncode == 0, result.stdout
    ran = [r["metrics"].get("execution_success") for r in _gate_rows(root)]
    assert ran.count(True) >= 4, ran  # the hinted zones ran on the user's module


# -- execute: a gate of answer metrics never needs the user's MCP server -----------------------
# A project made by `bench init --mcp` from tests/mcp_exec_server.py; two cases, answers of a
# deterministic function recorded into the gate's cache and replayed; the baseline written.
# Then the server's command is made one that does not exist (a CI machine without it).

MCP_CASES = [
    {"id": "m1", "toolset": "calc", "lang": "en",
     "messages": [{"role": "user", "content": "add 2 and 40"}],
     "expected": {"calls": [{"name": "add", "arguments": {"a": [2], "b": [40]}}]}},
    {"id": "m2", "toolset": "calc", "lang": "en",
     "messages": [{"role": "user", "content": "where is beijing"}],
     "expected": {"calls": [{"name": "lookup_city", "arguments": {"city": ["beijing"]}}]}}]
MCP_MODEL = '''
def answer(messages, tools, trial):
    if "add" in messages[-1].content:
        return [{"name": "add", "arguments": {"a": 2, "b": 40}}]
    return [{"name": "lookup_city", "arguments": {"city": "beijing"}}]
'''
MISSING_SERVER = "no-such-mcp-server-for-the-gate"


@pytest.fixture(scope="module")
def mcp_gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The calc project with its baseline, its server command pointing nowhere."""
    root = tmp_path_factory.mktemp("mcp-gate") / "calc"
    root.mkdir()
    shutil.copy(REPO / "tests/mcp_exec_server.py", root / "server.py")
    made = _bench_in(root, "init", ".", "--mcp", f"{sys.executable} server.py", "--name",
                     "calc")
    assert made.returncode == 0, made.stderr
    (root / "datasets/calc/cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in MCP_CASES), encoding="utf-8")
    (root / "calc_model.py").write_text(MCP_MODEL, encoding="utf-8")
    recorded = _bench_in(root, "run", "--dataset", "calc", "--variants", "current", "--split",
                         "all", "--provider", "function:calc_model:answer", "--cache", "write",
                         "--cache-path", "gate/responses.sqlite")
    assert recorded.returncode == 0, recorded.stderr
    update = _bench_in(root, "baseline", "update")
    assert update.returncode == 0, update.stderr
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    server = f'server = ["{sys.executable}", "server.py"]'
    assert server in text, text
    (root / "pyproject.toml").write_text(
        text.replace(server, f'server = ["{MISSING_SERVER}", "server.py"]'), encoding="utf-8")
    return root


@pytest.mark.slow
def test_a_replayed_gate_of_answer_metrics_passes_without_the_mcp_server(
        mcp_gate: Path, tmp_path: Path) -> None:
    """Selection and arguments are scored from the replayed answer: the gate passes on a
    machine where the toolset's server command does not exist, and never starts it."""
    root = _copy(mcp_gate, tmp_path)
    shutil.rmtree(root / "reports/runs")  # the recording's and the baseline's runs
    result = _pytest_gate(root)
    assert result.returncode == 0, result.stdout
    assert "2 passed" in result.stdout and "FileNotFoundError" not in result.stdout
    [run] = (root / "reports/runs").glob("gate-*")
    assert not (run / "mcp-server-calc.log").exists()  # the server was never started
    rows = _gate_rows(root)
    assert len(rows) == 2 and all(r["metrics"]["arguments_correct"] for r in rows)
    assert all(r["metrics"].get("execution_success") is None for r in rows)


@pytest.mark.slow
def test_a_gate_of_an_execution_metric_names_the_toolset_whose_server_is_missing(
        mcp_gate: Path, tmp_path: Path) -> None:
    """execution_success needs the calls run: with the server missing the test fails in one
    line naming the toolset, the command and the setting, not FileNotFoundError."""
    root = _copy(mcp_gate, tmp_path)
    _set_gate(root, 'metrics = ["selection_correct", "arguments_correct"]',
              'metrics = ["execution_success"]')
    _drop_floors(root)
    result = _pytest_gate(root)
    assert result.returncode == 1, result.stdout
    failure = result.stdout.split("bench gate: execution_success[current|replay:gate/"
                                  "responses.sqlite]")[1].split("short test summary")[0]
    [line] = [x for x in failure.splitlines() if x.strip() and not set(x) <= set("_= ")]
    assert line == (
        f"{root / 'pyproject.toml'}: field 'tool.bench.toolsets.calc.server': the gate "
        "executes the answers' calls (it gates execution_success) and toolset 'calc' cannot "
        f"start its MCP server `{MISSING_SERVER} server.py`: the program '{MISSING_SERVER}' is "
        "not found (not installed where the gate runs, or not on PATH); install it where the "
        "gate runs or fix the setting, or gate only metrics scored from the answer "
        "(selection, arguments), which execute nothing")
    assert "Traceback" not in result.stdout


@pytest.mark.slow
def test_a_gate_without_a_baseline_or_a_floor_fails_saying_how_to_write_them(
        mcp_gate: Path, tmp_path: Path) -> None:
    """A CI gate whose baseline was never written (or not committed) and that has no floor
    could not fail on any drop: it fails, naming the file and `bench baseline update`; with
    a floor and no baseline, the floor decides and it passes."""
    root = _copy(mcp_gate, tmp_path)
    (root / "gate/baseline.json").unlink()
    floors = next(x for x in (root / "pyproject.toml").read_text(encoding="utf-8")
                  .splitlines() if x.startswith("floors = {"))
    _drop_floors(root)
    result = _pytest_gate(root)
    assert result.returncode == 1, result.stdout
    assert "2 failed" in result.stdout
    assert (f"FAIL: no baseline ({(root / 'gate/baseline.json').resolve()} does not exist) "
            "and no floor: nothing to compare with, so no drop could fail this metric; write "
            "both with: bench baseline update (then commit the baseline)") in result.stdout
    _set_gate(root, "\n# " + floors, "\n" + floors)
    floored = _pytest_gate(root)
    assert floored.returncode == 0, floored.stdout


@pytest.mark.slow
def test_a_gated_metric_the_baseline_does_not_hold_fails_without_a_floor(
        tz_baseline: tuple[Path, str, str], tmp_path: Path) -> None:
    """execution_success added to the gate's metrics after the baseline was written (it
    holds selection and arguments) and no floor for it: the gate could not fail it on any
    drop, so that test fails, saying how to write it; selection_correct still passes."""
    root = _copy(tz_baseline[0], tmp_path)
    _set_gate(root, 'metrics = ["selection_correct", "arguments_correct"]',
              'metrics = ["selection_correct", "execution_success"]')
    assert "execution_success" not in json.loads(
        (root / "gate/baseline.json").read_text(encoding="utf-8"))["metrics"]
    result = _pytest_gate(root)
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed" in result.stdout
    assert (f"FAIL: the baseline {(root / 'gate/baseline.json').resolve()} does not hold "
            "execution_success (written before it was gated) and no floor: nothing to "
            "compare with, so no drop could fail this metric; write both with: bench "
            "baseline update (then commit the baseline)") in " ".join(result.stdout.split())


@pytest.mark.slow
def test_an_episode_gate_runs_its_episodes_whatever_its_metrics(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate of episodes gating an answer-only metric left execution off, and the run
    refused the episodes with 'drop --no-execute' (a flag the gate has not): the episodes
    run, and the metric they lack is named with the one they have; execute = false is
    refused in one line naming the gate's field."""
    from bench.errors import BenchError
    from bench.gate.config import GateConfig
    from bench.gate.core import evaluate
    from bench.gate.run import run_gate
    from bench.providers.function import register_function
    from tests.episodes.test_episodes import agent, episode

    root = tmp_path / "project"
    shutil.copytree(REPO / "datasets", root / "datasets")
    shutil.copytree(REPO / "descriptions", root / "descriptions")
    monkeypatch.setenv("BENCH_HOME", str(root))
    (root / "episodes.jsonl").write_text(
        "".join(json.dumps(episode(id=f"ep-{i}")) + "\n" for i in range(2)), encoding="utf-8")
    register_function("careful-episode-gate", agent)
    config = GateConfig(dataset="episodes.jsonl", variants=["l3"],
                        providers=["function:careful-episode-gate"],
                        metrics=["selection_correct"], floors={"selection_correct": 0.5},
                        root=root, source=root / "pyproject.toml")
    assert not config.executes  # from the metrics alone
    run = run_gate(config)
    assert run.frame["task_success"].all()  # the episodes ran on the executor
    [verdict] = evaluate(config, run.rows, None)
    assert verdict.reasons == ["no row carries selection_correct (the cases are episodes: "
                               "gate their task_success)"]
    with pytest.raises(BenchError) as refused:
        run_gate(config.model_copy(update={"execute": False}))
    assert str(refused.value) == (
        f"{root / 'pyproject.toml'}: field 'tool.bench.gate.execute': the dataset holds "
        "episodes, which run their calls on the executor: remove execute = false")


def test_a_gate_whose_every_provider_is_skipped_fails_naming_each_and_leaves_no_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate runs through the one run lifecycle (bench.runner.lifecycle): a provider
    that cannot run here (no API key) is named with why, and nothing is sent or kept.
    Before, the gate's run ended "partial" with an empty run folder left behind."""
    from bench.errors import BenchError
    from bench.gate.config import GateConfig
    from bench.gate.run import run_gate

    repo = Path(__file__).resolve().parents[2]
    root = tmp_path / "project"
    shutil.copytree(repo / "datasets", root / "datasets")
    shutil.copytree(repo / "descriptions", root / "descriptions")
    monkeypatch.setenv("BENCH_HOME", str(root))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = GateConfig(dataset="ecommerce", variants=["l3"],
                        providers=["openai:gpt-4o-mini"], limit=2,
                        root=root, source=root / "pyproject.toml")
    with pytest.raises(BenchError, match=r"every provider was skipped \(openai:gpt-4o-mini: "
                                         r".*OPENAI_API_KEY"):
        run_gate(config, run_id="gate-nokey")
    assert not (root / "reports" / "runs" / "gate-nokey").exists()


def test_a_gate_run_left_partial_by_a_skipped_provider_names_it_and_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With providers oracle and openai:gpt-4o-mini and no OPENAI_API_KEY, the oracle's rows
    ran and the gate failed with "ended with status partial: see its manifest". It names
    the skipped provider and why now."""
    from bench.errors import BenchError
    from bench.gate.config import GateConfig
    from bench.gate.run import run_gate

    repo = Path(__file__).resolve().parents[2]
    root = tmp_path / "project"
    shutil.copytree(repo / "datasets", root / "datasets")
    shutil.copytree(repo / "descriptions", root / "descriptions")
    monkeypatch.setenv("BENCH_HOME", str(root))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = GateConfig(dataset="ecommerce", variants=["l3"],
                        providers=["oracle", "openai:gpt-4o-mini"], limit=2,
                        root=root, source=root / "pyproject.toml")
    with pytest.raises(BenchError) as partial:
        run_gate(config, run_id="gate-half")
    said = str(partial.value)
    assert "gate run 'gate-half' ended with status partial: provider skipped: " \
        "openai:gpt-4o-mini (" in said and "OPENAI_API_KEY" in said, said
    assert "see its manifest" not in said
