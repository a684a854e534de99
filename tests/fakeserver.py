"""A scripted HTTP server on 127.0.0.1 that speaks the providers' wire protocols.

Tests (and ``benchmarks/``) point the real SDKs at :attr:`FakeServer.url` and script what the
server answers: normal answers, parallel calls, arguments as an object, malformed JSON,
truncated output, 429 with Retry-After, 500, slow answers past the client's timeout, streams
(server-sent events) with a repeated index, and the quirks of real traffic (each seen in
recorded responses, see ``tests/data/recorded/``): usage on the finish chunk, a repeated first
argument fragment, a first tool call at ``index: 1``, ``name: ""`` on continuation deltas
(:func:`chat_fragments`, :func:`chat_stream`), Anthropic's empty first ``partial_json`` and
``ping`` events (:func:`anthropic_stream`), Gemini ``thoughtSignature`` parts
(:func:`gemini_body`, :func:`gemini_stream`), Anthropic's tool search (``server_tool_use``,
``tool_search_tool_result`` with ``tool_reference`` blocks, then ``tool_use``:
:func:`anthropic_tool_search_body`, :func:`tool_search_handler`), an error inside a 200 stream
(:func:`chat_stream`'s ``error``, :func:`anthropic_stream`'s ``error``), SSE comment lines, gzip
bodies and chunked transfer (:class:`Reply`).

Usage::

    with FakeServer(latency_s=0.1) as server:          # fixed latency for every answer
        server.script(Reply(429, {"error": {...}}, headers={"retry-after": "1"}),
                      Reply(body=chat_body(calls=[("get_weather", {"city": "Paris"})])))
        ... openai.OpenAI(base_url=server.url + "/v1", api_key="x") ...
        server.requests[0].body          # what the SDK sent

Unscripted requests get :func:`default_reply` (a valid answer for the path), or what the
``handler`` callable returns, so a benchmark can run thousands of requests unscripted
(``record=False`` keeps memory flat). From outside the test suite import it as
``tests.fakeserver`` with the repository root on ``sys.path``. Wire
formats follow the providers' API references (OpenAI Chat Completions and Responses, Anthropic
Messages and streaming events, Gemini generateContent).
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

__all__ = ["FakeServer", "Reply", "Recorded", "chat_body", "chat_stream", "chat_fragments",
           "anthropic_body", "anthropic_stream", "anthropic_tool_search_body",
           "anthropic_blocks_stream", "tool_search_handler", "responses_body", "responses_stream",
           "gemini_body", "gemini_stream", "error_body", "default_reply"]


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        status: HTTP status code.
        body: a JSON-able value (sent as JSON), or None.
        headers: extra response headers.
        delay_s: seconds to wait before answering (on top of the server's fixed latency).
        events: server-sent events ``(event name or None, data)``; data dicts become JSON and
            ``"[DONE]"`` is sent as is; the name ``":"`` sends ``data`` as an SSE comment line
            (``: OPENROUTER PROCESSING``). Replaces ``body`` when given.
        raw: exact response bytes (e.g. broken JSON, or a recorded body); replaces ``body``.
        content_type: the Content-Type header (default: ``text/event-stream`` for events,
            else ``application/json``).
        gzip: send the payload gzip-compressed with ``Content-Encoding: gzip``.
        chunk_size: send the payload with ``Transfer-Encoding: chunked`` in chunks of this
            many bytes (cut anywhere, even inside a line or a UTF-8 character), no
            Content-Length.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    events: list[tuple[str | None, Any]] | None = None
    raw: bytes | None = None
    content_type: str | None = None
    gzip: bool = False
    chunk_size: int | None = None


@dataclass
class Recorded:
    """A request the server received: method, path, lower-cased headers, decoded JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


_ids = itertools.count(1)


#: Dummy API keys for the SDKs under test: they only ever reach 127.0.0.1.
DUMMY_KEYS = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test",
              "GEMINI_API_KEY": "gm-test"}


