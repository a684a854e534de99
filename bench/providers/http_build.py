"""Building an HTTP adapter from its provider id: the id parsed, credentials in its base URL
taken from this process's memory, the options checked (:class:`HTTPOptions`). The registry's
HTTP kinds build through :func:`make_http_provider`; this module imports nothing of the
registry, so the two never import each other."""

from __future__ import annotations

import os
import re

from pydantic import ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.providers.base import HTTPOptions, HTTPProvider
from bench.providers.errors import ProviderUnavailable, client_side_error

_COMPAT = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def parse_http_id(provider_id: str) -> tuple[str, str, str | None]:
    """(kind, model, base_url) of an HTTP provider id, its kind not checked against the
    registry (:func:`bench.providers.split_provider_id` checks it).

    Raises:
        BenchError: an empty model, or ``openai-compat`` without ``@http(s)://...``.
    """
    kind, _, rest = provider_id.partition(":")
    if kind == "openai-compat":
        found = _COMPAT.match(rest)
        if not found:
            raise BenchError(f"provider '{provider_id}': write openai-compat:<model>@<base_url>,"
                             " e.g. openai-compat:qwen2.5@http://127.0.0.1:8000/v1")
        return kind, found["model"], found["url"]
    if not rest.strip():
        raise BenchError(f"provider '{provider_id}': the model is missing ({kind}:<model>)")
    return kind, rest, None


def make_http_provider(cls: type[HTTPProvider], provider_id: str,
                       **options: object) -> HTTPProvider:
    """Build HTTP adapter ``cls`` for ``provider_id``: credentials in the id's base URL are
    taken from this process's memory (never stored), the id is parsed
    (:func:`split_provider_id`) and the options checked as :class:`HTTPOptions`.

    Raises:
        BenchError / ProviderUnavailable: as :func:`make_provider`; a BenchError also when
            the SDK's HTTP client refuses its settings while it is made (a proxy variable or
            base URL it cannot parse, a missing certificate file), naming the settings
            (:func:`client_settings`).
    """
    from bench.redact import public_provider_id, real_provider_id
    public = public_provider_id(provider_id)  # the id rows, manifests and messages show
    real = real_provider_id(public)
    if real is None:  # a resumed run: credentials are never stored
        raise ProviderUnavailable(public, "the base URL's credentials are never stored: give "
                                          "the id with them (user:password@, ?key=<value>) again "
                                          "with --provider")
    _, model, base_url = parse_http_id(real)
    if base_url is not None:
        options = {**options, "base_url": base_url}
    try:
        settings = HTTPOptions.model_validate({**options, "model": model})
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(f"provider '{public}': option '{field}': {message}") from None
    try:
        return cls(settings, provider_id=public)
    except BenchError:
        raise
    except Exception as exc:
        # the SDK's HTTP client refuses its settings while it is made: a proxy variable or
        # base URL it cannot parse (httpx's InvalidURL, urllib's ValueError), a certificate
        # file that does not exist (ssl's FileNotFoundError names no file)
        if not isinstance(exc, (ValueError, TypeError, OSError)) and \
                client_side_error(exc) is None:
            raise
        raise BenchError(f"provider '{public}' cannot start: its HTTP client refused the "
                         f"settings ({type(exc).__name__}: {exc}); check "
                         f"{client_settings(cls.kind, settings.base_url)}") from None


# The variable each kind's SDK reads its base URL from when the id gives none (openai,
# anthropic, google-genai), and those every HTTP client reads while it is made: proxies
# (urllib.request.getproxies, which httpx and aiohttp use) and certificates (ssl's default
# verify paths).
BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL", "openai-responses": "OPENAI_BASE_URL",
                      "anthropic": "ANTHROPIC_BASE_URL", "gemini": "GOOGLE_GEMINI_BASE_URL"}
CLIENT_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                    "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR")


def client_settings(kind: str, base_url: str | None) -> str:
    """The settings the HTTP client of a provider of ``kind`` is made from, to check when it
    refuses them: its base URL (``base_url``, else its :data:`BASE_URL_VARIABLES` variable when
    set) and the :data:`CLIENT_VARIABLES` that are set, each with its value (URLs made public:
    :func:`bench.redact.public_url`); or which variables to look at when none is set."""
    from bench.redact import public_url
    variable = BASE_URL_VARIABLES.get(kind)
    names = [name for name in ((variable,) if variable and not base_url else ())
             + CLIENT_VARIABLES if os.environ.get(name)]
    shown = [f"the base URL {public_url(base_url)!r}"] if base_url else []
    shown += [f"{name}={public_url(os.environ[name])!r}" for name in names]
    return ", ".join(shown) if shown else \
        "the proxy and certificate variables (none of HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, " \
        "SSL_CERT_FILE, SSL_CERT_DIR is set)"
