"""What a layer of the request pipeline (:mod:`bench.providers.pipeline`) takes and gives:
a provider-level :class:`ModelRequest` in, an :class:`Outcome` out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from bench.models import Message, Tool
from bench.providers.response import ProviderResponse
from bench.providers.tool_search import ToolSearch

CacheStatus = Literal["hit", "miss"]


@dataclass(frozen=True)
class ModelRequest:
    """One request to a model, as the provider sees it.

    Attributes:
        messages: the conversation (a case's messages, or an episode's so far).
        tools: the tool set offered (a variant's tools, byte-identical across its cases).
        trial: 0-based trial index (sampling seed offset; part of the cache key).
        variant_key: a stable key of ``tools`` (the variant's SHA-256), for per-variant caches.
        key: this request's name in the run (``case|condition|provider|trial``): a batch's
            ``custom_id`` is made from it.
        tool_choice: None (the provider's setting) or ``auto`` / ``required`` / ``none`` /
            a tool name, sent in this request's body by the HTTP adapters (and so part of its
            cache key); any other provider answers it with a ``validation`` error, which
            :class:`~bench.providers.pipeline.InvalidAsAnswer` turns into the row's invalid answer.
        tool_search: provider-native tool search (:class:`bench.providers.tool_search.
            ToolSearch`): ``tools`` is the whole catalog, sent deferred; None: the tools are
            sent as they are. Only an HTTP adapter that has it builds such a body
            (:meth:`~bench.providers.base.HTTPProvider.search_request`); any other provider answers it with a
            ``validation`` error.
    """

    messages: Sequence[Message]
    tools: Sequence[Tool]
    trial: int
    variant_key: str
    key: str
    tool_choice: str | None = None
    tool_search: ToolSearch | None = None


@dataclass(frozen=True)
class Outcome:
    """What the pipeline answered for one request.

    Attributes:
        response: the provider's answer (fresh, cached or replayed).
        attempts: requests sent (0 for a cache hit).
        cache: ``hit``, ``miss`` (asked the provider with the cache on) or None (cache off,
            or a provider whose answers are never cached).
    """

    response: ProviderResponse
    attempts: int
    cache: CacheStatus | None
