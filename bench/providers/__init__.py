"""Provider adapters behind one interface (:class:`bench.providers.base.Provider`).

Provider ids (BRIEF §4): ``local``; ``openai:<model>`` (Chat Completions);
``openai-responses:<model>`` (Responses API); ``anthropic:<model>``; ``gemini:<model>``;
``openai-compat:<model>@<base_url>``; ``function:<module>:<callable>`` (answers from a Python
callable); ``oracle`` (answers with each case's label). ``replay:<run-or-cache>`` belongs to
the response cache. Every kind is registered in :mod:`bench.providers.registry`, with its
capabilities.
"""

from __future__ import annotations


from bench.errors import BenchError
from bench.providers.base import HTTPOptions, HTTPProvider, Provider, ProviderResponse, Usage
from bench.providers.errors import ProviderError, ProviderUnavailable
from bench.providers.http_build import make_http_provider, parse_http_id

__all__ = ["HTTPOptions", "HTTPProvider", "Provider", "ProviderError", "ProviderResponse",
           "ProviderUnavailable", "Usage", "make_http_provider", "make_provider",
           "split_provider_id"]



def split_provider_id(provider_id: str) -> tuple[str, str, str | None]:
    """(kind, model, base_url) of an HTTP provider id (a kind registered with
    ``options="http"`` in :mod:`bench.providers.registry`).

    Raises:
        BenchError: an unknown kind, an empty model, or ``openai-compat`` without
            ``@http(s)://...``.
    """
    from bench.providers.registry import provider_spec, registered_kinds

    kind, _, rest = provider_id.partition(":")
    spec = provider_spec(provider_id)
    if spec is None or spec.options != "http":
        forms = ", ".join(s.id_form for s in registered_kinds() if s.options == "http")
        raise BenchError(f"unknown HTTP provider '{provider_id}' (use {forms})")
    return parse_http_id(provider_id)


def make_provider(provider_id: str, **options: object) -> Provider:
    """Build the provider named by a provider id (BRIEF §4) through its kind's registration
    (:func:`bench.providers.registry.build_provider`).

    Args:
        provider_id: see the module docstring.
        options: the kind's options (its ``options`` set in the registry): for ``local``:
            ``model_path``, ``seed``, ``max_tokens``, ``no_call_layout``, ``threads``; for HTTP
            providers: :class:`HTTPOptions` fields other than ``model`` (``base_url``
            overrides the SDK default; for openai-compat it comes from the id).

    Raises:
        BenchError: an unknown provider id or option, or the provider cannot start.
        ProviderUnavailable: (a BenchError) the API key is missing, an optional SDK is not
            installed, or the id's base URL had credentials this process does not know
            (:func:`bench.redact.real_provider_id`); the runner skips such a provider.
    """
    from bench.providers.registry import build_provider
    return build_provider(provider_id, options)
