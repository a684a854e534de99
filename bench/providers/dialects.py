"""Provider-neutral helpers the HTTP adapters share: conversation history with paired tool call
ids. The JSON Schema rewrites for each API family live in
:mod:`bench.descriptions.schema_dialects` (shared with ``bench lint`` and token cost).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from bench.models import Message

@dataclass
class HistoryCall:
    """An earlier assistant tool call, id assigned; ``signature``: the token its provider
    wants back with it (:attr:`bench.models.ToolCall.signature`), or None."""

    id: str
    name: str
    arguments: dict[str, Any]
    signature: str | None = None


@dataclass
class Turn:
    """One message of the conversation with tool calls and results paired by id.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the text ("" when none).
        calls: the assistant's tool calls (``assistant`` turns).
        call_id: the id of the call this result answers (``tool`` turns).
        name: the tool name of that call (``tool`` turns; Gemini needs it).
        is_error: the result reports a failed call (``tool`` turns).
    """

    role: str
    content: str
    calls: list[HistoryCall]
    call_id: str | None = None
    name: str | None = None
    is_error: bool = False


def _call_parts(raw: dict[str, Any]) -> tuple[str | None, str, Any]:
    """(id, name, arguments) of a canonical or OpenAI-shaped call dict."""
    nested = raw.get("function")
    function = nested if isinstance(nested, dict) else raw
    return raw.get("id"), str(function.get("name", "")), function.get("arguments",
                                                                         function.get("input"))


def history(messages: Sequence[Message]) -> list[Turn]:
    """The case's conversation with every tool result paired to the call it answers.

    Earlier assistant calls may be canonical (``{"id", "name", "arguments"}``, optionally
    ``"signature"``) or OpenAI-shaped
    (``{"id", "type": "function", "function": {"name", "arguments": "<json>"}}``). A call
    without id gets ``call_<turn>_<i>``; a tool message without ``tool_call_id`` answers the
    oldest unanswered call.

    Raises:
        ValueError: a tool result names an unknown call id, comes before any call, or a call's
            arguments are not a JSON object.
    """
    turns: list[Turn] = []
    pending: list[HistoryCall] = []
    known: dict[str, HistoryCall] = {}
    for position, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            calls = []
            for index, raw in enumerate(message.tool_calls):
                call_id, name, arguments = _call_parts(raw)
                if isinstance(arguments, str):
                    arguments = json.loads(arguments) if arguments.strip() else {}
                if arguments is None:
                    arguments = {}
                if not isinstance(arguments, dict):
                    raise ValueError(f"messages[{position}].tool_calls[{index}]: arguments "
                                     "must be a JSON object")
                signature = raw.get("signature")
                call = HistoryCall(call_id or f"call_{position}_{index}", name, arguments,
                                   signature if isinstance(signature, str) else None)
                calls.append(call)
                known[call.id] = call
            pending = list(calls)
            turns.append(Turn("assistant", message.content or "", calls))
        elif message.role == "tool":
            if message.tool_call_id:
                answered = known.get(message.tool_call_id)
                if answered is None:
                    raise ValueError(f"messages[{position}]: tool_call_id "
                                     f"'{message.tool_call_id}' answers no earlier tool call")
            elif pending:
                answered = pending[0]
            else:
                raise ValueError(f"messages[{position}]: a tool result without a tool call")
            pending = [c for c in pending if c.id != answered.id]
            turns.append(Turn("tool", message.content or "", [], answered.id, answered.name,
                              bool(message.is_error)))
        else:
            turns.append(Turn(message.role, message.content or "", []))
    return turns


def system_text(turns: Sequence[Turn]) -> str:
    """The system messages' text, joined by blank lines (APIs with a separate system field)."""
    return "\n\n".join(t.content for t in turns if t.role == "system" and t.content)


def merged_turns(turns: Sequence[Turn], *, assistant_role: str, key: str,
                 blocks: Callable[[Turn], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Non-system turns as ``{"role": ..., key: blocks(turn)}`` for APIs whose tool results
    travel in user turns (Anthropic, Gemini); consecutive same-role turns are merged, so the
    results of one assistant turn share one user message."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "system":
            continue
        role = assistant_role if turn.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            out[-1][key] += blocks(turn)
        else:
            out.append({"role": role, key: blocks(turn)})
    return out
