"""The report on agent episodes: timelines, the factor chart, the paired comparison and the
Markdown summary, on a run made by the real runner, executor and scorer with the ``function``
provider standing in for the model (no model, no network)."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.providers.function import register_function
from bench.report.comparison import choose_comparison, comparison_view
from bench.report.data import load_runs, row_outcome
from bench.report.episodes import (condition_summary, episodes_section, factor_success,
                                   sample_episodes)
from bench.report.html import render_html
from bench.report.markdown import render_markdown
from bench.report.table import format_rate
from bench.runner import RunConfig, Runner
from bench.stats.intervals import wilson_interval

ORDER = "ORD20250142"
HOSTILE = "<script>alert(1)</script>"
TRIALS = 2
pytestmark = pytest.mark.slow  # the run and the HTML renders take about 8 s on 2 busy cores
# the run's four conditions: l3 crossed with error_style x fault
ACTIONABLE, BARE = "l3", "l3~error_style=bare"
CONDITIONS = (ACTIONABLE, "l3~fault=503", BARE, "l3~error_style=bare~fault=503")
CASE = {
    "id": "ep-cancel", "toolset": "ecommerce", "lang": "en", "kind": "episode",
    "messages": [{"role": "user", "content": f"Please cancel order {ORDER}, I no longer "
                                             "need it."}],
    # hostile data in the database: every get_order_status result sends it back
    "state": {"overrides": [f"UPDATE orders SET updated_at = '{HOSTILE}' "
                            f"WHERE order_id = '{ORDER}'"]},
    "success": {"state_checks": [{"sql": f"SELECT status FROM orders WHERE "
                                         f"order_id='{ORDER}'", "expect": [["cancelled"]]}],
                "answer_facts": [["cancelled"]]},
    "required_calls": [{"name": "get_order_status", "arguments": {"order_id": [ORDER]}},
                       {"name": "cancel_order", "arguments": {"order_id": [ORDER]},
                        "after": [0]}],
    "forbidden_calls": [{"name": "request_refund"}],
    "max_steps": 6, "tags": ["sequential", "write"]}


def scripted_agent(messages, tools, trial):  # noqa: ANN001, ANN201 - a function provider
    """Look the order up, cancel it, confirm. An error result is retried when it says how
    (the actionable style) and ends the episode with a hostile apology when it does not
    (the bare style's "Error 503")."""
    last = messages[-1]
    made = [c["name"] for m in messages if m.role == "assistant" for c in m.tool_calls or []]
    if last.role == "user":
        return {"tool_calls": [{"name": "get_order_status", "arguments": {"order_id": ORDER}}],
                "text": "Let me look the order up."}
    if last.is_error:
        if "retry" in (last.content or "").lower():
            return {"tool_calls": [{"name": made[-1], "arguments": {"order_id": ORDER}}],
                    "text": "Retrying."}
        return {"tool_calls": [], "text": f"Sorry {HOSTILE}, the service failed."}
    if made[-1] == "get_order_status":
        return {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": ORDER}}]}
    return {"tool_calls": [], "text": f"Order {ORDER} is cancelled."}


@pytest.fixture(scope="module")
def episode_run(tmp_path_factory):
    """One run of the episode case under four conditions, two trials each; yields the
    loaded runs (BENCH_HOME a throw-away project)."""
    root = tmp_path_factory.mktemp("episodes")
    (root / "datasets").mkdir()
    dataset = root / "cases.jsonl"
    dataset.write_text(json.dumps(CASE) + "\n", encoding="utf-8")
    shutil.copytree(Path(__file__).resolve().parents[2] / "descriptions",
                    root / "descriptions")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_HOME", str(root))
        register_function("episode-agent", scripted_agent)
        Runner(RunConfig(dataset=str(dataset), variants=["l3"], trials=TRIALS,
                         providers=["function:episode-agent"],
                         factors={"error_style": ["actionable", "bare"],
                                  "fault": ["none", "503"]}),
               run_id="episodes", command=["bench", "run"]).run()
        yield load_runs(["episodes"])


@pytest.fixture(scope="module")
def page(episode_run):
    """The HTML report of the run (no comparison)."""
    return render_html(episode_run, "episodes")


def _episodes(html: str) -> dict[str, str]:
    """Each episode's ``<details>`` element by its summary line's condition and trial."""
    found = {}
    for block in re.findall(r'<details class="episode".*?</details>', html, re.S):
        summary = re.search(r"<summary>(.*?)</summary>", block, re.S).group(1)
        condition, trial = re.search(r" · (\S+) · \S+ · trial (\d+) · ", summary).groups()
        found[(condition, int(trial))] = block
    return found


def test_the_run_is_what_the_script_makes_it(episode_run):
    rows = episode_run[0].rows
    assert sorted({r.variant for r in rows}) == sorted(CONDITIONS)
    assert len(rows) == len(CONDITIONS) * TRIALS
    outcome = {r.variant: row_outcome(r) for r in rows}
    # only the bare 503 leaves the agent without a way on
    assert outcome == {c: "fail" if c == CONDITIONS[3] else "pass" for c in CONDITIONS}


def test_timeline_shows_each_step_and_escapes_model_output_and_results(page):
    html = page
    assert HOSTILE not in html and "alert(1)</" not in html
    assert len(re.findall(r"<script\b", html)) == 2  # the page's data and its own script
    episodes = _episodes(html)
    assert set(episodes) == {(c, t) for c in CONDITIONS for t in range(TRIALS)}

    good = episodes[(ACTIONABLE, 0)]
    assert good.count('<li class="step">') == 3
    assert "stopped by final_answer" in good
    assert "call <code>get_order_status</code>" in good
    assert "call <code>cancel_order</code>" in good
    assert f"&#34;order_id&#34;: &#34;{ORDER}&#34;" in good  # arguments, as JSON text
    assert "Let me look the order up." in good  # the model's message
    # the result exactly as sent back (compact JSON), hostile database text escaped
    assert ("{&#34;success&#34;:true,&#34;data&#34;:{&#34;order_id&#34;:&#34;ORD20250142&#34;"
            in good)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in good
    assert "tokens prompt 0 · completion 0 · cached 0" in good
    assert f"Order {ORDER} is cancelled." in good  # the final answer
    # state checks, expected against got
    assert good.count("[[&#34;cancelled&#34;]]") == 2 and 'class="outcome pass">yes' in good

    failed = episodes[(CONDITIONS[3], 1)]
    assert failed.count('<li class="step">') == 2
    assert '<h4 class="error">result sent back: error (is_error), code http_503</h4>' in failed
    assert ('<pre class="turn result error">{&#34;success&#34;:false,&#34;data&#34;:null,'
            '&#34;error&#34;:&#34;Error 503&#34;}</pre>') in failed
    assert "Sorry &lt;script&gt;alert(1)&lt;/script&gt;, the service failed." in failed
    assert "[[&#34;paid&#34;]]" in failed and 'class="outcome fail">no' in failed

    retried = episodes[("l3~fault=503", 0)]
    assert "retry the same call once" in retried  # the actionable error text
    # the first call to each tool fails once: status, retry, cancel, retry, answer
    assert retried.count('<li class="step">') == 5

    # the case table's drill-down links each row to its timeline
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)'
                                r"</script>", html, re.S).group(1))
    column = data["fields"].index("episode")
    anchors = {row[column][0] for row in data["rows"]}
    assert anchors == {f"ep-{i}" for i in range(len(CONDITIONS) * TRIALS)}
    assert all(f'id="{a}"' in html for a in anchors)


