"""OpenAI Chat Completions (``openai:<model>``) and any OpenAI-compatible server
(``openai-compat:<model>@<base_url>``: vLLM, Ollama, llama.cpp server, LM Studio), through the
official ``openai`` SDK.

Wire format: OpenAI API reference, "Create chat completion" (request ``tools``,
``tool_choice``, ``parallel_tool_calls``; response ``choices[0].message.tool_calls[]`` with
``function.arguments`` as a JSON string; streamed ``delta.tool_calls[]`` fragments with
``index``/``id``; ``usage.prompt_tokens_details.cached_tokens``,
``usage.completion_tokens_details.reasoning_tokens``).

Replies are read through :class:`ChatReply` (:mod:`bench.providers.replies`): a body of
unexpected shape is an invalid answer naming the field, never an exception. A streamed answer
is joined into one body first (:mod:`bench.providers.openai_chat_stream`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import urlsplit

from bench.jsonl import dumps
from bench.models import Message, Tool
from bench.parse import (
    BLOCKED,
    REFUSAL,
    ParsedAnswer,
    RawCall,
    answer_from_calls,
    clean_text,
)
from bench.providers.base import (
    HTTPOptions,
    HTTPProvider,
    ProviderResponse,
    Usage,
)
from bench.descriptions.schema_dialects import dialect, optional_properties
from bench.providers.headers import request_id_from
from bench.providers.errors import (
    ProviderUnavailable,
    error_from_exception,
)
from bench.providers.openai_chat_stream import assemble_chat_stream
from bench.providers.replies import (
    MalformedReply,
    ReplyModel,
    Text,
    body_object,
    read_reply,
    reply_json,
)
from bench.providers.sdk import send_with_sdk

if TYPE_CHECKING:  # the SDK loads when a provider starts
    import httpx
    from openai import AsyncOpenAI

COMPAT_KEY_ENV = "OPENAI_COMPAT_API_KEY"


def openai_client(provider_id: str, options: HTTPOptions, key_env: str | None) -> AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` client with SDK retries off (the runner retries).

    Args:
        key_env: variable holding the key; None for servers that need none (a placeholder is
            sent then).

    Raises:
        ProviderUnavailable: the key variable is unset or the SDK is missing.
    """
    key = os.environ.get(key_env) if key_env else os.environ.get(COMPAT_KEY_ENV)
    if key_env and not key:
        raise ProviderUnavailable(provider_id, f"{key_env} is not set")
    try:
        import openai
    except ImportError:
        raise ProviderUnavailable(provider_id, "the openai SDK is not installed "
                                               "(pip install openai)") from None
    # aiohttp under the SDK (its documented DefaultAioHttpClient): 1.1 against 1.5-1.8 ms of
    # CPU per request with httpx's async transport (benchmarks/RESULTS.md). Not for a base URL
    # with user:password (a proxy's Basic auth): aiohttp refuses those beside the SDK's own
    # Authorization header, httpx sends them.
    userinfo = urlsplit(options.base_url or "").username is not None
    return openai.AsyncOpenAI(api_key=key or "no-key-required", base_url=options.base_url,
                              timeout=options.timeout_s, max_retries=0,
                              http_client=None if userinfo else openai.DefaultAioHttpClient())


_JSON_HEADERS = {"Content-Type": "application/json"}


def _response_class() -> type:
    """The HTTP response class the installed openai SDK returns raw (httpx2 or httpx)."""
    try:
        import httpx2
        found: type = httpx2.Response
    except ImportError:
        import httpx
        found = httpx.Response
    return found


