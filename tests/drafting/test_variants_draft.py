"""Variants for imported toolsets: ``current`` is the imported text (an old project's
``original`` still reads), ``bench variants draft`` drafts l3..l50 through a provider into
the specs as drafts, runs and reports mark them, ``bench variants accept`` clears the mark."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bench.cli import app
from bench.descriptions import available_variants, load_variant
from bench.descriptions.spec_files import replace_variants_block
from bench.drafting.run import draft_variants
from bench.drafting.spec_writes import accept_drafts
from bench.drafting.whole import read_draft
from bench.errors import BenchError
from bench.providers.function import register_function
from bench.report.data import load_runs
from bench.report.html import render_html
from bench.runner import RunConfig, Runner
from tests.descriptions.test_lock import _tools_project
from tests.importers.test_own_tools import bench, error_lines, one_error_line, python_project

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"], "description": "Temperature unit"}},
        "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_forecast", "description": "Weather forecast for the next days.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1,
                                                 "maximum": 7}},
            "required": ["city", "days"]}}}]

PROMPTS: list[str] = []


def drafter(messages, tools, trial):  # noqa: ANN001, ANN201
    """A scripted drafting model: as many lines as the prompt asks for, naming the tool."""
    prompt = messages[-1].content
    PROMPTS.append(prompt)
    assert [t.name for t in tools] == ["write_description"]  # the draft's lines as a call
    lines = int(re.search(r"Write about (\d+) non-empty lines", prompt).group(1))
    name = re.search(r"the tool `([^`]+)`", prompt).group(1)
    body = "\n".join(f"{name}: line {i + 1} of the drafted text." for i in range(lines))
    return {"tool_calls": [], "text": f"```\n{body}\n```"}


@pytest.fixture
def weather(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with an imported toolset (bench import openai) and two labeled cases."""
    root = tmp_path / "weather-project"
    (root / "descriptions").mkdir(parents=True)
    cases = root / "datasets/weather/cases.jsonl"
    cases.parent.mkdir(parents=True)
    cases.write_text("\n".join(json.dumps({
        "id": f"w-{i}", "toolset": "weather", "lang": "en",
        "messages": [{"role": "user", "content": f"weather in {city}?"}],
        "expected": {"calls": [{"name": "get_weather", "arguments": {"city": [city]}}]}})
        for i, city in enumerate(["Oslo", "Lima"])) + "\n", encoding="utf-8")
    monkeypatch.setenv("BENCH_HOME", str(root))
    tools_file = tmp_path / "weather.json"
    tools_file.write_text(json.dumps(TOOLS), encoding="utf-8")
    result = CliRunner().invoke(app, ["import", "openai", str(tools_file)])
    assert result.exit_code == 0, result.output
    register_function("drafter", drafter)
    register_function("weather-model", lambda messages, tools, trial: [
        {"name": "get_weather", "arguments": {"city": messages[-1].content.split()[-1][:-1]}}])
    return root


def test_import_writes_current_and_an_old_original_still_reads(weather: Path):
    assert (weather / "descriptions/weather/variants/current.yaml").is_file()
    assert available_variants("weather") == ["current"]
    current = load_variant("weather", "current")
    assert current.tool("get_weather").description == "Current weather for a city."
    # a project imported before the rename holds original.yaml: both names read it
    variants = weather / "descriptions/weather/variants"
    (variants / "current.yaml").rename(variants / "original.yaml")
    assert available_variants("weather") == ["current", "original"]
    assert load_variant("weather", "current").tools == current.tools
    assert load_variant("weather", "original").tools == current.tools


