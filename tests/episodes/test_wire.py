"""Episodes on the wire: a scripted three-step episode through each HTTP adapter's real SDK
against the loopback fake server, asserting the exact tool-result messages each provider
receives at each step (ids paired with the calls they answer, order kept, errors flagged in
the provider's own way: Anthropic ``is_error``, Gemini ``functionResponse.response.error``).

The script: step 1 asks for two orders in parallel, one of which does not exist (the
reference executor answers ``not_found``); step 2 tracks the first order's parcel; step 3 is
the final answer. The calls run on the real executor against the episode's database copy.
"""

from __future__ import annotations

import json

import pytest

from bench.providers import make_provider
from bench.runner import RunConfig, Runner
from tests.fakeserver import (Reply, anthropic_body, chat_body, gemini_body,
                              gemini_stream, responses_body)
from tests.stored import row_dicts

QUESTION = ("Check orders ORD20250002 and ORD99999999, then tell me where the first one's "
            "parcel is.")
FOUND, MISSING, PARCEL = "ORD20250002", "ORD99999999", "EA515077827CN"  # seeded shop data
FINAL = "ORD20250002 was delivered (parcel EA515077827CN); ORD99999999 does not exist."
CASE = {"id": "wire-1", "toolset": "ecommerce", "lang": "en", "kind": "episode",
        "messages": [{"role": "user", "content": QUESTION}],
        "success": {"answer_facts": [["delivered"]]},
        "required_calls": [
            {"name": "get_order_status", "arguments": {"order_id": [FOUND]}},
            {"name": "track_shipment", "arguments": {"tracking_number": [PARCEL]},
             "after": [0]}],
        "max_steps": 5}
STEP1 = [("get_order_status", {"order_id": FOUND}), ("get_order_status", {"order_id": MISSING})]
STEP2 = [("track_shipment", {"tracking_number": PARCEL})]

# each run copies the shop database and (first in a session) builds it: seconds per test
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("keys")]  # keys: tests/conftest.py


def responses_with_ids(calls, call_ids=(), text=None):
    """A Responses body whose ``function_call`` items carry the given ``call_id`` s."""
    body = responses_body(calls=calls, text=text)
    for item, call_id in zip([i for i in body["output"] if i["type"] == "function_call"],
                             call_ids):
        item["call_id"] = call_id
    return body


SCRIPTS = {
    "openai": [chat_body(calls=STEP1, ids=["call_a", "call_b"]),
               chat_body(calls=STEP2, ids=["call_c"]), chat_body(text=FINAL)],
    "openai-responses": [responses_with_ids(STEP1, ["call_a", "call_b"]),
                         responses_with_ids(STEP2, ["call_c"]), responses_body(text=FINAL)],
    "anthropic": [anthropic_body(calls=STEP1, ids=["toolu_a", "toolu_b"]),
                  anthropic_body(calls=STEP2, ids=["toolu_c"]), anthropic_body(text=FINAL)],
    # Gemini sends no call ids: the loop gives each call one, unique in the episode
    "gemini": [gemini_body(calls=STEP1), gemini_body(calls=STEP2), gemini_body(text=FINAL)],
}
IDS = {"openai": ["call_a", "call_b", "call_c"],
       "openai-responses": ["call_a", "call_b", "call_c"],
       "anthropic": ["toolu_a", "toolu_b", "toolu_c"],
       "gemini": ["call_0", "call_1", "call_1_0"]}
BASE = {"openai": "/v1", "openai-responses": "/v1", "anthropic": "", "gemini": ""}


def run_episode(project, tmp_path, server, kind, script=None, stream=None):
    """Run the one-episode dataset through ``kind``'s adapter, the server answering
    ``script`` (default ``SCRIPTS[kind]``), each body sent as server-sent events by
    ``stream`` when given (the adapter then asks for a stream); return (row, requests)."""
    dataset = tmp_path / "episodes.jsonl"
    dataset.write_text(json.dumps(CASE) + "\n", encoding="utf-8")
    server.clear()
    server.script(*(Reply(events=stream(body)) if stream else Reply(body=body)
                    for body in script or SCRIPTS[kind]))
    provider_id = f"{kind}:model-test"
    config = RunConfig(dataset=str(dataset), variants=["l3"], providers=[provider_id])
    runner = Runner(config, run_id=f"wire-{kind}", provider_factory=lambda pid, cfg:
                    make_provider(pid, base_url=server.url + BASE[kind],
                                  stream=stream is not None))
    runner.run()
    (row,) = row_dicts(runner.store)
    return row, list(server.requests)


