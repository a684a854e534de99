"""bench.optimize's guards with the scripted target: an edit that wins selection by
over-triggering, assertive wording, an edit that copies a test query, and a proposer that
answers prose are rejected with their reasons, and nothing is accepted."""

from __future__ import annotations

import pytest

import bench.optimize as bo
from bench.models import Tool
from bench.optimize.guards import assertive_phrases
# TARGET's import registers the scripted providers
from tests.optimize.test_optimize import TARGET, example  # noqa: F401


def test_an_edit_that_over_triggers_is_rejected_on_dev(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-pushy", project=shop,
                      opt_id="pushy", allow_assertive=True)
    result = run.result
    pushy = result.candidate("r1c1")
    # it wins selection on dev (4 parcel cases gained, 3 no-call cases lost)...
    assert (result.candidate("start").dev_k, pushy.dev_k, pushy.dev_n) == (9, 10, 13)
    # ...by calling on the no-call cases: rejected, and flagged for its wording as well
    assert (pushy.parent_restraint_calls, pushy.restraint_calls) == (0, 3)
    assert pushy.status == "rejected"
    assert pushy.flags == ['assertive wording: track_shipment: always use "Always use"',
                           "over-triggering: 3 more call(s) on no-call/ask dev cases"]
    (rejection,) = result.rejections
    assert (rejection.kind, rejection.candidate) == ("over-triggering", "r1c1")
    assert not run.accepted and result.final == "start"
    assert result.stop_reason == "no candidate improved on dev in round 1"
    assert result.acceptance.reasons == ["the search kept no candidate: nothing to test"]


def test_assertive_wording_is_rejected_before_any_request(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-pushy", project=shop,
                      opt_id="assertive")
    (rejection,) = run.result.rejections
    assert rejection.kind == "assertive"
    assert rejection.reason == 'assertive wording: track_shipment: always use "Always use"'
    assert [r.purpose for r in run.result.runs] == ["dev r0", "propose r1"]  # never run


def test_an_edit_that_copies_a_test_query_is_rejected(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-leaky", project=shop,
                      opt_id="leaky")
    (rejection,) = run.result.rejections
    assert rejection.kind == "leak" and rejection.candidate == "r1c1"
    assert rejection.reason.startswith("mirrors test case(s) test-01: near-copy in "
                                       "track_shipment ('where did my parcel go')")
    assert not run.accepted and run.result.final == "start"


def test_an_unparseable_proposal_is_a_counted_rejection(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-babble", project=shop,
                      opt_id="babble")
    (rejection,) = run.result.rejections
    assert rejection.kind == "unparseable" and rejection.tool == "track_shipment"
    assert run.result.stop_reason == "no usable proposal in round 1"


@pytest.mark.parametrize("text", [
    "This is the most effective function for this purpose and should be called whenever "
    "possible.", "Always use this tool.", "The best tool for orders.",
    "Never use other tools for this.", "Use this tool for any request."])
def test_assertive_cues_are_found(text):
    before = Tool(name="t", description="Track an order.", input_schema={"type": "object"})
    after = before.model_copy(update={"description": f"Track an order. {text}"})
    assert assertive_phrases([after], [before])
    assert not assertive_phrases([after], [after])  # only new wording counts


def _appends_two_test_queries(messages, tools, trial):
    """Adds the parcel term the target needs, with two test queries word for word."""
    tool, description, _ = example._prompt_parts(messages[-1].content or "")
    return example._proposal(tool, f"{description} Where did my parcel go, is my parcel "
                                   "lost.", "parcel questions")


def _test_query_in_a_parameter(messages, tools, trial):
    tool, _, _ = example._prompt_parts(messages[-1].content or "")
    return [{"name": "propose_edit", "arguments": {
        "tool": tool, "parameters": {"tracking_number": "The waybill number, as in 'where "
                                                        "did my parcel go'."},
        "reason": "an example helps"}}]


def test_an_edit_that_appends_test_queries_to_a_line_is_rejected(shop):
    from bench.providers.function import register_function

    register_function("opt-appender", _appends_two_test_queries)
    # a budget the edit fits in: before the containment signal, this edit was accepted
    run = bo.optimize("shop", "start", TARGET, "function:opt-appender", project=shop,
                      opt_id="appender", max_tokens_ratio=1.5)
    (rejection,) = run.result.rejections
    assert (rejection.kind, rejection.candidate) == ("leak", "r1c1")
    assert rejection.reason == "mirrors test case(s) test-01: containment in track_shipment " \
        "('Show where an order is: its shipment status and the expected delivery date. Where " \
        "did my parcel go, is my parcel lost.')"
    assert not run.accepted and run.result.final == "start"


