"""The provider-neutral interface every adapter implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

from pydantic import BaseModel, Field

from bench.models import Message, Tool
from bench.parse import ParsedAnswer


class Usage(BaseModel):
    """Token usage of one request (tokens).

    ``cached_tokens`` is the part of the prompt the provider did not have to process again
    (a prefix-cache hit).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


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
    """

    raw: Any
    parsed: ParsedAnswer
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float
    tool_definition_tokens: int | None = None
    request: dict[str, Any] = Field(default_factory=dict)


class Provider(ABC):
    """A model behind one provider id (BRIEF §4: ``local``, ``openai:<model>``...).

    Subclasses are used from one thread; ``complete`` may be slow and must not mutate shared
    state other than the provider's own caches.
    """

    provider_id: str

    @abstractmethod
    def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                 variant_key: str, trial: int) -> ProviderResponse:
        """Ask the model for tool calls.

        Args:
            messages: the case's conversation.
            tools: the variant's tools, byte-identical for every case of a variant.
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

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (models, connections)."""
