"""Token counts of tool definitions.

OpenAI: the o200k_base encoding from ``bpe-openai`` (bundled, works offline) over the tools as
sent in a Chat Completions request (``[{"type": "function", "function": {...}}]``, compact
JSON). OpenAI renders tools into its prompt in its own format, so this is an estimate of the
billed tool tokens, consistent across variants. The embedded model's count comes from its own
tokenizer over the exact tools block it is shown (see ``bench.providers.local``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Protocol, Sequence

from bench.descriptions.schema_dialects import dialect
from bench.models import Tool


class _Encoding(Protocol):
    """What bench uses of a ``bpe_openai`` encoding (the package ships no type information)."""

    def encode(self, text: str) -> list[int]: ...


@lru_cache(maxsize=1)
def _o200k() -> _Encoding:
    import bpe_openai
    encoding: _Encoding = bpe_openai.get_encoding("o200k_base")
    return encoding


def openai_tools_json(tools: Sequence[Tool]) -> str:
    """The tools as OpenAI's ``tools`` request field (the ``openai`` schema dialect of
    :mod:`bench.descriptions.schema_dialects`), compact JSON (UTF-8 kept)."""
    payload = dialect("openai").tools_field(tools)
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def o200k_tokens(text: str) -> int:
    """Number of o200k_base tokens in ``text``."""
    return len(_o200k().encode(text))


def openai_tool_tokens(tools: Sequence[Tool]) -> int:
    """Estimated OpenAI tool-definition tokens (o200k_base over :func:`openai_tools_json`)."""
    return o200k_tokens(openai_tools_json(tools))
