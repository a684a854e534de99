"""What a provider returns, before scoring: :class:`ProviderResponse` and its
:class:`Usage` (the interface itself is :mod:`bench.providers.base`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from bench.parse import ParsedAnswer, storable
from bench.providers.tool_search import ToolSearchOutcome
from bench.results import RowUsage


class Usage(BaseModel):
    """Token usage of one request (tokens).

    ``cached_tokens`` is the part of the prompt the provider did not have to process again
    (a prefix-cache hit). ``completion_tokens`` counts every output token the provider bills,
    reasoning included (each adapter documents how its provider reports them);
    ``reasoning_tokens`` is the reasoning ("thinking") part of it, or None when the provider
    does not report it separately.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int | None = None

    @field_validator("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
                     mode="before")
    @classmethod
    def _non_negative(cls, value: Any) -> Any:
        # A server's negative count would make costs negative and disarm --max-usd.
        return 0 if isinstance(value, (int, float)) and value < 0 else value

    def as_row_usage(self) -> RowUsage:
        """The usage as a result row stores it (:class:`bench.results.RowUsage`, every
        field)."""
        return RowUsage(prompt_tokens=self.prompt_tokens,
                        completion_tokens=self.completion_tokens,
                        cached_tokens=self.cached_tokens, reasoning_tokens=self.reasoning_tokens)


class ProviderResponse(BaseModel):
    """One provider answer, before scoring.

    Attributes:
        raw: the raw response (text for the embedded model, the JSON body for HTTP providers).
        parsed: the answer in canonical form.
        finish_reason: ``stop``, ``length``, ``tool_calls``... as the provider says.
        usage: token usage.
        latency_s: wall time of the request in seconds.
        tool_definition_tokens: tokens the tool definitions take in the provider's tokenizer.
        request: a small summary of what was sent (model, tool names, tool_choice, hashes).
        request_id: the provider's request id (HTTP header), when it sent one.
        tool_search: what a provider-native tool search did (Anthropic's tool search tool,
            :mod:`bench.providers.tool_search`): the searches and the tools they loaded;
            None when the request had no native tool search.
    """

    raw: Any
    parsed: ParsedAnswer
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float
    tool_definition_tokens: int | None = None
    request: dict[str, Any] = Field(default_factory=dict)
    request_id: str | None = None
    tool_search: ToolSearchOutcome | None = None

    @field_validator("raw", mode="after")
    @classmethod
    def _escaped(cls, value: Any) -> Any:
        # Lone surrogates would make the row unreadable, absurd nesting the response cache's
        # serializer fail (see bench.parse.storable).
        return storable(value)