def test_draft_writes_marked_drafts_into_specs_and_runs_mark_them(weather: Path):
    PROMPTS.clear()
    result = CliRunner().invoke(app, ["variants", "draft", "--provider", "function:drafter",
                                      "--toolset", "weather"])
    assert result.exit_code == 0, result.output
    assert len(PROMPTS) == 8  # 2 tools x 4 lengths, through the provider's pipeline
    assert "Current weather for a city." in PROMPTS[0] and "Temperature unit" in PROMPTS[0]
    spec = yaml.safe_load((weather / "descriptions/weather/specs/get_weather.yaml")
                          .read_text(encoding="utf-8"))
    assert spec["summary"] == "Current weather for a city."
    l10 = spec["variants"]["l10"]
    assert l10["draft"] is True and l10["drafted_by"] == "function:drafter"
    assert l10["drafted_from"].startswith("current sha256:")
    assert available_variants("weather") == ["l3", "l10", "l30", "l50", "current"]

    for name, lines in (("l3", 3), ("l10", 10), ("l30", 30), ("l50", 50)):
        variant = load_variant("weather", name)
        assert variant.draft_tools == ("get_forecast", "get_weather")
        assert variant.line_counts == {"get_forecast": lines, "get_weather": lines}
        # a drafted length is sent without the schema's property descriptions
        assert "description" not in variant.tool("get_weather").input_schema["properties"][
            "unit"]
    assert load_variant("weather", "current").tool("get_weather").input_schema[
        "properties"]["unit"]["description"] == "Temperature unit"  # as imported

    listing = CliRunner().invoke(app, ["variants", "--toolset", "weather"])
    assert listing.exit_code == 0, listing.output
    assert "l10 (draft: 2 of 2)" in listing.output

    runner = Runner(RunConfig(dataset="weather", variants=["l3", "l50", "current"],
                              providers=["function:weather-model"], execute=False),
                    run_id="ablation", command=["bench", "run"])
    runner.run()
    manifest = runner.store.load_manifest()
    assert {v.name: v.draft_tools for v in manifest.variants} == {
        "l3": ["get_forecast", "get_weather"], "l50": ["get_forecast", "get_weather"],
        "current": None}
    page = render_html(load_runs(["ablation"]), "drafts")
    assert page.count('<span class="draft">(draft)</span>') == 2
    assert 'id="drafts"' in page
    shown = CliRunner().invoke(app, ["show", "ablation"])
    assert "l3 (draft)" in shown.output and "current (draft)" not in shown.output

    with pytest.raises(BenchError, match="already has a draft for l3"):
        draft_variants("weather", "function:drafter", [3])

    accepted = accept_drafts("weather", ["l3"])
    assert sorted(accepted) == [("get_forecast", "l3"), ("get_weather", "l3")]
    assert load_variant("weather", "l3").draft_tools == ()
    assert load_variant("weather", "l10").draft_tools == ("get_forecast", "get_weather")
    result = CliRunner().invoke(app, ["variants", "accept", "--toolset", "weather"])
    assert result.exit_code == 0 and "6 drafts accepted" in result.output
    assert all(not load_variant("weather", n).draft_tools for n in ("l10", "l30", "l50"))


def test_only_the_variants_block_of_a_spec_changes():
    text = ("# my notes stay\nname: t\nsummary: s  # inline too\nvariants:\n  l3:\n"
            "    description: old\n    draft: true\ninput_schema: {type: object}\n")
    new = replace_variants_block(text, {"l3": {"description": "new", "draft": True}})
    assert new.startswith("# my notes stay\nname: t\nsummary: s  # inline too\n"
                          "input_schema: {type: object}\n")
    assert yaml.safe_load(new)["variants"] == {"l3": {"description": "new", "draft": True}}
    assert "variants" not in yaml.safe_load(replace_variants_block(text, {}))


def test_a_partly_drafted_toolset_without_a_template_names_the_missing_tools(weather: Path):
    assert CliRunner().invoke(app, ["variants", "draft", "--provider", "function:drafter",
                                    "--toolset", "weather", "--lengths", "5",
                                    "--tools", "get_weather"]).exit_code == 0
    (weather / "descriptions/weather/specs/get_forecast.yaml").write_text(
        "name: get_forecast\nsummary: Forecast.\ninput_schema: {type: object}\n",
        encoding="utf-8")
    with pytest.raises(BenchError, match=r"1 tool\(s\) have no text for it in their spec "
                                         r"\(get_forecast\)"):
        load_variant("weather", "l5")


def junk_drafter(messages, tools, trial):  # noqa: ANN001, ANN201
    """Three good lines for get_weather's l3 through the draft tool; a JSON document for its
    other lengths and for every length of get_forecast."""
    prompt = messages[-1].content
    if "`get_weather`" in prompt and "Write about 3 non-empty lines" in prompt:
        return [{"name": "write_description", "arguments": {"lines": [
            "Current weather for one city.", "Pass the city's name.",
            "Give unit c or f when the user says which."]}}]
    return {"tool_calls": [], "text": '{"description": "weather"}'}


