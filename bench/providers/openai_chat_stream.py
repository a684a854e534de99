"""A streamed Chat Completions answer joined into one ``chat.completion`` body
(:func:`assemble_chat_stream`), for :mod:`bench.providers.openai_chat`: the OpenAI API
reference's ``chat.completion.chunk`` (``choices[].delta`` with ``content``, ``refusal`` and
``tool_calls[]`` fragments carrying ``index``/``id``; ``usage`` on the last chunk), and the
quirks of OpenAI-compatible servers bench has met.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

from bench.parse import CallDelta, assemble_call_deltas


def _decodes(arguments: Any) -> bool:
    """True when ``arguments`` is a JSON text that decodes (or not a string at all)."""
    if not isinstance(arguments, str):
        return True
    try:
        json.loads(arguments)
    except (ValueError, RecursionError):
        return False
    return True


def _repeated_openings(deltas: Sequence[CallDelta]) -> set[int]:
    """Positions of fragments that repeat, right after it, the arguments of the fragment that
    opened their call (same ``index``, no id, same non-empty text): a quirk of some
    OpenAI-compatible servers, which resend the opening fragment's arguments."""
    repeats: set[int] = set()
    last: dict[Any, CallDelta] = {}
    for position, delta in enumerate(deltas):
        before = last.get(delta.index)
        if (before is not None and before.id and not delta.id
                and isinstance(delta.arguments, str) and delta.arguments.strip()
                and delta.arguments == before.arguments):
            repeats.add(position)
        last[delta.index] = delta
    return repeats


def assemble_chat_stream(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Join streamed ``chat.completion.chunk`` dicts into one ``chat.completion`` body.

    Tool-call fragments are joined by call id (:func:`bench.parse.assemble_call_deltas`), so
    parallel calls that share a stream ``index`` stay apart; a first call at ``index: 1`` and
    ``name: ""`` on continuation fragments are read as sent. Only choice 0 is read (a
    chunk's ``choices[].index``), as :meth:`bench.providers.openai_chat.OpenAIChatProvider.parse_body` reads only the
    first choice of a whole body. ``delta.content`` may be a string or, from Mistral's
    reasoning models, a list of ``text`` / ``thinking`` parts (the text parts are kept);
    ``delta.refusal`` fragments are joined into ``message.refusal``. ``usage`` is taken from
    whichever chunk carries it (a separate last chunk, or the finish chunk). When a call's
    joined arguments do not decode and a fragment repeated its opening fragment's arguments
    (:func:`_repeated_openings`), the call is joined again without that repeat if that makes
    it decode; the call then records ``x_bench_repair``. Otherwise the arguments stay as sent
    (an invalid call).
    """
    text: list[str] = []
    refusal: list[str] = []
    deltas: list[CallDelta] = []
    finish = None
    usage = None
    first: Mapping[str, Any] = {}
    for chunk in chunks:
        first = first or chunk
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            index = choice.get("index")
            if isinstance(index, int) and index != 0:
                continue  # another choice (n > 1): the answer is choice 0, as in parse_body
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str):
                text.append(content)
            elif isinstance(content, list):  # Mistral: [{"type": "text" | "thinking", ...}]
                text += [str(part.get("text") or "") for part in content
                         if isinstance(part, dict) and part.get("type") == "text"]
            if isinstance(delta.get("refusal"), str):
                refusal.append(delta["refusal"])
            for fragment in delta.get("tool_calls") or []:
                function = fragment.get("function") or {}
                deltas.append(CallDelta(fragment.get("index"), fragment.get("id"),
                                        function.get("name"), function.get("arguments")))
            finish = choice.get("finish_reason") or finish
    calls = assemble_call_deltas(deltas)
    repaired: set[int] = set()
    repeats = _repeated_openings(deltas) if deltas else set()
    if repeats and not all(_decodes(c.arguments) for c in calls):
        again = assemble_call_deltas([d for i, d in enumerate(deltas) if i not in repeats])
        if len(again) == len(calls):
            for position, (call, retry) in enumerate(zip(calls, again)):
                if not _decodes(call.arguments) and retry.id == call.id \
                        and _decodes(retry.arguments):
                    calls[position] = retry
                    repaired.add(position)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None,
                               "refusal": "".join(refusal) or None}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments},
             **({"x_bench_repair": "repeated first argument fragment dropped"}
                if position in repaired else {})}
            for position, c in enumerate(calls)]
    return {"id": first.get("id"), "object": "chat.completion", "model": first.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage}
