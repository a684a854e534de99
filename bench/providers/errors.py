"""Provider error classes shared by every adapter and the runner (BRIEF §7's classification).

An adapter raises :class:`ProviderError` for a request that got no usable answer; its
``error_class`` tells the caller what to do:

- ``transient``: connection reset/refused or closed, a DNS failure, a body cut short, a reply
  that is not HTTP, HTTP 409, 5xx, 529, an overloaded or server error inside a stream.
  Retried with exponential backoff.
- ``rate_limited``: HTTP 429, a rate-limit error inside a stream. Retried after
  ``retry_after_s``.
- ``timeout``: request timeout, HTTP 408. Retried with exponential backoff.
- ``permanent``: auth and configuration errors: HTTP 401, 402, 403, 404, 405, OpenAI's
  ``insufficient_quota``. Every later request would fail alike: the run stops at once.
- ``validation``: any other 4xx (400, 413, 422...), a 4xx-like error inside a stream, an answer
  that cannot be read, a request bench cannot build. Never retried; it becomes the row's
  invalid answer with the message kept.
- ``client``: the request never left this machine: the SDK's HTTP client refused to build or
  send it (a base URL that is not an http(s) URL, credentials in the base URL that the client
  will not combine with the SDK's ``Authorization`` header, an API key it cannot put in a
  header); see :func:`client_side_error`. Nothing was asked, so there is no answer to score:
  the run stops at once, the item is left unwritten and ``--resume`` sends it once the
  configuration is fixed.

The mapping follows the providers' documented error codes (OpenAI and Anthropic "Errors" pages:
429 rate limit, 500/503 server, 529 Anthropic overloaded; Gemini's 429 RESOURCE_EXHAUSTED,
500/503/504).

An HTTP 200 stream can end in an error: OpenRouter sends a chunk ``{"error": {"code": 400,
"message": "Token limit reached"}}`` (the openai SDK raises ``APIError`` with ``.code == "400"``,
a string, and no status); Anthropic sends ``event: error`` with ``{"type": "error", "error":
{"type": "overloaded_error", ...}}``, its streamed 529 (the anthropic SDK raises
``APIStatusError`` with ``status_code == 200``); Gemini sends ``{"error": {"code", "status",
"message"}}``. :func:`stream_error_status` reads such an error object as the HTTP status it
stands for, so it is classified like that status. The SDKs are not imported here: exceptions
are read by duck typing (``status_code``/``code``/``body``, ``response.headers``, class names),
so this module has no optional dependency. What the response headers say (the wait before a
retry, the request id) is read in :mod:`bench.providers.headers`.
"""

from __future__ import annotations

from typing import Any, Literal

from bench.errors import BenchError
from bench.providers.headers import (  # noqa: F401 - re-exported: the header readers
    REQUEST_ID_HEADERS, parse_retry_after, rate_limit_reset_s, request_id_from)
from bench.redact import one_line

ErrorClass = Literal["transient", "rate_limited", "timeout", "permanent", "validation", "client"]
RETRYABLE: frozenset[str] = frozenset({"transient", "rate_limited", "timeout"})
#: Classes that end the run at once (every later request would fail alike).
STOPS_RUN: frozenset[str] = frozenset({"permanent", "client"})


class ProviderUnavailable(BenchError):
    """The provider cannot be used in this run at all (no API key, optional SDK missing).

    The runner reports the provider as skipped with ``reason`` and runs the others.

    Args:
        provider_id: the provider id (BRIEF §4).
        reason: one line saying why and how to fix it (never contains a secret).
    """

    def __init__(self, provider_id: str, reason: str) -> None:
        self.provider_id = provider_id
        self.reason = reason
        super().__init__(f"provider '{provider_id}' skipped: {reason}")


class StopRequested(Exception):
    """A provider asks the run to stop as a Ctrl-C stops it: the user's ``function:`` raised
    ``KeyboardInterrupt``. The request's row is not written (a resume asks again); the run
    stops sending, gives the requests in flight their time, and ends ``interrupted``
    (:func:`bench.runner.loop.execute_plan`). The message is one line saying why."""