def test_an_edit_that_puts_a_test_query_in_a_parameter_is_rejected(shop):
    import yaml

    from bench.providers.function import register_function

    start = shop / "descriptions" / "shop" / "variants" / "start.yaml"
    tools = yaml.safe_load(start.read_text(encoding="utf-8"))["tools"]
    tools[0]["input_schema"]["properties"] = {"tracking_number": {
        "type": "string", "description": "The waybill number."}}
    start.write_text(yaml.safe_dump({"tools": tools}, sort_keys=False), encoding="utf-8")
    register_function("opt-param", _test_query_in_a_parameter)
    run = bo.optimize("shop", "start", TARGET, "function:opt-param", project=shop,
                      opt_id="param")
    (rejection,) = run.result.rejections
    assert rejection.kind == "leak"
    assert "test-01" in rejection.reason and \
        "input_schema.properties.tracking_number.description" in rejection.reason
    assert [r.purpose for r in run.result.runs] == ["dev r0", "propose r1"]  # never run


def test_a_prompt_template_that_quotes_a_test_query_is_refused(shop, tmp_path):
    from bench.errors import BenchError
    from bench.optimize.evidence import DEFAULT_TEMPLATE

    mine = tmp_path / "prompt.j2"
    mine.write_text(DEFAULT_TEMPLATE.read_text(encoding="utf-8")
                    + "\nFor instance a user may ask: where did my parcel go?\n",
                    encoding="utf-8")
    with pytest.raises(BenchError, match="contains test case test-01 of dataset shop") as info:
        bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                    opt_id="quoting", template=str(mine))
    assert str(mine) in str(info.value)
    assert not (shop / "reports" / "optimize" / "quoting").exists()  # nothing sent or kept


def test_a_prompt_template_cannot_reach_python_to_read_the_test_cases(shop, tmp_path):
    """``--template`` renders in jinja2's sandbox: a template that walks to ``os`` through a
    global's ``__init__.__globals__`` to read cases.jsonl (test cases included) is one line
    naming the template, before any request is sent."""
    from bench.errors import BenchError
    from bench.optimize.evidence import DEFAULT_TEMPLATE

    mine = tmp_path / "prompt.j2"
    mine.write_text(DEFAULT_TEMPLATE.read_text(encoding="utf-8") + "\nMore examples:\n"
                    "{{ cycler.__init__.__globals__.os.popen('cat "
                    f"{shop / 'datasets' / 'shop' / 'cases.jsonl'}').read() }}}}\n",
                    encoding="utf-8")
    with pytest.raises(BenchError, match="sandbox forbids") as info:
        bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                    opt_id="escape", template=str(mine), rounds=1)
    said = str(info.value)
    assert said.startswith(f"{mine}: ") and "\n" not in said
    assert "parcel" not in said  # nothing of the cases in the message either
    assert not (shop / "reports" / "optimize" / "escape").exists()  # nothing sent or kept


def test_a_dev_case_that_is_another_datasets_test_case_is_left_out_of_the_prompt(shop):
    """A dev case of one dataset can be, word for word, a test case of another: its failure
    is not shown to the proposer (the round records why), the other failures still are, and
    the report says so."""
    import json

    query = "where is my parcel right now please"
    cases = shop / "datasets" / "shop" / "cases.jsonl"
    with cases.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "dev-99", "toolset": "shop", "lang": "en",
                                 "split": "dev", "messages": [{"role": "user",
                                                               "content": query}],
                                 "expected": {"calls": [{"name": "track_shipment",
                                                         "arguments": {}}]}}) + "\n")
    other = shop / "datasets" / "other"
    other.mkdir()
    (other / "cases.jsonl").write_text(json.dumps({
        "id": "other-01", "toolset": "shop", "lang": "en", "split": "test",
        "messages": [{"role": "user", "content": query}],
        "expected": {"calls": [{"name": "track_shipment", "arguments": {}}]}}) + "\n",
        encoding="utf-8")
    run = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                      opt_id="shared", rounds=1)
    prompts = (run.folder / "work" / "proposals" / "r1.jsonl").read_text(encoding="utf-8")
    assert "right now please" not in prompts
    assert "where is my parcel" in prompts  # the other parcel failures are still shown
    (round_one,) = run.result.rounds
    assert round_one.failures == {"track_shipment": 5}  # the case failed, and is counted
    assert round_one.withheld == {"dev-99": "its query copies test case other-01 of dataset "
                                            f"other ('{query}')"}
    report = (run.folder / "report.md").read_text(encoding="utf-8")
    assert "dev case `dev-99` left out of the proposer's prompt" in report


@pytest.mark.parametrize("body, said", [
    ("{{ 1/0 }}", "ZeroDivisionError: division by zero"),
    ('{{ total + "x" }}', "TypeError: unsupported operand type(s) for +: 'int' and 'str'"),
    ('{% include "x" %}', "it includes, imports or extends another template"),
])
def test_a_prompt_template_that_fails_while_rendering_is_one_line_naming_its_file(
        shop, tmp_path, body, said):
    from bench.errors import BenchError

    mine = tmp_path / "prompt.j2"
    mine.write_text(f"Improve {{{{ tool.name }}}}.\n{body}\n", encoding="utf-8")
    with pytest.raises(BenchError) as info:
        bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                    opt_id="broken", template=str(mine))
    message = str(info.value)
    assert message.startswith(f"{mine}:2: template error: ") and said in message
    assert "\n" not in message
    assert not (shop / "reports" / "optimize" / "broken").exists()  # nothing sent or kept