def check_results_sent(row):
    """The trajectory's results: the found order, the not_found error, the parcel; returns
    their contents (what each provider must have received)."""
    steps = row["episode"]["steps"]
    assert [len(s["calls"]) for s in steps] == [2, 1, 0]
    assert row["episode"]["stop_reason"] == "final_answer"
    assert row["episode"]["final_answer"] == FINAL
    found, missing = steps[0]["results"]
    (parcel,) = steps[1]["results"]
    assert [r["is_error"] for r in (found, missing, parcel)] == [False, True, False]
    assert missing["error_code"] == "not_found"
    assert json.loads(found["content"])["data"]["tracking_number"] == PARCEL
    assert MISSING in json.loads(missing["content"])["error"]
    assert json.loads(parcel["content"])["data"]["status"] == "delivered"
    assert row["metrics"]["task_success"] is True and row["metrics"]["errors_seen"] == 1
    return found["content"], missing["content"], parcel["content"]


def test_openai_chat_tool_messages_carry_tool_call_id(project, tmp_path, server):
    row, requests = run_episode(project, tmp_path, server, "openai")
    found, missing, parcel = check_results_sent(row)
    assert [r.path for r in requests] == ["/v1/chat/completions"] * 3
    a, b, c = IDS["openai"]
    user = {"role": "user", "content": QUESTION}
    # "" beside tool_calls when the model wrote nothing (llama.cpp's Python server rejects
    # null, and its chat templates need a content)
    first = {"role": "assistant", "content": "", "tool_calls": [
        {"id": a, "type": "function", "function": {"name": "get_order_status",
                                                   "arguments": json.dumps({"order_id": FOUND})}},
        {"id": b, "type": "function", "function": {"name": "get_order_status",
                                                   "arguments": json.dumps({"order_id": MISSING})}}]}
    results = [{"role": "tool", "tool_call_id": a, "content": found},
               {"role": "tool", "tool_call_id": b, "content": missing}]
    second = {"role": "assistant", "content": "", "tool_calls": [
        {"id": c, "type": "function", "function": {"name": "track_shipment",
                                                   "arguments": json.dumps({"tracking_number": PARCEL})}}]}
    assert requests[0].body["messages"] == [user]
    assert requests[1].body["messages"] == [user, first, *results]
    assert requests[2].body["messages"] == [user, first, *results, second,
                                            {"role": "tool", "tool_call_id": c, "content": parcel}]


def test_openai_responses_function_call_output_carries_call_id(project, tmp_path, server):
    row, requests = run_episode(project, tmp_path, server, "openai-responses")
    found, missing, parcel = check_results_sent(row)
    assert [r.path for r in requests] == ["/v1/responses"] * 3
    a, b, c = IDS["openai-responses"]
    user = {"role": "user", "content": QUESTION}
    step1 = [{"type": "function_call", "call_id": a, "name": "get_order_status",
              "arguments": json.dumps({"order_id": FOUND})},
             {"type": "function_call", "call_id": b, "name": "get_order_status",
              "arguments": json.dumps({"order_id": MISSING})},
             {"type": "function_call_output", "call_id": a, "output": found},
             {"type": "function_call_output", "call_id": b, "output": missing}]
    step2 = [{"type": "function_call", "call_id": c, "name": "track_shipment",
              "arguments": json.dumps({"tracking_number": PARCEL})},
             {"type": "function_call_output", "call_id": c, "output": parcel}]
    assert requests[0].body["input"] == [user]
    assert requests[1].body["input"] == [user, *step1]
    assert requests[2].body["input"] == [user, *step1, *step2]