def test_usable_drafts_are_written_and_each_tool_without_one_is_named_on_one_line(
        weather: Path):
    register_function("junk-drafter", junk_drafter)
    specs = weather / "descriptions/weather/specs"
    result = CliRunner().invoke(app, ["variants", "draft", "--provider", "function:junk-drafter",
                                      "--toolset", "weather", "--lengths", "3,10"])
    # get_weather's l3 is kept although its l10 is unusable: some drafts were written
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if line.startswith("get_")] == [
        "get_weather: drafted l3; not drafted or incomplete (l10: a JSON document, not a "
        "description)",
        "get_forecast: no usable draft from function:junk-drafter (l3: a JSON document, not a "
        "description; l10: a JSON document, not a description)"]
    assert "1 of 4 drafts written" in result.stdout
    # one progress line per tool and length on stderr
    assert [line.split(":")[0] for line in result.stderr.splitlines()
            if line.startswith("draft ")] == [
        "draft 1/4 get_weather l3", "draft 2/4 get_weather l10", "draft 3/4 get_forecast l3",
        "draft 4/4 get_forecast l10"]
    drafted = yaml.safe_load((specs / "get_weather.yaml").read_text(encoding="utf-8"))
    assert list(drafted["variants"]) == ["l3"] and drafted["variants"]["l3"]["draft"] is True
    assert drafted["variants"]["l3"]["description"].splitlines()[0] == \
        "Current weather for one city."
    # the tool without a draft got a spec without variants: l3 renders every tool
    assert "variants" not in yaml.safe_load((specs / "get_forecast.yaml").read_text())
    l3 = load_variant("weather", "l3")
    assert [t.name for t in l3.tools] == ["get_forecast", "get_weather"]
    assert l3.draft_tools == ("get_weather",)
    # nothing usable at all: exit 1
    nothing = CliRunner().invoke(app, ["variants", "draft", "--provider",
                                       "function:junk-drafter", "--toolset", "weather",
                                       "--lengths", "30"])
    assert nothing.exit_code == 1, nothing.output
    assert "0 of 2 drafts written" in nothing.stdout


def answer_with(lines=None, text=None, error=None):  # noqa: ANN001, ANN201
    """A parsed answer: a write_description call with ``lines``, or ``text``, or an error."""
    from bench.models import ToolCall
    from bench.parse import ParsedAnswer

    calls = [] if lines is None else [ToolCall(id="c0", name="write_description",
                                               arguments={"lines": lines},
                                               raw_arguments=json.dumps({"lines": lines}))]
    return ParsedAnswer(calls=calls, text=text, error=error)


@pytest.mark.parametrize(("answer", "why"), [
    (answer_with(error="truncated: the answer hit the token limit"), "invalid answer"),
    (answer_with(text="   \n "), "no text"),
    (answer_with(lines=["one", 2, "three"]), "without a list of strings"),
    (answer_with(lines=["Weather now.", "Beep\x07 here.", "City."]), "control characters"),
    (answer_with(lines=["Weather now.", "x" * 401, "City."]), "a line of 401 characters"),
    (answer_with(text="Weather.\nCurrent description:\nWeather."), "the prompt copied back"),
    (answer_with(text='["Weather now.", "City.", "Unit."]'), "a JSON document"),
    (answer_with(lines=["Weather now."]), "1 lines, not 2 to 5"),
    (answer_with(lines=[f"line {i}" for i in range(6)]), "6 lines, not 2 to 5"),
])
def test_the_models_answer_is_untrusted(answer, why):  # noqa: ANN001
    with pytest.raises(ValueError, match=re.escape(why)):
        read_draft(answer, 3)


def test_a_usable_answer_is_its_lines_or_its_text():
    assert read_draft(answer_with(lines=["Weather now. ", "", "City."]), 3) == \
        "Weather now.\n\nCity."
    assert read_draft(answer_with(text="```\nWeather now.\nCity.\n```"), 3) == \
        "Weather now.\nCity."


SECTION_WORDS = (("should the assistant handle", "Edge cases"), ("could type", "Examples"),
                 ("not serve", "When not to use it"), ("sounds like one", "When not to use it"),
                 ("Which kind of user request does", "When to use it"),
                 ("would an assistant call", "When to use it"),
                 ("Who typically asks", "Business context"), ("tell the user when", "Errors"),
                 ("most useful", "Business context"), ("Which format", "Constraints"),
                 ("must always be given", "Constraints"), ("did not expect", "Errors"),
                 ("never send", "Constraints"), ("do next", "Business context"),
                 ("gets no answer", "Errors"), ("check in the user's", "Constraints"),
                 ("right before needing", "Business context"),
                 ("does not know", "Errors"),
                 ("return?", "What it returns"), ("Which values", "Constraints"),
                 ("When should the assistant give", "Constraints"),
                 ("must be true", "Constraints"), ("typically need", "Business context"),
                 ("along with", "Business context"), ("missing or invalid", "Errors"),
                 ("finds nothing", "Errors"), ("lacks a value", "Errors"))


def section_of(prompt: str) -> str:
    """The section a drafting request asks for (its question's words)."""
    return next(title for words, title in SECTION_WORDS if words in prompt)