def complete_once(provider: Any, *args: Any, **kwargs: Any) -> Any:
    """``provider.complete(*args, **kwargs)`` on a fresh event loop, then the provider's async
    client closed on that loop (as a run closes it): one request from synchronous test code."""
    async def once() -> Any:
        try:
            return await provider.complete(*args, **kwargs)
        finally:
            await provider.aclose()
    return asyncio.run(once())


def set_dummy_keys(monkeypatch: Any) -> None:
    """Set :data:`DUMMY_KEYS` in the environment for one test (pytest's ``monkeypatch``)."""
    for name, value in DUMMY_KEYS.items():
        monkeypatch.setenv(name, value)


def error_body(status: int, message: str) -> dict[str, Any]:
    """An error body in the OpenAI/Anthropic style ``{"error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": f"http_{status}", "message": message,
                                       "code": status}}


def chat_body(calls: Sequence[tuple[str, Any]] = (), text: str | None = None,
              finish: str | None = None, usage: tuple[int, int, int] = (100, 20, 0),
              ids: Sequence[str] | None = None, model: str = "fake-model") -> dict[str, Any]:
    """A Chat Completions body. ``calls``: (name, arguments) where arguments is sent as is
    when it is a string and JSON-encoded otherwise, unless it is wrapped as ``("obj", {...})``
    (sent as an object)."""
    tool_calls = []
    for index, (name, arguments) in enumerate(calls):
        if isinstance(arguments, tuple) and arguments[0] == "obj":
            wire = arguments[1]
        elif isinstance(arguments, str):
            wire = arguments
        else:
            wire = json.dumps(arguments, ensure_ascii=False)
        tool_calls.append({"id": ids[index] if ids else f"call_{next(_ids)}", "type": "function",
                           "function": {"name": name, "arguments": wire}})
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt, completion, cached = usage
    return {"id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish or ("tool_calls" if calls else "stop")}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def chat_fragments(call_id: str, name: str, arguments: str, *, index: int = 0,
                   pieces: int = 3, repeat_first: bool = False, empty_name: bool = False
                   ) -> list[dict[str, Any]]:
    """``delta.tool_calls`` fragments of one call, for :func:`chat_stream`.

    The first fragment carries ``id``, ``name`` and the first piece of ``arguments`` (cut into
    ``pieces`` pieces); the others carry the rest.

    Args:
        index: the stream ``index`` of the call (real servers may start at 1).
        repeat_first: send the first argument piece a second time in the next fragment (a
            server that repeats the opening fragment's arguments).
        empty_name: continuation fragments carry ``name: ""`` (as some OpenAI-compatible
            servers send), instead of no name.
    """
    size = max(1, -(-len(arguments) // max(1, pieces)))
    cut = [arguments[i:i + size] for i in range(0, len(arguments), size)] or [""]
    if repeat_first:
        cut.insert(1, cut[0])
    out = [{"index": index, "id": call_id, "name": name, "arguments": cut[0]}]
    for piece in cut[1:]:
        fragment: dict[str, Any] = {"index": index, "arguments": piece}
        if empty_name:
            fragment["name"] = ""
        out.append(fragment)
    return out


def chat_stream(fragments: Sequence[dict[str, Any]], finish: str = "tool_calls",
                text: str | None = None, usage: tuple[int, int] = (100, 20), *,
                usage_on_finish: bool = False, error: dict[str, Any] | None = None,
                comments: bool = False) -> list[tuple[str | None, Any]]:
    """Chat Completions chunks: one per ``delta.tool_calls`` fragment (dicts with ``index``,
    optional ``id``, ``name`` (sent even when ``""``), ``arguments``), then the finish chunk,
    a usage chunk and ``[DONE]``.

    Args:
        usage_on_finish: put ``usage`` on the finish chunk and send no separate usage chunk
            (as OpenRouter, Groq and vLLM do).
        error: an error chunk ``{"error": error}`` sent after the finish chunk instead of the
            usage chunk (OpenRouter's ``{"error": {"code": 400, "message": "Token limit
            reached"}}`` after ``finish_reason: "length"``).
        comments: start with SSE comment lines (``: OPENROUTER PROCESSING``).
    """
    base = {"id": f"chatcmpl-{next(_ids)}", "object": "chat.completion.chunk", "created": 0,
            "model": "fake-model"}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta,
                                     "finish_reason": finish_reason}]}

    events: list[tuple[str | None, Any]] = []
    if comments:
        events += [(":", "OPENROUTER PROCESSING"), (":", "OPENROUTER PROCESSING")]
    events.append((None, chunk({"role": "assistant"})))
    if text:
        events.append((None, chunk({"content": text})))
    for fragment in fragments:
        call: dict[str, Any] = {"index": fragment.get("index", 0)}
        if fragment.get("id"):
            call["id"] = fragment["id"]
            call["type"] = "function"
        function = {}
        if "name" in fragment:
            function["name"] = fragment["name"]
        if "arguments" in fragment:
            function["arguments"] = fragment["arguments"]
        call["function"] = function
        events.append((None, chunk({"tool_calls": [call]})))
    counted = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
               "total_tokens": sum(usage)}
    events.append((None, {**chunk({}, finish), "usage": counted} if usage_on_finish
                   else chunk({}, finish)))
    if error is not None:
        events.append((None, {**base, "choices": [], "error": error}))
    elif not usage_on_finish:
        events.append((None, {**base, "choices": [], "usage": counted}))
    events.append((None, "[DONE]"))
    return events


def anthropic_body(calls: Sequence[tuple[str, Any]] = (), text: str | None = None,
                   stop: str | None = None, usage: tuple[int, int, int] = (100, 20, 0),
                   ids: Sequence[str] | None = None) -> dict[str, Any]:
    """A Messages body; each call's ``input`` is sent as given (object, or a string to test
    a misbehaving server)."""
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for index, (name, arguments) in enumerate(calls):
        content.append({"type": "tool_use", "id": ids[index] if ids else f"toolu_{next(_ids)}",
                        "name": name, "input": arguments})
    prompt, completion, cached = usage
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant",
            "model": "fake-model", "content": content,
            "stop_reason": stop or ("tool_use" if calls else "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": completion,
                      "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}}


def _search_words(text: str) -> list[str]:
    """Lower-cased words of 4+ letters (or CJK runs) of ``text``, first occurrence order."""
    return list(dict.fromkeys(w.lower() for w in re.findall(r"[A-Za-z]{4,}|[\u4e00-\u9fff]+",
                                                           text)))


def anthropic_tool_search_body(request_body: dict[str, Any], *, error_code: str | None = None,
                               search: bool = True, pick: int = 0, limit: int = 5,
                               text: str | None = "Let me search for a tool."
                               ) -> dict[str, Any]:
    """A Messages answer to a request with Anthropic's tool search tool, as the real server
    answers it (block shapes of the ``anthropic`` SDK 2.15.0 types, see
    :mod:`bench.providers.tool_search`): ``text``, then ``server_tool_use`` (``srvtoolu_``
    id; input ``{"pattern": ...}`` for the regex variant, a Python regular expression built
    from the user's words, ``{"query": ...}`` for BM25), then ``tool_search_tool_result``
    whose ``tool_search_tool_search_result`` holds up to ``limit`` ``tool_reference`` blocks
    (deferred tools whose name, description or argument names match, most matched words
    first, ties in catalog order), then the model's ``tool_use`` of reference number ``pick``
    (input ``{}``), ``stop_reason`` ``tool_use``.

    Args:
        request_body: the request the SDK sent (its ``tools`` and user messages are read).
        error_code: answer the search with ``tool_search_tool_result_error`` and this code
            (``unavailable``...) and end the turn with text instead.
        search: False: the model does not search; it calls the first always-loaded tool
            (or answers in text when there is none).
        pick: which returned tool the model calls (an index past the end: text answer).
        limit: most references a search returns.
        text: the model's opening text (None: none).
    """
    tools = request_body.get("tools") or []
    kind = next(t["type"] for t in tools if str(t.get("type", "")).startswith("tool_search"))
    deferred = [t for t in tools if t.get("defer_loading")]
    loaded = [t for t in tools if "input_schema" in t and not t.get("defer_loading")]
    asked = " ".join(block.get("text", "") if isinstance(block, dict) else str(block)
                     for m in request_body.get("messages", []) if m.get("role") == "user"
                     for block in (m["content"] if isinstance(m["content"], list)
                                   else [m["content"]]))
    words = _search_words(asked)
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if not search:
        if loaded:
            content.append({"type": "tool_use", "id": f"toolu_{next(_ids):024d}",
                            "name": loaded[0]["name"], "input": {}})
        else:
            content.append({"type": "text", "text": "I cannot help with that."})
        return _search_answer(content, bool(loaded), searches=0)
    regex = kind.startswith("tool_search_tool_regex")
    server_id = f"srvtoolu_{next(_ids):024d}"
    pattern = "(?i)" + "|".join(re.escape(w) for w in words[:12])
    query = {"pattern": pattern[:200]} if regex else {"query": asked[:200]}
    content.append({"type": "server_tool_use", "id": server_id,
                    "name": "tool_search_tool_regex" if regex else "tool_search_tool_bm25",
                    "input": query})
    if error_code is not None:
        content += [{"type": "tool_search_tool_result", "tool_use_id": server_id,
                     "content": {"type": "tool_search_tool_result_error",
                                 "error_code": error_code, "error_message": None}},
                    {"type": "text", "text": "The tool search is unavailable."}]
        return _search_answer(content, False, searches=1)

    def document(tool: dict[str, Any]) -> str:
        names = " ".join((tool.get("input_schema") or {}).get("properties") or {})
        return f"{tool['name']} {tool['name'].replace('_', ' ')} {tool.get('description', '')}" \
               f" {names}".lower()

    scored = [(sum(1 for w in words if w in document(t)), -i, t["name"])
              for i, t in enumerate(deferred)]
    found = [name for hits, _, name in sorted(scored, reverse=True) if hits][:limit]
    content.append({"type": "tool_search_tool_result", "tool_use_id": server_id,
                    "content": {"type": "tool_search_tool_search_result",
                                "tool_references": [{"type": "tool_reference", "tool_name": n}
                                                    for n in found]}})
    if pick < len(found):
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids):024d}",
                        "name": found[pick], "input": {}})
        return _search_answer(content, True, searches=1)
    content.append({"type": "text", "text": "No tool fits."})
    return _search_answer(content, False, searches=1)


def _search_answer(content: list[dict[str, Any]], called: bool, *,
                   searches: int) -> dict[str, Any]:
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant",
            "model": "fake-model", "content": content,
            "stop_reason": "tool_use" if called else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 60,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                      # the SDK's ServerToolUsage requires the two web counts; Anthropic's
                      # tool search page documents tool_search_requests
                      "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0,
                                          "tool_search_requests": searches}}}


def anthropic_blocks_stream(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """A Messages answer ``body`` as streaming events, block by block as the real API sends
    tool search: ``server_tool_use`` and ``tool_use`` blocks start with ``input: {}`` and get
    their input as one ``input_json_delta``; ``tool_search_tool_result`` comes whole in its
    ``content_block_start``; text as one ``text_delta``."""
    usage = body["usage"]
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start",
        "message": {**{k: v for k, v in body.items() if k != "content"}, "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}})]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        if kind in ("server_tool_use", "tool_use"):
            events += [("content_block_start", {"type": "content_block_start", "index": index,
                        "content_block": {**block, "input": {}}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": json.dumps(block["input"])}})]
        elif kind == "text":
            events += [("content_block_start", {"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]}})]
        else:
            events.append(("content_block_start", {"type": "content_block_start",
                                                   "index": index, "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": body["stop_reason"],
                                            "stop_sequence": None},
                                  "usage": {"output_tokens": usage["output_tokens"],
                                            "server_tool_use": usage["server_tool_use"]}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def tool_search_handler(**options: Any) -> Callable[[Recorded], Reply]:
    """A :class:`FakeServer` ``handler`` answering each Messages request that carries a tool
    search tool with :func:`anthropic_tool_search_body` (``options`` passed on), streamed
    when the request asks for a stream; other requests get :func:`default_reply`."""
    def handle(request: Recorded) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if not request.path.endswith("/messages") or not any(
                str(t.get("type", "")).startswith("tool_search")
                for t in body.get("tools") or []):
            return default_reply(request)
        answer = anthropic_tool_search_body(body, **options)
        return Reply(events=anthropic_blocks_stream(answer)) if body.get("stream") \
            else Reply(body=answer)
    return handle


def anthropic_stream(calls: Sequence[tuple[str, str, Sequence[str]]], text: str | None = None,
                     stop: str = "tool_use", usage: tuple[int, int] = (100, 20), *,
                     empty_first_partial: bool = True, ping: bool = True,
                     error: dict[str, Any] | None = None) -> list[tuple[str | None, Any]]:
    """Messages streaming events. ``calls``: (id, name, partial_json pieces).

    Args:
        empty_first_partial: each ``tool_use`` block's first ``input_json_delta`` has
            ``partial_json: ""``, as the real API sends.
        ping: ``ping`` events between blocks, as the real API sends.
        error: end the stream with ``event: error`` carrying ``{"type": "error", "error":
            error}`` (e.g. ``{"type": "overloaded_error", "message": "Overloaded"}``, the
            streamed 529) after the content blocks, instead of ``message_delta`` and
            ``message_stop``.
    """
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start",
        "message": {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant",
                    "model": "fake-model", "content": [], "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage[0], "output_tokens": 1}}})]
    pinged = [("ping", {"type": "ping"})] if ping else []
    index = 0
    if text:
        events += [("content_block_start", {"type": "content_block_start", "index": index,
                                            "content_block": {"type": "text", "text": ""}}),
                   *pinged,
                   ("content_block_delta", {"type": "content_block_delta", "index": index,
                                            "delta": {"type": "text_delta", "text": text}}),
                   ("content_block_stop", {"type": "content_block_stop", "index": index})]
        index += 1
    for call_id, name, pieces in calls:
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": call_id, "name": name,
                                         "input": {}}}))
        events += pinged
        sent = [""] + list(pieces) if empty_first_partial else list(pieces)
        events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}})
                   for piece in sent]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if error is not None:
        events.append(("error", {"type": "error", "error": error}))
        return events
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": usage[1]}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def responses_body(calls: Sequence[tuple[str, Any]] = (), text: str | None = None,
                   incomplete: str | None = None, usage: tuple[int, int, int] = (100, 20, 0)
                   ) -> dict[str, Any]:
    """A Responses API body (``output`` items ``function_call`` / ``message``);
    ``incomplete="max_output_tokens"`` makes a truncated answer."""
    output: list[dict[str, Any]] = []
    if text:
        output.append({"type": "message", "id": f"msg_{next(_ids)}", "status": "completed",
                       "role": "assistant",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for name, arguments in calls:
        wire = arguments if isinstance(arguments, str) else json.dumps(arguments,
                                                                       ensure_ascii=False)
        output.append({"type": "function_call", "id": f"fc_{next(_ids)}",
                       "call_id": f"call_{next(_ids)}", "name": name, "arguments": wire,
                       "status": "completed"})
    prompt, completion, cached = usage
    return {"id": f"resp_{next(_ids)}", "object": "response", "created_at": 0,
            "model": "fake-model", "status": "incomplete" if incomplete else "completed",
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": prompt, "output_tokens": completion,
                      "total_tokens": prompt + completion,
                      "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def responses_stream(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """Responses streaming events for a final ``body``: created, one added/arguments.delta/
    done per function call, then ``response.completed`` with the whole response."""
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0,
                              "response": {**body, "status": "in_progress", "output": []}})]
    for index, item in enumerate(body["output"]):
        events.append(("response.output_item.added", {
            "type": "response.output_item.added", "output_index": index,
            "sequence_number": len(events), "item": {**item, "arguments": ""}
            if item["type"] == "function_call" else item}))
        if item["type"] == "function_call":
            events.append(("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "item_id": item["id"],
                "output_index": index, "sequence_number": len(events),
                "delta": item["arguments"]}))
        events.append(("response.output_item.done", {
            "type": "response.output_item.done", "output_index": index,
            "sequence_number": len(events), "item": item}))
    final = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append((final, {"type": final, "sequence_number": len(events), "response": body}))
    return events


def gemini_body(calls: Sequence[tuple[str, Any]] = (), text: str | None = None,
                finish: str = "STOP", usage: tuple[int, int, int] = (100, 20, 0), *,
                thought_signature: str | None = None) -> dict[str, Any]:
    """A Gemini ``GenerateContentResponse`` body (``functionCall`` parts).

    Args:
        thought_signature: put this ``thoughtSignature`` on the first ``functionCall`` part
            (on the text part when there is no call), as thinking models (Gemini 2.5, 3) do.
    """
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": text})
    for name, arguments in calls:
        parts.append({"functionCall": {"name": name, "args": arguments}})
    if thought_signature and parts:
        signed = next((p for p in parts if "functionCall" in p), parts[0])
        signed["thoughtSignature"] = thought_signature
    prompt, completion, cached = usage
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                              "cachedContentTokenCount": cached,
                              "totalTokenCount": prompt + completion},
            "modelVersion": "fake-model", "responseId": f"resp-{next(_ids)}"}


def gemini_stream(body: dict[str, Any], *, error: dict[str, Any] | None = None
                  ) -> list[tuple[str | None, Any]]:
    """``streamGenerateContent?alt=sse`` events for a final ``body``: one chunk per part (the
    last one with ``finishReason``; every chunk with the usage so far, as Gemini sends), or,
    with ``error``, the first part then ``{"error": error}`` (e.g. ``{"code": 503, "status":
    "UNAVAILABLE", "message": "overloaded"}``)."""
    candidate = body["candidates"][0]
    parts = candidate["content"]["parts"] or [{"text": ""}]
    events: list[tuple[str | None, Any]] = []
    for position, part in enumerate(parts):
        last = position == len(parts) - 1
        chunk_candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]},
                                           "index": 0}
        if last:
            chunk_candidate["finishReason"] = candidate["finishReason"]
        events.append((None, {"candidates": [chunk_candidate],
                              "usageMetadata": body["usageMetadata"],
                              "modelVersion": body.get("modelVersion"),
                              "responseId": body.get("responseId")}))
        if error is not None:
            events.append((None, {"error": error}))
            break
    return events


def default_reply(request: Recorded) -> Reply:
    """A valid answer for the request's path: a call of the first tool with ``{}``, or text;
    streamed (server-sent events) when the request asks for a stream."""
    body = request.body if isinstance(request.body, dict) else {}
    tools = body.get("tools") or []
    stream = bool(body.get("stream"))
    if request.path.endswith("/chat/completions"):
        first = tools[0]["function"]["name"] if tools else None
        if stream:
            return Reply(events=chat_stream(chat_fragments(f"call_{next(_ids)}", first, "{}")
                                            if first else [], finish="tool_calls" if first
                                            else "stop", text=None if first else "ok"))
        return Reply(body=chat_body(calls=[(first, {})] if first else (), text=None if first
                                    else "ok"))
    if request.path.endswith("/messages"):
        first = tools[0]["name"] if tools else None
        if stream:
            return Reply(events=anthropic_stream(
                [(f"toolu_{next(_ids)}", first, ["{}"])] if first else [],
                text=None if first else "ok", stop="tool_use" if first else "end_turn"))
        return Reply(body=anthropic_body(calls=[(first, {})] if first else (),
                                         text=None if first else "ok"))
    if request.path.endswith("/responses"):
        first = tools[0]["name"] if tools else None
        answer = responses_body(calls=[(first, {})] if first else (),
                                text=None if first else "ok")
        return Reply(events=responses_stream(answer)) if stream else Reply(body=answer)
    if ":generateContent" in request.path or ":streamGenerateContent" in request.path:
        declarations = tools[0].get("functionDeclarations", []) if tools else []
        first = declarations[0]["name"] if declarations else None
        answer = gemini_body(calls=[(first, {})] if first else (), text=None if first else "ok")
        if ":streamGenerateContent" in request.path:
            return Reply(events=gemini_stream(answer))
        return Reply(body=answer)
    return Reply(404, error_body(404, f"no such path {request.path}"))


class _Server(ThreadingHTTPServer):
    # A deep listen backlog: 32+ clients connecting at once must not wait for SYN retries.
    request_queue_size = 512
    daemon_threads = True


class FakeServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 (a free port) answering scripted replies.

    Args:
        latency_s: fixed seconds from a request's arrival to its answer (benchmarks use 0.1).
        handler: ``Recorded -> Reply`` for unscripted requests (default :func:`default_reply`).
        record: keep every request in :attr:`requests` (turn off for long benchmarks).
    """

    def __init__(self, latency_s: float = 0.0,
                 handler: Callable[[Recorded], Reply] | None = None, record: bool = True) -> None:
        self.latency_s = latency_s
        self.handler = handler or default_reply
        self.record = record
        self.requests: list[Recorded] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one (then the handler answers)."""
        with self._lock:
            self._queue.extend(replies)

    def clear(self) -> None:
        """Drop the replies still queued and the recorded requests (a server shared by several
        tests starts each one empty: a test that failed or skipped leaves no stale reply)."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def start(self) -> "FakeServer":
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; replies still sleeping are cut short."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self, request: Recorded) -> Reply:
        with self._lock:
            if self.record:
                self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        return self.handler(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, the body waits for the
            # client's delayed ACK (~40 ms on Linux loopback), which would cap a 100 ms
            # benchmark at ~70% of its limit.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                """Quiet: tests read :attr:`FakeServer.requests` instead."""

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._received = time.monotonic()
                self._answer(None)

            def do_POST(self) -> None:  # noqa: N802
                self._received = time.monotonic()
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(data) if data else None
                except ValueError:
                    body = data.decode("utf-8", "replace")
                self._answer(body)

            def _answer(self, body: Any) -> None:
                request = Recorded(self.command, self.path.split("?")[0],
                                   {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next_reply(request)
                if reply.events is not None:
                    lines = []
                    for name, data in reply.events:
                        text = data if isinstance(data, str) else json.dumps(data,
                                                                             ensure_ascii=False)
                        if name == ":":
                            lines.append(f": {text}\n\n")
                            continue
                        lines.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
                    payload = "".join(lines).encode("utf-8")
                    content_type = "text/event-stream"
                elif reply.raw is not None:
                    payload, content_type = reply.raw, "application/json"
                else:
                    payload = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
                    content_type = "application/json"
                content_type = reply.content_type or content_type
                if reply.gzip:
                    payload = gzip.compress(payload, mtime=0)
                # The latency counts from the request's arrival, so the time this server
                # spends decoding and encoding bodies is part of it, not added to it.
                wait = self._received + server.latency_s + reply.delay_s - time.monotonic()
                if wait > 0 and server._stopping.wait(wait):
                    return
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", content_type)
                    if reply.gzip:
                        self.send_header("content-encoding", "gzip")
                    if reply.chunk_size:
                        self.send_header("transfer-encoding", "chunked")
                    else:
                        self.send_header("content-length", str(len(payload)))
                    self.send_header("x-request-id", f"req_{next(_ids)}")
                    self.send_header("request-id", f"req_{next(_ids)}")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    if not reply.chunk_size:
                        self.wfile.write(payload)
                        return
                    for start in range(0, len(payload), reply.chunk_size):
                        piece = payload[start:start + reply.chunk_size]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler


def wait_for(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll ``predicate`` every 10 ms for up to ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
