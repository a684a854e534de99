"""Provider ids and URLs made public: a base URL's credentials and secret query values
replaced by ``***`` where the id is read (:func:`public_provider_id`), registered as secrets,
and the full id kept in memory for the requests (:func:`real_provider_id`).
"""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote

from bench.redact.text import MARK, _URL_QUERY, _lock, register_secret

_credentials: dict[str, str] = {}  # public provider id -> the id with its credentials


def _publish(text: str) -> tuple[str, list[str]]:
    """(``text`` with its URL's userinfo and secret query values replaced by ``***``, the
    secrets taken out)."""
    secrets: list[str] = []
    match = re.search(r"://([^/\s@]+)@", text)
    if match and match.group(1) != MARK:
        userinfo = match.group(1)
        user, _, password = userinfo.partition(":")
        secrets += [userinfo, user, password, unquote(user), unquote(password),
                    base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()]
        text = text[:match.start(1)] + MARK + text[match.end(1):]

    def query(m: re.Match[str]) -> str:
        if m.group(2) == MARK:
            return m.group(0)
        secrets.extend((m.group(2), unquote(m.group(2))))
        return m.group(1) + MARK

    text = _URL_QUERY.sub(query, text) if "=" in text else text
    return text, secrets


def public_url(url: str | None) -> str | None:
    """``url`` as bench stores and prints it: user:password@ and the values of secret query
    parameters (``key``, ``token``, ``api_key``, ``password``...) replaced by ``***``; the
    values taken out are registered as secrets (:func:`register_secret`)."""
    if not url:
        return url
    public, secrets = _publish(url)
    for value in secrets:
        register_secret(value)
    return public


def public_provider_id(provider_id: str) -> str:
    """The id to store and print for ``provider_id``: its base URL made public
    (:func:`public_url`: userinfo and secret query values replaced by ``***``).

    The secrets taken out are registered (:func:`register_secret`), and the full id is kept
    in memory for :func:`real_provider_id`. An id without secrets comes back unchanged.
    """
    public = public_url(provider_id) or provider_id
    if public != provider_id:
        with _lock:
            _credentials[public] = provider_id
    return public


def real_provider_id(provider_id: str) -> str | None:
    """The id with its secrets for a public id from :func:`public_provider_id`; the id itself
    when nothing in it was redacted; None when its secrets are not known in this process
    (e.g. a resumed run: they were never written)."""
    if MARK not in provider_id:
        return provider_id
    with _lock:
        return _credentials.get(provider_id)
