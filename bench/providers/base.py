"""The provider-neutral interface every adapter implements.

HTTP adapters (:class:`HTTPProvider`) also implement this CONTRACT, which the response cache,
replay and batch mode rely on:

- ``endpoint -> str``: the path the request goes to, e.g. ``/v1/chat/completions``,
  ``/v1/responses``, ``/v1/messages``, ``/v1beta/models/<model>:generateContent``.
- ``build_request(messages, tools, *, trial) -> dict``: the exact JSON body for ``endpoint``
  (what one line of an OpenAI Batch file's ``body`` or an Anthropic Message Batch's ``params``
  holds). Deterministic: same inputs, same dict; treat it as read-only (the converted tool
  entries are shared between requests of a variant). Raises :class:`~bench.providers.errors.
  ProviderError` (class ``validation``) when the request cannot be built.
- ``parse_body(body, *, latency_s, request=None) -> ProviderResponse``: parse one raw JSON
  response body (as the provider sent it). Never raises on model output or on a body of
  unexpected shape: undecodable calls become invalid calls, a body that does not fit the
  adapter's typed reply model (:mod:`bench.providers.replies`) becomes an invalid answer
  (``parsed.error_code`` ``malformed_reply``). :meth:`HTTPProvider.parse_reply` wraps it for
  callers: whatever it raises (a bench bug) becomes the answer's ``parser_failed`` error. ``request`` is the body that was sent (its
  summary goes to ``ProviderResponse.request``). With ``strict=True`` it maps the ``null``
  sent for an optional argument back to "omitted", which needs the variant's tools converted
  first (``prepare()`` or ``build_request()``).
- ``async send(body) -> (response_body, headers)``: one call through the SDK's async client
  (``AsyncOpenAI``, ``AsyncAnthropic``, google-genai's ``client.aio``; httpx underneath), no
  retries (``max_retries=0``); raises :class:`~bench.providers.errors.ProviderError` with an
  ``error_class`` and ``retry_after_s``. Retrying is the caller's job.
- ``async complete()`` = ``build_request`` + ``send`` + ``parse_body`` (latency, request id).
- ``summarize_request(body) -> dict``: what a result row records about the request (model,
  tool names, tool_choice, parallel_tool_calls, the dialect changes made to the tools).

Concurrency: one event loop runs every request of a run (:mod:`bench.runner.core`); many
``send`` calls are in flight at once on it. ``build_request`` and ``parse_body`` are plain
functions (tool conversions are cached under a lock, so other threads may call them too).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import Any, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import (MALFORMED_REPLY, NO_ANSWER, PARSER_FAILED, invalid_answer)
from bench.providers.dialects import Turn, history
from bench.providers.errors import ProviderError
from bench.providers.headers import request_id_from
from bench.providers.response import ProviderResponse as ProviderResponse  # re-exported
from bench.providers.response import Usage as Usage
from bench.providers.tool_search import ToolSearch
from bench.redact import one_line, public_url


class Provider(ABC):
    """A model behind one provider id (BRIEF §4: ``local``, ``openai:<model>``...).

    ``complete`` is a coroutine: the run's event loop awaits many at once (up to the
    provider's concurrency). A provider whose work blocks (the embedded model) runs it in a
    worker behind ``await`` (:func:`asyncio.to_thread`), never on the loop itself. It must not
    mutate shared state other than the provider's own caches.
    """

    provider_id: str

    @abstractmethod
    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                 variant_key: str, trial: int) -> ProviderResponse:
        """Ask the model for tool calls.

        Args:
            messages: the case's conversation (the runner passes a copy made for this request:
                changing it changes nothing else).
            tools: the variant's tools, byte-identical for every case of a variant (a copy
                made for this request, too).
            variant_key: a stable key of the tools (the variant hash), for per-variant caches.
            trial: 0-based trial index.

        Raises:
            BenchError: the provider cannot run (missing model, missing key).
        """

    def prepare(self, tools: Sequence[Tool], *, variant_key: str, label: str) -> None:
        """Check and cache what the provider needs for one variant before the run starts.

        Args:
            tools: the variant's tools.
            variant_key: the variant's hash (cache key).
            label: how to name the variant in errors.

        Raises:
            BenchError: the provider cannot use these tools (e.g. a schema it cannot express).
        """

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the manifest records about the provider: model id, file hash, settings."""

    def start_notes(self) -> list[str]:
        """Lines a run prints on stderr once this provider has started (e.g. the embedded
        model's hardware checks); default none.

        Raises:
            BenchError: a check finds the provider unusable here (the line says the fix).
        """
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (models, connections)."""

    async def aclose(self) -> None:
        """Release resources from inside the run's event loop (an async client's connection
        pool closes there); default: :meth:`close`."""
        self.close()

    #: Requests in flight at most (None: ``--concurrency`` decides; the registry sets its
    #: kind's cap on an instance whose class sets none).
    max_concurrency: int | None = None

    #: Seconds a stopping run waits for this provider's requests in flight before it
    #: abandons them (None: the run's request timeout; rows abandoned are redone on resume).
    stop_wait_s: float | None = None

    def abandon(self, why: str) -> None:  # noqa: B027 - optional hook
        """Give up the requests in flight (the stopping run has cancelled their tasks): stop
        work that cancellation cannot reach, such as a model generating in a worker. Called by
        a stopping run after :attr:`stop_wait_s`; default: nothing (a cancelled HTTP request
        closes its connection)."""


class HTTPOptions(BaseModel):
    """Settings shared by the HTTP adapters.

    Attributes:
        model: the provider's model name.
        base_url: API root (None: the SDK's default or its ``*_BASE_URL`` variable).
        tool_choice: ``auto``, ``required`` (must call some tool), ``none``, or a tool name
            (must call that tool).
        parallel_tool_calls: allow several calls in one answer (None: the provider's default).
        strict: OpenAI strict mode for tool schemas (see
            :mod:`bench.descriptions.schema_dialects`).
        temperature: sampling temperature.
        max_tokens: completion cap in tokens.
        seed: base seed; trial ``t`` sends ``seed + t`` where the provider takes a seed.
        timeout_s: per-request timeout in seconds.
        stream: receive the answer as server-sent events and assemble it.
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    base_url: str | None = None
    tool_choice: str = "auto"
    parallel_tool_calls: bool | None = None
    strict: bool = False
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=512, ge=1)
    seed: int = 1234
    timeout_s: float = Field(default=60.0, gt=0)
    stream: bool = False


class ConvertedTools(BaseModel):
    """A variant's tools in one provider's dialect, with the log of every change made."""

    tools: list[dict[str, Any]]
    changes: list[str]


class HTTPProvider(Provider):
    """Base of the adapters that call a provider's HTTP API (see the module CONTRACT).

    Subclasses set ``kind`` and implement :meth:`convert_tool`, :meth:`build_request`,
    :meth:`parse_body`, :meth:`send` and the ``endpoint`` property.

    Args:
        options: :class:`HTTPOptions`.
        provider_id: the id the run uses (default ``<kind>:<model>``).
    """

    kind: str = "http"
    not_sent: tuple[str, ...] = ()  # HTTPOptions fields the provider's API does not take

    def __init__(self, options: HTTPOptions, *, provider_id: str | None = None) -> None:
        self.options = options
        self.provider_id = provider_id or f"{self.kind}:{options.model}"
        self._lock = threading.Lock()
        self._converted: dict[tuple[int, ...], tuple[Sequence[Tool], ConvertedTools]] = {}
        self._variant_changes: dict[str, list[str]] = {}
        self._tool_changes: dict[str, list[str]] = {}

    @property
    @abstractmethod
    def endpoint(self) -> str:
        """The request path, e.g. ``/v1/chat/completions``."""

    @abstractmethod
    def convert_tool(self, tool: Tool) -> tuple[dict[str, Any], list[str]]:
        """One canonical tool in the provider's dialect, and the changes made to it."""

    @abstractmethod
    def build_request(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                      trial: int, tool_choice: str | None = None) -> dict[str, Any]:
        """The exact JSON body for :attr:`endpoint` (see the module CONTRACT); a
        ``tool_choice`` overrides the provider's setting for this request only.

        Raises:
            ProviderError: class ``validation``: the conversation or tool_choice cannot be
                expressed (e.g. a tool result answering no earlier call).
        """

    def search_request(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       trial: int, tool_choice: str | None = None,
                       tool_search: ToolSearch) -> dict[str, Any]:
        """The JSON body of a request with provider-native tool search
        (:class:`bench.providers.tool_search.ToolSearch`): every tool sent, all but the
        always-loaded ones deferred. Only providers that have it override this.

        Raises:
            ProviderError: class ``validation``: this provider has no native tool search (the
                default), or the request cannot be built (as :meth:`build_request`).
        """
        raise ProviderError(f"{self.provider_id} has no native tool search (--retriever "
                            "native is Anthropic's tool search tool)", error_class="validation")

    @abstractmethod
    def parse_body(self, body: object, *, latency_s: float,
                   request: Mapping[str, Any] | None = None) -> ProviderResponse:
        """Parse one raw JSON response body (see the module CONTRACT)."""

    @abstractmethod
    async def send(self, body: dict[str, Any]) -> tuple[object, Mapping[str, str]]:
        """POST ``body`` through the SDK's async client once; return (response JSON, response headers).

        Raises:
            ProviderError: the request failed (class per :mod:`bench.providers.errors`).
        """

    def converted_tools(self, tools: Sequence[Tool]) -> ConvertedTools:
        """The tools in this provider's dialect, cached per tools list (by identity)."""
        key = tuple(id(t) for t in tools)
        found = self._converted.get(key)
        if found is None:
            entries, changes = [], []
            per_tool = {}
            for tool in tools:
                entry, tool_changes = self.convert_tool(tool)
                entries.append(entry)
                changes += tool_changes
                per_tool[tool.name] = tool_changes
            found = (tools, ConvertedTools(tools=entries, changes=changes))
            with self._lock:  # the tools list is kept so that its ids stay unique
                self._converted[key] = found
                self._tool_changes.update(per_tool)
        return found[1]

    def turns(self, messages: Sequence[Message]) -> list[Turn]:
        """The conversation with tool results paired to their calls (see
        :func:`bench.providers.dialects.history`).

        Raises:
            ProviderError: class ``validation`` for an unpaired tool result or bad arguments.
        """
        try:
            return history(messages)
        except ValueError as exc:
            raise ProviderError(str(exc), error_class="validation") from None

    def no_answer(self, body: object, why: str, *, latency_s: float,
                  summary: dict[str, Any], code: str = NO_ANSWER, usage: Usage | None = None,
                  request_id: str | None = None) -> ProviderResponse:
        """A response whose body holds no answer: ``parsed`` is an invalid answer with
        ``error_code`` ``code`` and the message ``why``; ``usage`` as the reply counted it."""
        return ProviderResponse(raw=body, parsed=invalid_answer(code, why), latency_s=latency_s,
                                request=summary, usage=usage or Usage(), request_id=request_id)

    def malformed(self, body: object, why: str, *, latency_s: float,
                  request: Mapping[str, Any] | None) -> ProviderResponse:
        """The answer to a body of unexpected shape: invalid, code ``malformed_reply``,
        ``why`` naming the field (usage unknown: zero)."""
        summary = self.summarize_request(request) if request is not None else {}
        return self.no_answer(body, why, latency_s=latency_s, summary=summary,
                              code=MALFORMED_REPLY)

    def parse_reply(self, body: object, *, latency_s: float,
                    request: Mapping[str, Any] | None = None) -> ProviderResponse:
        """:meth:`parse_body`, except that an exception it raises (a bench bug: parse_body
        must not raise) becomes the answer: invalid, code ``parser_failed``, naming the
        exception. Never raises."""
        try:
            return self.parse_body(body, latency_s=latency_s, request=request)
        except Exception as exc:  # noqa: BLE001 - one bad reply must not end the run
            try:
                summary = self.summarize_request(request) if request is not None else {}
            except Exception:  # noqa: BLE001
                summary = {}
            message = one_line(f"{type(exc).__name__}: {exc}", 300)
            return ProviderResponse(raw=body, parsed=invalid_answer(
                PARSER_FAILED, f"the reply could not be parsed ({message})"),
                latency_s=latency_s, request=summary)

    def check_tool_choice(self, tools: Sequence[Tool], tool_choice: str | None = None) -> None:
        """Raise ProviderError(validation) when tool_choice (else the setting) is not a tool."""
        choice = tool_choice or self.options.tool_choice
        if choice not in ("auto", "required", "none") and choice not in {t.name for t in tools}:
            raise ProviderError(f"tool_choice '{choice}' is not one of the tools "
                                f"({', '.join(t.name for t in tools)})",
                                error_class="validation")

    def prepare(self, tools: Sequence[Tool], *, variant_key: str, label: str = "variant") -> None:
        """Convert the variant's tools once and keep the change log for the manifest.

        Raises:
            BenchError: tool_choice names a tool the variant does not have.
        """
        try:
            self.check_tool_choice(tools)
        except ProviderError as exc:
            raise BenchError(f"{label}: {exc.message}") from None
        self._variant_changes[label] = self.converted_tools(tools).changes

    def tool_names(self, body: Mapping[str, Any]) -> list[str]:
        """Names of the tools in a request body (dialects nest them differently)."""
        names = []
        for entry in body.get("tools") or []:
            inner = entry.get("function") if isinstance(entry.get("function"), dict) else entry
            names.append(str(inner.get("name")))
        return names

    def summarize_request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """What a result row records about a request: model, settings, message count, tool
        names and the dialect changes made to those tools."""
        names = self.tool_names(body)
        return {"model": self.options.model, "endpoint": self.endpoint, "tools": names,
                "tool_choice": self.options.tool_choice,
                "parallel_tool_calls": self.options.parallel_tool_calls,
                "strict": self.options.strict, "temperature": self.options.temperature,
                "max_tokens": self.options.max_tokens, "stream": self.options.stream,
                "dialect_changes": [c for n in names for c in self._tool_changes.get(n, [])]}

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        """``build_request`` + ``send`` + ``parse_body``; see :meth:`Provider.complete`.

        Raises:
            ProviderError: the request failed; ``error_class`` says whether to retry.
        """
        body = self.build_request(messages, tools, trial=trial)
        started = time.perf_counter()
        answer, headers = await self.send(body)
        latency = time.perf_counter() - started
        response = self.parse_reply(answer, latency_s=latency, request=body)
        response.request_id = request_id_from(headers) or response.request_id
        return response

    async def aclose(self) -> None:
        """Close the SDK's async client (``AsyncOpenAI.close`` / ``AsyncAnthropic.close``: its
        httpx connection pool) inside the run's loop."""
        client = getattr(self, "_client", None)
        if client is not None:
            await client.close()

    def describe(self) -> dict[str, Any]:
        """Provider id, model, base URL (made public: :func:`bench.redact.public_url`),
        settings and the dialect changes per variant (never a key); see
        :meth:`Provider.describe`."""
        return {"provider": self.provider_id, "kind": self.kind, "model": self.options.model,
                "base_url": public_url(self.options.base_url), "endpoint": self.endpoint,
                **self.options.model_dump(exclude={"model", "base_url"}),
                "not_sent": list(self.not_sent), "dialect_changes": self._variant_changes}
