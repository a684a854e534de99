"""Google Gemini ``generateContent`` (``gemini:<model>``) through ``google-genai`` (optional
extra ``gemini``).

Wire format: Gemini API reference, ``models.generateContent``: ``contents[]`` of ``{role: user
| model, parts[]}`` with ``text``, ``functionCall {id, name, args}`` and ``functionResponse {id,
name, response}`` parts; ``systemInstruction``; ``tools[].functionDeclarations[]`` whose
``parameters`` is Gemini's schema subset (see :mod:`bench.descriptions.schema_dialects`);
``toolConfig.functionCallingConfig {mode: AUTO | ANY | NONE, allowedFunctionNames}``;
``generationConfig {temperature, maxOutputTokens, seed}``. Answer: ``candidates[0].content.
parts[].functionCall`` (``args`` an object), ``finishReason`` (``MAX_TOKENS`` on truncation,
``MALFORMED_FUNCTION_CALL``, ``UNEXPECTED_TOOL_CALL``), ``usageMetadata {promptTokenCount,
candidatesTokenCount, cachedContentTokenCount, thoughtsTokenCount}``, ``responseId``.

Replies are read through :class:`GeminiReply` (:mod:`bench.providers.replies`): a body of
unexpected shape is an invalid answer naming the field, never an exception.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from bench.models import Message, Tool
from bench.parse import (BLOCKED, MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, RawCall,
                         answer_from_calls, clean_text)
from bench.providers.base import HTTPOptions, HTTPProvider, ProviderResponse, Usage
from bench.descriptions.schema_dialects import dialect
from bench.providers.dialects import Turn, merged_turns, system_text
from bench.providers.errors import ProviderUnavailable, error_from_exception
from bench.providers.replies import MalformedReply, ReplyModel, body_object, read_reply, reply_json
from bench.redact import one_line

KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


def _parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if turn.role == "tool":
        # google-genai types.FunctionResponse.response: "Use 'output' key to specify function
        # output and 'error' key to specify error details"
        response = {"error" if turn.is_error else "output": turn.content}
        parts.append({"functionResponse": {"id": turn.call_id, "name": turn.name,
                                           "response": response}})
    elif turn.content:
        parts.append({"text": turn.content})
    return parts + [{"functionCall": {"id": c.id, "name": c.name, "args": c.arguments},
                     **({"thoughtSignature": c.signature} if c.signature else {})}
                    for c in turn.calls]


class GeminiProvider(HTTPProvider):
    """``gemini:<model>`` (key from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``).

    Gemini has no switch for parallel calls (``describe()["not_sent"]``). With
    ``options.stream`` the answer comes from ``streamGenerateContent?alt=sse``; the request
    body is the same (so the response cache and the batch file see one body).

    Raises:
        ProviderUnavailable: no API key, or google-genai is not installed.
    """

    kind = "gemini"
    not_sent = ("parallel_tool_calls",)

    def __init__(self, options: HTTPOptions, *, provider_id: str | None = None) -> None:
        super().__init__(options, provider_id=provider_id)
        key = next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), None)
        if not key:
            raise ProviderUnavailable(self.provider_id,
                                      f"neither {' nor '.join(KEY_ENVS)} is set")
        try:
            from google import genai
            from google.genai import types
        except ImportError:
            raise ProviderUnavailable(self.provider_id, "google-genai is not installed (pip "
                                                        "install -c constraints.txt -e "
                                                        "'.[gemini]')") from None
        self._types = types
        http = types.HttpOptions(base_url=options.base_url, api_version="v1beta",
                                 timeout=int(options.timeout_s * 1000))  # milliseconds
        self._client = genai.Client(api_key=key, http_options=http)

    @property
    def endpoint(self) -> str:
        """``/v1beta/models/<model>:generateContent``, or ``:streamGenerateContent?alt=sse``
        when streaming."""
        if self.options.stream:
            return f"/v1beta/models/{self.options.model}:streamGenerateContent?alt=sse"
        return f"/v1beta/models/{self.options.model}:generateContent"

    def convert_tool(self, tool: Tool) -> tuple[dict[str, Any], list[str]]:
        """A ``functionDeclaration`` with the schema rewritten to Gemini's subset."""
        return dialect("gemini").tool_entry(tool)

    def tool_names(self, body: Mapping[str, Any]) -> list[str]:
        """Names in ``tools[].functionDeclarations[]``."""
        return [str(d.get("name")) for entry in body.get("tools") or []
                for d in entry.get("functionDeclarations") or []]

    def contents(self, messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
        """(system text, contents); a tool result is a ``functionResponse`` naming its call's
        tool and id; consecutive same-role turns are merged.

        Raises:
            ProviderError: class ``validation`` for an unpaired tool result.
        """
        turns = self.turns(messages)
        return system_text(turns), merged_turns(turns, assistant_role="model", key="parts",
                                                blocks=_parts)

    def build_request(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                      trial: int, tool_choice: str | None = None) -> dict[str, Any]:
        """The generateContent body; see the CONTRACT in :mod:`bench.providers.base`."""
        options = self.options
        system, contents = self.contents(messages)
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if tools:
            self.check_tool_choice(tools, tool_choice)
            body["tools"] = [{"functionDeclarations": self.converted_tools(tools).tools}]
            choice = tool_choice or options.tool_choice
            config = {"auto": {"mode": "AUTO"}, "required": {"mode": "ANY"},
                      "none": {"mode": "NONE"}}.get(
                choice, {"mode": "ANY", "allowedFunctionNames": [choice]})
            body["toolConfig"] = {"functionCallingConfig": config}
        body["generationConfig"] = {"temperature": options.temperature,
                                    "maxOutputTokens": options.max_tokens,
                                    "seed": options.seed + trial}
        return body

    async def send(self, body: dict[str, Any]) -> tuple[object, Mapping[str, str]]:
        """One generateContent call through google-genai's async client (streamGenerateContent when
        ``options.stream``); see the CONTRACT."""
        types = self._types
        config = {k: v for k, v in body.items() if k != "contents"}
        config.update(config.pop("generationConfig", {}))
        if self.options.stream:
            return await self._send_stream(body["contents"], config)
        try:
            result = await self._client.aio.models.generate_content(
                model=self.options.model, contents=body["contents"],
                config=types.GenerateContentConfig.model_validate(
                    {**config, "shouldReturnHttpResponse": True}))
        except Exception as exc:  # noqa: BLE001 - every failure is classified, none swallowed
            raise error_from_exception(exc) from exc
        http = result.sdk_http_response
        raw = http.body if http is not None else None
        answer = reply_json(raw) if isinstance(raw, str) else \
            result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return answer, (http.headers or {}) if http is not None else {}

    async def _send_stream(self, contents: list[dict[str, Any]], config: dict[str, Any]
                     ) -> tuple[dict[str, Any], Mapping[str, str]]:
        """``streamGenerateContent?alt=sse`` through google-genai's ``generate_content_stream``;
        the chunks (typed by the SDK, dumped back to their wire names) joined by
        :func:`assemble_gemini_stream`.

        Raises:
            ProviderError: any SDK or transport failure, an error event in the stream included.
        """
        headers: Mapping[str, str] = {}
        chunks: list[dict[str, Any]] = []
        try:
            # wire-format (camelCase) dicts: the SDK validates them into its Content models,
            # as generate_content does; its annotation lists only snake_case ContentDicts
            stream = await self._client.aio.models.generate_content_stream(
                model=self.options.model, contents=contents,  # type: ignore[arg-type]
                config=self._types.GenerateContentConfig.model_validate(config))
            async for chunk in stream:
                http = chunk.sdk_http_response
                headers = (http.headers or {}) if http is not None else headers
                chunks.append(chunk.model_dump(mode="json", by_alias=True, exclude_none=True,
                                               exclude={"sdk_http_response"}))
        except Exception as exc:  # noqa: BLE001 - every failure is classified, none swallowed
            raise error_from_exception(exc) from exc
        return assemble_gemini_stream(chunks), headers

    async def aclose(self) -> None:
        """Close google-genai's async client (its httpx pool) inside the run's loop."""
        await self._client.aio.aclose()

    def parse_body(self, body: object, *, latency_s: float,
                   request: Mapping[str, Any] | None = None) -> ProviderResponse:
        """Parse a generateContent body (or one streamed chunk's); see the CONTRACT in
        :mod:`bench.providers.base`.

        The first candidate is the answer; ``thought`` parts are not prose. ``MAX_TOKENS``
        truncates it (also when it has no ``parts`` at all: a thinking model spent the
        budget on thoughts); ``MALFORMED_FUNCTION_CALL`` and ``UNEXPECTED_TOOL_CALL`` make
        it invalid with that code; a safety finish reason (:data:`BLOCKED_REASONS`) or a
        prompt blocked without candidates makes it invalid with code ``blocked``.
        """
        try:
            reply = read_reply(GeminiReply, body_object(body))
        except MalformedReply as exc:
            return self.malformed(body, str(exc), latency_s=latency_s, request=request)
        summary = self.summarize_request(request) if request is not None else {}
        counted = gemini_usage(reply.usage_metadata)
        request_id = clean_text(reply.response_id)[0]
        if not reply.candidates:
            blocked = clean_text((reply.prompt_feedback or PromptFeedback()).block_reason)[0]
            if blocked:
                return self.no_answer(body, f"the prompt was blocked (blockReason {blocked})",
                                      latency_s=latency_s, summary=summary, code=BLOCKED,
                                      usage=counted, request_id=request_id)
            return self.no_answer(body, "the reply has no candidates", latency_s=latency_s,
                                  summary=summary, usage=counted, request_id=request_id)
        candidate = reply.candidates[0]
        parts = (candidate.content or GeminiContent()).parts or []
        calls = [RawCall(p.function_call.id, p.function_call.name or "", p.function_call.args,
                         p.thought_signature)
                 for p in parts if p.function_call is not None]
        text = "".join(p.text or "" for p in parts if not p.thought)
        finish = clean_text(candidate.finish_reason)[0]
        parsed = answer_from_calls(calls, text=text, truncated=finish == "MAX_TOKENS")
        code = {"MALFORMED_FUNCTION_CALL": MALFORMED_FUNCTION_CALL,
                "UNEXPECTED_TOOL_CALL": UNEXPECTED_TOOL_CALL}.get(finish or "")
        if code is None and finish in BLOCKED_REASONS:
            code = BLOCKED
        if code is not None and parsed.error is None:
            said = one_line(clean_text(candidate.finish_message)[0] or "", 300)
            parsed = parsed.model_copy(update={
                "error": f"{code}: finishReason {finish}" + (f" ({said})" if said else ""),
                "error_code": code, "declined": False})
        return ProviderResponse(raw=body, parsed=parsed, finish_reason=finish,
                                latency_s=latency_s, request=summary, usage=counted,
                                request_id=request_id)


def assemble_gemini_stream(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Join streamed ``GenerateContentResponse`` chunks into one body.

    The first candidate's parts are concatenated in arrival order (text, ``functionCall`` and
    ``thoughtSignature`` parts as sent); ``finishReason``, ``usageMetadata`` (cumulative in
    every chunk: the last one is final), ``modelVersion`` and ``responseId`` come from the last
    chunk that has them; ``promptFeedback`` from any chunk (a blocked prompt). A stream without
    candidates gives a body without candidates (parsed as "no candidates").

    Args:
        chunks: the chunks as JSON objects with the wire's camelCase names.
    """
    body: dict[str, Any] = {}
    parts: list[dict[str, Any]] = []
    candidate: dict[str, Any] | None = None
    for chunk in chunks:
        for key in ("usageMetadata", "modelVersion", "responseId", "promptFeedback"):
            if chunk.get(key) is not None:
                body[key] = chunk[key]
        candidates = chunk.get("candidates") or []
        if not candidates or not isinstance(candidates[0], Mapping):
            continue
        first = candidates[0]
        if candidate is None:
            candidate = {k: v for k, v in first.items() if k != "content"}
        else:
            candidate.update({k: v for k, v in first.items() if k != "content"})
        content = first.get("content") or {}
        parts += [dict(p) for p in content.get("parts") or [] if isinstance(p, Mapping)]
        if content.get("role"):
            candidate["role"] = content["role"]
    if candidate is not None:
        role = candidate.pop("role", "model")
        body["candidates"] = [{**candidate, "content": {"role": role, "parts": parts}}]
    return body


# Finish reasons of an answer the safety or recitation filters withheld (Gemini API reference,
# "FinishReason").
BLOCKED_REASONS = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT",
                             "SPII", "IMAGE_SAFETY"})


class _Gemini(ReplyModel):
    """Gemini replies are camelCase; the models name fields in snake_case."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True,
                              alias_generator=to_camel, populate_by_name=True)