def section_drafter(messages, tools, trial):  # noqa: ANN001, ANN201
    """A scripted model for section-by-section drafting: one line per question, naming the
    section, the tool and the question's number; examples whose arguments break the tool's
    schema on every other question."""
    prompt = messages[-1].content
    PROMPTS.append(prompt)
    name = re.search(r"Tool `([^`]+)`:", prompt).group(1)
    title = section_of(prompt)
    number = sum(1 for p in PROMPTS if f"Tool `{name}`:" in p and section_of(p) == title)
    if tools[0].name == "write_examples":
        arguments = {"days": 99} if number % 2 else {"city": f"City{number}", "days": 2}
        return [{"name": "write_examples", "arguments": {"examples": [
            {"request": f"What will the weather be like in City{number} (asked {name})?",
             "arguments": arguments}]}}]
    lead = {"When to use it": "Use it when", "When not to use it": "Do not use it when"}.get(
        title, "-")
    return [{"name": "write_section", "arguments": {"lines": [
        f"{lead} {title.lower()} of {name}, scripted item {number}"]}}]


def test_sections_drafting_fills_the_empty_sections_and_renders_every_length(weather: Path):
    from bench.drafting.filters import usable_range

    register_function("section-drafter", section_drafter)
    specs = weather / "descriptions/weather/specs"
    specs.mkdir()
    (specs / "get_weather.yaml").write_text(  # a person's sections are kept, not asked
        "name: get_weather\nsummary: Current weather for a city.\n"
        "when_to_use:\n- when the user asks about the weather now.\n"
        "returns: The temperature and the sky.\n"
        "input_schema: {type: object, properties: {city: {type: string}}, "
        "required: [city]}\n", encoding="utf-8")
    PROMPTS.clear()
    result = CliRunner().invoke(app, ["variants", "draft", "--provider",
                                      "function:section-drafter", "--toolset", "weather",
                                      "--method", "sections"])
    assert result.exit_code == 0, result.output
    asked = [(re.search(r"Tool `(\w+)`:", p).group(1), section_of(p)) for p in PROMPTS]
    titles = {tool: {title for t, title in asked if t == tool}
              for tool in ("get_weather", "get_forecast")}
    everything = {"When to use it", "When not to use it", "What it returns", "Constraints",
                  "Business context", "Errors", "Examples", "Edge cases"}
    assert titles == {"get_weather": everything - {"When to use it", "What it returns"},
                      "get_forecast": everything}
    # one progress line per question
    assert len([line for line in result.stderr.splitlines() if line.startswith("draft ")]) \
        == len(PROMPTS)
    counts = {}
    for name, lines in (("l3", 3), ("l10", 10), ("l30", 30), ("l50", 50)):
        variant = load_variant("weather", name)
        assert variant.draft_tools == ("get_forecast", "get_weather")
        counts[name] = variant.line_counts
        low, high = usable_range(lines)
        assert all(low <= n <= high for n in counts[name].values()), (name, counts[name])
    assert counts["l3"]["get_forecast"] < counts["l10"]["get_forecast"] < \
        counts["l30"]["get_forecast"] < counts["l50"]["get_forecast"]
    l3 = load_variant("weather", "l3").tool("get_weather").description.splitlines()
    assert l3 == ["Current weather for a city.", "Use it when the user asks about the weather "
                  "now.", "Do not use it when when not to use it of get_weather, scripted item 1."]
    forecast = load_variant("weather", "l50").tool("get_forecast").description
    assert "Use it when when to use it of get_forecast, scripted item 2." in forecast  # "Use it" once
    assert "Constraints:" in forecast and "Edge cases:" in forecast
    examples = [line for line in forecast.splitlines() if line.startswith('- "What will')]
    assert examples and all('"days": 2' in line for line in examples)  # bad ones dropped
    assert "City1 " not in forecast


def slow_section_drafter(messages, tools, trial):  # noqa: ANN001, ANN201
    """:func:`section_drafter`, taking 1.5 s per answer."""
    import time

    time.sleep(1.5)
    return section_drafter(messages, tools, trial)


@pytest.mark.slow
def test_a_tools_time_budget_stops_its_requests_and_keeps_what_was_drafted(weather: Path):
    register_function("slow-drafter", slow_section_drafter)
    PROMPTS.clear()
    result = CliRunner().invoke(app, ["variants", "draft", "--provider", "function:slow-drafter",
                                      "--toolset", "weather", "--method", "sections",
                                      "--lengths", "3", "--tool-timeout", "1"])
    assert result.exit_code == 0, result.output
    assert len(PROMPTS) == 2  # one request per tool: the budget was spent after it
    skipped = [line for line in result.stderr.splitlines() if "not asked" in line]
    assert [line.split(":")[0] for line in skipped] == [
        "draft 6/12 get_weather when_not_to_use", "draft 12/12 get_forecast when_not_to_use"]
    assert "the tool's --tool-timeout of 1 s was spent" in skipped[0]
    # summary and "Use it" line: usable at l3, written, the missing section named
    assert load_variant("weather", "l3").line_counts == {"get_forecast": 2, "get_weather": 2}
    assert "get_weather: drafted l3; not drafted or incomplete (when_not_to_use: not asked" \
        in " ".join(result.stdout.split())
    # every length asked was written: no "again" hint for lengths that do not exist
    assert "2 of 2 drafts written" in result.stdout and "again" not in result.stdout