class ProviderError(BenchError):
    """One request failed; ``error_class`` says whether retrying can help.

    Args:
        message: what failed (HTTP status and the provider's own message when it sent one).
        error_class: see the module table.
        status: HTTP status code, or None (timeouts, connection errors, local validation).
        retry_after_s: seconds the provider asked to wait (``Retry-After``,
            ``retry-after-ms``), or None.
        request_id: the provider's request id header, when it sent one.
    """

    def __init__(self, message: str, *, error_class: ErrorClass, status: int | None = None,
                 retry_after_s: float | None = None, request_id: str | None = None) -> None:
        self.error_class = error_class
        self.status = status
        self.retry_after_s = retry_after_s
        self.request_id = request_id
        self.detail = message
        super().__init__(f"{error_class}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by the constructor's arguments (the default passes ``args`` positionally,
        which the keyword-only fields do not accept): sender processes send it back as is."""
        return _provider_error, (self.detail, self.error_class, self.status,
                                 self.retry_after_s, self.request_id)

    @property
    def retryable(self) -> bool:
        """True for ``transient``, ``rate_limited`` and ``timeout``."""
        return self.error_class in RETRYABLE


def _provider_error(message: str, error_class: ErrorClass, status: int | None,
                    retry_after_s: float | None, request_id: str | None) -> ProviderError:
    return ProviderError(message, error_class=error_class, status=status,
                         retry_after_s=retry_after_s, request_id=request_id)


# Statuses that say the run itself is misconfigured (key, billing, model name, base URL): every
# later request would fail the same way, so the run stops.
AUTH_OR_CONFIG_STATUSES = frozenset({401, 402, 403, 404, 405})

# Error ``type``/``code`` strings sent without an HTTP status (inside a 200 stream), as the HTTP
# status each provider documents for them: Anthropic "Errors" page (invalid_request_error 400,
# authentication_error 401, billing_error 402, permission_error 403, not_found_error 404,
# request_too_large 413, rate_limit_error 429, api_error 500, timeout_error 504,
# overloaded_error 529); OpenAI "Error codes" (server_error 500, rate_limit_exceeded 429,
# invalid_request_error 400); Gemini / google.rpc ``status`` names (google/rpc/code.proto:
# INVALID_ARGUMENT 400, FAILED_PRECONDITION 400, OUT_OF_RANGE 400, UNAUTHENTICATED 401,
# PERMISSION_DENIED 403, NOT_FOUND 404, RESOURCE_EXHAUSTED 429, CANCELLED 499, UNKNOWN 500,
# INTERNAL 500, UNAVAILABLE 503, DEADLINE_EXCEEDED 504).
ERROR_NAME_STATUS: dict[str, int] = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
    "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
    "server_error": 500, "rate_limit_exceeded": 429, "invalid_prompt": 400,
    "context_length_exceeded": 400,
    "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429, "CANCELLED": 499, "UNKNOWN": 500, "INTERNAL": 500,
    "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504,
}
# OpenAI's 429 ``insufficient_quota``: the account is out of credit, waiting does not help.
CONFIG_ERROR_CODES = frozenset({"insufficient_quota", "invalid_api_key"})


def classify_status(status: int) -> ErrorClass:
    """Error class of an HTTP status code (see the module table).

    Only auth and configuration statuses (:data:`AUTH_OR_CONFIG_STATUSES`) are ``permanent``;
    any other 4xx is about this one request (``validation``).
    """
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status == 409 or status >= 500:  # 409: OpenAI's "try again" conflict; 529 overloaded
        return "transient"
    if status in AUTH_OR_CONFIG_STATUSES:
        return "permanent"
    return "validation"


def _as_status(value: Any) -> int | None:
    """An HTTP-like status from an int or a numeric string (``"400"``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and 400 <= value <= 599 else None


def stream_error_status(error: object) -> tuple[int, str] | None:
    """The HTTP status an error object sent without one stands for, and its name.

    Args:
        error: the error as sent in a stream: ``{"error": {...}}`` or the inner object, with a
            numeric ``code`` (OpenRouter, Gemini; an int or a numeric string), a numeric
            ``status_code`` (Groq), a ``status`` name (Gemini), a ``type`` (Anthropic, OpenAI)
            or a string ``code`` (OpenAI).

    Returns:
        (status, what named it: ``"code 400"``, ``"overloaded_error"``...), or None when the
        object names nothing known (see :data:`ERROR_NAME_STATUS`).
    """
    if not isinstance(error, dict):
        return None
    inner = error.get("error")
    candidates = [inner, error] if isinstance(inner, dict) else [error]
    for found in candidates:
        code = found.get("code")
        if isinstance(code, str) and code in CONFIG_ERROR_CODES:
            return 403, code
        status = _as_status(code)
        if status is not None:
            return status, f"code {status}"
        status = _as_status(found.get("status_code"))  # Groq's in-stream errors
        if status is not None:
            return status, f"status_code {status}"
        for key in ("status", "type", "code"):
            name = found.get(key)
            if isinstance(name, str) and name in ERROR_NAME_STATUS:
                return ERROR_NAME_STATUS[name], name
    return None


def _error_message(exc: BaseException, body: Any) -> str:
    """The provider's own message: the error object's ``message``, else the exception's."""
    for found in (body.get("error") if isinstance(body, dict) else None, body):
        if isinstance(found, dict) and isinstance(found.get("message"), str) and found["message"]:
            return str(found["message"])
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def error_from_exception(exc: BaseException) -> ProviderError:
    """Map an SDK or transport exception to a :class:`ProviderError`.

    Works for the ``openai`` and ``anthropic`` SDKs (``APIStatusError.status_code``,
    ``APITimeoutError``, ``APIConnectionError``, and ``APIError`` raised for an error inside a
    200 stream, whose ``body`` is read with :func:`stream_error_status`), ``google-genai``
    (``APIError.code`` / ``.details``) and httpx transport errors, read by attribute and class
    name. A request the HTTP client refused to send (:func:`client_side_error`) is class
    ``client``. Any other exception that names no status, no timeout and no connection failure
    (e.g. a body that is not JSON) is class ``validation``: this request's answer could not be
    read, the run goes on.
    """
    if isinstance(exc, ProviderError):
        return exc
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):  # aiohttp's (its `code` is a deprecated alias)
        status = getattr(exc, "status", None)
    if not isinstance(status, int):  # google-genai's
        status = getattr(exc, "code", None)
    if not isinstance(status, int):
        status = getattr(response, "status_code", None) if response is not None else None
    names = {cls.__name__ for cls in type(exc).__mro__}
    request_id = request_id_from(headers) if headers is not None else None
    if _not_http(exc):  # aiohttp's parser calls it status 400, which the server never sent
        said = str(getattr(exc, "message", exc))
        return ProviderError(f"connection failed: the reply is not HTTP "
                             f"({type(exc).__name__}: {_one_line(said)})",
                             error_class="transient")
    if isinstance(status, int) and status >= 400:
        body_message = getattr(exc, "message", None) or str(exc)
        return ProviderError(f"HTTP {status}: {_one_line(body_message)}",
                             error_class=classify_status(status), status=status,
                             retry_after_s=parse_retry_after(headers), request_id=request_id)
    refused = client_side_error(exc)
    if refused is not None:
        return ProviderError(f"the request was not sent: the HTTP client refused it "
                             f"({type(refused).__name__}: {_one_line(str(refused))})",
                             error_class="client")
    body = getattr(exc, "body", None)
    if body is None:
        body = getattr(exc, "details", None)  # google-genai
    streamed = stream_error_status(body) or stream_error_status(
        {"code": getattr(exc, "code", None), "type": getattr(exc, "type", None)})
    if streamed is not None:
        equivalent, name = streamed
        error_class: ErrorClass = "permanent" if name in CONFIG_ERROR_CODES \
            else classify_status(equivalent)
        return ProviderError(f"error in the stream ({name}): "
                             f"{_one_line(_error_message(exc, body))}",
                             error_class=error_class, retry_after_s=parse_retry_after(headers),
                             request_id=request_id)
    if _refused(exc):
        return ProviderError(f"connection failed: {_one_line(str(exc.__cause__ or exc))}",
                             error_class="transient", request_id=request_id)
    if any("Timeout" in name for name in names) or isinstance(exc, TimeoutError):
        return ProviderError(f"request timed out ({type(exc).__name__})", error_class="timeout",
                             request_id=request_id)
    if any(name in names for name in TRANSPORT_ERRORS) or isinstance(exc, ConnectionError):
        return ProviderError(f"connection failed: {_one_line(str(exc))}",
                             error_class="transient", request_id=request_id)
    return ProviderError(f"the answer could not be read ({type(exc).__name__}: "
                         f"{_one_line(str(exc))})", error_class="validation",
                         request_id=request_id)