class OpenAIChatProvider(HTTPProvider):
    """``openai:<model>``: the Chat Completions API (key from ``OPENAI_API_KEY``).

    Args:
        options: :class:`HTTPOptions`; ``strict=True`` rewrites schemas for strict mode and maps
            the ``null`` it then receives for an optional argument back to "omitted".
        provider_id: default ``openai:<model>``.

    Raises:
        ProviderUnavailable: no API key in the environment, or the SDK is missing.
    """

    kind = "openai"
    key_env: str | None = "OPENAI_API_KEY"
    max_tokens_field = "max_completion_tokens"

    def __init__(self, options: HTTPOptions, *, provider_id: str | None = None) -> None:
        super().__init__(options, provider_id=provider_id)
        self._client = openai_client(self.provider_id, options, self.key_env)
        self._optional: dict[str, frozenset[str]] = {}

    @property
    def endpoint(self) -> str:
        """``/v1/chat/completions``."""
        return "/v1/chat/completions"

    def convert_tool(self, tool: Tool) -> tuple[dict[str, Any], list[str]]:
        """``{"type": "function", "function": {name, description, parameters[, strict]}}``."""
        entry, changes = dialect("openai-strict" if self.options.strict else "openai"
                                 ).tool_entry(tool)
        if self.options.strict:
            entry["function"]["strict"] = True
            self._optional[tool.name] = optional_properties(tool.input_schema)
        return entry, changes

    def messages_payload(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The conversation in Chat Completions form, tool results paired by ``tool_call_id``.

        Raises:
            ProviderError: class ``validation`` for an unpaired tool result.
        """
        turns = self.turns(messages)
        out: list[dict[str, Any]] = []
        for turn in turns:
            if turn.role == "tool":
                out.append({"role": "tool", "tool_call_id": turn.call_id,
                            "content": turn.content})
            elif turn.calls:
                # "" rather than null: llama.cpp's Python server rejects null (its request
                # type is str) and chat templates that read message.content fail without one
                out.append({"role": "assistant", "content": turn.content,
                            "tool_calls": [{"id": c.id, "type": "function",
                                            "function": {"name": c.name, "arguments": json.dumps(
                                                c.arguments, ensure_ascii=False)}}
                                           for c in turn.calls]})
            else:
                out.append({"role": turn.role, "content": turn.content})
        return out

    def build_request(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                      trial: int, tool_choice: str | None = None) -> dict[str, Any]:
        """The Chat Completions body; see the CONTRACT in :mod:`bench.providers.base`."""
        options = self.options
        body: dict[str, Any] = {"model": options.model,
                                "messages": self.messages_payload(messages),
                                "temperature": options.temperature,
                                self.max_tokens_field: options.max_tokens,
                                "seed": options.seed + trial}
        if tools:
            self.check_tool_choice(tools, tool_choice)
            body["tools"] = self.converted_tools(tools).tools
            choice = tool_choice or options.tool_choice
            body["tool_choice"] = choice if choice in ("auto", "required", "none") else \
                {"type": "function", "function": {"name": choice}}
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    async def send(self, body: dict[str, Any]) -> tuple[object, Mapping[str, str]]:
        """One Chat Completions call (streamed when ``body["stream"]``); see the CONTRACT."""
        if body.get("stream"):
            return await send_with_sdk(self._client.chat.completions, body, assemble_chat_stream)
        try:
            # The body is already exact JSON: the SDK's generic post (same auth, base URL,
            # timeout and error mapping) skips create()'s typed transform of every nested
            # schema (~1.3 ms CPU per request), and sending it pre-encoded skips the SDK's
            # own JSON pass over every tool schema (benchmarks/provider_throughput.py).
            raw: httpx.Response = await self._client.post("/chat/completions", content=dumps(body).encode("utf-8"),
                                    options={"headers": _JSON_HEADERS},
                                    cast_to=_response_class())
            return reply_json(raw.content, request_id=request_id_from(raw.headers)), raw.headers
        except Exception as exc:  # noqa: BLE001 - every failure is classified, none swallowed
            raise error_from_exception(exc) from exc

    def parse_body(self, body: object, *, latency_s: float,
                   request: Mapping[str, Any] | None = None) -> ProviderResponse:
        """Parse a Chat Completions body; see the CONTRACT in :mod:`bench.providers.base`.

        The first choice is the answer: ``finish_reason`` ``length`` makes it truncated,
        ``content_filter`` makes it invalid (code ``blocked``), and so does a non-empty
        ``message.refusal`` (code ``refusal``, its text kept as prose): the model refused
        for safety reasons, which is not a decision that no tool fits (OpenAI "Structured
        Outputs" guide, "Refusals"; Anthropic's ``stop_reason: "refusal"`` gets the same
        code). Usage as :func:`openai_usage` counts it.
        """
        try:
            reply = read_reply(ChatReply, body_object(body))
        except MalformedReply as exc:
            return self.malformed(body, str(exc), latency_s=latency_s, request=request)
        summary = self.summarize_request(request) if request is not None else {}
        usage = openai_usage(reply.usage)
        if not reply.choices:
            return self.no_answer(body, "the reply has no choices", latency_s=latency_s,
                                  summary=summary, usage=usage)
        choice = reply.choices[0]
        message = choice.message
        finish = clean_text(choice.finish_reason)[0]
        calls = [RawCall(call.id, "", None) if call.function is None else
                 RawCall(call.id, call.function.name or "", call.function.arguments)
                 for call in (message.tool_calls if message is not None else None) or []]
        parsed = answer_from_calls(calls, text=None if message is None
                                   else message.content or message.refusal,
                                   truncated=finish == "length", expect_string=True)
        if finish == "content_filter" and parsed.error is None:
            parsed = parsed.model_copy(update={
                "error": f"{BLOCKED}: finish_reason content_filter (the provider's content "
                         "filter withheld the answer)", "error_code": BLOCKED,
                "declined": False})
        refusal = clean_text(message.refusal if message is not None else None)[0]
        if refusal and refusal.strip() and parsed.error is None:
            parsed = parsed.model_copy(update={
                "error": f"{REFUSAL}: message.refusal (the model refused to answer)",
                "error_code": REFUSAL, "declined": False})
        if self.options.strict:
            parsed = drop_strict_nulls(parsed, self._optional)
        return ProviderResponse(raw=body, parsed=parsed, finish_reason=finish,
                                latency_s=latency_s, request=summary, usage=usage)


class ChatFunction(ReplyModel):
    """``tool_calls[].function``: ``arguments`` is a JSON string (some servers send an
    object; :func:`bench.parse.decode_arguments` judges it)."""

    name: str | None = None
    arguments: Any = None


class ChatToolCall(ReplyModel):
    """``message.tool_calls[]``."""

    id: str | None = None
    function: ChatFunction | None = None


class ChatMessage(ReplyModel):
    """``choices[].message``; ``content`` may be a list of text parts."""

    content: Text = None
    refusal: str | None = None
    tool_calls: list[ChatToolCall] | None = None


class ChatChoice(ReplyModel):
    """``choices[]``."""

    message: ChatMessage | None = None
    finish_reason: str | None = None


class PromptTokensDetails(ReplyModel):
    """``usage.prompt_tokens_details``."""

    cached_tokens: int | None = None


class CompletionTokensDetails(ReplyModel):
    """``usage.completion_tokens_details``."""

    reasoning_tokens: int | None = None


class ChatUsage(ReplyModel):
    """``usage`` (tokens)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None


class ChatReply(ReplyModel):
    """The fields of a ``chat.completion`` body bench reads (or of one streamed chunk)."""

    choices: list[ChatChoice] | None = None
    usage: ChatUsage | None = None


def openai_usage(usage: ChatUsage | None) -> Usage:
    """:class:`Usage` from a Chat Completions ``usage``.

    Reasoning tokens: OpenAI counts them inside ``completion_tokens`` and bills them as output
    (OpenAI API reference, "The chat completion object", ``usage.completion_tokens_details``:
    rejected prediction tokens are "like reasoning tokens ... still counted in the total
    completion tokens for purposes of billing, output, and context window limits";
    github.com/openai/openai-openapi). Some OpenAI-compatible servers count them outside it
    (xAI: "reasoning token consumption will be counted separately from completion_tokens, but
    will be counted in the total_tokens", docs.x.ai "Consumption and rate limits", as quoted in
    github.com/vercel/ai pull request 12425). So when ``total_tokens`` equals prompt +
    completion + reasoning (and not prompt + completion), they are added to
    ``completion_tokens``, which then holds every billed output token.
    """
    if usage is None:
        return Usage()
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    details = usage.completion_tokens_details
    reasoning = details.reasoning_tokens if details is not None else None
    if reasoning and reasoning > 0 and usage.total_tokens is not None \
            and usage.total_tokens == prompt + completion + reasoning:
        completion += reasoning
    cached = usage.prompt_tokens_details.cached_tokens \
        if usage.prompt_tokens_details is not None else None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached or 0,
                 reasoning_tokens=reasoning)