LOCKSTEP = '''
import os, pathlib, re, time


def answer(messages, tools, trial):
    """Draft the asked lines; wait (20 s at most) until the other process asks for the same
    tool, so that the two processes write each spec at the same moment."""
    prompt = messages[-1].content
    name = re.search(r"the tool `([^`]+)`", prompt).group(1)
    lines = int(re.search(r"Write about ([0-9]+) non-empty lines", prompt).group(1))
    sync = pathlib.Path(os.environ["DRAFT_SYNC"])
    me = os.environ["DRAFT_ROLE"]
    (sync / f"{me}-{name}").touch()
    other = sync / (("b" if me == "a" else "a") + "-" + name)
    deadline = time.monotonic() + 20
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    return {"tool_calls": [], "text": "\\n".join(f"{name}: line {i + 1}." for i in range(lines))}
'''


@pytest.mark.slow
def test_two_drafts_at_once_on_one_toolset_keep_both(tmp_path: Path):
    import os
    import subprocess
    import sys

    root = tmp_path / "many"
    (root / "descriptions").mkdir(parents=True)
    tools = [{"type": "function", "function": {
        "name": f"tool_{i:02d}", "description": f"Tool number {i}.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
        for i in range(30)]
    (tmp_path / "many.json").write_text(json.dumps(tools), encoding="utf-8")
    (tmp_path / "lockstep.py").write_text(LOCKSTEP, encoding="utf-8")
    (tmp_path / "sync").mkdir()
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "BENCH_HOME": str(root), "DRAFT_SYNC": str(tmp_path / "sync"),
           "PYTHONPATH": str(repo) + os.pathsep + str(tmp_path)}
    imported = subprocess.run([sys.executable, "-m", "bench", "import", "openai",
                               str(tmp_path / "many.json")],
                              env=env, capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    drafting = [subprocess.Popen(
        [sys.executable, "-m", "bench", "variants", "draft", "--provider",
         "function:lockstep:answer", "--toolset", "many", "--lengths", lengths],
        env={**env, "DRAFT_ROLE": role}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for role, lengths in (("a", "10"), ("b", "30"))]
    for process in drafting:
        stdout, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stdout + stderr
    lost = {}
    for i in range(30):
        spec = yaml.safe_load((root / f"descriptions/many/specs/tool_{i:02d}.yaml")
                              .read_text(encoding="utf-8"))
        if sorted(spec.get("variants") or {}) != ["l10", "l30"]:
            lost[f"tool_{i:02d}"] = sorted(spec.get("variants") or {})
    assert lost == {}


#: Drafts the first tool at once, then takes 30 s on the next one after writing ``second``.
FIRST_THEN_SLOW = '''
import pathlib, re, time


def answer(messages, tools, trial):
    prompt = messages[-1].content
    name = re.search(r"the tool `([^`]+)`", prompt).group(1)
    lines = int(re.search(r"Write about ([0-9]+) non-empty lines", prompt).group(1))
    asked = pathlib.Path("first")
    if asked.exists():
        pathlib.Path("second").touch()
        time.sleep(30)
    asked.touch()
    return {"tool_calls": [], "text": "\\n".join(f"{name}: line {i + 1}." for i in range(lines))}
'''


@pytest.mark.slow
def test_ctrl_c_stops_drafting_and_keeps_the_drafts_written_when_sigint_was_inherited_ignored(
        weather: Path, tmp_path: Path):
    """Drafting as a script's background job, which starts with SIGINT ignored: Ctrl-C
    exits 130 with the first tool's draft kept (docs/descriptions-and-variants.md), as
    SIGTERM did. The drafting loop (asyncio.Runner) left it ignored: every draft was made."""
    import os
    import signal
    import sys

    from conftest import REPO, stop_once_ready
    (tmp_path / "first_then_slow.py").write_text(FIRST_THEN_SLOW, encoding="utf-8")
    env = {**os.environ, "BENCH_HOME": str(weather),
           "PYTHONPATH": str(REPO) + os.pathsep + str(tmp_path)}
    result = stop_once_ready(
        [sys.executable, "-m", "bench", "variants", "draft", "--provider",
         "function:first_then_slow:answer", "--toolset", "weather", "--lengths", "3"],
        weather / "second", signal.SIGINT, cwd=weather, env=env, sigint_ignored=True)
    assert result.returncode == 130, result.stdout + result.stderr
    drafted = {path.stem: sorted((yaml.safe_load(path.read_text(encoding="utf-8"))
                                  .get("variants") or {}))
               for path in (weather / "descriptions/weather/specs").glob("*.yaml")}
    assert sorted(drafted.values()) == [[], ["l3"]], drafted


def test_a_sections_lines_that_copy_the_prompt_or_are_no_sentence_are_dropped():
    from bench.descriptions.draft_wording import SECTIONS
    from bench.drafting.sections import read_section
    from bench.models import Tool, ToolCall
    from bench.parse import ParsedAnswer

    def lines(*items: str) -> ParsedAnswer:
        return ParsedAnswer(calls=[ToolCall(id="c0", name="write_section",
                                            arguments={"lines": list(items)},
                                            raw_arguments=json.dumps({"lines": items}))])

    tool = Tool(name="get_time", description="Current time in a time zone.",
                input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}})
    use = SECTIONS[0]
    question = use.questions[0].replace("{tool}", "get_time")
    # what the embedded 0.5B model wrote when its prompt showed headings and instructions
    junk = ("What it returns: exactly 1 line(s), each what a call returns.", "required.",
            "additionalProperties", "Answer this question in one short sentence of your own",
            ". / . / . / . / .", "Which kind of user request does get_time serve? Answer with a "
            "phrase")
    assert read_section(lines(*junk, "Use it when the user asks for the time in Tokyo",
                              "when the user asks for the time in Tokyo."), use, tool,
                        question) == ["when the user asks for the time in Tokyo."]
    with pytest.raises(ValueError, match="no usable line: the prompt copied back, not a "
                                         "sentence"):
        read_section(lines(*junk), use, tool, question)
    # a line the tool's sections already hold is not repeated
    with pytest.raises(ValueError, match="no text"):
        read_section(lines("when the user asks for the time."), use, tool, question,
                     taken=["When the user asks for the time."])


def l3_only_drafter(messages, tools, trial):  # noqa: ANN001, ANN201
    """:func:`drafter` for a 3-line draft; a JSON document (unusable) for any other length."""
    if "Write about 3 non-empty lines" in messages[-1].content:
        return drafter(messages, tools, trial)
    return {"tool_calls": [], "text": '{"description": "weather"}'}


def test_a_partial_draft_resumes_drafting_only_the_missing_lengths(weather: Path):
    register_function("l3-drafter", l3_only_drafter)
    specs = weather / "descriptions/weather/specs"
    draft = ["variants", "draft", "--toolset", "weather", "--provider"]
    first = CliRunner().invoke(app, [*draft, "function:l3-drafter", "--lengths", "3,10"])
    assert first.exit_code == 0, first.output  # l3 written, l10 unusable: a partial draft
    kept = (specs / "get_weather.yaml").read_text(encoding="utf-8")
    (specs / "get_weather.yaml").write_text(kept.replace(  # a person's edit of the l3 draft
        "get_weather: line 1 of the drafted text.", "Weather now, reviewed."), encoding="utf-8")

    PROMPTS.clear()
    again = CliRunner().invoke(app, [*draft, "function:drafter"])
    assert again.exit_code == 0, again.output
    assert "l3 kept; drafting l10, l30, l50" in again.stdout.splitlines()
    assert sorted(re.search(r"Write about (\d+)", p).group(1) for p in PROMPTS) == \
        ["10", "10", "30", "30", "50", "50"]  # no length of 3 asked again
    assert "6 of 6" not in again.stdout and "drafts written" not in again.stdout  # no failure
    for tool in ("get_weather", "get_forecast"):
        variants = yaml.safe_load((specs / f"{tool}.yaml").read_text())["variants"]
        assert sorted(variants) == ["l10", "l3", "l30", "l50"]
        assert variants["l3"]["description"].count("\n") == 2  # the first run's text
    assert load_variant("weather", "l3").tool("get_weather").description.splitlines()[0] == \
        "Weather now, reviewed."

    # nothing left to draft: said, with the way to draft again
    with pytest.raises(BenchError, match="every tool already has a text for l3, l10, l30, "
                                         "l50; tool 'get_weather' already has a draft for l3 "
                                         r"\(pass --force"):
        draft_variants("weather", "function:drafter")
    # --force drafts every length again, the kept ones too
    PROMPTS.clear()
    forced = CliRunner().invoke(app, [*draft, "function:drafter", "--force", "--lengths", "3"])
    assert forced.exit_code == 0, forced.output
    assert len(PROMPTS) == 2 and "kept" not in forced.stdout
    assert load_variant("weather", "l3").tool("get_weather").description.splitlines()[0] == \
        "get_weather: line 1 of the drafted text."


def test_a_sections_draft_resumes_per_tool_and_names_what_each_keeps(weather: Path):
    register_function("section-drafter", section_drafter)
    specs = weather / "descriptions/weather/specs"
    specs.mkdir()
    (specs / "get_weather.yaml").write_text(
        "name: get_weather\nsummary: Current weather for a city.\n"
        "input_schema: {type: object, properties: {city: {type: string}}}\n"
        "variants:\n  l3:\n    description: |-\n      Current weather for a city.\n"
        "      Use it for the weather now.\n    draft: false\n", encoding="utf-8")
    PROMPTS.clear()
    result = CliRunner().invoke(app, ["variants", "draft", "--provider",
                                      "function:section-drafter", "--toolset", "weather",
                                      "--method", "sections", "--lengths", "3,10"])
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if "draft" in line][:2] == [
        "get_weather: l3 kept; drafting l10", "get_forecast: drafting l3, l10"]
    weather_spec = yaml.safe_load((specs / "get_weather.yaml").read_text())
    assert weather_spec["variants"]["l3"] == {
        "description": "Current weather for a city.\nUse it for the weather now.",
        "draft": False}
    assert weather_spec["variants"]["l10"]["draft"] is True
    assert sorted(yaml.safe_load((specs / "get_forecast.yaml").read_text())["variants"]) == \
        ["l10", "l3"]