# Classes of a connection that failed or broke (retried as ``transient``): the openai and
# anthropic SDKs' own, httpx's, and aiohttp's, which google-genai raises as they are (a server
# that closed a kept-alive connection, a DNS failure, a body cut short were each the row's
# invalid answer): ClientConnectionError holds ClientOSError, ClientConnectorError (DNS and
# certificate failures too) and ServerDisconnectedError; ClientPayloadError is a body that
# ended before its length or chunks said.
TRANSPORT_ERRORS = frozenset({"APIConnectionError", "ConnectError", "TransportError",
                              "RemoteProtocolError", "ReadError", "ClientConnectionError",
                              "ClientPayloadError"})

# httpx / httpx2 / aiohttp classes for a request the client refuses before sending anything: a
# URL it cannot parse or whose scheme is not http(s) (aiohttp's are mapped to httpx's
# ``UnsupportedProtocol`` by the SDKs' aiohttp transport), or a message h11 will not write.
CLIENT_SIDE_ERRORS = frozenset({"InvalidURL", "UnsupportedProtocol", "LocalProtocolError",
                                "InvalidUrlClientError", "NonHttpUrlClientError"})
# Packages that build and send the SDKs' HTTP requests, and the SDKs' own request builders
# (Stainless ``_base_client``: "Passing both `body` and `content` is not supported"...). A
# built-in ValueError or TypeError that their code raises is their refusal of what they were
# asked to send: they report trouble on the network or from the server through classes of their
# own or OSError, and a reply that is not JSON fails in json's code, not theirs.
CLIENT_PACKAGES = frozenset({"httpx", "httpx2", "httpcore", "h11", "h2", "aiohttp", "yarl",
                             "multidict"})