def test_anthropic_tool_result_blocks_flag_the_failed_call(project, tmp_path, server):
    row, requests = run_episode(project, tmp_path, server, "anthropic")
    found, missing, parcel = check_results_sent(row)
    assert [r.path for r in requests] == ["/v1/messages"] * 3
    a, b, c = IDS["anthropic"]
    user = {"role": "user", "content": [{"type": "text", "text": QUESTION}]}
    first = {"role": "assistant", "content": [
        {"type": "tool_use", "id": a, "name": "get_order_status", "input": {"order_id": FOUND}},
        {"type": "tool_use", "id": b, "name": "get_order_status",
         "input": {"order_id": MISSING}}]}
    # both results of one assistant turn in one user message, in call order; only the
    # failed one has is_error
    results = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": a, "content": found},
        {"type": "tool_result", "tool_use_id": b, "content": missing, "is_error": True}]}
    second = {"role": "assistant", "content": [
        {"type": "tool_use", "id": c, "name": "track_shipment",
         "input": {"tracking_number": PARCEL}}]}
    last = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": c,
                                         "content": parcel}]}
    assert requests[0].body["messages"] == [user]
    assert requests[1].body["messages"] == [user, first, results]
    assert requests[2].body["messages"] == [user, first, results, second, last]


def test_gemini_function_response_error_or_output(project, tmp_path, server):
    row, requests = run_episode(project, tmp_path, server, "gemini")
    found, missing, parcel = check_results_sent(row)
    assert [r.path for r in requests] == ["/v1beta/models/model-test:generateContent"] * 3
    a, b, c = IDS["gemini"]
    assert [call["id"] for step in row["episode"]["steps"] for call in step["calls"]] == \
        [a, b, c]
    user = {"role": "user", "parts": [{"text": QUESTION}]}
    first = {"role": "model", "parts": [
        {"functionCall": {"id": a, "name": "get_order_status", "args": {"order_id": FOUND}}},
        {"functionCall": {"id": b, "name": "get_order_status",
                          "args": {"order_id": MISSING}}}]}
    results = {"role": "user", "parts": [
        {"functionResponse": {"id": a, "name": "get_order_status",
                              "response": {"output": found}}},
        {"functionResponse": {"id": b, "name": "get_order_status",
                              "response": {"error": missing}}}]}
    second = {"role": "model", "parts": [
        {"functionCall": {"id": c, "name": "track_shipment",
                          "args": {"tracking_number": PARCEL}}}]}
    last = {"role": "user", "parts": [
        {"functionResponse": {"id": c, "name": "track_shipment",
                              "response": {"output": parcel}}}]}
    assert requests[0].body["contents"] == [user]
    assert requests[1].body["contents"] == [user, first, results]
    assert requests[2].body["contents"] == [user, first, results, second, last]


@pytest.mark.parametrize("stream", [None, gemini_stream], ids=["body", "stream"])
def test_gemini_thought_signatures_go_back_with_their_calls(project, tmp_path, server,
                                                            stream):
    # Gemini 3 signs a turn's first functionCall part and answers HTTP 400 when a later
    # request's history drops the signature ("Function call is missing a
    # thought_signature"): each must be sent back unchanged, on the part it came with
    first_sig, second_sig = "c2lnbmF0dXJlLUE=", "c2lnbmF0dXJlLUI="  # base64, as sent
    script = [gemini_body(calls=STEP1, thought_signature=first_sig),
              gemini_body(calls=STEP2, thought_signature=second_sig), gemini_body(text=FINAL)]
    row, requests = run_episode(project, tmp_path, server, "gemini", script, stream)
    check_results_sent(row)
    method = "streamGenerateContent" if stream else "generateContent"
    assert [r.path for r in requests] == [f"/v1beta/models/model-test:{method}"] * 3
    a, b, c = IDS["gemini"]
    first = {"role": "model", "parts": [
        {"functionCall": {"id": a, "name": "get_order_status", "args": {"order_id": FOUND}},
         "thoughtSignature": first_sig},
        {"functionCall": {"id": b, "name": "get_order_status",
                          "args": {"order_id": MISSING}}}]}
    second = {"role": "model", "parts": [
        {"functionCall": {"id": c, "name": "track_shipment",
                          "args": {"tracking_number": PARCEL}},
         "thoughtSignature": second_sig}]}
    assert requests[1].body["contents"][1] == first
    assert requests[2].body["contents"][1] == first
    assert requests[2].body["contents"][3] == second