class OpenAICompatProvider(OpenAIChatProvider):
    """``openai-compat:<model>@<base_url>``: an OpenAI-compatible Chat Completions server.

    The key is optional (``OPENAI_COMPAT_API_KEY`` when the server wants one) and the token cap
    goes in ``max_tokens``, the field these servers read.

    Raises:
        ProviderUnavailable: the openai SDK is missing.
    """

    kind = "openai-compat"
    key_env = None
    max_tokens_field = "max_tokens"

    def __init__(self, options: HTTPOptions, *, provider_id: str | None = None) -> None:
        super().__init__(options, provider_id=provider_id
                         or f"openai-compat:{options.model}@{options.base_url}")


def drop_strict_nulls(parsed: ParsedAnswer, optional: Mapping[str, frozenset[str]]
                      ) -> ParsedAnswer:
    """Strict mode makes optional arguments nullable; ``null`` there means "omitted".

    Removes those ``null`` arguments and notes ``strict_null_omitted`` on the call.
    """
    calls = []
    for call in parsed.calls:
        dropped = [k for k in optional.get(call.name, ()) if k in call.arguments
                   and call.arguments[k] is None]
        if dropped:
            call = call.model_copy(update={
                "arguments": {k: v for k, v in call.arguments.items() if k not in dropped},
                "notes": [*call.notes, "strict_null_omitted"]})
        calls.append(call)
    return parsed.model_copy(update={"calls": calls})
