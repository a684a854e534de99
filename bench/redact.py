"""Secrets never reach a file bench writes or a message it prints (issue 19, item 3).

One function, :func:`redact`, is applied by every writer (result rows, manifests with the
recorded command line, the response cache, reports, traces, baselines) and to every printed
message (:class:`RedactingStream` wraps stdout and stderr in :func:`bench.cli.main`). It
replaces by ``***``:

- URL userinfo: ``http://user:pass@host`` -> ``http://***@host`` (RFC 3986 section 3.2.1
  deprecates passwords in URLs; httpx sends them as Basic auth);
- the value of secret-looking headers and fields (``Authorization``, ``Proxy-Authorization``,
  ``x-api-key``, ``x-goog-api-key``, ``api_key``/``api-key``/``apikey``, ``access_token``,
  ``password``, ``secret``), in JSON (``"x-api-key": "..."``), header (``x-api-key: ...``) or
  query (``api_key=...``) form, so a 401 body that echoes the request's headers is covered;
- query parameters named ``key`` or ``token`` (``?key=...``, ``&token=...``);
- ``Bearer``/``Basic`` credentials and key-shaped tokens: OpenAI/Anthropic ``sk-...`` and
  Google ``AIza...`` keys;
- every literal secret bench knows: the values of environment variables whose names say key,
  token, secret or password (8 characters or more), and the user, password and Basic-auth
  form of every credentialed URL seen by :func:`public_provider_id`.

A provider id whose base URL carries credentials runs under its *public* id (userinfo
redacted) everywhere: row keys, the manifest, the cache. The credentials stay in this
process's memory (:func:`real_provider_id`) for the request itself; a resumed run gets them
again from ``--provider``.

Redaction works on text (JSON, HTML, Markdown, XML alike): every replacement keeps JSON valid
(``***`` needs no escaping and the patterns never cross a quote).
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import threading
from typing import Any, TextIO
from urllib.parse import unquote

__all__ = ["BROKEN_PIPE_EXIT", "MARK", "RedactingStream", "public_provider_id",
           "real_provider_id", "redact", "redact_bytes", "register_secret"]

MARK = "***"
#: Exit code when stdout's reader went away: 128 + SIGPIPE, what a shell reports for a
#: program that a closed pipe stopped (``yes | head``).
BROKEN_PIPE_EXIT = 141
_MIN_LITERAL = 6  # shorter literals would redact ordinary words

# ://userinfo@ : userinfo holds no '/', whitespace, quote or '@' (RFC 3986 3.2.1). The
# pattern starts at the literal '://' (a scheme before it would make a run of letters
# quadratic: a model's 1 MiB argument took minutes).
_USERINFO = re.compile(r"(://)[^/\s@\"'<>\\]+@")
_SCHEME_VALUE = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_KEYS = re.compile(r"(?<![A-Za-z0-9])(sk-|AIza)[A-Za-z0-9_-]{8,}")
# a secret-named header, field or parameter, then its value up to a quote, space or separator
# ('|' ends a row key's provider part, '&' and '#' a query value, '`' a Markdown code span)
_NAMED = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])((?:proxy-)?authorization|x-api-key|x-goog-api-key|api[-_]?key|"
    r"access[-_]token|password|secret)(\\?[\"']?\s*[:=]\s*\\?[\"']?)"
    r"(?:(bearer|basic|token)\s+)?([^\s\"'`\\,;&|#<>(){}\[\]]+)")
# a query parameter named key or token (Gemini's REST form ``?key=``, proxies' ``?token=``);
# only in query form: a JSON field "key" is a row's key, not a secret
_QUERY = re.compile(r"(?i)([?&](?:key|token)=)([^&|`\s\"'#<>\\]+)")
# A cheap first test on the lower-cased text (substring tests: a case-insensitive regex took
# ~200 us on a 2.5 KB row); most rows hold none of these.
_TRIGGER_WORDS = ("bearer", "basic", "sk-", "aiza", "authorization", "api", "access",
                  "password", "secret", "key=", "token=")

_lock = threading.Lock()
_literals: set[str] = set()
_env_size = -1  # len(os.environ) when it was last read
_credentials: dict[str, str] = {}  # public provider id -> the id with its credentials
_ENV_NAME = re.compile(r"(?i)(api_?key|token|secret|password|passwd)")


def register_secret(value: str | None) -> None:
    """Redact ``value`` literally from now on (values under 6 characters are ignored)."""
    if value and len(value) >= _MIN_LITERAL:
        with _lock:
            _literals.add(value)


def _literal_secrets() -> list[str]:
    """Registered secrets plus the current values of secret-named environment variables."""
    global _env_size
    if len(os.environ) != _env_size:  # read again when variables come or go
        _env_size = len(os.environ)
        for name, value in list(os.environ.items()):
            if _ENV_NAME.search(name) and len(value) >= 8:
                register_secret(value)
    with _lock:
        return sorted(_literals, key=len, reverse=True)  # longest first: no partial leftovers


def _named(match: re.Match[str]) -> str:
    name, sep, scheme, value = match.groups()
    if value == MARK:
        return match.group(0)
    return f"{name}{sep}{scheme + ' ' if scheme else ''}{MARK}"


def redact(text: str) -> str:
    """``text`` with every secret this module knows replaced by ``***`` (see the module
    docstring for the rules). Idempotent; text without secrets comes back unchanged (the
    same object)."""
    if not isinstance(text, str) or not text:
        return text
    literals = _literal_secrets()
    hit = [s for s in literals if s in text]
    low = text.lower()
    userinfo = "://" in low and "@" in low
    words = {w for w in _TRIGGER_WORDS if w in low}
    if not hit and not userinfo and not words:
        return text
    for secret in hit:
        text = text.replace(secret, MARK)
    # each pattern only when its words occur: the case-insensitive ones are slow on long text
    if userinfo:
        text = _USERINFO.sub(lambda m: m.group(1) + MARK + "@", text)
    if words & {"bearer", "basic"}:
        text = _SCHEME_VALUE.sub(lambda m: m.group(1) + m.group(2) + MARK, text)
    if words & {"sk-", "aiza"}:
        text = _KEYS.sub(lambda m: m.group(1) + MARK, text)
    if words & {"authorization", "api", "access", "password", "secret"}:
        text = _NAMED.sub(_named, text)
    if words & {"key=", "token="}:
        text = _QUERY.sub(lambda m: m.group(0) if m.group(2) == MARK else m.group(1) + MARK,
                          text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """:func:`redact` for UTF-8 bytes (e.g. a result row's line); unchanged bytes come back
    as the same object. Bytes that are not UTF-8 are redacted with surrogate escapes kept."""
    text = data.decode("utf-8", "surrogateescape")
    cleaned = redact(text)
    return data if cleaned is text else cleaned.encode("utf-8", "surrogateescape")


def redact_data(data: Any) -> Any:
    """``data`` (JSON-like: dicts, lists, strings) with :func:`redact` applied to every
    string, keys included."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact(k) if isinstance(k, str) else k: redact_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v) for v in data]
    return data


def public_provider_id(provider_id: str) -> str:
    """The id to store and print for ``provider_id``: its URL's userinfo replaced by ``***``.

    The credentials (user, password, their Basic-auth form) are registered as secrets, and
    the full id is kept in memory for :func:`real_provider_id`. An id without userinfo comes
    back unchanged.
    """
    match = re.search(r"://([^/\s@]+)@", provider_id)
    if not match or match.group(1) == MARK:
        return provider_id
    userinfo = match.group(1)
    user, _, password = userinfo.partition(":")
    for value in (userinfo, user, password, unquote(user), unquote(password)):
        register_secret(value)
    register_secret(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
    public = provider_id[:match.start(1)] + MARK + provider_id[match.end(1):]
    with _lock:
        _credentials[public] = provider_id
    return public


def real_provider_id(provider_id: str) -> str | None:
    """The id with credentials for a public id from :func:`public_provider_id`; the id itself
    when it holds no redacted userinfo; None when its credentials are not known in this
    process (e.g. a resumed run: they were never written)."""
    if f"://{MARK}@" not in provider_id:
        return provider_id
    with _lock:
        return _credentials.get(provider_id)


class RedactingStream(io.TextIOBase):
    """A text stream that writes :func:`redact` of each write to ``stream`` (stdout or
    stderr): every message bench prints goes through it. A secret split across two writes
    would pass; bench's messages are written whole (rich renders a message in one write).
    It has no ``buffer``, so that click writes text through it instead of going around it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write the redacted ``text``; returns ``len(text)`` as callers expect.

        Raises:
            SystemExit: code :data:`BROKEN_PIPE_EXIT` when the reader has gone
                (``bench compare ... | head``), see :meth:`_reader_gone`.
        """
        try:
            self._stream.write(redact(text))
        except BrokenPipeError:
            self._reader_gone()
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream (SystemExit :data:`BROKEN_PIPE_EXIT` as :meth:`write`)."""
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        """The pipe's reader closed it: point the descriptor at ``os.devnull`` (what is
        still buffered goes nowhere instead of failing again at exit) and exit with
        :data:`BROKEN_PIPE_EXIT`, never with a code of bench's own (1: a regression), and
        before rich or click turn the error into exit 1. Python's advice:
        https://docs.python.org/3/library/signal.html#note-on-sigpipe"""
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        raise SystemExit(BROKEN_PIPE_EXIT)

    def isatty(self) -> bool:
        """The wrapped stream's answer (rich decides on colours and widths by it)."""
        return self._stream.isatty()

    def fileno(self) -> int:
        """The wrapped stream's descriptor."""
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The wrapped stream's encoding."""
        return getattr(self._stream, "encoding", "utf-8")
