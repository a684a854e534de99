"""OpenAI Responses API (``openai-responses:<model>``) through the official ``openai`` SDK.

Wire format: OpenAI API reference, "Create a model response": ``instructions`` + ``input``
items (messages, ``function_call`` with ``call_id``, ``function_call_output``); ``tools[]`` of
``{"type": "function", name, description, parameters, strict}``; ``tool_choice`` ``auto`` /
``required`` / ``none`` / ``{"type": "function", "name"}``; answer ``output[]`` items
``function_call`` (``arguments`` a JSON string) and ``message`` (``output_text``); a cut answer
has ``status: "incomplete"`` and ``incomplete_details.reason: "max_output_tokens"``. Streamed
answers end with a ``response.completed`` / ``response.incomplete`` event carrying the whole
response.

Replies are read through :class:`ResponsesReply` and, per output item type, the item models
(:mod:`bench.providers.replies`): a body of unexpected shape is an invalid answer naming the
field, never an exception.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

from bench.models import Message, Tool
from bench.parse import (BLOCKED, PROVIDER_ERROR, REFUSAL, RawCall, answer_from_calls,
                         clean_text, invalid_answer)
from bench.providers.base import HTTPOptions, HTTPProvider, ProviderResponse, Usage
from bench.providers.errors import (CONFIG_ERROR_CODES, ProviderError, classify_status,
                                    stream_error_status)
from bench.providers.replies import MalformedReply, ReplyModel, at, body_object, read_reply
from bench.descriptions.schema_dialects import dialect, optional_properties
from bench.providers.dialects import system_text
from bench.redact import one_line
from bench.providers.openai_chat import drop_strict_nulls, openai_client
from bench.providers.sdk import send_with_sdk


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
        parameters = tool.input_schema
        changes: list[str] = []
        if self.options.strict:
            parameters, changes = dialect("openai-strict").rewrite(tool.input_schema, tool.name)
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
                      trial: int, tool_choice: str | None = None) -> dict[str, Any]:
        """The Responses body; see the CONTRACT in :mod:`bench.providers.base`."""
        options = self.options
        instructions, items = self.input_items(messages)
        body: dict[str, Any] = {"model": options.model, "input": items,
                                "temperature": options.temperature,
                                "max_output_tokens": options.max_tokens, "store": False}
        if instructions:
            body["instructions"] = instructions
        if tools:
            self.check_tool_choice(tools, tool_choice)
            body["tools"] = self.converted_tools(tools).tools
            choice = tool_choice or options.tool_choice
            body["tool_choice"] = choice if choice in ("auto", "required", "none") else \
                {"type": "function", "name": choice}
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.stream:
            body["stream"] = True
        return body

    async def send(self, body: dict[str, Any]) -> tuple[object, Mapping[str, str]]:
        """One Responses call (streamed when ``body["stream"]``); see the CONTRACT."""
        return await send_with_sdk(self._client.responses, body, assemble_response_stream)

    def parse_body(self, body: object, *, latency_s: float,
                   request: Mapping[str, Any] | None = None) -> ProviderResponse:
        """Parse a Responses body; see the CONTRACT in :mod:`bench.providers.base`.

        ``finish_reason`` is ``incomplete_details.reason`` for an incomplete response
        (``max_output_tokens``: truncated; ``content_filter``: invalid, code ``blocked``),
        ``failed`` for a failed one (invalid, code ``provider_error``), otherwise
        ``tool_calls`` or ``stop``. Output items other than ``function_call`` and
        ``message`` (``reasoning``...) are not read. A ``refusal`` content part makes the
        answer invalid with code ``refusal`` (its text kept as prose), as Chat Completions'
        ``message.refusal`` does: a safety refusal is not a decision that no tool fits.
        """
        try:
            reply = read_reply(ResponsesReply, body_object(body))
            items = at(reply.output, "output")
            calls, text, refused = [], [], False
            for index, item in enumerate(items):
                if item.get("type") == "function_call":
                    call = read_reply(FunctionCallItem, item, f"output[{index}]")
                    calls.append(RawCall(call.call_id or call.id, call.name or "",
                                         call.arguments))
                elif item.get("type") == "message":
                    message = read_reply(MessageItem, item, f"output[{index}]")
                    text += [part.text or part.refusal or "" for part in message.content or []]
                    refused = refused or any(part.type == "refusal" or bool(part.refusal)
                                             for part in message.content or [])
        except MalformedReply as exc:
            return self.malformed(body, str(exc), latency_s=latency_s, request=request)
        summary = self.summarize_request(request) if request is not None else {}
        usage = responses_usage(reply.usage)
        if reply.output is None and reply.status != "failed":
            return self.no_answer(body, "the reply has no output", latency_s=latency_s,
                                  summary=summary, usage=usage)
        incomplete = clean_text((reply.incomplete_details or IncompleteDetails()).reason)[0] \
            if reply.status == "incomplete" else None
        parsed = answer_from_calls(calls, text="".join(text),
                                   truncated=incomplete in ("max_output_tokens", "stream_ended"),
                                   expect_string=True)
        if reply.status == "failed":
            error = reply.error or ResponseError()
            parsed = invalid_answer(PROVIDER_ERROR, clean_text(
                f"the response failed ({error.code or 'no code'}: "
                f"{one_line(error.message or '', 300)})")[0])
            incomplete = "failed"
        elif incomplete == "content_filter":
            parsed = parsed.model_copy(update={
                "error": f"{BLOCKED}: incomplete_details.reason content_filter",
                "error_code": BLOCKED, "declined": False})
        elif refused and parsed.error is None:
            parsed = parsed.model_copy(update={
                "error": f"{REFUSAL}: a refusal content part (the model refused to answer)",
                "error_code": REFUSAL, "declined": False})
        if self.options.strict:
            parsed = drop_strict_nulls(parsed, self._optional)
        return ProviderResponse(
            raw=body, parsed=parsed, latency_s=latency_s, request=summary,
            finish_reason=incomplete or ("tool_calls" if calls else "stop"), usage=usage)


class FunctionCallItem(ReplyModel):
    """An ``output[]`` item of type ``function_call`` (``arguments`` a JSON string)."""

    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None


class ContentPart(ReplyModel):
    """A ``message`` item's ``content[]`` part (``output_text`` or ``refusal``)."""

    type: str | None = None
    text: str | None = None
    refusal: str | None = None