def test_factor_chart_and_table(episode_run, page):
    html = page
    uri = re.search(r'id="chart-factors" alt="[^"]*" src="data:image/svg\+xml;base64,([^"]+)"',
                    html).group(1)
    svg = base64.b64decode(uri).decode("utf-8")
    for name in ("result_format", "error_style", "result_budget", "fault", "variant",
                 "actionable", "bare", "none", "503"):
        assert f">{name}" in svg, name
    table = factor_success(episode_run)
    counts = {(r["factor"], r["level"]): (r["k"], r["n"]) for r in table.to_dict("records")}
    n = TRIALS * 2
    assert counts == {("result_format", "envelope"): (6, 8), ("error_style", "actionable"):
                      (n, n), ("error_style", "bare"): (TRIALS, n), ("result_budget", "capped"):
                      (6, 8), ("fault", "none"): (n, n), ("fault", "503"): (TRIALS, n),
                      ("variant", "l3"): (6, 8)}
    assert list(table["factor"].unique()) == ["result_format", "error_style", "result_budget",
                                              "fault", "variant"]
    shown = format_rate(TRIALS / n, *wilson_interval(TRIALS, n), n)
    assert (f'<td class="text">error_style</td><td class="text">bare</td><td class="text">'
            f'function:episode-agent</td><td class="">{TRIALS}/{n}</td><td class="">{shown}'
            '</td>') in html


