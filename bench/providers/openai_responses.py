"""OpenAI Responses API (``openai-responses:<model>``) through the official ``openai`` SDK.

Wire format: OpenAI API reference, "Create a model response": ``instructions`` + ``input``
items (messages, ``function_call`` with ``call_id``, ``function_call_output``); ``tools[]`` of
``{"type": "function", name, description, parameters, strict}``; ``tool_choice`` ``auto`` /
``required`` / ``none`` / ``{"type": "function", "name"}``; answer ``output[]`` items
``function_call`` (``arguments`` a JSON string) and ``message`` (``output_text``); a cut answer
has ``status: "incomplete"`` and ``incomplete_details.reason: "max_output_tokens"``. Streamed
answers end with a ``response.completed`` / ``response.incomplete`` event carrying the whole
response.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

from bench.models import Message, Tool
from bench.parse import RawCall, answer_from_calls
from bench.providers.base import (HTTPOptions, HTTPProvider, ProviderResponse, Usage,
                                  send_with_sdk)
from bench.providers.dialects import openai_strict_schema, optional_properties, system_text
from bench.providers.openai_chat import drop_strict_nulls, openai_client


class OpenAIResponsesProvider(HTTPProvider):
    """``openai-responses:<model>``: the Responses API (key from ``OPENAI_API_KEY``).

    Requests are sent with ``store: false`` (nothing kept server-side). The Responses API
    takes no seed (``describe()["not_sent"]``).

    Raises:
        ProviderUnavailable: no API key in the environment, or the SDK is missing.
    """

    kind = "openai-responses"
    not_sent = ("seed",)

    def __init__(self, options: HTTPOptions, *, provider_id: str | None = None) -> None:
        super().__init__(options, provider_id=provider_id)
        self._client = openai_client(self.provider_id, options, "OPENAI_API_KEY")
        self._optional: dict[str, frozenset[str]] = {}

    @property
    def endpoint(self) -> str:
        """``/v1/responses``."""
        return "/v1/responses"

    def convert_tool(self, tool: Tool) -> tuple[dict[str, Any], list[str]]:
        """``{"type": "function", name, description, parameters, strict}``."""
        parameters, changes = tool.input_schema, []
        if self.options.strict:
            parameters, changes = openai_strict_schema(tool.input_schema, tool.name)
            self._optional[tool.name] = optional_properties(tool.input_schema)
        return {"type": "function", "name": tool.name, "description": tool.description,
                "parameters": parameters, "strict": self.options.strict}, changes

    def input_items(self, messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
        """(instructions, input items), ``function_call_output`` paired by ``call_id``.

        Raises:
            ProviderError: class ``validation`` for an unpaired tool result.
        """
        turns = self.turns(messages)
        instructions = system_text(turns)
        items: list[dict[str, Any]] = []
        for turn in turns:
            if turn.role == "system":
                continue
            if turn.role == "tool":
                items.append({"type": "function_call_output", "call_id": turn.call_id,
                              "output": turn.content})
                continue
            if turn.content:
                items.append({"role": turn.role, "content": turn.content})
            items += [{"type": "function_call", "call_id": c.id, "name": c.name,
                       "arguments": json.dumps(c.arguments, ensure_ascii=False)}
                      for c in turn.calls]
        return instructions, items

    def build_request(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                      trial: int) -> dict[str, Any]:
        """The Responses body; see the CONTRACT in :mod:`bench.providers.base`."""
        options = self.options
        instructions, items = self.input_items(messages)
        body: dict[str, Any] = {"model": options.model, "input": items,
                                "temperature": options.temperature,
                                "max_output_tokens": options.max_tokens, "store": False}
        if instructions:
            body["instructions"] = instructions
        if tools:
            self.check_tool_choice(tools)
            body["tools"] = self.converted_tools(tools).tools
            choice = options.tool_choice
            body["tool_choice"] = choice if choice in ("auto", "required", "none") else \
                {"type": "function", "name": choice}
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.stream:
            body["stream"] = True
        return body

    def send(self, body: dict[str, Any]) -> tuple[dict[str, Any], Mapping[str, str]]:
        """One Responses call (streamed when ``body["stream"]``); see the CONTRACT."""
        return send_with_sdk(self._client.responses, body, assemble_response_stream)

    def parse_body(self, body: Mapping[str, Any], *, latency_s: float,
                   request: Mapping[str, Any] | None = None) -> ProviderResponse:
        """Parse a Responses body; see the CONTRACT in :mod:`bench.providers.base`.

        ``finish_reason`` is ``incomplete_details.reason`` for an incomplete response,
        otherwise ``tool_calls`` or ``stop``.
        """
        summary = self.summarize_request(request) if request is not None else {}
        output = body.get("output") if isinstance(body, Mapping) else None
        if not isinstance(output, list):
            return self.no_answer(body, "response has no output", latency_s=latency_s,
                                  summary=summary)
        calls, text = [], []
        for item in output:
            if item.get("type") == "function_call":
                calls.append(RawCall(item.get("call_id") or item.get("id"),
                                     str(item.get("name") or ""), item.get("arguments")))
            elif item.get("type") == "message":
                text += [part.get("text") or part.get("refusal") or ""
                         for part in item.get("content") or []]
        incomplete = (body.get("incomplete_details") or {}).get("reason") \
            if body.get("status") == "incomplete" else None
        parsed = answer_from_calls(calls, text="".join(text),
                                   truncated=incomplete in ("max_output_tokens", "stream_ended"),
                                   expect_string=True)
        if self.options.strict:
            parsed = drop_strict_nulls(parsed, self._optional)
        usage = body.get("usage") or {}
        details = usage.get("input_tokens_details") or {}
        return ProviderResponse(
            raw=body, parsed=parsed, latency_s=latency_s, request=summary,
            finish_reason=incomplete or ("tool_calls" if calls else "stop"),
            usage=Usage(prompt_tokens=int(usage.get("input_tokens") or 0),
                        completion_tokens=int(usage.get("output_tokens") or 0),
                        cached_tokens=int(details.get("cached_tokens") or 0)))


def assemble_response_stream(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The response body from streamed Responses events: the final ``response.completed`` /
    ``response.incomplete`` event's ``response``; when the stream ended without one, the
    ``output_item.done`` items seen, joined with their ``function_call_arguments.delta``
    fragments (status ``incomplete``, so the answer is invalid rather than empty)."""
    items: dict[int, dict[str, Any]] = {}
    fragments: dict[str, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            return dict(event.get("response") or {})
        if kind in ("response.output_item.added", "response.output_item.done"):
            items[int(event.get("output_index", len(items)))] = dict(event.get("item") or {})
        elif kind == "response.function_call_arguments.delta":
            fragments.setdefault(str(event.get("item_id")), []).append(str(event.get("delta")))
    output = []
    for _, item in sorted(items.items()):
        if item.get("type") == "function_call" and not item.get("arguments"):
            item["arguments"] = "".join(fragments.get(str(item.get("id")), []))
        output.append(item)
    return {"object": "response", "status": "incomplete", "output": output,
            "incomplete_details": {"reason": "stream_ended"}}
