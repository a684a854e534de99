"""The request pipeline: the only way anything in bench asks a model.

A provider's pipeline is a stack of :class:`Layer` objects around its
:meth:`~bench.providers.base.Provider.complete`, each with one concern, chosen from what the
provider's kind declares in the registry (:class:`bench.providers.registry.ProviderSpec`)::

    InvalidAsAnswer -> [user layers] -> Cached -> Retrying -> Send      (the usual stack)
    InvalidAsAnswer -> [user layers] -> Cached -> Batched              (--batch, batch kinds)
    InvalidAsAnswer -> [user layers] -> Retrying -> Send                (recorded kinds: replay)

A layer is an async callable ``(Exchange) -> Outcome`` that may hold the next one (``inner``):
the shape of inspect_ai's ``Model`` wrapping its ``ModelAPI`` with cache and retry
(``src/inspect_ai/model/_model.py``) and of pydantic-ai's ``WrapperModel``
(``pydantic_ai/models/wrapper.py``). A user adds one (logging, a fallback model) with a
:data:`LayerFactory` given to :func:`build_pipeline` (``bench.evaluate(layers=...)``,
``Runner(layers=...)``), without touching the runner.

What a layer sees is a provider-level request (:class:`ModelRequest`: messages, tools,
tool_choice, trial, the variant's key and the request's key), never a plan item.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence

from bench.errors import BenchError
from bench.parse import PROVIDER_ERROR, UNREADABLE_REPLY, ParsedAnswer
from bench.providers.base import HTTPProvider, Provider, ProviderResponse
from bench.providers.batcher import Batcher
from bench.providers.cache import ResponseCache, request_key
from bench.providers.copies import PickledTools
from bench.providers.errors import ProviderError
from bench.providers.headers import request_id_from
from bench.providers.ratelimit import ProviderGate, call_with_retries
from bench.providers.replies import UnreadableReply
from bench.providers.request import CacheStatus as CacheStatus  # re-exported
from bench.providers.request import ModelRequest as ModelRequest
from bench.providers.request import Outcome as Outcome

#: What a provider's :meth:`~Provider.describe` holds that names this machine, not the model:
#: left out of the cache key so that two machines share answers.
MACHINE_SPECIFIC = ("model_path", "threads", "system_info")


class Exchange:
    """A :class:`ModelRequest` on its way down the stack, with the provider it goes to.

    ``body`` is the HTTP adapter's JSON body (:meth:`HTTPProvider.build_request`), built once
    when a layer first needs it (the cache key and the send share it); None for a provider
    that is not an HTTP adapter.

    Raises (``body``):
        ProviderError: class ``validation``: the conversation or tools cannot be sent.
    """

    __slots__ = ("request", "provider", "_body", "_built")

    def __init__(self, request: ModelRequest, provider: Provider) -> None:
        self.request, self.provider = request, provider
        self._body: dict[str, Any] | None = None
        self._built = False

    @property
    def body(self) -> dict[str, Any] | None:
        """The HTTP body (built on first use), or None for a non-HTTP provider."""
        if not self._built:
            if isinstance(self.provider, HTTPProvider) and self.request.tool_search:
                self._body = self.provider.search_request(
                    self.request.messages, self.request.tools, trial=self.request.trial,
                    tool_choice=self.request.tool_choice, tool_search=self.request.tool_search)
            elif isinstance(self.provider, HTTPProvider):
                self._body = self.provider.build_request(
                    self.request.messages, self.request.tools, trial=self.request.trial,
                    tool_choice=self.request.tool_choice)
            self._built = True
        return self._body


class Layer(Protocol):
    """One step of a pipeline: ``await layer(exchange)`` answers the exchange's request.

    Raises:
        ProviderError, GateClosed, BatchFailed: as the layers below raise them.
    """

    def __call__(self, exchange: Exchange) -> Awaitable[Outcome]: ...


#: ``(provider_id, the stack below) -> the layer wrapping it``: how a user adds a layer.
LayerFactory = Callable[[str, Layer], Layer]




class Send:
    """The bottom of the stack: one request to the provider.

    An HTTP adapter gets ``send(body)`` and ``parse_reply`` (the gate, when given, sees the
    response's rate-limit headers); any other provider gets ``complete`` with deep copies of
    the messages and tools, so nothing it does to its input reaches the case, the variant,
    later requests or the stored rows.

    Raises:
        ProviderError: the request failed (class per :mod:`bench.providers.errors`).
    """

    def __init__(self, provider: Provider, gate: ProviderGate | None = None) -> None:
        self.provider, self.gate = provider, gate
        self._tools = PickledTools()

    async def __call__(self, exchange: Exchange) -> Outcome:
        """Send the exchange's request once; ``attempts`` is 1."""
        request, body = exchange.request, exchange.body
        if body is None:
            if request.tool_search is not None:
                raise ProviderError(f"{self.provider.provider_id} has no native tool search "
                                    "(--retriever native is Anthropic's tool search tool)",
                                    error_class="validation")
            if request.tool_choice is not None:
                raise ProviderError(f"{self.provider.provider_id} takes no per-request "
                                    f"tool_choice (asked for '{request.tool_choice}'); only "
                                    "HTTP providers do", error_class="validation")
            response = await self.provider.complete(
                copy.deepcopy(list(request.messages)),
                self._tools.copy(request.variant_key, request.tools),
                variant_key=request.variant_key, trial=request.trial)
            return Outcome(response, 1, None)
        provider = self.provider
        assert isinstance(provider, HTTPProvider)  # a body is built by HTTP adapters only
        started = time.perf_counter()
        answer, headers = await provider.send(body)
        latency = time.perf_counter() - started
        if self.gate is not None:
            self.gate.observe(headers)
        response = provider.parse_reply(answer, latency_s=latency, request=body)
        response.request_id = request_id_from(headers) or response.request_id
        _record_choice(response, request)
        return Outcome(response, 1, None)


def _record_choice(response: ProviderResponse, request: ModelRequest) -> None:
    # the row's request summary says what was sent: a per-request tool_choice when given
    if request.tool_choice is not None:
        response.request["tool_choice"] = request.tool_choice


class Retrying:
    """Retries through the provider's gate: transient errors and timeouts with backoff, 429s
    with the gate's shared pause (:func:`bench.providers.ratelimit.call_with_retries`).

    Args:
        inner: the layer below (usually :class:`Send`).
        gate: the provider's :class:`ProviderGate` (concurrency cap and pauses).
        attempts: the most attempts per request, >= 1.
    """

    def __init__(self, inner: Layer, gate: ProviderGate, attempts: int) -> None:
        self.inner, self.gate, self.attempts = inner, gate, attempts

    async def __call__(self, exchange: Exchange) -> Outcome:
        """The inner layer's outcome with ``attempts`` counted here.

        Raises:
            ProviderError: permanent or validation at once; the last error once retries run
                out. GateClosed: the run is stopping.
        """
        outcome, made = await call_with_retries(lambda: self.inner(exchange), self.gate,
                                                attempts=self.attempts)
        return Outcome(outcome.response, made, outcome.cache)


class Batched:
    """The bottom of a batch-mode stack: the request joins its provider's next batch
    (:class:`bench.providers.batcher.Batcher`) and its answer is awaited.

    Raises:
        BatchFailed: the batch reported an error for this request.
    """

    def __init__(self, provider: HTTPProvider, batcher: Batcher) -> None:
        self.provider, self.batcher = provider, batcher

    async def __call__(self, exchange: Exchange) -> Outcome:
        """The batch's answer, parsed (``request['batch']`` names the batch)."""
        body = exchange.body
        assert body is not None  # batch kinds are HTTP adapters
        answer, batch_id = await self.batcher.answer(exchange.request.key, body)
        response = self.provider.parse_reply(answer, latency_s=0.0, request=body)
        response.request["batch"] = batch_id
        _record_choice(response, exchange.request)
        return Outcome(response, 1, None)


class Cached:
    """Answers from the response cache when it reads; stores fresh answers when it writes.

    The key (:func:`bench.providers.cache.request_key`) is the provider id, what makes its
    answers differ besides the conversation (an HTTP adapter's exact body and base URL; any
    other provider's :meth:`~Provider.describe` without :data:`MACHINE_SPECIFIC` fields),
    the messages, the tools and the trial.

    Args:
        inner: the layer below.
        cache: the open :class:`ResponseCache`.
        provider_id: the provider's id (part of the key).
    """

    def __init__(self, inner: Layer, cache: ResponseCache, provider_id: str) -> None:
        self.inner, self.cache, self.provider_id = inner, cache, provider_id

    def key(self, exchange: Exchange) -> str:
        """The exchange's cache key (hex SHA-256)."""
        body, provider = exchange.body, exchange.provider
        identity: dict[str, Any]
        if body is not None:
            base_url = provider.options.base_url if isinstance(provider, HTTPProvider) else None
            identity = {"body": body, "base_url": str(base_url or "")}
        else:
            identity = {k: v for k, v in provider.describe().items()
                        if k not in MACHINE_SPECIFIC}
        request = exchange.request
        return request_key(self.provider_id, identity, request.messages, request.tools,
                           request.trial)

    async def __call__(self, exchange: Exchange) -> Outcome:
        """A hit (``attempts`` 0), or the inner layer's outcome marked ``miss`` and stored."""
        key = self.key(exchange)
        hit = self.cache.get(key)
        if hit is not None:
            return Outcome(hit, 0, "hit")
        outcome = await self.inner(exchange)
        provider, request = exchange.provider, exchange.request
        options = getattr(provider, "options", None)
        self.cache.put(key, outcome.response, provider_id=self.provider_id,
                       base_url=getattr(options, "base_url", None),
                       messages=request.messages, tools=request.tools, trial=request.trial)
        return Outcome(outcome.response, outcome.attempts, "miss")


class InvalidAsAnswer:
    """The top of every stack: a request the provider rejects (class ``validation``, e.g. a
    prompt over the context window) and a 200 reply that stayed unreadable through its
    retries (:class:`UnreadableReply`) become that request's answer, an invalid one naming
    the error (codes ``provider_error``, ``unreadable_reply``), as the embedded model answers
    a context overflow. Neither ends a run.

    Args:
        inner: the rest of the stack.
        attempts: the attempts an unreadable reply was given (the run's ``attempts``).
    """

    def __init__(self, inner: Layer, attempts: int) -> None:
        self.inner, self.attempts = inner, attempts

    async def __call__(self, exchange: Exchange) -> Outcome:
        """The inner outcome, or the invalid answer.

        Raises:
            ProviderError: any class other than ``validation`` (UnreadableReply excepted).
        """
        try:
            return await self.inner(exchange)
        except UnreadableReply as exc:
            return invalid_outcome(exc, self.attempts)
        except ProviderError as exc:
            if exc.error_class != "validation":
                raise
            return invalid_outcome(exc, 1)


def invalid_outcome(exc: ProviderError, attempts: int) -> Outcome:
    """The invalid answer standing for a rejected or unreadable request (see
    :class:`InvalidAsAnswer`)."""
    code = UNREADABLE_REPLY if isinstance(exc, UnreadableReply) else PROVIDER_ERROR
    return Outcome(ProviderResponse(
        raw=None, parsed=ParsedAnswer(error=f"provider error: {exc}", error_code=code),
        finish_reason="error", latency_s=0.0,
        request={"error_class": exc.error_class, "status": exc.status},
        request_id=exc.request_id), attempts, None)


@dataclass
class Pipeline:
    """One provider's stack, ready to answer :class:`ModelRequest` objects.

    Attributes:
        provider_id: the provider's id.
        provider: the provider at the bottom.
        head: the top layer.
        gate: the provider's gate: the run reports its statistics and closes it when
            stopping (unused in batch mode).
        layers: the stack's layer names, top first (``InvalidAsAnswer``, ``Cached``...).
    """

    provider_id: str
    provider: Provider
    head: Layer
    gate: ProviderGate
    layers: list[str] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> Outcome:
        """Answer ``request`` through the stack.

        Raises:
            ProviderError: a permanent, client or exhausted retryable error.
            GateClosed: the run is stopping.
            BatchFailed: the request's batch reported an error for it.
        """
        outcome = await self.head(Exchange(request, self.provider))
        if not isinstance(outcome, Outcome) or not isinstance(outcome.response,
                                                              ProviderResponse) \
                or not isinstance(outcome.attempts, int) or outcome.attempts < 0 \
                or outcome.cache not in (None, "hit", "miss"):
            shown = repr(outcome)[:200]
            raise BenchError(f"{self.provider_id}: the request pipeline ({' -> '.join(self.layers)})"
                             f" answered {shown}, not an Outcome(response: ProviderResponse, "
                             "attempts >= 0, cache 'hit', 'miss' or None); check the layers "
                             "given with layers=")
        return outcome


def build_pipeline(provider_id: str, provider: Provider, *, concurrency: int, attempts: int,
                   cache: ResponseCache | None = None, batcher: Batcher | None = None,
                   extra: Sequence[LayerFactory] = ()) -> Pipeline:
    """The stack of ``provider`` (see the module docstring), from its kind's declared
    capabilities (:func:`bench.providers.registry.provider_spec`): a ``recorded`` kind
    (``replay``) is never cached again; ``batcher`` (given only for ``batch`` kinds in batch
    mode) replaces the gate and retries.

    Args:
        provider_id: the provider's id.
        provider: the started provider.
        concurrency: requests in flight at most through its gate, >= 1.
        attempts: the most attempts per request (``--attempts``).
        cache: the run's response cache, or None when off.
        batcher: the provider's batcher in batch mode.
        extra: user layers, outermost last, placed under :class:`InvalidAsAnswer`.

    Returns:
        The :class:`Pipeline`; its ``layers`` name the stack from the top.
    """
    from bench.providers.registry import provider_spec
    spec = provider_spec(provider_id)
    recorded = spec is not None and spec.recorded
    gate = ProviderGate(concurrency)  # in batch mode too: the manifest reports every gate
    names: list[str] = []
    head: Layer
    if batcher is not None and isinstance(provider, HTTPProvider):
        head, names = Batched(provider, batcher), ["Batched"]
    else:
        head = Retrying(Send(provider, gate), gate, attempts)
        names = ["Retrying", "Send"]
    if cache is not None and not recorded:
        head, names = Cached(head, cache, provider_id), ["Cached", *names]
    for factory in extra:
        made = factory(provider_id, head)
        if not callable(made):
            raise BenchError(f"layer factory {getattr(factory, '__name__', repr(factory))} "
                             f"returned {made!r} for '{provider_id}', not a layer (an async "
                             "callable taking an Exchange)")
        head = made
        names.insert(0, getattr(made, "__name__", type(made).__name__))
    head = InvalidAsAnswer(head, attempts)
    return Pipeline(provider_id, provider, head, gate, ["InvalidAsAnswer", *names])

