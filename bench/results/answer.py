"""The parts of a row that record one model answer: the parsed calls, the parsed answer and the
token usage (a single-answer row has one of each; an episode has one per step)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bench.results.base import _Record


class RowCall(_Record):
    """One parsed tool call (:class:`bench.models.ToolCall` dumped); every field may be
    absent on rows written by hand or by early releases."""

    id: str | None = Field(default=None, description="the provider's call id, or call_<index>")
    name: str | None = Field(default=None, description="the tool name as received")
    arguments: Any = Field(default_factory=dict, description="decoded arguments (an object "
                                                             "when valid)")
    raw_arguments: Any = Field(default=None, description="the exact string or object received")
    notes: list[str] = Field(default_factory=list, description="decode notes "
                                                               "(double_encoded, truncated...)")
    valid: bool = Field(default=True, description="False when the arguments could not be decoded")


class RowParsed(_Record):
    """The answer in canonical form (:class:`bench.parse.ParsedAnswer` dumped)."""

    calls: list[RowCall] | None = Field(default_factory=list, description="tool calls in the "
                                                                          "order received")
    declined: bool = Field(default=False, description="the model said that no tool fits")
    error: str | None = Field(default=None, description="why the answer could not be decoded (one "
                                                        "line); None when it could")
    error_code: str | None = Field(default=None, description="the code of error (bench.parse."
                                                             "ANSWER_ERROR_CODES)")
    text: str | None = Field(default=None, description="prose beside or instead of calls")


class RowUsage(_Record):
    """Token usage of the request (tokens; :class:`bench.providers.base.Usage` dumped)."""

    prompt_tokens: int | None = Field(default=None, description="tokens, prompt (cached included)")
    completion_tokens: int | None = Field(default=None, description="tokens, output (reasoning "
                                                                    "included)")
    cached_tokens: int | None = Field(default=None, description="tokens of the prompt served from "
                                                                "the provider's prefix cache")
    reasoning_tokens: int | None = Field(
        default=None, description="tokens of reasoning, None when "
                                  "not reported separately")
