"""Provider adapters behind one interface (:class:`bench.providers.base.Provider`).

Provider ids (BRIEF §4): ``local``; ``openai:<model>`` (Chat Completions);
``openai-responses:<model>`` (Responses API); ``anthropic:<model>``; ``gemini:<model>``;
``openai-compat:<model>@<base_url>``. ``replay:<run-or-cache>`` belongs to the response cache.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.providers.base import HTTPOptions, HTTPProvider, Provider, ProviderResponse, Usage
from bench.providers.errors import ProviderError, ProviderUnavailable

__all__ = ["HTTPOptions", "HTTPProvider", "Provider", "ProviderError", "ProviderResponse",
           "ProviderUnavailable", "Usage", "make_provider", "split_provider_id"]

HTTP_KINDS = ("openai", "openai-responses", "anthropic", "gemini", "openai-compat")
_COMPAT = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def split_provider_id(provider_id: str) -> tuple[str, str, str | None]:
    """(kind, model, base_url) of an HTTP provider id.

    Raises:
        BenchError: an unknown kind, an empty model, or ``openai-compat`` without
            ``@http(s)://...``.
    """
    kind, _, rest = provider_id.partition(":")
    if kind not in HTTP_KINDS:
        raise BenchError(f"unknown provider '{provider_id}' (use local, openai:<model>, "
                         "openai-responses:<model>, anthropic:<model>, gemini:<model>, "
                         "openai-compat:<model>@<base_url>)")
    if kind == "openai-compat":
        found = _COMPAT.match(rest)
        if not found:
            raise BenchError(f"provider '{provider_id}': write openai-compat:<model>@<base_url>,"
                             " e.g. openai-compat:qwen2.5@http://127.0.0.1:8000/v1")
        return kind, found["model"], found["url"]
    if not rest.strip():
        raise BenchError(f"provider '{provider_id}': the model is missing ({kind}:<model>)")
    return kind, rest, None


def make_provider(provider_id: str, **options: Any) -> Provider:
    """Build the provider named by a provider id (BRIEF §4).

    Args:
        provider_id: see the module docstring.
        options: for ``local``: ``model_path``, ``seed``, ``max_tokens``, ``no_call_layout``,
            ``threads``; for HTTP providers: :class:`HTTPOptions` fields other than ``model``
            (``base_url`` overrides the SDK default; for openai-compat it comes from the id).

    Raises:
        BenchError: an unknown provider id or option, or the provider cannot start.
        ProviderUnavailable: (a BenchError) the API key is missing, an optional SDK is not
            installed, or the id's base URL had credentials this process does not know
            (:func:`bench.redact.real_provider_id`); the runner skips such a provider.
    """
    if provider_id == "local":
        from bench.providers.local import LocalProvider
        return LocalProvider(**options)
    if provider_id.startswith("replay:"):
        from bench.providers.replay import ReplayProvider
        return ReplayProvider(provider_id)
    from bench.redact import public_provider_id, real_provider_id
    public = public_provider_id(provider_id)  # the id rows, manifests and messages show
    real = real_provider_id(public)
    if real is None:  # a resumed run: credentials are never stored
        raise ProviderUnavailable(public, "the base URL's credentials are never stored: give "
                                          "the id with user:password@ again with --provider")
    kind, model, base_url = split_provider_id(real)
    if base_url is not None:
        options = {**options, "base_url": base_url}
    try:
        settings = HTTPOptions(model=model, **options)
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(f"provider '{public}': option '{field}': {message}") from None
    if kind == "openai":
        from bench.providers.openai_chat import OpenAIChatProvider as cls
    elif kind == "openai-compat":
        from bench.providers.openai_chat import OpenAICompatProvider as cls
    elif kind == "openai-responses":
        from bench.providers.openai_responses import OpenAIResponsesProvider as cls
    elif kind == "anthropic":
        from bench.providers.anthropic_messages import AnthropicProvider as cls
    else:
        from bench.providers.gemini import GeminiProvider as cls
    return cls(settings, provider_id=public)