def test_a_spec_with_crlf_line_endings_keeps_them_when_drafts_are_written(weather: Path):
    specs = weather / "descriptions/weather/specs"
    specs.mkdir()
    text = ("# written on Windows\r\nname: get_weather\r\nsummary: Current weather for a "
            "city.\r\ninput_schema: {type: object, properties: {city: {type: string}}}\r\n")
    (specs / "get_weather.yaml").write_bytes(text.encode("utf-8"))
    result = CliRunner().invoke(app, ["variants", "draft", "--provider", "function:drafter",
                                      "--toolset", "weather", "--lengths", "3",
                                      "--tools", "get_weather"])
    assert result.exit_code == 0, result.output
    written = (specs / "get_weather.yaml").read_bytes()
    assert written.startswith(text.encode("utf-8"))  # the lines it had, as they were
    assert b"\n" not in written.replace(b"\r\n", b"")  # every line ends in CRLF
    assert load_variant("weather", "l3").tool("get_weather").description == \
        "\n".join(f"get_weather: line {i} of the drafted text." for i in (1, 2, 3))
    assert accept_drafts("weather", ["l3"]) == [("get_weather", "l3")]
    assert b"\n" not in (specs / "get_weather.yaml").read_bytes().replace(b"\r\n", b"")


# lines the embedded 0.5B model wrote in `bench variants draft --provider local --method
# sections` on the two tools of mcp-server-time (get_current_time, convert_time)
COPIED_FACTS = (
    "Tool `get_current_time`: Get current time in a specific timezones.",
    "The parameter `timezone` of `get_current_time` accepts a string, required, and IANA "
    "timezone name (e.g., 'America/New_York', 'Europe/London').",
    "The arguments of convert_time must always be given: source_timezone (string, required): "
    "Source IANA timezone name (e.g., 'America/New_York', 'Europe/London').")
