"""``bench synth`` and ``bench review`` (docs/synth.md), offline: a scripted generator and two
scripted solvers (``function:`` providers, tests/data/synth/synth_script.py) on the shipped
``ecommerce`` toolset, and one end-to-end run through the embedded model."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

from bench.datasets import load_dataset
from bench.datasets.splits import assign_splits
from bench.errors import BenchError
from bench.models import Case
from bench.project import Project
from bench.providers.function import register_function
from bench.synth.candidates import REASONS, SynthSettings
from bench.synth.checks import near_duplicate, query_tokens
from bench.synth.core import synthesize
from bench.synth.prompts import BUILTIN
from bench.synth.apply import apply_decisions
from bench.synth.review import Decisions, load_decisions, read_counts, render_html, template
from conftest import requires_local_model
from tests.importers.test_own_tools import bench, error_lines, python_project

SCRIPT = Path(__file__).parents[1] / "data" / "synth" / "synth_script.py"


def _script():
    spec = importlib.util.spec_from_file_location("synth_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def scripted(project):
    """The scripted generator and solvers registered as function:synth-gen, -a, -b."""
    module = _script()
    register_function("synth-gen", module.generator)
    register_function("synth-a", module.solver_a)
    register_function("synth-b", module.solver_b)
    return module


def _settings(**changes) -> SynthSettings:
    base = dict(toolset="ecommerce", generator="function:synth-gen",
                solvers=("function:synth-a", "function:synth-b"), dataset="ecommerce-synth",
                count=3)
    return SynthSettings(**{**base, **changes})


@pytest.mark.slow
def test_scripted_synthesis_counts_each_rejection_reason_and_keeps_provenance(project,
                                                                               scripted):
    report = synthesize(_settings(), Project(project))
    expected = scripted.EXPECTED_REASONS
    assert report.requests == 15 and len(report.candidates) == 15
    # every reason occurs, each candidate ends where the script says
    got = {(c.kind, int(c.request.rsplit("-", 1)[1])): c.reason for c in report.candidates}
    assert got == expected
    counts = report.counts()
    assert counts == {"kept": 5, "format": 2, "language": 1, "kind": 2, "schema": 1,
                      "duplicate": 1, "leak": 1, "execution": 1, "unsolvable": 1}
    assert set(counts) == {"kept", *REASONS}
    why = {c.reason: c.verdicts[c.reason] for c in report.candidates if c.reason}
    assert "'unused' is not one of" in why["schema"]
    assert "near-copy" in why["leak"] and "list_coupons" in why["leak"]
    assert "1 of 2 answers agree" in why["unsolvable"]
    assert "permanent" in why["execution"]

    folder = project / "datasets" / "ecommerce-synth"
    data = json.loads((folder / "synth-report.json").read_text())
    assert data["counts"] == counts and data["by_kind"]["parallel"]["duplicate"] == 1
    assert data["skipped_checks"] == {"execution: no call to run": 3}
    assert "| unsolvable | 0 | 0 | 0 | 1 | 0 | 1 |" in (folder / "synth-report.md").read_text()

    # kept cases load with the existing loader, all dev, each with its provenance
    dataset = load_dataset(str(folder / "cases.jsonl"))
    assert len(dataset.cases) == 5 and {c.split for c in dataset.cases} == {"dev"}
    runs = project / "reports" / "runs"
    for case in dataset.cases:
        p = case.provenance
        assert p is not None and p.review is None
        assert p.generator == "function:synth-gen" and p.seed == 1234
        source = (BUILTIN / p.template).read_bytes()
        assert p.template_sha256 == hashlib.sha256(source).hexdigest()
        assert len(p.prompt_sha256) == 64
        assert (project / "reports" / "synth" / "ecommerce-synth" / "reports" / "runs"
                / str(p.run_id) / "manifest.json").is_file()
        assert list(p.verdicts) == list(REASONS)
        assert all(v == "pass" or v.startswith(("pass: ", "skipped: "))
                   for v in p.verdicts.values())
    assert (runs / str(report.verify_run) / "manifest.json").is_file()
    tags = {c.id: c.tags for c in dataset.cases}
    assert sorted(t[1] for t in tags.values()) == ["ask", "no_call", "parallel",
                                                    "parallel-multiple", "simple"]
    # the ask label names the missing argument; the no-call label is no_call
    ask = next(c for c in dataset.cases if c.expected.ask)
    assert ask.expected.ask_for == [["order id", "order_id"]]
    # optional arguments with a default may be omitted or sent as the default
    weather = next(c for c in dataset.cases if c.query.startswith("What will the weather"))
    assert weather.expected.calls[0].arguments == {"city": ["Chengdu"],
                                                   "unit": ["celsius", None],
                                                   "days": [1, None]}
    readme = (folder / "README.md").read_text()
    assert "| unreviewed (dev only) | 5 |" in readme and "<!-- stats:begin -->" in readme

    # a second run appends nothing already kept: its candidates are near-duplicates
    again = synthesize(_settings(kinds=("single",), count=1), Project(project))
    assert again.counts()["duplicate"] == 1 and again.counts()["kept"] == 0
    assert len(load_dataset(str(folder / "cases.jsonl")).cases) == 5


def test_unreviewed_generated_cases_stay_in_dev():
    row = {"id": "g-1", "toolset": "ecommerce", "lang": "en", "split": "test",
           "messages": [{"role": "user", "content": "hi"}], "expected": {"no_call": True},
           "provenance": {"generator": "local", "template": "no_call.j2",
                          "template_sha256": "0" * 64, "prompt_sha256": "1" * 64,
                          "seed": 1}}
    with pytest.raises(ValueError, match="nobody reviewed"):
        Case.model_validate(row)
    reviewed = {**row, "provenance": {**row["provenance"],
                                      "review": {"decision": "accepted",
                                                 "date": "2026-12-03"}}}
    assert Case.model_validate(reviewed).split == "test"
    # assign_splits never puts an unreviewed one in test, even alone in its stratum
    cases = [Case.model_validate({**row, "id": f"g-{i}", "split": "dev"}) for i in range(5)]
    assert set(assign_splits(cases).values()) == {"dev"}


def test_near_duplicates_mask_ids_and_keep_chinese_after_an_id():
    kept = [("a", query_tokens("订单ORD20261011付款成功了吗？"))]
    assert near_duplicate("订单ORD20261099付款成功了吗？", kept) is not None
    # the leak checker's own mask would swallow the Chinese after the id; ours does not
    assert near_duplicate("订单ORD20261126的收件人改成王芳", kept) is None


def test_bad_settings_are_one_line_errors(project, scripted):
    with pytest.raises(BenchError, match="'fr' is not a case language"):
        synthesize(_settings(languages=("fr",)), Project(project))
    with pytest.raises(BenchError, match="unknown kind 'chat'"):
        synthesize(_settings(kinds=("chat",)), Project(project))
    with pytest.raises(BenchError, match="--min-agree 3: the solvers give 2"):
        synthesize(_settings(min_agree=3), Project(project))
    with pytest.raises(BenchError, match="its trials count once"):
        synthesize(_settings(solvers=("local",), solver_trials=3), Project(project))
    with pytest.raises(BenchError, match="oracle answers from the label"):
        synthesize(_settings(solvers=("oracle", "function:synth-a")), Project(project))


def test_templates_override_the_built_in_ones(project, scripted, tmp_path):
    mine = tmp_path / "templates"
    mine.mkdir()
    # the scripted generator reads the header line; the override keeps it, adds its own text
    (mine / "single.j2").write_text(
        "Request {{ index }}: kind {{ kind }}, language {{ lang }}, tool {{ tool.name }}.\n"
        "My own words about {{ toolset }}.\n")
    report = synthesize(_settings(kinds=("single",), count=1, templates=mine),
                        Project(project))
    case = load_dataset(str(project / "datasets" / "ecommerce-synth" / "cases.jsonl")).cases[0]
    assert report.counts()["kept"] == 1
    assert case.provenance is not None
    assert case.provenance.template_sha256 == hashlib.sha256(
        (mine / "single.j2").read_bytes()).hexdigest()
    (mine / "single.j2").write_text("{% if %}")
    with pytest.raises(BenchError, match="template error") as info:
        synthesize(_settings(kinds=("single",), count=1, templates=mine), Project(project))
    assert "single.j2" in str(info.value)


def test_review_page_escapes_model_text(tmp_path):
    hostile = '</textarea><script>alert(1)</script>"><img src=x onerror=alert(2)>'
    case = Case.model_validate({
        "id": "g-<b>1</b>", "toolset": "ecommerce", "lang": "en", "split": "dev",
        "messages": [{"role": "user", "content": hostile}],
        "expected": {"calls": [{"name": "get_weather", "arguments": {"city": [hostile]}}]},
        "provenance": {"generator": "local", "template": "single.j2",
                       "template_sha256": "0" * 64, "prompt_sha256": "1" * 64, "seed": 1,
                       "verdicts": {"schema": f"fail: {hostile}"}}})
    page = render_html(tmp_path / "cases.jsonl", [case])
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'data-id="g-&lt;b&gt;1&lt;/b&gt;"' in page
    assert page.count("<script>") == 1  # the page's own, which reads the DOM
    assert "Download decisions.json" in page


@pytest.mark.slow
def test_review_flow_end_to_end_on_the_command_line(project, run_bench):
    shutil.copy(SCRIPT, project / "synth_script.py")  # function:<module> imports from the cwd
    made = run_bench("synth", "--toolset", "ecommerce", "--generator",
                     "function:synth_script:generator", "--solver",
                     "function:synth_script:solver_a,function:synth_script:solver_b",
                     "--count", "3", "--dataset", "mine")
    assert made.returncode == 0, made.stderr
    assert "kept 5 in" in made.stdout
    folder = project / "datasets" / "mine"
    decisions_file = project / "decisions.json"
    shown = run_bench("review", "mine", "--decisions-out", str(decisions_file))
    assert shown.returncode == 0, shown.stderr
    assert "Please cancel my order" in shown.stdout
    decisions = json.loads(decisions_file.read_text())
    assert [d["decision"] for d in decisions["decisions"]] == ["pending"] * 5
    page = run_bench("review", "mine", "--html", str(project / "review.html"))
    assert page.returncode == 0 and (project / "review.html").is_file()

    cases = {c.id: c for c in load_dataset(str(folder / "cases.jsonl")).cases}
    parallel = next(i for i, c in cases.items() if "parallel" in c.tags)
    vague = next(i for i, c in cases.items() if c.expected.no_call)
    by_id = {d["id"]: d for d in decisions["decisions"]}
    for case_id, entry in by_id.items():
        entry["decision"] = "accept"
    by_id[parallel].update(decision="fix", expected={"calls": [
        {"name": "get_weather", "arguments": {"city": ["Harbin", "哈尔滨"]}},
        {"name": "get_weather", "arguments": {"city": ["Hangzhou", "杭州"]}}]})
    by_id[vague].update(decision="reject", note="not a real request")
    pending = next(i for i in by_id if i not in (parallel, vague))
    by_id[pending]["decision"] = "pending"
    decisions["reviewer"] = "ana"
    decisions_file.write_text(json.dumps(decisions))
    applied = run_bench("review", "mine", "--apply", str(decisions_file))
    assert applied.returncode == 0, applied.stderr
    assert "applied: accept 2, fix 1, reject 1; 1 pending" in applied.stdout
    assert "audited precision 50.0%" in applied.stdout

    after = {c.id: c for c in load_dataset(str(folder / "cases.jsonl")).cases}
    assert set(after) == set(cases) - {vague}
    assert after[pending].provenance.review is None and after[pending].split == "dev"
    assert after[parallel].provenance.review.decision == "fixed"
    assert after[parallel].expected.calls[0].arguments["city"] == ["Harbin", "哈尔滨"]
    reviewed = [c for c in after.values() if c.provenance.review is not None]
    assert {c.provenance.review.reviewer for c in reviewed} == {"ana"}
    assert any(c.split == "test" for c in reviewed)  # reviewed cases may now be test
    counts = read_counts(folder, list(after.values()))
    assert (counts.accepted, counts.fixed, counts.rejected, counts.unreviewed) == (2, 1, 1, 1)
    readme = (folder / "README.md").read_text()
    assert "50.0% [15.0-85.0] (2 accepted / 4 reviewed)" in readme
    ledger = [json.loads(line) for line in (folder / "review.jsonl").read_text().splitlines()]
    assert [e["decision"] for e in ledger].count("reject") == 1

    # a bad decisions file is one line, exit 2, and changes nothing
    before = (folder / "cases.jsonl").read_text()
    decisions_file.write_text(json.dumps({"dataset": "mine", "decisions": [
        {"id": pending, "decision": "fix", "expected": {"calls": [
            {"name": "get_weather", "arguments": {"town": ["Wuhan"]}}]}}]}))
    bad = run_bench("review", "mine", "--apply", str(decisions_file))
    assert bad.returncode == 2 and "has no argument 'town'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert (folder / "cases.jsonl").read_text() == before
    decisions_file.write_text(json.dumps({"dataset": "mine", "decisions": [
        {"id": "nope", "decision": "maybe"}]}))
    bad = run_bench("review", "mine", "--apply", str(decisions_file))
    assert bad.returncode == 2 and "decisions.0.decision" in bad.stderr


def test_apply_refuses_unknown_and_twice_decided_cases(project, scripted):
    synthesize(_settings(kinds=("single",), count=1), Project(project))
    path = project / "datasets" / "ecommerce-synth" / "cases.jsonl"
    cases = load_dataset(str(path)).cases
    decisions = template(path, cases)
    assert [d.decision for d in decisions.decisions] == ["pending"]
    twice = Decisions(dataset=str(path), decisions=[*decisions.decisions,
                                                   *decisions.decisions])
    with pytest.raises(BenchError, match="decided twice"):
        apply_decisions(path, twice, date="2026-12-03")
    unknown = Decisions.model_validate({"dataset": str(path), "decisions": [
        {"id": "ecom-0001", "decision": "accept"}]})
    with pytest.raises(BenchError, match="not a generated case"):
        apply_decisions(path, unknown, date="2026-12-03")
    (project / "d.json").write_text("{not json")
    with pytest.raises(BenchError, match="malformed JSON"):
        load_decisions(project / "d.json")


@requires_local_model
@pytest.mark.slow
def test_synthesis_through_the_embedded_model(project):
    """One tiny end-to-end run: the embedded model proposes and solves (its greedy answers
    are one independent answer, so --min-agree 1). Run under flock /work/wt/model.lock."""
    report = synthesize(SynthSettings(toolset="ecommerce", generator="local",
                                      solvers=("local",), min_agree=1, dataset="local-synth",
                                      kinds=("single", "no_call"), count=1, variant="l3"),
                        Project(project))
    counts = report.counts()
    assert report.requests == 2 and sum(counts.values()) == len(report.candidates) >= 2
    folder = project / "datasets" / "local-synth"
    data = json.loads((folder / "synth-report.json").read_text())
    assert data["counts"] == counts and data["settings"]["generator"] == "local"
    if counts["kept"]:
        kept = load_dataset(str(folder / "cases.jsonl")).cases
        assert all(c.provenance and c.provenance.generator == "local" and c.split == "dev"
                   for c in kept)


def test_terminal_review_asks_per_case_and_applies(project, scripted):
    from typer.testing import CliRunner

    from bench.cli import app

    synthesize(_settings(kinds=("single", "no_call"), count=1), Project(project))
    path = project / "datasets" / "ecommerce-synth" / "cases.jsonl"
    first, second = load_dataset(str(path)).cases
    # accept the first, reject the second (what a person types at the prompts)
    result = CliRunner().invoke(app, ["review", "ecommerce-synth", "--interactive"],
                                input="a\nr\n", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert first.query in result.output and "applied: accept 1, reject 1" in result.output
    after = load_dataset(str(path)).cases
    assert [c.id for c in after] == [first.id]
    assert after[0].provenance is not None and after[0].provenance.review is not None
    # the rejected case counts as reviewed: precision 1 / 2
    assert "50.0% [9.5-90.5] (1 accepted / 2 reviewed)" in (path.parent / "README.md").read_text()


def _copies_a_test_query(messages, tools, trial):
    """A generator that answers another dataset's test query (ecommerce's ecom-0073) word for
    word on request 1, and inside a longer request on request 2."""
    first = "What's the weather in New York today?"
    number = int(re.search(r"Request (\d+)", messages[-1].content or "").group(1))
    query = first if number == 1 else f"Before my flight tonight: {first[:-1].lower()}, please"
    return [{"name": "propose_call_case", "arguments": {
        "query": query, "calls": [{"name": "get_weather", "arguments": {"city": "New York"}}]}}]


def test_a_copy_of_another_datasets_test_query_is_a_leak(project, scripted):
    register_function("synth-copier", _copies_a_test_query)
    report = synthesize(_settings(generator="function:synth-copier", kinds=("single",),
                                  count=2, dataset="weather-new"), Project(project))
    why = [(c.reason, c.verdicts.get("leak", "")) for c in report.candidates]
    assert why[0] == ("leak", "fail: a near-duplicate of test case ecom-0073 of dataset ecommerce "
                              "(similarity 1.00 >= 0.7)")
    assert why[1][0] == "leak" and why[1][1].startswith(
        "fail: contains test case ecom-0073 of dataset ecommerce (100% of its n-grams")
    assert not (project / "datasets" / "weather-new" / "cases.jsonl").exists()


def test_a_template_that_quotes_a_test_query_is_refused_before_any_request(project, scripted,
                                                                            tmp_path):
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "single.j2").write_text(
        "Request {{ index }}: kind {{ kind }}, language {{ lang }}, tool {{ tool.name }}.\n"
        "Write something like: What's the weather in New York today?\n")
    with pytest.raises(BenchError, match="contains test case ecom-0073 of dataset ecommerce"):
        synthesize(_settings(kinds=("single",), count=1, templates=mine), Project(project))
    assert not (project / "reports" / "synth" / "ecommerce-synth").exists()


def test_a_template_that_breaks_the_sandbox_is_one_line_naming_its_file(project, scripted,
                                                                      tmp_path):
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "single.j2").write_text(
        "Request {{ index }}: kind {{ kind }}, language {{ lang }}, tool {{ tool.name }}.\n"
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}\n")
    with pytest.raises(BenchError, match="sandbox forbids") as info:
        synthesize(_settings(kinds=("single",), count=1, templates=mine), Project(project))
    assert str(info.value).startswith(f"{mine / 'single.j2'}: ")


@pytest.mark.parametrize("body, said", [
    ("{{ 1/0 }}", ":2: template error: ZeroDivisionError: division by zero"),
    ("{{ tools[0].parameters + 1 }}", ":2: template error: TypeError: can only concatenate"),
    ('{% include "single.j2" %}', ":2: template error: it includes or calls itself without "
                                  "end (RecursionError)"),
])
def test_a_template_that_fails_while_rendering_is_one_line_naming_its_file(
        project, scripted, tmp_path, body, said):
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "single.j2").write_text(f"Request {{{{ index }}}}.\n{body}\n")
    with pytest.raises(BenchError) as info:
        synthesize(_settings(kinds=("single",), count=1, templates=mine), Project(project))
    message = str(info.value)
    assert message.startswith(f"{mine / 'single.j2'}{said}") and "\n" not in message
    assert not (project / "reports" / "synth" / "ecommerce-synth").exists()


def _one_generated_case(project: Path) -> tuple[Path, Case]:
    synthesize(_settings(kinds=("single",), count=1), Project(project))
    path = project / "datasets" / "ecommerce-synth" / "cases.jsonl"
    (case,) = load_dataset(str(path)).cases
    return path, case


def test_apply_refuses_a_fix_that_copies_another_datasets_test_query(project, scripted):
    path, case = _one_generated_case(project)
    before = path.read_text()
    # ecom-0073 is a test case of the shipped ecommerce dataset
    fix = Decisions.model_validate({"dataset": str(path), "decisions": [
        {"id": case.id, "decision": "fix", "query": "What's the weather in New York today?"}]})
    with pytest.raises(BenchError) as info:
        apply_decisions(path, fix, date="2026-12-03", source=project / "d.json")
    assert str(info.value) == (
        f"{project / 'd.json'}: field 'decisions.0.query': case '{case.id}' after the fix "
        "copies test case ecom-0073 of dataset ecommerce ('what s the weather in new york "
        "today'): a case may not repeat a test query of any dataset; give it another query "
        "or reject it")
    assert path.read_text() == before  # nothing written


def test_apply_refuses_decisions_made_for_another_dataset(project, scripted):
    path, case = _one_generated_case(project)
    before = path.read_text()
    other = Decisions.model_validate({
        "dataset": str(project / "datasets" / "ecommerce" / "cases.jsonl"),
        "decisions": [{"id": case.id, "decision": "accept"}]})
    with pytest.raises(BenchError, match="field 'dataset': the decisions are for dataset "
                                         ".*ecommerce/cases.jsonl', not .*ecommerce-synth"):
        apply_decisions(path, other, date="2026-12-03")
    assert path.read_text() == before
    # the same dataset named by its name (a project moved since) is this one
    mine = Decisions.model_validate({"dataset": "ecommerce-synth",
                                     "decisions": [{"id": case.id, "decision": "accept"}]})
    assert apply_decisions(path, mine, date="2026-12-03").applied == {"accept": 1}


def test_apply_stores_a_token_shaped_reviewer_and_note_redacted(project, scripted):
    path, case = _one_generated_case(project)
    token = "ghp_" + "a1B2c3D4e5" * 4
    decisions = Decisions.model_validate({"dataset": str(path), "reviewer": token,
                                          "decisions": [{"id": case.id, "decision": "accept",
                                                         "note": f"by {token}"}]})
    apply_decisions(path, decisions, date="2026-12-03")
    stored = path.read_text() + (path.parent / "review.jsonl").read_text()
    assert token not in stored
    (after,) = load_dataset(str(path)).cases
    assert after.provenance is not None and after.provenance.review is not None
    assert after.provenance.review.reviewer == "***"


# -- bench review and bench synth, fed hostile input -------------------------------------------

SYNTH_ROW = {"id": "synth-proj-0001", "toolset": "proj", "lang": "en", "split": "dev",
             "messages": [{"role": "user", "content": "add 5 and 7 \u202e\x1b[31m please"}],
             "expected": {"calls": [{"name": "add", "arguments": {"a": [5], "b": [7]}}]},
             "tags": ["synth", "simple"],
             "provenance": {"generator": "function:gen:generator", "template": "single.j2",
                            "template_sha256": "0" * 64, "prompt_sha256": "0" * 64,
                            "seed": 1234, "run_id": "synth-gen-x",
                            "verdicts": {"format": "pass", "unsolvable": "pass"}}}


def synth_project(tmp_path: Path) -> tuple[Path, Path]:
    """:func:`python_project` with a generated dataset ``proj-synth`` of one unreviewed case;
    returns the project and the dataset file."""
    project = python_project(tmp_path)
    folder = project / "datasets" / "proj-synth"
    folder.mkdir()
    (folder / "cases.jsonl").write_text(json.dumps(SYNTH_ROW) + "\n", encoding="utf-8")
    return project, folder / "cases.jsonl"


def test_review_shows_a_generated_query_with_its_control_characters_escaped(tmp_path):
    project, _ = synth_project(tmp_path)
    shown = bench(project, "review", "proj-synth", "--decisions-out", "d.json")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout
    assert "add 5 and 7 \\u202e\\x1b[31m please" in shown.stdout


@pytest.mark.parametrize("decision, fragment", [
    ({"decision": "fix", "query": "  "}, "field 'decisions.0.query': the corrected query is "
                                         "empty"),
    ({"decision": "fix", "expected": {"calls": [{"name": "nosuch", "arguments": {}}]}},
     "field 'decisions.0.expected.calls.0.name'"),
    ({"id": "nope", "decision": "accept"}, "field 'decisions.0.id'"),
])
def test_review_apply_names_the_decisions_file_and_entry_and_writes_nothing(
        tmp_path, decision, fragment):
    project, cases = synth_project(tmp_path)
    before = cases.read_bytes()
    (project / "my decisions.json").write_text(json.dumps(
        {"dataset": str(cases), "decisions": [{"id": SYNTH_ROW["id"], **decision}]}))
    result = bench(project, "review", "proj-synth", "--apply", "my decisions.json")
    line = error_lines(result)[0]
    assert line.startswith("error: my decisions.json: ") and fragment in line, line
    assert cases.read_bytes() == before


@pytest.mark.parametrize("generator, solver, fragment", [
    ("nosuch", "function:gen:solver", "--generator: unknown provider 'nosuch'"),
    ("function:gen:generator", "nosuch:x", "--solver: unknown provider 'nosuch:x'"),
    ("function:gen:boom", "function:gen:solver", "RuntimeError: generator exploded"),
    ("function:no_such_module:x", "function:gen:solver", "cannot import 'no_such_module'"),
])
def test_synth_with_a_bad_generator_or_solver_leaves_no_folder(tmp_path, generator, solver,
                                                               fragment):
    project = python_project(tmp_path)
    (project / "gen.py").write_text(
        'def boom(messages, tools, trial):\n    raise RuntimeError("generator exploded")\n'
        'def generator(messages, tools, trial):\n    return []\n'
        'def solver(messages, tools, trial):\n    return []\n')
    result = bench(project, "synth", "--toolset", "proj", "--generator", generator,
                   "--solver", solver, "--solver-trials", "2", "--kinds", "single",
                   "--count", "1", "--dataset", "mine")
    assert fragment in error_lines(result)[0]
    assert not (project / "reports" / "synth").exists()
    assert not (project / "datasets" / "mine").exists()