def test_sample_keeps_every_condition_and_failures_first(episode_run, page):
    section = episodes_section(episode_run, limit=len(CONDITIONS))
    shown = [(e["variant"], e["outcome"]) for e in section["shown"]]
    assert sorted(v for v, _ in shown) == sorted(CONDITIONS)
    assert section["note"].startswith(f"Showing {len(CONDITIONS)} of "
                                      f"{len(CONDITIONS) * TRIALS} episodes")
    html_rows = page.count('<details class="episode"')
    assert html_rows == len(CONDITIONS) * TRIALS  # below the limit: every episode drawn
    assert 'id="episode-sample"' not in page
    # within a condition, a failed episode is drawn before a passed one
    first, second = [r for r in episode_run[0].rows if r.variant == ACTIONABLE]
    failed = second.model_copy(update={"metrics": second.metrics.model_copy(
        update={"task_success": False})})
    assert sample_episodes([first, failed], [ACTIONABLE], limit=1) == [failed]


def test_compare_pairs_episodes_on_task_success(episode_run):
    pair = [ACTIONABLE, CONDITIONS[3]]
    comparison = choose_comparison(episode_run, pair)
    test = next(t for t in comparison.tests if t.metric == "task_success")
    assert (test.n, test.rate_a, test.rate_b, test.a_only, test.b_only) == (TRIALS, 1.0, 0.0,
                                                                            TRIALS, 0)
    flips = [f for f in comparison.flips if f.metric == "task_success"]
    assert sorted(f.trial for f in flips) == list(range(TRIALS))
    assert flips[0].answer_a.startswith(f'get_order_status({{"order_id": "{ORDER}"}}) -> ok; '
                                        f'cancel_order({{"order_id": "{ORDER}"}}) -> ok; '
                                        f'final answer: "Order {ORDER} is cancelled."')
    assert flips[0].answer_b == (f'get_order_status({{"order_id": "{ORDER}"}}) -> error '
                                 f'http_503; final answer: "Sorry {HOSTILE}, the service '
                                 'failed."')
    view = comparison_view(comparison)
    assert any(row[1] == "task success" for row in view["tests"]["rows"])
    html = render_html(episode_run, "t", comparison)
    section = html[html.index('<section id="comparison">'):]
    section = section[:section.index("</section>")]
    assert '<td class="text">task success</td><td class="">2</td>' in section
    assert "-&gt; error http_503; final answer: &#34;Sorry &lt;script&gt;" in section
    assert HOSTILE not in html


def test_markdown_summarises_episodes_per_condition(episode_run):
    text = render_markdown(episode_run, "t")
    assert f"**Agent episodes** ({len(CONDITIONS) * TRIALS} episodes;" in text
    lines = {line.split(" | ")[1]: line for line in text.splitlines()
             if line.startswith("| function:episode-agent | l3")
             and line.count(" | ") == 7}
    assert set(lines) == set(CONDITIONS)
    fail = format_rate(0.0, *wilson_interval(0, TRIALS), TRIALS)
    assert lines[CONDITIONS[3]] == (f"| function:episode-agent | {CONDITIONS[3]} | {TRIALS} | "
                                    f"{fail} | pass@{TRIALS} 0.0% / pass^{TRIALS} 0.0% | "
                                    f"2.0 | 0.00 | final_answer {TRIALS} |")
    assert lines["l3~fault=503"].endswith(" | 5.0 | 1.00 | final_answer 2 |")
    assert HOSTILE not in text
    # pass / fail / unparseable counts follow task success
    assert f"| 0 / {TRIALS} / 0 |" in text and f"| {TRIALS} / 0 / 0 |" in text


