"""The executor pipeline: resolution, decoding, validation, capping, per-call isolation."""

from __future__ import annotations

import concurrent.futures
import json

import pytest

from bench.descriptions import load_variant
from bench.executor.backends import ReferenceBackends
from bench.executor.backends.base import Handler
from bench.executor.capping import cap_result, estimate_tokens, to_json
from bench.executor.outcome import RunContext
from bench.executor.pipeline import Executor, ExecutorConfig
from bench.models import Tool, ToolCall
from bench.parse import decode_arguments

SORT_TOOL = Tool(name="rank", description="rank rows", input_schema={
    "type": "object", "additionalProperties": False, "required": ["n"],
    "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10},
                   "order": {"type": "string", "enum": ["ASC", "DESC"]},
                   "tags": {"type": "array", "items": {"type": "string"}},
                   "flag": {"type": "boolean"}}})


def rank(args, ctx):
    return {"n": args["n"], "order": args.get("order", "DESC"), "tags": args.get("tags", [])}


@pytest.fixture
def local_executor():
    ex = Executor({"demo": {"rank": Handler(rank)}})
    yield ex
    ex.close()


def call(name, arguments, call_id="c1", **kw):
    return ToolCall(id=call_id, name=name, arguments=arguments, **kw)


def test_unknown_tool_lists_the_valid_names(local_executor):
    outcome = local_executor.execute(call("rnak", {}), [SORT_TOOL], "demo")
    assert not outcome.success and outcome.error_class == "validation"
    assert outcome.error_code == "unknown_tool" and "valid tools: rank" in outcome.error
    assert outcome.envelope() == {"success": False, "data": None, "error": outcome.error}


@pytest.mark.parametrize("arguments, needle", [
    ({}, "'n' is a required property"),
    ({"n": "3"}, "is not of type 'integer'"),
    ({"n": 3, "order": "up"}, "is not one of ['ASC', 'DESC']"),
    ({"n": 30}, "30 is greater than the maximum of 10"),
    ({"n": 3, "extra": 1}, "Additional properties are not allowed ('extra'"),
])
def test_schema_validation_names_the_problem(local_executor, arguments, needle):
    outcome = local_executor.execute(call("rank", arguments), [SORT_TOOL], "demo")
    assert outcome.error_code == "invalid_arguments" and needle in outcome.error
    assert outcome.error_class == "validation" and outcome.attempts[0].status == "rejected"


def test_lenient_repairs_are_recorded_but_strict_mode_rejects(local_executor):
    raw = json.dumps(json.dumps({"n": "3", "order": "asc", "tags": '["a", "b"]',
                                 "flag": "true"}))
    arguments, notes, valid = decode_arguments(raw)
    outcome = local_executor.execute(call("rank", arguments, notes=notes, valid=valid),
                                     [SORT_TOOL], "demo")
    assert not outcome.success and outcome.error_code == "invalid_arguments"
    assert outcome.repairs == ["arguments: double-encoded JSON string decoded",
                               "n: string '3' -> number 3", "order: enum case 'asc' -> 'ASC'",
                               "tags: JSON string -> array", "flag: string 'true' -> boolean"]
    assert "a lenient runtime would fix" in outcome.error
    lenient = Executor({"demo": {"rank": Handler(rank)}}, ExecutorConfig(lenient=True))
    try:
        repaired = lenient.execute(call("rank", arguments, notes=notes), [SORT_TOOL], "demo")
    finally:
        lenient.close()
    assert repaired.success and repaired.data == {"n": 3, "order": "ASC", "tags": ["a", "b"]}
    assert len(repaired.repairs) == 5


def test_repairs_follow_the_schema_not_the_look_of_a_value(local_executor):
    tool = Tool(name="rank", description="", input_schema={
        "type": "object", "properties": {"n": {"type": "integer"}, "code": {"type": "string"}}})
    outcome = local_executor.execute(call("rank", {"n": 2, "code": "007"}), [tool], "demo")
    assert outcome.repairs == [] and outcome.success


def test_undecodable_arguments_are_a_validation_error(local_executor):
    arguments, notes, valid = decode_arguments('{"n": 3')
    outcome = local_executor.execute(call("rank", arguments, notes=notes, valid=valid),
                                     [SORT_TOOL], "demo")
    assert outcome.error_code == "undecodable_arguments" and "malformed_json" in outcome.error


def test_a_crashing_handler_becomes_an_error_not_an_exception():
    def broken(args, ctx):
        raise KeyError("boom")

    ex = Executor({"demo": {"rank": Handler(broken)}})
    try:
        outcome = ex.execute(call("rank", {"n": 1}), [SORT_TOOL], "demo")
    finally:
        ex.close()
    assert outcome.error_code == "internal_error" and "KeyError" in outcome.error
    assert len(outcome.attempts) == 1  # permanent: not retried


def test_cap_keeps_head_and_tail_and_states_the_total():
    rows = [{"i": i, "text": "x" * 40} for i in range(5000)]
    capped, truncated, total = cap_result({"rows": rows, "row_count": 5000}, 500)
    assert truncated and total > 500
    assert estimate_tokens(to_json(capped)) <= 500
    kept = capped["rows"]
    assert kept[0]["i"] == 0 and kept[-1]["i"] == 4999
    note = capped["truncation"]
    assert note["total_items"] == 5000 and note["kept_head"] + note["kept_tail"] == len(kept)
    assert note["omitted"] == 5000 - len(kept) and "page" in note["hint"]
    text, cut, _ = cap_result("y" * 100_000, 200)
    assert cut and text["head"].startswith('"yyy') and text["tail"].endswith('yy"')
    assert text["truncation"]["total_chars"] == 100_002
    small, cut, _ = cap_result({"a": 1}, 500)
    assert small == {"a": 1} and not cut


def test_two_hundred_concurrent_calls_keep_their_own_results():
    """Mixed tools, 200 calls at once over 32 threads: every outcome belongs to its call."""
    executor = Executor(ReferenceBackends(), ExecutorConfig(workers=16))
    tools = load_variant("ecommerce", "l10").tools
    cities = ["北京", "Shanghai", "Tokyo", "Berlin", "成都"]
    calls = []
    for i in range(200):
        kind = i % 4
        if kind == 0:
            calls.append(call("get_order_status", {"order_id": f"ORD2026{1 + i:04d}"},
                              f"call-{i}"))
        elif kind == 1:
            calls.append(call("get_weather", {"city": cities[i % 5], "days": 1 + i % 7},
                              f"call-{i}"))
        elif kind == 2:
            calls.append(call("query_database", {"sql": f"SELECT {i} AS marker"}, f"call-{i}"))
        else:
            calls.append(call("search_orders", {"page": 1 + i % 5, "page_size": 3},
                              f"call-{i}"))
    try:
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            outcomes = list(pool.map(lambda c: executor.execute(c, tools, "ecommerce",
                                                                RunContext()), calls))
    finally:
        executor.close()
    for i, (sent, outcome) in enumerate(zip(calls, outcomes)):
        assert outcome.call_id == sent.id and outcome.tool == sent.name
        assert outcome.success, outcome.error
        data, kind = outcome.data, i % 4
        if kind == 0:
            assert data["order_id"] == sent.arguments["order_id"]
        elif kind == 1:
            assert len(data["forecast"]) == sent.arguments["days"]
            assert sent.arguments["city"] in (data["city"], data["city_zh"])
        elif kind == 2:
            assert data["rows"] == [[i]]
        else:
            assert data["page"] == sent.arguments["page"]
