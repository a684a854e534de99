"""Error classes of provider requests (BRIEF §7) and how the runner treats each.

=============  ==========================================  =====================================
class          raised for                                  runner's policy
=============  ==========================================  =====================================
transient      5xx, connection reset/refused               retry, exponential backoff + jitter
rate_limited   HTTP 429 (and 529 "overloaded")             pause the provider (Retry-After),
                                                           halve its concurrency, retry
timeout        the request exceeded its timeout            retry, exponential backoff + jitter
permanent      400/401/403/404/422, a missing key          never retried; the run stops
validation     the request cannot be built for this        never retried; the run stops
               provider (a schema it cannot express)
=============  ==========================================  =====================================

Adapters raise :class:`ProviderError` with one of these classes; the runner never looks at
SDK-specific exception types.
"""

from __future__ import annotations

import email.utils
import time
from typing import Literal, Mapping

ErrorClass = Literal["transient", "rate_limited", "timeout", "permanent", "validation"]
RETRYABLE: frozenset[str] = frozenset({"transient", "rate_limited", "timeout"})


class ProviderError(Exception):
    """A failed provider request, classified.

    Args:
        message: what failed (never contains an API key).
        error_class: one of :data:`ErrorClass`.
        status: the HTTP status code, if there was a response.
        retry_after_s: seconds the server asked to wait (Retry-After or rate-limit headers),
            or None.
        request_id: the provider's request id, if any.
    """

    def __init__(self, message: str, *, error_class: ErrorClass, status: int | None = None,
                 retry_after_s: float | None = None, request_id: str | None = None) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.status = status
        self.retry_after_s = retry_after_s
        self.request_id = request_id

    @property
    def retryable(self) -> bool:
        """True for transient, rate_limited and timeout errors."""
        return self.error_class in RETRYABLE


def classify_status(status: int) -> ErrorClass:
    """The error class of an HTTP status code.

    429 and Anthropic's 529 ("overloaded") are rate_limited; 408 is timeout; other 5xx (and
    409, which OpenAI documents as retryable) are transient; every other 4xx is permanent.
    """
    if status in (429, 529):
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status >= 500 or status == 409:
        return "transient"
    return "permanent"


def _duration_s(value: str) -> float | None:
    """Parse ``"1.5"``, ``"20ms"``, ``"6m0s"``, ``"1h2m3.5s"`` (OpenAI's reset headers) as seconds."""
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, number = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    i = 0
    while i < len(text):
        char = text[i]
        if char.isdigit() or char == ".":
            number += char
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else char
        if unit not in units or not number:
            return None
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    return total if not number else None


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait before the next request, from a response's headers; None if none say.

    Reads, in order: ``retry-after-ms`` (OpenAI), ``Retry-After`` (seconds or an HTTP date,
    RFC 9110 §10.2.3), then the rate-limit reset headers of OpenAI
    (``x-ratelimit-reset-requests`` / ``-tokens``, durations like ``6m0s``) and Anthropic
    (``anthropic-ratelimit-*-reset``, RFC 3339 times) when the matching ``remaining`` is 0.

    Args:
        headers: response headers (case-insensitive mapping or plain dict).
        now: current UNIX time in seconds (tests); default ``time.time()``.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    now = time.time() if now is None else now
    if "retry-after-ms" in lower:
        try:
            return max(0.0, float(lower["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    if "retry-after" in lower:
        value = lower["retry-after"].strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - now)
    waits = []
    for kind in ("requests", "tokens"):
        if lower.get(f"x-ratelimit-remaining-{kind}") == "0":
            reset = _duration_s(lower.get(f"x-ratelimit-reset-{kind}", ""))
            if reset is not None:
                waits.append(reset)
        if lower.get(f"anthropic-ratelimit-{kind}-remaining") == "0":
            reset_at = lower.get(f"anthropic-ratelimit-{kind}-reset")
            if reset_at:
                from datetime import datetime
                try:
                    waits.append(max(0.0, datetime.fromisoformat(
                        reset_at.replace("Z", "+00:00")).timestamp() - now))
                except ValueError:
                    pass
    return max(waits) if waits else None
