"""Provider replies of unexpected shape through the whole CLI (`bench run` against the loopback
fake server, real openai SDK): none ends the run (issue 19, items 1, 2 and 4).

- 16 Chat Completions bodies of the 14 shapes issue 19 lists each become their row's answer:
  invalid with code ``malformed_reply`` and the field named, except ``content`` as a list of
  parts, which real servers send and which is read.
- A 200 reply whose body is not JSON (or not UTF-8, or nested past the decoder's limit) is
  retried like a 5xx; after the last attempt it is the row's invalid answer
  (``unreadable_reply``).
- Lone surrogates in a model's tool name, argument keys and values and prose leave ``bench
  report`` (one and two runs), ``bench traces`` (table and ``--json``) and ``bench compare``
  working, and the row keeps the text as received, escaped.
"""

from __future__ import annotations

import pytest
import copy
import json

from tests.fakeserver import FakeServer, Reply, chat_body, gemini_body

BASE = chat_body(calls=[("search_orders", {"keyword": "headphones"})])


def _set(path: tuple, value):
    def mutate(body):
        node = body
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


MESSAGE = ("choices", 0, "message")
CALL = (*MESSAGE, "tool_calls", 0)
# (issue 19's shape, how to make it, the error it must give; None: a valid answer)
SHAPES = [
    ("message as a string", _set(MESSAGE, "hello"),
     "choices[0].message: expected an object, got string"),
    ("message as a list", _set(MESSAGE, [{"role": "assistant"}]),
     "choices[0].message: expected an object, got array"),
    ("tool_calls as a string", _set((*MESSAGE, "tool_calls"), "search_orders"),
     "choices[0].message.tool_calls: expected a list, got string"),
    ("tool_calls as a dict", _set((*MESSAGE, "tool_calls"), {"0": {}}),
     "choices[0].message.tool_calls: expected a list, got object"),
    ("tool_calls [null]", _set((*MESSAGE, "tool_calls"), [None]),
     "choices[0].message.tool_calls[0]: expected an object, got null"),
    ("function as a string", _set((*CALL, "function"), "search_orders"),
     "choices[0].message.tool_calls[0].function: expected an object, got string"),
    ("an integer call id", _set((*CALL, "id"), 17),
     "choices[0].message.tool_calls[0].id: expected a string, got integer"),
    ("content as an object", _set((*MESSAGE, "content"), {"text": "hi"}),
     "choices[0].message.content: expected a string, a list of parts or null, got object"),
    ("content as a list of parts", _set((*MESSAGE, "content"),
                                        [{"type": "text", "text": "Looking "},
                                         {"type": "text", "text": "it up."}]), None),
    ("refusal as a number", _set((*MESSAGE, "refusal"), 1),
     "choices[0].message.refusal: expected a string, got integer"),
    ("finish_reason as an object", _set(("choices", 0, "finish_reason"), {"type": "stop"}),
     "choices[0].finish_reason: expected a string, got object"),
    ("usage as a string", _set(("usage",), "100 tokens"),
     "usage: expected an object, got string"),
    ("a token count as a string", _set(("usage", "prompt_tokens"), "100"),
     "usage.prompt_tokens: expected an integer, got string"),
    ("a token count NaN", _set(("usage", "completion_tokens"), float("nan")),
     "usage.completion_tokens: expected an integer, got NaN"),
    ("a token count Infinity", _set(("usage", "total_tokens"), float("inf")),
     "usage.total_tokens: expected an integer, got Infinity"),
    ("prompt_tokens_details as a string", _set(("usage", "prompt_tokens_details"), "cached"),
     "usage.prompt_tokens_details: expected an object, got string"),
]


def _rows(project, run_id):
    path = project / "reports" / "runs" / run_id / "results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _body(mutate) -> bytes:
    body = copy.deepcopy(BASE)
    mutate(body)
    return json.dumps(body).encode("utf-8")  # json writes NaN and Infinity, as servers do


@pytest.mark.slow
def test_replies_of_unexpected_shape_are_invalid_rows_and_the_run_completes(run_bench,
                                                                            project):
    with FakeServer() as server:
        server.script(*(Reply(raw=_body(mutate)) for _, mutate, _ in SHAPES))
        result = run_bench("run", "--provider", f"openai-compat:m@{server.url}/v1",
                           "--limit", str(len(SHAPES)), "--variants", "l3",
                           "--concurrency", "1", "--no-execute", "--run-id", "shapes",
                           timeout=300)
        sent = len(server.requests)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = _rows(project, "shapes")
    assert len(rows) == len(SHAPES) == sent  # nothing retried: a bad shape is an answer
    errors = [row["parsed"]["error"] for row in rows]
    for label, _, expected in SHAPES:
        if expected is not None:
            assert f"malformed_reply: {expected}" in errors, label
    invalid = [row for row in rows if row["parsed"]["error"]]
    assert len(invalid) == len(SHAPES) - 1
    for row in invalid:
        assert row["parsed"]["error_code"] == "malformed_reply"
        assert set(row["metrics"]["error_codes"]) == {"unparseable", "malformed_reply"}
        assert row["parsed"]["calls"] == [] and row["response"]["raw"] is not None
    (parts,) = [row for row in rows if not row["parsed"]["error"]]
    assert parts["parsed"]["text"] == "Looking it up."
    assert [c["name"] for c in parts["parsed"]["calls"]] == ["search_orders"]
    manifest = json.loads((project / "reports" / "runs" / "shapes" / "manifest.json")
                          .read_text(encoding="utf-8"))
    assert manifest["status"] == "complete"
    assert "reasoning" not in result.stdout  # no reasoning tokens: no column