def test_cli_compare_prints_the_flipped_episodes(episode_run):
    result = CliRunner().invoke(app, ["compare", ACTIONABLE, CONDITIONS[3], "--run",
                                      "episodes"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output  # two pairs cannot make a regression
    output = result.output
    assert f"task_success: {TRIALS} right in {ACTIONABLE}, wrong in {CONDITIONS[3]}" in output
    assert (f'B: get_order_status({{"order_id": "{ORDER}"}}) -> error http_503; final answer: '
            f'"Sorry {HOSTILE}, the service failed."') in output


def test_per_condition_table_gives_pass_at_k_and_pass_hat_k_over_trials(episode_run, page):
    summary = {c["variant"]: c["pass_k"] for c in condition_summary(episode_run)}
    assert summary[CONDITIONS[0]] == (TRIALS, 1.0, 1.0)  # every trial succeeds
    assert summary[CONDITIONS[3]] == (TRIALS, 0.0, 0.0)  # the bare 503: none does
    assert f"pass@{TRIALS} 100.0% / pass^{TRIALS} 100.0%" in page
    assert f"pass@{TRIALS} 0.0% / pass^{TRIALS} 0.0%" in page


def test_each_factor_is_paired_against_its_first_setting(episode_run, page):
    from bench.report.episodes import factor_pairs

    pairs = {(p["factor"], p["level"]): p for p in factor_pairs(episode_run)}
    assert set(pairs) == {("error_style", "bare"), ("fault", "503")}
    bare = pairs[("error_style", "bare")]
    # paired on (case, trial, fault): only under the 503 does the bare style lose, each trial
    assert (bare["pairs"], bare["base_only"], bare["level_only"]) == (2 * TRIALS, TRIALS, 0)
    assert bare["diff"] == -0.5 and bare["base"] == "actionable"
    assert 'id="factor-pairs"' in page and "bare vs actionable" in page


def test_pass_at_k_without_a_complete_trial_set_shows_a_dash(episode_run):
    # `bench show` printed "pass@2 nan%" where the HTML report shows "-"
    import os
    runs = Path(os.environ["BENCH_HOME"]) / "reports" / "runs"
    shutil.copytree(runs / "episodes", runs / "one-trial")
    manifest = json.loads((runs / "one-trial" / "manifest.json").read_text(encoding="utf-8"))
    (runs / "one-trial" / "manifest.json").write_text(json.dumps({**manifest,
                                                                  "run_id": "one-trial"}))
    results = runs / "one-trial" / "results.jsonl"
    rows = [{**json.loads(line), "run_id": "one-trial"}
            for line in results.read_text(encoding="utf-8").splitlines()]
    kept = [r for r in rows if not (r["variant"] == BARE and r["trial"] == 1)]
    results.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    shown = CliRunner().invoke(app, ["show", "one-trial"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "nan" not in shown.output
    table = {line.split("│")[2].strip(): [cell.strip() for cell in line.split("│")[3:-1]]
             for line in shown.output.splitlines()
             if line.startswith("│ function:episode-agent") and line.count("│") == 8}
    # cases, pass@1, pass^1, pass@2, pass^2
    assert table[BARE] == ["1", "100.0%", "100.0%", "-", "-"]
    assert table[ACTIONABLE] == ["1", "100.0%", "100.0%", "100.0%", "100.0%"]

    text = render_markdown(load_runs(["one-trial"]), "t")
    cells = {line.split(" | ")[1]: line.split(" | ")[4] for line in text.splitlines()
             if line.startswith("| function:episode-agent | l3") and line.count(" | ") == 7}
    assert cells[BARE] == "-"
    assert cells[ACTIONABLE] == f"pass@{TRIALS} 100.0% / pass^{TRIALS} 100.0%"
