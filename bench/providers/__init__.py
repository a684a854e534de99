"""Provider adapters behind one interface (:class:`bench.providers.base.Provider`)."""

from __future__ import annotations

from typing import Any

from bench.errors import BenchError
from bench.providers.base import Provider, ProviderResponse, Usage

__all__ = ["Provider", "ProviderResponse", "Usage", "make_provider"]


def make_provider(provider_id: str, **options: Any) -> Provider:
    """Build the provider named by a provider id (BRIEF §4).

    Args:
        provider_id: ``local`` (the embedded model); other ids are planned (issue 5).
        options: adapter options, e.g. ``model_path``, ``seed``, ``max_tokens``,
            ``no_call_layout`` for ``local``.

    Raises:
        BenchError: an unknown or not yet available provider id, or the provider cannot start.
    """
    if provider_id == "local":
        from bench.providers.local import LocalProvider
        return LocalProvider(**options)
    kind = provider_id.split(":", 1)[0]
    if kind == "replay":
        from bench.providers.replay import ReplayProvider
        return ReplayProvider(provider_id)
    if kind in ("openai", "anthropic", "gemini", "openai-compat"):
        raise BenchError(f"provider '{provider_id}': the {kind} adapter is not built yet; "
                         "only 'local' is available in this version")
    raise BenchError(f"unknown provider '{provider_id}' (use local, openai:<model>, "
                     "anthropic:<model>, gemini:<model>, openai-compat:<model>@<base_url>)")