class FunctionCall(_Gemini):
    """A part's ``functionCall`` (``args`` an object)."""

    id: str | None = None
    name: str | None = None
    args: Any = None


class Part(_Gemini):
    """``content.parts[]``: ``text``, ``functionCall``; ``thought: true`` marks thoughts;
    ``thoughtSignature`` (base64 text) signs the part and must go back with it."""

    text: str | None = None
    thought: bool | None = None
    function_call: FunctionCall | None = None
    thought_signature: str | None = None


class GeminiContent(_Gemini):
    """``candidates[].content``; no ``parts`` at all is valid (``MAX_TOKENS``)."""

    parts: list[Part] | None = None


class Candidate(_Gemini):
    """``candidates[]``."""

    content: GeminiContent | None = None
    finish_reason: str | None = None
    finish_message: str | None = None


class PromptFeedback(_Gemini):
    """``promptFeedback``."""

    block_reason: str | None = None


class UsageMetadata(_Gemini):
    """``usageMetadata`` (tokens)."""

    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    cached_content_token_count: int | None = None
    thoughts_token_count: int | None = None


class GeminiReply(_Gemini):
    """The fields of a ``GenerateContentResponse`` bench reads."""

    candidates: list[Candidate] | None = None
    prompt_feedback: PromptFeedback | None = None
    usage_metadata: UsageMetadata | None = None
    response_id: str | None = None


def gemini_usage(usage: UsageMetadata | None) -> Usage:
    """:class:`Usage` from ``usageMetadata``.

    Thoughts are billed as output but are not part of ``candidatesTokenCount``: the API
    reference's ``UsageMetadata`` gives ``totalTokenCount`` as "prompt + thoughts + response
    candidates" (ai.google.dev/api/generate-content#UsageMetadata) and the pricing page's
    output price is "including thinking tokens" (ai.google.dev/gemini-api/docs/pricing). So
    ``completion_tokens`` = ``candidatesTokenCount`` + ``thoughtsTokenCount``.
    """
    if usage is None:
        return Usage()
    thoughts = usage.thoughts_token_count
    return Usage(prompt_tokens=usage.prompt_token_count or 0,
                 completion_tokens=(usage.candidates_token_count or 0) + max(thoughts or 0, 0),
                 cached_tokens=usage.cached_content_token_count or 0,
                 reasoning_tokens=thoughts)