class MessageItem(ReplyModel):
    """An ``output[]`` item of type ``message``."""

    content: list[ContentPart] | None = None


class IncompleteDetails(ReplyModel):
    """``incomplete_details``."""

    reason: str | None = None


class ResponseError(ReplyModel):
    """``error`` of a failed response."""

    code: str | None = None
    message: str | None = None


class InputTokensDetails(ReplyModel):
    """``usage.input_tokens_details``."""

    cached_tokens: int | None = None


class OutputTokensDetails(ReplyModel):
    """``usage.output_tokens_details``."""

    reasoning_tokens: int | None = None


class ResponsesUsage(ReplyModel):
    """``usage`` (tokens)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    input_tokens_details: InputTokensDetails | None = None
    output_tokens_details: OutputTokensDetails | None = None


class ResponsesReply(ReplyModel):
    """The fields of a ``response`` body bench reads (items are read by type)."""

    output: Any = None
    status: str | None = None
    incomplete_details: IncompleteDetails | None = None
    error: ResponseError | None = None
    usage: ResponsesUsage | None = None


def responses_usage(usage: ResponsesUsage | None) -> Usage:
    """:class:`Usage` from a Responses ``usage``. ``output_tokens`` already includes the
    reasoning tokens, which are billed as output (OpenAI API reference, "The response
    object": ``usage.output_tokens_details.reasoning_tokens``, "the number of reasoning
    tokens"; OpenAI "Reasoning models" guide: reasoning tokens "are billed as output
    tokens")."""
    if usage is None:
        return Usage()
    return Usage(prompt_tokens=usage.input_tokens or 0,
                 completion_tokens=usage.output_tokens or 0,
                 cached_tokens=(usage.input_tokens_details
                                or InputTokensDetails()).cached_tokens or 0,
                 reasoning_tokens=(usage.output_tokens_details
                                   or OutputTokensDetails()).reasoning_tokens)


def _stream_error(error: Any, where: str) -> ProviderError | None:
    """The :class:`ProviderError` an error object inside a Responses stream stands for (see
    :func:`bench.providers.errors.stream_error_status`), or None when it names no known code.
    """
    found = stream_error_status(error)
    if found is None:
        return None
    status, name = found
    message = error.get("message") if isinstance(error, Mapping) else None
    return ProviderError(
        f"error in the stream ({where}, {name}): "
        f"{one_line(str(message or 'no message'), 300)}",
        error_class="permanent" if name in CONFIG_ERROR_CODES else classify_status(status))


def assemble_response_stream(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The response body from streamed Responses events: the final ``response.completed`` /
    ``response.incomplete`` / ``response.failed`` event's ``response``; when the stream ended
    without one, the ``output_item.done`` items seen, joined with their
    ``function_call_arguments.delta`` fragments (status ``incomplete``, so the answer is
    invalid rather than empty).

    Errors are classified by what they say, like their HTTP equivalents (OpenAI API
    reference, "Streaming events": ``error`` with ``code`` and ``message``;
    ``response.failed`` with ``response.error``): an ``error`` event, and a failed response
    whose error code is a server, rate-limit or configuration error (``server_error``,
    ``rate_limit_exceeded``, ``insufficient_quota``...), raise it; any other failed response
    is returned (the row's invalid answer, code ``provider_error``).

    Raises:
        ProviderError: an ``error`` event, or a failed response as above.
    """
    items: dict[int, dict[str, Any]] = {}
    fragments: dict[str, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "error":
            raise _stream_error(event, "error event") or ProviderError(
                f"error in the stream (error event, code {event.get('code')}): "
                + one_line(str(event.get("message") or "no message"), 300),
                error_class="validation")
        if kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            raised = _stream_error(error, "response.failed")
            if raised is not None and raised.error_class != "validation":
                raise raised
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