@pytest.mark.slow
def test_a_200_reply_that_is_not_json_is_retried_then_is_the_rows_invalid_answer(run_bench,
                                                                                project):
    good = Reply(body=chat_body(calls=[("search_orders", {"keyword": "cable"})]))
    with FakeServer() as server:
        server.script(
            Reply(raw=b"<html>502 Bad Gateway</html>"), good,   # row 1: retried, then valid
            Reply(raw=b'{"id": "\xff\xfe"}'), Reply(raw=b"[" * 100_000),  # row 2: both bad
            Reply(raw=b""), good)                               # row 3: empty, then valid
        result = run_bench("run", "--provider", f"openai-compat:m@{server.url}/v1",
                           "--limit", "3", "--variants", "l3", "--concurrency", "1",
                           "--attempts", "2", "--no-execute", "--run-id", "notjson",
                           timeout=300)
        sent = len(server.requests)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = _rows(project, "notjson")
    assert len(rows) == 3 and sent == 6
    assert [row["attempts"] for row in rows] == [2, 2, 2]
    assert rows[0]["parsed"]["error"] is None and rows[2]["parsed"]["error"] is None
    bad = rows[1]["parsed"]
    assert bad["error_code"] == "unreadable_reply"
    assert "HTTP 200 reply body is JSON nested deeper than the decoder's limit" in bad["error"]
    assert "unreadable_reply" in rows[1]["metrics"]["error_codes"]


SURROGATE_BODY = chat_body(calls=[("search_orders\ud800", {"keyword\udfff": "cable \ud83d"})],
                           text="Sure \udc00")


@pytest.mark.slow
def test_lone_surrogates_from_the_model_leave_every_reader_working(run_bench, project):
    # ensure_ascii writes the lone surrogates as \\udXXX escapes: valid UTF-8 bytes, as a
    # server sends them
    raw = json.dumps(SURROGATE_BODY).encode("ascii")
    with FakeServer(handler=lambda request: Reply(raw=raw)) as server:
        for run_id in ("lone1", "lone2"):
            result = run_bench("run", "--provider", f"openai-compat:m@{server.url}/v1",
                               "--limit", "2", "--variants", "l3", "--run-id", run_id,
                               timeout=300)
            assert result.returncode == 0, result.stderr
    row = _rows(project, "lone1")[0]
    (call,) = row["parsed"]["calls"]
    assert call["name"] == "search_orders\ufffd" and "broken_unicode" in call["notes"]
    assert call["arguments"] == {"keyword\ufffd": "cable \ufffd"}
    assert row["parsed"]["text"] == "Sure \ufffd"
    # what was received stays in the row, each lone surrogate as its escape
    assert call["raw_arguments"] == '{"keyword\\udfff": "cable \\ud83d"}'
    sent_call = row["response"]["raw"]["choices"][0]["message"]["tool_calls"][0]
    assert sent_call["function"]["name"] == "search_orders\\ud800"
    outputs = {}
    for args in (("report", "lone1"), ("report", "lone1", "lone2"), ("traces", "lone1"),
                 ("traces", "lone1", "--json"), ("compare", "lone1", "lone2")):
        result = run_bench(*args, timeout=300)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr, args
        outputs[args] = result.stdout
    assert "search_orders\ufffd" in outputs[("traces", "lone1", "--json")]


@pytest.mark.slow
def test_gemini_thoughts_count_in_tokens_budgets_the_table_and_the_report(run_bench, project,
                                                                         monkeypatch):
    body = gemini_body(calls=[("search_orders", {"keyword": "cable"})], usage=(100, 20, 0))
    body["usageMetadata"]["thoughtsTokenCount"] = 1000  # billed as output, not in the 20
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")
    with FakeServer(handler=lambda request: Reply(body=body)) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        thinks = run_bench("run", "--provider", "gemini:gemini-test", "--limit", "2",
                           "--variants", "l3", "--no-execute", "--run-id", "thinks",
                           timeout=300)
        budget = run_bench("run", "--provider", "gemini:gemini-test", "--limit", "5",
                           "--variants", "l3", "--no-execute", "--concurrency", "1",
                           "--max-total-tokens", "2000", "--run-id", "budget", timeout=300)
    assert thinks.returncode == 0, thinks.stderr
    assert "reasoning" in thinks.stdout  # the table's reasoning column
    rows = _rows(project, "thinks")
    assert [(r["usage"]["completion_tokens"], r["usage"]["reasoning_tokens"]) for r in rows] \
        == [(1020, 1000)] * 2
    # 1,120 tokens a request: the second reaches 2,000 (with thoughts ignored, 120 each,
    # all five would run)
    assert budget.returncode == 3, budget.stderr
    assert len(_rows(project, "budget")) == 2
    manifest = json.loads((project / "reports" / "runs" / "budget" / "manifest.json")
                          .read_text(encoding="utf-8"))
    assert manifest["status"] == "budget_exhausted"
    assert manifest["spent"]["billed_tokens"] == 2240
    page = run_bench("report", "thinks", "-o", "-", timeout=300)
    assert page.returncode == 0, page.stderr
    assert "<th>mean reasoning tokens</th>" in page.stdout
    assert "reasoning_tokens" in page.stdout  # the run's token totals