CLIENT_MODULES = frozenset({"openai._base_client", "anthropic._base_client"})


def client_side_error(exc: BaseException) -> BaseException | None:
    """The exception by which the SDK's HTTP client refused to send a request, or None.

    Looked for in ``exc`` and its cause chain (the SDKs wrap what their transport raised in
    their ``APIConnectionError``): a class of :data:`CLIENT_SIDE_ERRORS`, or a built-in
    ``ValueError``/``TypeError`` (``UnicodeDecodeError`` excepted: decoding reads something
    received) raised by code of :data:`CLIENT_PACKAGES` or :data:`CLIENT_MODULES`, e.g.
    aiohttp's ``ValueError: Cannot combine AUTHORIZATION header with AUTH argument or
    credentials encoded in URL``, httpx's ``UnicodeEncodeError`` for an API key that is not
    ASCII, aiohttp's ``ValueError`` for a header holding a newline, the openai SDK's
    ``TypeError`` for a request it cannot build. A refused connection, a DNS failure, a
    timeout, an HTTP status or a reply that cannot be read are never a refusal
    (:func:`error_from_exception`).
    """
    seen, found = 0, exc
    while seen < 10:
        if any(cls.__name__ in CLIENT_SIDE_ERRORS for cls in type(found).__mro__):
            return found
        if type(found).__module__ == "builtins" and isinstance(found, (ValueError, TypeError)) \
                and not isinstance(found, UnicodeDecodeError):
            module = _raised_in(found)
            if module.partition(".")[0] in CLIENT_PACKAGES or module in CLIENT_MODULES:
                return found
        next_found = found.__cause__ or found.__context__
        if next_found is None:
            break
        found, seen = next_found, seen + 1
    return None


def _raised_in(exc: BaseException) -> str:
    """The module whose code raised ``exc`` (its innermost traceback frame), or ``""``."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return str(frame.tb_frame.f_globals.get("__name__", "")) if frame is not None else ""


def _not_http(exc: BaseException) -> bool:
    """True when ``exc`` is aiohttp's error for a reply that is not valid HTTP (a status line
    or header its parser rejects): a ``ClientResponseError`` raised from an
    ``HttpProcessingError``, whose status, 400, the server never sent."""
    cause = exc.__cause__
    return any(cls.__name__ == "ClientResponseError" for cls in type(exc).__mro__) and \
        cause is not None and any(cls.__name__ == "HttpProcessingError"
                                  for cls in type(cause).__mro__)


def _refused(exc: BaseException) -> bool:
    """True when a connection was refused, reset or broken somewhere down ``exc``'s cause
    chain. The SDKs' aiohttp transport (``_vendor/httpx_aiohttp/transport.py`` in openai and
    anthropic) maps aiohttp's ``ClientConnectorError`` and every other
    ``ClientConnectionError`` (a server that closed the connection unanswered) to httpx's
    ``ConnectTimeout``: they would otherwise read as a timeout. aiohttp's own timeout
    (``ServerTimeoutError``, a ``ClientConnectionError`` too) stays a timeout."""
    seen = 0
    while seen < 10:
        if isinstance(exc, (ConnectionRefusedError, ConnectionResetError)):
            return True
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "ClientConnectionError" in names and not isinstance(exc, TimeoutError):
            return True
        cause = exc.__cause__ or exc.__context__
        if cause is None:
            break
        exc, seen = cause, seen + 1
    return False


def _one_line(text: str, limit: int = 300) -> str:
    """``text`` redacted, on one line and cut to ``limit`` characters
    (:func:`bench.redact.one_line`)."""
    return one_line(text, limit, "...")
