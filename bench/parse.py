"""Parse provider answers into :class:`~bench.models.ToolCall` lists (BRIEF §8).

Strict decoding is recorded next to the lenient repairs that were needed, in ``ToolCall.notes``;
an answer that cannot be decoded is an *invalid* answer (``ParsedAnswer.error``), never an
empty call list, so a truncated answer can never pass as "no call".
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from bench.models import ToolCall


class ParsedAnswer(BaseModel):
    """A provider answer in canonical form.

    Attributes:
        calls: the tool calls, in the order received.
        declined: True when the model explicitly said that no tool fits.
        error: why the answer could not be decoded (None when it could).
        text: prose the model wrote instead of or beside its calls.
    """

    calls: list[ToolCall] = Field(default_factory=list)
    declined: bool = False
    error: str | None = None
    text: str | None = None


def decode_arguments(raw: Any) -> tuple[dict[str, Any], list[str], bool]:
    """Decode a call's arguments as sent by a provider.

    Args:
        raw: a dict, a JSON string, a double-encoded JSON string, ``""`` or None.

    Returns:
        (arguments, notes, valid). ``""`` and None decode to ``{}`` with note ``empty``
        (tools without parameters); a string that is not a JSON object is invalid.
    """
    if isinstance(raw, dict):
        return raw, [], True
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, ["empty"], True
    if not isinstance(raw, str):
        return {}, ["not_an_object"], False
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return {}, ["malformed_json"], False
    notes: list[str] = []
    if isinstance(value, str):
        try:
            value = json.loads(value)
            notes.append("double_encoded")
        except json.JSONDecodeError:
            return {}, ["malformed_json"], False
    if not isinstance(value, dict):
        return {}, [*notes, "not_an_object"], False
    return value, notes, True


def parse_json_tool_calls(text: str, finish_reason: str | None,
                          decline_tool: str | None = None) -> ParsedAnswer:
    """Parse a JSON answer ``{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}``.

    This is the answer format of the embedded model, whose decoding a grammar constrains.

    Args:
        text: the model's completion text.
        finish_reason: ``"length"`` marks a truncated answer (always invalid).
        decline_tool: name of the pseudo-tool that means "no tool fits", if the prompt layout
            offers one; calls to it become ``declined=True`` and are dropped from ``calls``.

    Returns:
        A :class:`ParsedAnswer`; ``error`` is set for truncated or undecodable answers.
    """
    if finish_reason == "length":
        return ParsedAnswer(error="truncated: the answer hit the token limit", text=text)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParsedAnswer(error=f"malformed JSON answer: {exc.msg}", text=text)
    except (ValueError, RecursionError) as exc:  # huge integers, absurd nesting
        return ParsedAnswer(error=f"undecodable JSON answer: {type(exc).__name__}", text=text)
    if not isinstance(obj, dict) or not isinstance(obj.get("tool_calls"), list):
        return ParsedAnswer(error="answer has no 'tool_calls' list", text=text)
    calls: list[ToolCall] = []
    declined = False
    for index, item in enumerate(obj["tool_calls"]):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return ParsedAnswer(error=f"tool_calls[{index}] has no 'name'", text=text)
        if decline_tool is not None and item["name"] == decline_tool:
            declined = True
            continue
        raw = item.get("arguments")
        arguments, notes, valid = decode_arguments(raw)
        calls.append(ToolCall(id=f"call_{index}", name=item["name"], arguments=arguments,
                              raw_arguments=raw, notes=notes, valid=valid))
    if declined and calls:
        # "no tool fits" next to real calls: keep the calls, the decline is contradictory.
        declined = False
    return ParsedAnswer(calls=calls, declined=declined or not calls)