UNFINISHED_WHEN = ("when the user, `get_current_time` serves to retrieve the current time in a "
                   "specific timezone.")


def test_a_sections_lines_that_copy_the_prompts_facts_are_dropped():
    from bench.descriptions.draft_wording import SECTIONS
    from bench.drafting.sections import read_section
    from bench.models import Tool, ToolCall
    from bench.parse import ParsedAnswer

    def lines(*items: str) -> ParsedAnswer:
        return ParsedAnswer(calls=[ToolCall(id="c0", name="write_section",
                                            arguments={"lines": list(items)},
                                            raw_arguments=json.dumps({"lines": items}))])

    tool = Tool(name="get_current_time", description="Get current time in a specific timezones",
                input_schema={"type": "object", "properties": {"timezone": {"type": "string"}},
                              "required": ["timezone"]})
    sections = {s.key: s for s in SECTIONS}
    constraints = sections["constraints"]
    question = constraints.questions[2].replace("{tool}", "get_current_time")
    good = "Give the zone as an IANA name such as Europe/London, never as an offset."
    assert read_section(lines(*COPIED_FACTS, good), constraints, tool, question) == [good]
    for line in COPIED_FACTS:
        with pytest.raises(ValueError, match="the prompt copied back"):
            read_section(lines(line), constraints, tool, question)
    # kept, for bench lint to flag (BL017): every when-to-use answer of the model for
    # convert_time was of this kind, and without one no l3 is drafted
    use = sections["when_to_use"]
    assert read_section(lines(UNFINISHED_WHEN), use, tool, use.questions[0].replace(
        "{tool}", "get_current_time")) == [UNFINISHED_WHEN]


