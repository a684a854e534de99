"""Token cost of a variant's tool definitions per provider family.

Each figure says how it was obtained (``method``) and whether it is exact for that provider
(``estimate``):

- ``openai``: ``o200k_base`` (GPT-4o and later) and ``cl100k_base`` (GPT-4, GPT-3.5) from
  ``bpe-openai`` over the ``tools`` request field (see :mod:`bench.descriptions.tokens`).
  OpenAI renders tools into the prompt in a format it does not publish, so both are estimates;
  OpenAI documents no fixed tool-use overhead.
- ``anthropic``: with ``ANTHROPIC_API_KEY`` set, the token-count endpoint
  (``client.messages.count_tokens``) for one short user message with and without the tools:
  the difference is the tools plus Anthropic's tool-use system prompt, exact as the API counts.
  Without a key: ``o200k_base`` over the Anthropic ``tools`` field (Claude's tokenizer is not
  public) plus the documented system-prompt tokens, labeled an estimate.
- ``local``: the embedded model's own tokenizer over the exact tools block it is shown (exact;
  computed in :func:`bench.providers.local.tools_block_tokens`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

from bench.descriptions.schema_dialects import dialect
from bench.errors import BenchError
from bench.models import Tool

# Tokens of the system prompt Anthropic adds when `tools` is set, for tool_choice auto/none and
# any/tool. Source: Anthropic, "Tool use with Claude", Pricing section,
# https://docs.claude.com/en/docs/agents-and-tools/tool-use/overview#pricing
ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS: dict[str, tuple[int, int]] = {
    "claude-opus-4": (346, 313), "claude-sonnet-4": (346, 313), "claude-haiku-4": (346, 313),
    "claude-3-7-sonnet": (346, 313), "claude-3-5-haiku": (264, 340),
    "claude-3-opus": (530, 281), "claude-3-sonnet": (159, 235), "claude-3-haiku": (264, 340),
}
ANTHROPIC_DOCS = "https://docs.claude.com/en/docs/agents-and-tools/tool-use/overview#pricing"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


@dataclass
class TokenCost:
    """Tool-definition tokens of one variant for one provider family.

    Attributes:
        family: ``openai``, ``anthropic`` or ``local``.
        label: short column label (e.g. ``o200k``).
        tokens: tokens of the tools themselves (None: not available).
        overhead: tokens the provider adds around the tools block when documented, else None.
        estimate: True when the count is not the provider's own.
        method: how it was counted, one line.
    """

    family: str
    label: str
    tokens: int | None
    overhead: int | None
    estimate: bool
    method: str

    @property
    def total(self) -> int | None:
        """``tokens + overhead`` (None if tokens is None)."""
        return None if self.tokens is None else self.tokens + (self.overhead or 0)


def anthropic_tools_json(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The tools as Anthropic's ``tools`` request field (the ``anthropic`` schema dialect of
    :mod:`bench.descriptions.schema_dialects`, as the adapter sends it)."""
    return dialect("anthropic").tools_field(tools)


def anthropic_system_prompt_tokens(model: str, tool_choice: str = "auto") -> int | None:
    """Documented tool-use system-prompt tokens of ``model`` (see
    :data:`ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS`), or None for an unlisted model.

    ``tool_choice``: ``auto``/``none`` or ``any``/``tool``.
    """
    normalized = model.replace("claude-opus-3", "claude-3-opus")
    for prefix, (auto, forced) in ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS.items():
        if normalized.startswith(prefix):
            return auto if tool_choice in ("auto", "none") else forced
    return None


def openai_costs(tools: Sequence[Tool]) -> list[TokenCost]:
    """OpenAI estimates, ``o200k_base`` and ``cl100k_base`` (offline)."""
    import bpe_openai

    from bench.descriptions.tokens import openai_tools_json

    text = openai_tools_json(tools)
    return [TokenCost("openai", name.split("_")[0], len(bpe_openai.get_encoding(name)
                                                          .encode(text)), None, True,
                      f"{name} over the tools request field (OpenAI's rendering is not "
                      "published)") for name in ("o200k_base", "cl100k_base")]


def anthropic_cost(tools: Sequence[Tool], model: str = DEFAULT_ANTHROPIC_MODEL,
                   client: Any = None) -> TokenCost:
    """Anthropic tool tokens: the token-count endpoint when a key (or ``client``) is given,
    else an estimate.

    Args:
        tools: the variant's tools.
        model: Claude model id, for the endpoint and the documented overhead.
        client: an ``anthropic.Anthropic`` client; default: one built from the environment
            when ``ANTHROPIC_API_KEY`` is set.

    Raises:
        BenchError: the endpoint refuses the request (bad key, unknown model, network).
    """
    overhead = anthropic_system_prompt_tokens(model)
    if client is None and os.environ.get("ANTHROPIC_API_KEY"):
        try:
            import anthropic
        except ImportError:
            raise BenchError("ANTHROPIC_API_KEY is set but the anthropic SDK is not "
                             "installed (pip install anthropic)") from None
        client = anthropic.Anthropic(max_retries=2, timeout=30.0)
    if client is None:
        from bench.descriptions.tokens import o200k_tokens

        text = json.dumps(anthropic_tools_json(tools), ensure_ascii=False,
                          separators=(",", ":"))
        return TokenCost("anthropic", "estimate", o200k_tokens(text), overhead, True,
                         "estimate: o200k_base over the tools field (no ANTHROPIC_API_KEY); "
                         f"+ documented tool-use system prompt ({ANTHROPIC_DOCS})")
    messages = [{"role": "user", "content": "hi"}]
    try:
        with_tools = client.messages.count_tokens(model=model, messages=messages,
                                                  tools=anthropic_tools_json(tools))
        without = client.messages.count_tokens(model=model, messages=messages)
    except Exception as exc:  # the SDK's APIError family; the key never appears in it
        raise BenchError(f"Anthropic token count failed: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    return TokenCost("anthropic", "count_tokens",
                     with_tools.input_tokens - without.input_tokens, None, False,
                     f"messages.count_tokens ({model}), with minus without tools: includes the "
                     "tool-use system prompt")
