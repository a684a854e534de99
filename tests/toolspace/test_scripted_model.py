"""The scripted ``function:`` model of docs/many-tools.md (benchmarks/scripted.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.models import Message, Tool

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scripted  # noqa: E402 - the documented module, from benchmarks/


def _tool(name: str, description: str) -> Tool:
    return Tool(name=name, description=description,
                input_schema={"type": "object", "properties": {}})


def test_it_calls_the_tool_sharing_the_most_words_and_none_when_nothing_is_shared():
    tools = [_tool("get_weather", "Current weather for a city."),
             _tool("cancel_order", "Cancel a customer's order before it ships.")]
    ask = [Message(role="user", content="Please cancel my order")]
    assert scripted.answer(ask, tools, 1) == {
        "tool_calls": [{"name": "cancel_order", "arguments": {}}]}
    # ties go to the tool sent first
    twins = [_tool("a_tool", "order status"), _tool("b_tool", "order status")]
    assert scripted.answer([Message(role="user", content="order?")], twins, 1)[
        "tool_calls"] == [{"name": "a_tool", "arguments": {}}]
    nothing = scripted.answer([Message(role="user", content="zzz qqq")], tools, 1)
    assert nothing["tool_calls"] == [] and nothing["text"]
