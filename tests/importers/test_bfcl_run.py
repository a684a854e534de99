"""BFCL data end to end: `bench import bfcl` on entries whose labels contradict their own
schemas, `bench run` on the result (loopback server speaking the OpenAI Chat Completions wire
protocol, driven by the real openai SDK), BFCL's verdict beside bench's metrics in the rows,
the table, the HTML report and `bench compare`; `--skip-invalid-cases` on a dataset with bad
labels.

The entries below are written for these tests, modelled on (and shortened from) BFCL v4
entries of the public gorilla repository (commit 6ea57973c7a6097fd7c5915698c54c17c5b1b6c8,
``berkeley-function-call-leaderboard/bfcl_eval/data/``, Apache-2.0): simple_python_96 and
multiple_119 (a list of dicts in per-key form), simple_python_149 (``[["Apple"],
["Microsoft"]]`` for an array of strings), simple_python_307 (``true`` for a string),
simple_python_358 (``"GF"`` outside an enum), multiple_76 (``"bronze"`` where the enum has
``"Bronze"``), live_parallel_multiple_2-2-0 (no acceptable value inside the enum).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakeserver import FakeServer, Recorded, Reply, chat_body

from bench.datasets import check_against_tools, load_dataset
from bench.descriptions import load_variant

REPO = Path(__file__).resolve().parents[2]


def _fn(name, properties, required=()):
    return {"name": name, "description": f"{name} (test function).",
            "parameters": {"type": "dict", "properties": properties,
                           "required": list(required)}}


STRING = {"type": "string", "description": "text"}
CONDITIONS = {"type": "array", "description": "conditions", "items": {
    "type": "dict", "properties": {"field": STRING, "operation": STRING, "value": STRING}}}
# (id, question, functions, ground truth or None for irrelevance)
ENTRIES = [
    ("simple_python_1", "Area of a triangle with base 10 and height 5?",
     [_fn("calculate_triangle_area", {"base": {"type": "integer"}, "height": {"type": "integer"},
                                      "unit": STRING}, ["base", "height"])],
     [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]),
    ("simple_python_2", "Weather in San Francisco?",
     [_fn("weather.get", {"city": STRING}, ["city"])],
     [{"weather.get": {"city": ["San Francisco", "SF"]}}]),
    ("simple_python_96", "Users older than 25 who are engineers.",
     [_fn("database.query", {"table": STRING, "conditions": CONDITIONS},
          ["table", "conditions"])],
     [{"database.query": {"table": ["user"], "conditions": [[
         {"field": ["age"], "operation": [">"], "value": ["25"]},
         {"field": ["job"], "operation": ["="], "value": ["engineer"]}]]}}]),
    ("simple_python_149", "Stock prices of Apple and Microsoft.",
     [_fn("get_stock_price", {"company_names": {"type": "array", "items": STRING}},
          ["company_names"])],
     [{"get_stock_price": {"company_names": [["Apple", "Microsoft"], [["Apple"], ["Microsoft"]],
                                             ["AAPL", "MSFT"]]}}]),
    ("simple_python_307", "Who won Lakers vs Clippers?",
     [_fn("game_result.get_winner", {"teams": {"type": "array", "items": STRING},
                                     "venue": STRING}, ["teams"])],
     [{"game_result.get_winner": {"teams": [["Lakers", "Clippers"]], "venue": ["", True]}}]),
    ("simple_python_358", "A gluten free cookie recipe.",
     [_fn("recipe_search", {"diet": {"type": "array", "items": {
         "type": "string", "enum": ["Gluten Free", "Vegan"]}}, "dish": STRING},
          ["diet", "dish"])],
     [{"recipe_search": {"diet": [["Gluten Free"], ["GF"]], "dish": ["cookie"]}}]),
    ("multiple_76", "A bronze horse sculpture.",
     [_fn("sculpture.create_custom", {"item": STRING, "material": {
         "type": "string", "enum": ["Bronze", "Marble"]}}, ["item", "material"]),
      _fn("sculpture.find", {"name": STRING}, ["name"])],
     [{"sculpture.create_custom": {"item": ["horse"], "material": ["Bronze", "bronze"]}}]),
    ("multiple_900", "Stop the bedroom air purifier.",
     [_fn("ControlAppliance.execute", {"command": {"type": "string", "enum": [
         "living room, air conditioner, run"]}}, ["command"]),
      _fn("weather.get", {"city": STRING}, ["city"])],
     [{"ControlAppliance.execute": {"command": ["bedroom, air purifier, stop"]}}]),
    ("irrelevance_1", "Tell me a joke.",
     [_fn("calculate_triangle_area", {"base": {"type": "integer"}}, ["base"])], None),
]
RIGHT = {  # question -> a correct call (bench tool names), None: no call
    "Area of a triangle with base 10 and height 5?":
        ("calculate_triangle_area", {"base": 10, "height": 5}),
    "Weather in San Francisco?": ("weather_get", {"city": "san francisco"}),  # BFCL: any case
    "Users older than 25 who are engineers.":
        ("database_query", {"table": "user", "conditions": [
            {"field": "age", "operation": ">", "value": "25"},
            {"field": "job", "operation": "=", "value": "engineer"}]}),
    "Stock prices of Apple and Microsoft.":
        ("get_stock_price", {"company_names": ["Apple", "Microsoft"]}),
    "Who won Lakers vs Clippers?": ("game_result_get_winner", {"teams": ["Lakers", "Clippers"]}),
    "A gluten free cookie recipe.":
        ("recipe_search", {"diet": ["Gluten Free"], "dish": "cookie"}),
    "A bronze horse sculpture.":
        ("sculpture_create_custom", {"item": "horse", "material": "Bronze"}),
    "Tell me a joke.": None,
}


def write_bfcl(folder: Path) -> Path:
    """The entries as BFCL files: questions and possible_answer/ (JSON Lines)."""
    questions = folder / "BFCL_v4_mixed.json"
    answers = folder / "possible_answer" / questions.name
    answers.parent.mkdir(parents=True)
    questions.write_text("".join(json.dumps({"id": i, "question": [[{"role": "user",
                                                                      "content": q}]],
                                             "function": f}) + "\n"
                                 for i, q, f, _ in ENTRIES), encoding="utf-8")
    answers.write_text("".join(json.dumps({"id": i, "ground_truth": g}) + "\n"
                               for i, _, _, g in ENTRIES if g is not None), encoding="utf-8")
    return questions


def answering(right: bool):
    """A server handler: the correct call for each question, or a wrong value in each."""
    def handle(request: Recorded) -> Reply:
        question = request.body["messages"][-1]["content"]
        call = RIGHT[question]
        if call is None:
            return Reply(body=chat_body(text="Why did the chicken cross the road?"))
        name, arguments = call
        if not right:
            key = next(iter(arguments))
            arguments = {**arguments, key: "wrong"}
        return Reply(body=chat_body(calls=[(name, arguments)]))
    return handle


@pytest.fixture
def imported(run_bench, project, tmp_path):
    questions = write_bfcl(tmp_path / "bfcl")
    result = run_bench("import", "bfcl", str(questions), "--name", "mixed")
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.slow
def test_conflicting_labels_are_reported_one_line_each_and_kept_out(imported, project):
    lines = [line for line in imported.stdout.splitlines()
             if line.startswith("conflicting label:")]
    answers = "possible_answer/BFCL_v4_mixed.json"
    expected = [  # (case, parameter, why, action), file order
        ("simple_python_149", "get_stock_price.company_names", '[["Apple"], ["Microsoft"]]',
         "value dropped"),
        ("simple_python_307", "game_result.get_winner.venue", "true breaks", "value dropped"),
        ("simple_python_358", "recipe_search.diet", '["GF"] breaks', "value dropped"),
        ("multiple_76", "sculpture.create_custom.material", '"bronze" breaks',
         "value dropped"),
        ("multiple_900", "ControlAppliance.execute.command",
         "'bedroom, air purifier, stop' is not one of", "case excluded"),
    ]
    assert len(lines) == len(expected), lines
    for line, (case, parameter, why, action) in zip(lines, expected):
        assert f"{answers}:" in line and f": {case}: {parameter}: " in line, line
        assert why in line and line.endswith(f"({action})"), line
    folder = project / "datasets" / "mixed"
    excluded = [json.loads(x) for x in (folder / "excluded.jsonl").read_text().splitlines()]
    assert [e["id"] for e in excluded] == ["multiple_900"]
    dataset = load_dataset("mixed")  # loads, and every label fits: bench run accepts it
    check_against_tools(dataset, "mixed", load_variant("mixed", "bfcl").tools)
    by_id = {c.id: c for c in dataset.cases}
    assert "multiple_900" not in by_id and len(by_id) == len(ENTRIES) - 1
    args = {i: c.expected.calls[0].arguments for i, c in by_id.items() if c.expected.calls}
    assert args["simple_python_96"]["conditions"] == [[
        {"field": "age", "operation": ">", "value": "25"},
        {"field": "job", "operation": "=", "value": "engineer"}]]
    assert args["simple_python_149"]["company_names"] == [["Apple", "Microsoft"],
                                                          ["AAPL", "MSFT"]]
    assert args["simple_python_307"]["venue"] == [None]  # only omission fits the schema
    assert args["simple_python_358"]["diet"] == [["Gluten Free"]]
    assert args["multiple_76"]["material"] == ["Bronze"]
    sources = [json.loads(x) for x in (folder / "bfcl.jsonl").read_text().splitlines()]
    assert [s["id"] for s in sources] == list(by_id)
    venue = next(s for s in sources if s["id"] == "simple_python_307")  # BFCL's own answer
    assert venue["ground_truth"][0]["game_result.get_winner"]["venue"] == ["", True]
    assert venue["tool_names"] == {"game_result_get_winner": "game_result.get_winner"}


@pytest.mark.slow
def test_run_scores_with_bfcl_beside_bench_and_table_report_compare_show_it(
        imported, run_bench, project, monkeypatch):
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "x")
    runs = {}
    handlers = {True: answering(True), False: answering(False)}
    mode = {"right": True}
    with FakeServer(handler=lambda request: handlers[mode["right"]](request)) as server:
        for name, right in (("good", True), ("bad", False)):
            mode["right"] = right  # one server: both runs have the same provider id (paired)
            result = run_bench("run", "--dataset", "mixed", "--variants", "bfcl", "--provider",
                               f"openai-compat:m@{server.url}/v1", "--run-id", name,
                               "--no-execute")
            assert result.returncode == 0, result.stderr
            runs[name] = result
            rows = [json.loads(x) for x in (project / "reports" / "runs" / name /
                                            "results.jsonl").read_text().splitlines()]
            metrics = {r["case_id"]: r["metrics"] for r in rows}
            assert len(metrics) == len(ENTRIES) - 1
            if right:
                assert all(m["bfcl_valid"] is True for m in metrics.values()), metrics
                # BFCL ignores case in strings; bench's strict arguments do not
                assert metrics["simple_python_2"]["arguments_correct"] is False
            else:
                assert metrics["irrelevance_1"]["bfcl_valid"] is True
                wrong = {i: m for i, m in metrics.items() if i != "irrelevance_1"}
                assert all(m["bfcl_valid"] is False for m in wrong.values())
                assert metrics["simple_python_1"]["bfcl_error_type"] == "type_error:simple"
                assert metrics["simple_python_2"]["bfcl_error_type"] == \
                    "value_error:string"
    header = runs["good"].stdout + runs["good"].stderr
    assert "BFCL" in header and "100.0%" in header
    report = run_bench("report", "good", "bad")
    assert report.returncode == 0, report.stderr
    html = next((project / "reports").glob("good+bad/*.html")).read_text(encoding="utf-8")
    assert "BFCL checker" in html
    compared = run_bench("compare", "good", "bad", "--json")
    assert compared.returncode in (0, 1), compared.stderr
    tests = {t["metric"]: t for t in json.loads(compared.stdout)["tests"]}
    assert tests["bfcl_valid"]["n"] == len(ENTRIES) - 1
    assert tests["bfcl_valid"]["rate_a"] == 1.0
    assert tests["bfcl_valid"]["rate_b"] == pytest.approx(1 / (len(ENTRIES) - 1))


@pytest.mark.slow
def test_skip_invalid_cases_lists_and_skips_instead_of_refusing(imported, run_bench, project,
                                                                monkeypatch):
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "x")
    path = project / "datasets" / "mixed" / "cases.jsonl"
    cases = [json.loads(x) for x in path.read_text().splitlines()]
    bad = next(c for c in cases if c["id"] == "multiple_76")
    bad["expected"]["calls"][0]["arguments"]["material"] = ["bronze"]  # outside the enum
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    line = next(n for n, c in enumerate(cases, 1) if c["id"] == "multiple_76")
    with FakeServer(handler=answering(True)) as server:
        provider = f"openai-compat:m@{server.url}/v1"
        refused = run_bench("run", "--dataset", "mixed", "--variants", "bfcl", "--provider",
                            provider, "--no-execute")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert f"cases.jsonl:{line}:" in refused.stderr
        assert "--skip-invalid-cases" in refused.stderr
        ran = run_bench("run", "--dataset", "mixed", "--variants", "bfcl", "--provider",
                        provider, "--no-execute", "--skip-invalid-cases", "--run-id", "skip")
    assert ran.returncode == 0, ran.stderr
    assert (f"skipped case 'multiple_76' ({path}:{line}, expected.calls.0.arguments.material):"
            " acceptable value 'bronze' breaks the tool's schema") in ran.stderr
    run_dir = project / "reports" / "runs" / "skip"
    rows = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert "multiple_76" not in {r["case_id"] for r in rows} and len(rows) == len(cases) - 1
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [s["case"] for s in manifest["cases_skipped"]] == ["multiple_76"]
    assert manifest["config"]["skip_invalid_cases"] is True


def test_rows_without_an_answer_are_not_bfcl_passes(imported, run_bench, project, monkeypatch):
    """Every request refused (HTTP 400, as a server whose context window is too small answers):
    no row, the irrelevance case included, passes BFCL's checker, and the table does not
    show a BFCL pass rate above bench's own."""
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "x")
    refused = Reply(400, {"error": {"message": "Requested tokens (9000) exceed context window "
                                               "of 2048", "type": "invalid_request_error"}})
    with FakeServer(handler=lambda request: refused) as server:
        result = run_bench("run", "--dataset", "mixed", "--variants", "bfcl", "--provider",
                           f"openai-compat:m@{server.url}/v1", "--run-id", "refused",
                           "--no-execute")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in (project / "reports" / "runs" / "refused" /
                                    "results.jsonl").read_text().splitlines()]
    assert rows and all(r["parsed"]["error_code"] == "provider_error" for r in rows)
    assert all(r["metrics"]["bfcl_valid"] is False for r in rows), \
        [(r["case_id"], r["metrics"]["bfcl_valid"]) for r in rows]
    assert {r["metrics"]["bfcl_error_type"] for r in rows} == {"no_answer:provider_error"}
    shown = run_bench("show", "refused")
    assert shown.returncode == 0, shown.stderr
    assert "100.0%" not in shown.stdout, shown.stdout


def test_import_hint_names_a_bench_home_other_than_the_current_directory(project, tmp_path):
    questions = write_bfcl(tmp_path / "bfcl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "BENCH_HOME": str(project),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    away = subprocess.run([sys.executable, "-m", "bench", "import", "bfcl", str(questions),
                           "--name", "mixed"], cwd=elsewhere, env=env, capture_output=True,
                          text=True, timeout=600)
    assert away.returncode == 0, away.stderr
    assert (f"run it: BENCH_HOME={project} bench run --dataset mixed --variants bfcl"
            in away.stdout), away.stdout
    here = subprocess.run([sys.executable, "-m", "bench", "import", "bfcl", str(questions),
                           "--name", "mixed", "--force"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert here.returncode == 0, here.stderr
    assert "run it: bench run --dataset mixed --variants bfcl" in here.stdout, here.stdout