def test_lint_warns_on_drafted_lines_copied_from_the_prompt_and_on_a_longer_length_that_is_shorter(
        weather: Path):
    specs = weather / "descriptions/weather/specs"
    specs.mkdir()
    l10 = "\n".join(["Current weather for a city.", "Use it " + UNFINISHED_WHEN,
                     *(f"- fact {i} about the weather in a city." for i in range(7)),
                     "Returns: the temperature."])
    l30 = "\n".join(["Current weather for a city.", "Use it when the user asks for the weather.",
                     "Constraints: exactly 8 line(s), each a constraint.",
                     *(f"- {line}" for line in COPIED_FACTS),
                     "- city (string, required): the city's name."])  # a template's own line
    (specs / "get_weather.yaml").write_text(yaml.safe_dump({
        "name": "get_weather", "summary": "Current weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "variants": {"l10": {"description": l10, "draft": True},
                     "l30": {"description": l30, "draft": True}}}), encoding="utf-8")
    (specs / "get_forecast.yaml").write_text(
        "name: get_forecast\nsummary: Weather forecast for the next days.\n"
        "input_schema: {type: object}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["lint", "--toolset", "weather", "--dataset", "none",
                                      "--json"])
    found = [(f["code"], f["variant"], f["tool"], f["message"])
             for f in json.loads(result.stdout)["findings"] if f["code"] in ("BL017", "BL018")]
    assert found == [
        ("BL017", "l10", "get_weather", "1 line copied from the drafting prompt: 'Use it when "
         "the user, `get_current_time` serves to retrieve the curren' ('Use it when the user,')"),
        ("BL017", "l30", "get_weather", "4 lines copied from the drafting prompt: 'Constraints: "
         "exactly 8 line(s), each a constraint.' ('line(s)'); '- Tool `get_current_time`: Get "
         "current time in a specific timezones.' ('Tool `get_current_time`:'); +2 more"),
        ("BL018", "l30", "get_weather", "7 lines, fewer than l10 (10)"),
        # l50 is not drafted: its template renders the spec's summary and parameters
        ("BL018", "l50", "get_weather", "3 lines, fewer than l10 (10)")]
    assert result.exit_code == 0  # warnings


# -- a spec that is not YAML, or whose variants block is malformed: one error line -------------


def test_variants_draft_and_accept_with_a_broken_spec_are_one_line(tmp_path):
    root = _tools_project(tmp_path)
    (root / "drafter.py").write_text(
        "def draft(messages, tools, trial):\n"
        "    return {'tool_calls': [], 'text': 'Read one note by its id.'}\n", encoding="utf-8")
    spec = root / "descriptions" / "proj" / "specs" / "get_note.yaml"
    spec.write_text("name: get_note\n  bad: [\n", encoding="utf-8")
    drafted = bench(root, "variants", "draft", "-p", "function:drafter:draft", "--toolset",
                    "proj", "--lengths", "3")
    one_error_line(drafted, "get_note.yaml:2: invalid YAML")
    one_error_line(bench(root, "variants", "accept", "--toolset", "proj"),
                   "get_note.yaml:2: invalid YAML")
    assert spec.read_text(encoding="utf-8") == "name: get_note\n  bad: [\n"  # kept


@pytest.mark.parametrize("block, fragment", [
    ("variants:\n  l3: just a string\n", "field 'variants.l3'"),
    ("variants: [1, 2]\n", "field 'variants'"),
])
def test_variants_draft_on_a_spec_with_a_malformed_variants_block_is_one_line(
        tmp_path, block, fragment):
    project = python_project(tmp_path)
    (project / "drafter.py").write_text(
        'def draft(messages, tools, trial):\n'
        '    return {"tool_calls": [], "text": "Adds two numbers."}\n')
    spec = project / "descriptions" / "proj" / "specs" / "add.yaml"
    text = spec.read_text(encoding="utf-8") + block
    spec.write_text(text, encoding="utf-8")
    result = bench(project, "variants", "draft", "--toolset", "proj", "--provider",
                   "function:drafter:draft", "--lengths", "3")
    line = error_lines(result)[0]
    assert line.startswith(f"error: {spec}:") and fragment in line, line
    assert spec.read_text(encoding="utf-8") == text  # nothing overwritten
