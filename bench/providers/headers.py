"""What a provider's response headers say: how long to wait before asking again
(``Retry-After``, ``retry-after-ms``, the OpenAI and Anthropic rate-limit reset headers) and
the provider's request id. Re-exported by :mod:`bench.providers.errors`.
"""

from __future__ import annotations

import email.utils
import re
import time
from datetime import datetime
from typing import Iterable, Mapping


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date),
    else from the rate-limit reset headers (:func:`rate_limit_reset_s`).

    Args:
        headers: a case-insensitive mapping (httpx headers) or a plain dict.
        now: the current Unix time in seconds (tests); default ``time.time()``.

    Returns:
        Seconds >= 0, or None when no usable header is present.
    """
    if headers is None:
        return None
    lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return rate_limit_reset_s(lowered, now=now)
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return rate_limit_reset_s(lowered, now=now)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _duration_s(text: str) -> float | None:
    """``"1.5"``, ``"20ms"``, ``"6m0s"``, ``"1h2m3.5s"`` (OpenAI's reset headers) in seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(number) * units[unit] for number, unit in parts)


def rate_limit_reset_s(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, *, now: float | None = None) -> float | None:
    """Seconds until an exhausted rate-limit window resets, from rate-limit headers, or None.

    Reads OpenAI's ``x-ratelimit-remaining-{requests,tokens}`` / ``x-ratelimit-reset-*``
    (durations such as ``6m0s``) and Anthropic's ``anthropic-ratelimit-{requests,tokens}-
    remaining`` / ``-reset`` (RFC 3339 times); only a window whose ``remaining`` is 0 counts.

    Args:
        headers: response headers: a mapping or (name, value) pairs; names are matched
            case-insensitively.
        now: the current Unix time in seconds (tests); default ``time.time()``.
    """
    if headers is None:
        return None
    # Only the rate-limit headers are copied: this runs on every response.
    pairs = headers.items() if hasattr(headers, "items") else headers
    lowered = {str(name).lower(): str(value) for name, value in pairs
               if "ratelimit" in str(name).lower()}
    if not lowered:
        return None
    now = time.time() if now is None else now
    waits = []
    for kind in ("requests", "tokens"):
        if lowered.get(f"x-ratelimit-remaining-{kind}", "").strip() == "0":
            reset = _duration_s(lowered.get(f"x-ratelimit-reset-{kind}", ""))
            if reset is not None:
                waits.append(reset)
        if lowered.get(f"anthropic-ratelimit-{kind}-remaining", "").strip() == "0":
            try:
                when = datetime.fromisoformat(
                    lowered.get(f"anthropic-ratelimit-{kind}-reset", "").replace("Z", "+00:00"))
            except ValueError:
                continue
            waits.append(max(0.0, when.timestamp() - now))
    return max(waits) if waits else None


REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id")


def request_id_from(headers: Mapping[str, str] | None) -> str | None:
    """The provider's request id from response headers (OpenAI ``x-request-id``, Anthropic
    ``request-id``), or None."""
    if headers is None:
        return None
    for name in REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return str(value)
    return None
