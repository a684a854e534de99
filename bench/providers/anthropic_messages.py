"""Anthropic Messages API (``anthropic:<model>``) through the official ``anthropic`` SDK.

Wire format: Anthropic API reference, "Messages" and "Streaming Messages": ``tools[]`` with
``input_schema``; ``tool_choice`` ``{"type": "auto" | "any" | "none" | "tool", "name",
"disable_parallel_tool_use"}``; answer ``content[]`` blocks ``text`` / ``tool_use`` (``id``,
``name``, ``input`` object); earlier calls answered by ``tool_result`` blocks (``tool_use_id``)
in the next user message, before any text; ``stop_reason`` ``max_tokens`` on truncation;
streamed events ``message_start``, ``content_block_start``, ``content_block_delta``
(``text_delta``, ``input_json_delta.partial_json``), ``content_block_stop``, ``message_delta``,
``message_stop``. The request id is the ``request-id`` header.

Native tool search (``--retriever native``, :mod:`bench.providers.tool_search`):
:meth:`AnthropicProvider.search_request` sends every tool, all but the always-loaded ones with
``defer_loading: true``, after the ``tool_search_tool_regex_20251119`` (or ``_bm25_``) server
tool; :meth:`AnthropicProvider.parse_body` reads the ``server_tool_use`` and
``tool_search_tool_result`` blocks into :attr:`ProviderResponse.tool_search` and never as
calls (only ``tool_use`` blocks are the model's calls).

Replies are read through :class:`MessagesReply` and, per content block type, the block models
(:mod:`bench.providers.replies`): a body of unexpected shape is an invalid answer naming the
field, never an exception. Stop reasons that leave no usable answer (``refusal``,
``pause_turn``) make it invalid with that reason as its code.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Sequence

from bench.models import Message, Tool
from bench.parse import PAUSE_TURN, REFUSAL, RawCall, answer_from_calls, clean_text
from bench.providers.base import HTTPOptions, HTTPProvider, ProviderResponse, Usage
from bench.providers.replies import MalformedReply, ReplyModel, at, body_object, read_reply
from bench.descriptions.schema_dialects import dialect
from bench.providers.dialects import Turn, merged_turns, system_text
from bench.providers.errors import ProviderError, ProviderUnavailable
from bench.providers.sdk import send_with_sdk
from bench.providers.tool_search import ToolSearch, read_tool_search, search_tool_in

KEY_ENV = "ANTHROPIC_API_KEY"


class AnthropicProvider(HTTPProvider):
    """``anthropic:<model>``: the Messages API (key from ``ANTHROPIC_API_KEY``).

    The Messages API of the ``anthropic`` SDK 2.x takes neither seed nor temperature, so neither
    is sent (``describe()["not_sent"]``); ``trial`` does not change the body (the response cache
    keys on it).

    Raises:
        ProviderUnavailable: no API key in the environment, or the SDK is missing.
    """

    kind = "anthropic"
    not_sent = ("temperature", "seed")

    def __init__(self, options: HTTPOptions, *, provider_id: str | None = None) -> None:
        super().__init__(options, provider_id=provider_id)
        key = os.environ.get(KEY_ENV)
        if not key:
            raise ProviderUnavailable(self.provider_id, f"{KEY_ENV} is not set")
        try:
            import anthropic
        except ImportError:
            raise ProviderUnavailable(self.provider_id, "the anthropic SDK is not installed "
                                                        "(pip install anthropic)") from None
        self._client = anthropic.AsyncAnthropic(api_key=key, base_url=options.base_url,
                                                timeout=options.timeout_s, max_retries=0,
                                                http_client=anthropic.DefaultAioHttpClient())

    @property
    def endpoint(self) -> str:
        """``/v1/messages``."""
        return "/v1/messages"

    def convert_tool(self, tool: Tool) -> tuple[dict[str, Any], list[str]]:
        """``{name, description, input_schema}``: the canonical shape, unchanged."""
        return dialect("anthropic").tool_entry(tool)

    def messages_payload(self, messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
        """(system text, messages): ``tool_use`` / ``tool_result`` blocks paired by id, results
        of one assistant turn merged into one user message, consecutive same-role turns merged.

        Raises:
            ProviderError: class ``validation`` for an unpaired tool result.
        """
        turns = self.turns(messages)
        return system_text(turns), merged_turns(turns, assistant_role="assistant",
                                                key="content", blocks=_content_blocks)

    def build_request(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                      trial: int, tool_choice: str | None = None) -> dict[str, Any]:
        """The Messages body; see the CONTRACT in :mod:`bench.providers.base`."""
        options = self.options
        system, payload = self.messages_payload(messages)
        body: dict[str, Any] = {"model": options.model, "max_tokens": options.max_tokens,
                                "messages": payload}
        if system:
            body["system"] = system
        if tools:
            self.check_tool_choice(tools, tool_choice)
            body["tools"] = self.converted_tools(tools).tools
            choice = tool_choice or options.tool_choice
            mapped: dict[str, str | bool] = dict({
                "auto": {"type": "auto"}, "required": {"type": "any"},
                "none": {"type": "none"}}.get(choice, {"type": "tool", "name": choice}))
            if options.parallel_tool_calls is False and mapped["type"] != "none":
                mapped["disable_parallel_tool_use"] = True
            body["tool_choice"] = mapped
        if options.stream:
            body["stream"] = True
        return body

    def search_request(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       trial: int, tool_choice: str | None = None,
                       tool_search: ToolSearch) -> dict[str, Any]:
        """The Messages body with native tool search: :meth:`build_request`'s, its ``tools``
        the search tool then every tool of ``tools``, each with ``"defer_loading": true``
        unless ``tool_search.always_loaded`` names it
        (:meth:`bench.providers.tool_search.ToolSearch.tool_entries`). ``tool_choice`` maps
        as in :meth:`build_request` (a named deferred tool is the API's to accept or refuse).

        Raises:
            ProviderError: class ``validation``: no tools, or as :meth:`build_request`.
        """
        if not tools:
            raise ProviderError("native tool search needs tools to search",
                                error_class="validation")
        body = self.build_request(messages, tools, trial=trial, tool_choice=tool_choice)
        body["tools"] = tool_search.tool_entries(body["tools"])
        return body

    def summarize_request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`HTTPProvider.summarize_request`, plus, with native tool search,
        ``tool_search``: the search tool's type and the number of deferred tools (``tools``
        then names the search tool too)."""
        summary = super().summarize_request(body)
        kind = search_tool_in(body)
        if kind is not None:
            entries = [e for e in body.get("tools") or [] if isinstance(e, Mapping)]
            summary["tool_search"] = {
                "tool": kind, "deferred": sum(1 for e in entries if e.get("defer_loading")),
                "always_loaded": [str(e.get("name")) for e in entries
                                  if "input_schema" in e and not e.get("defer_loading")]}
        return summary

    async def send(self, body: dict[str, Any]) -> tuple[object, Mapping[str, str]]:
        """One Messages call (streamed when ``body["stream"]``); see the CONTRACT."""
        return await send_with_sdk(self._client.messages, body, assemble_message_stream)

    def parse_body(self, body: object, *, latency_s: float,
                   request: Mapping[str, Any] | None = None) -> ProviderResponse:
        """Parse a Messages body; see the CONTRACT in :mod:`bench.providers.base`.

        ``text`` and ``tool_use`` blocks are read; others (``thinking``...) are not prose.
        With native tool search (a search tool in ``request``), ``server_tool_use`` and
        ``tool_search_tool_result`` blocks are read into ``tool_search``
        (:func:`bench.providers.tool_search.read_tool_search`), never as calls.
        ``stop_reason`` ``max_tokens`` or ``model_context_window_exceeded``: truncated;
        ``refusal`` (Claude's safety classifier stopped the answer) and ``pause_turn`` (a
        long turn paused, to be continued by another request): invalid, with that code.
        Anthropic "Handling stop reasons" (docs.anthropic.com/en/api/handling-stop-reasons).
        """
        try:
            reply = read_reply(MessagesReply, body_object(body))
            blocks = at(reply.content, "content")
            text, calls = [], []
            for index, block in enumerate(blocks):
                if block.get("type") == "text":
                    text.append(read_reply(TextBlock, block, f"content[{index}]").text or "")
                elif block.get("type") == "tool_use":
                    use = read_reply(ToolUseBlock, block, f"content[{index}]")
                    calls.append(RawCall(use.id, use.name or "", use.input))
            searched = read_tool_search(blocks) if request is not None and \
                search_tool_in(request) is not None else None
        except MalformedReply as exc:
            return self.malformed(body, str(exc), latency_s=latency_s, request=request)
        summary = self.summarize_request(request) if request is not None else {}
        usage = anthropic_usage(reply.usage)
        if reply.content is None:
            return self.no_answer(body, "the reply has no content", latency_s=latency_s,
                                  summary=summary, usage=usage)
        stop = clean_text(reply.stop_reason)[0]
        parsed = answer_from_calls(calls, text="".join(text), truncated=stop in (
            "max_tokens", "model_context_window_exceeded"))
        if stop in (REFUSAL, PAUSE_TURN) and parsed.error is None:
            why = "the model's safety classifier stopped the answer" if stop == REFUSAL \
                else "the turn was paused before it finished"
            parsed = parsed.model_copy(update={"error": f"{stop}: stop_reason {stop} ({why})",
                                               "error_code": stop, "declined": False})
        return ProviderResponse(raw=body, parsed=parsed, finish_reason=stop,
                                latency_s=latency_s, request=summary, usage=usage,
                                tool_search=searched)


class TextBlock(ReplyModel):
    """A ``content[]`` block of type ``text``."""

    text: str | None = None


class ToolUseBlock(ReplyModel):
    """A ``content[]`` block of type ``tool_use`` (``input`` an object)."""

    id: str | None = None
    name: str | None = None
    input: Any = None


class MessagesUsage(ReplyModel):
    """``usage`` (tokens)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class MessagesReply(ReplyModel):
    """The fields of a ``message`` body bench reads (blocks are read by type)."""

    content: Any = None
    stop_reason: str | None = None
    usage: MessagesUsage | None = None


def anthropic_usage(usage: MessagesUsage | None) -> Usage:
    """:class:`Usage` from a Messages ``usage``: the prompt is input + cache reads + cache
    writes. Extended thinking is inside ``output_tokens`` and billed as output (Anthropic
    "Building with extended thinking", "Pricing": "you're charged for the full thinking
    tokens"); no separate count is sent, so ``reasoning_tokens`` stays None."""
    if usage is None:
        return Usage()
    cached = usage.cache_read_input_tokens or 0
    return Usage(prompt_tokens=(usage.input_tokens or 0) + cached
                 + (usage.cache_creation_input_tokens or 0),
                 completion_tokens=usage.output_tokens or 0, cached_tokens=cached)


def _content_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.role == "tool":
        block: dict[str, str | bool | None] = {"type": "tool_result", "tool_use_id": turn.call_id,
                                               "content": turn.content}
        if turn.is_error:
            block["is_error"] = True
        blocks.append(block)
    elif turn.content:
        blocks.append({"type": "text", "text": turn.content})
    return blocks + [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                     for c in turn.calls]


def assemble_message_stream(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Join streamed Messages events into one ``message`` body.

    A ``tool_use`` block's ``input`` is its joined ``partial_json`` decoded to an object; a
    fragment that does not decode (a cut-off stream) stays a string, so parsing marks the call
    invalid instead of reading ``{}``.
    """
    message: dict[str, Any] = {"content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            message = {**event.get("message", {}), "content": []}
        elif kind == "content_block_start":
            started = dict(event.get("content_block") or {})
            blocks[int(event.get("index", len(blocks)))] = started
            message["content"].append(started)
        elif kind == "content_block_delta":
            index = int(event.get("index", 0))
            block = blocks.get(index)
            delta = event.get("delta") or {}
            if block is None:
                continue
            if delta.get("type") == "text_delta":
                block["text"] = (block.get("text") or "") + str(delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if "stop_reason" in delta:
                message["stop_reason"] = delta["stop_reason"]
            final = {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            message["usage"] = {**(message.get("usage") or {}), **final}
    for index, pieces in partial.items():
        joined = "".join(pieces)
        try:
            blocks[index]["input"] = json.loads(joined) if joined.strip() else {}
        except ValueError:
            blocks[index]["input"] = joined
    return message
