"""Response cache in SQLite, shared by runs and by the ``replay`` provider.

A cached answer is keyed by everything that can change it: provider id, model, base URL, the
request body or settings (tool_choice, sampling parameters), the canonical messages and tools,
and the trial index, so repeated trials never share an answer. Keys are SHA-256 digests of
canonical JSON; API keys are never part of the material (secret-named fields are dropped and
URL credentials stripped before hashing or storing).

The database runs in WAL mode with one connection per thread, so concurrent workers read
without blocking and writes wait (``busy_timeout``) instead of failing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal, Sequence
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.jsonl import dumps
from bench.models import Message, Tool
from bench.providers.base import ProviderResponse
from bench.results import ManifestCache
from bench.redact import ANSWER_FREE_TEXT, public_provider_id, redact_fields

CacheMode = Literal["off", "read", "write", "readwrite"]
CACHE_MODES: tuple[str, ...] = ("off", "read", "write", "readwrite")
SECRET_FIELDS = frozenset({"api_key", "apikey", "authorization", "x-api-key", "x-goog-api-key",
                           "password", "secret", "access_token", "headers", "default_headers"})
SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    base_url TEXT,
    messages_sha256 TEXT NOT NULL,
    tools_sha256 TEXT NOT NULL,
    trial INTEGER NOT NULL,
    response TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_lookup
    ON responses (messages_sha256, tools_sha256, trial);
"""


def canonical_json(data: object) -> str:
    """Key-sorted, compact JSON text (the input of every digest here)."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)


def digest(data: object) -> str:
    """SHA-256 hex digest of :func:`canonical_json` of ``data``."""
    return hashlib.sha256(canonical_json(data).encode("utf-8", "backslashreplace")).hexdigest()


def messages_digest(messages: Sequence[Message]) -> str:
    """Digest of a conversation in canonical form (fields left at None are omitted)."""
    return digest([m.model_dump(exclude_none=True) for m in messages])


def tools_digest(tools: Sequence[Tool]) -> str:
    """Digest of a canonical tool list (order kept: it is part of the prompt)."""
    return digest([t.model_dump() for t in tools])


def strip_secrets(data: object) -> object:
    """A copy of ``data`` without secret-named fields (:data:`SECRET_FIELDS`), recursively."""
    if isinstance(data, dict):
        return {k: strip_secrets(v) for k, v in data.items()
                if str(k).lower() not in SECRET_FIELDS}
    if isinstance(data, (list, tuple)):
        return [strip_secrets(v) for v in data]
    return data


def public_url(url: str | None) -> str | None:
    """``url`` without user:password@ credentials and without a query string."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def request_key(provider_id: str, identity: dict[str, Any], messages: Sequence[Message],
                tools: Sequence[Tool], trial: int) -> str:
    """The cache key of one request (SHA-256 hex).

    Args:
        provider_id: e.g. ``openai:gpt-4o-mini``.
        identity: what the provider says makes its answers differ: model, base URL, request
            body (tool_choice, sampling parameters), seeds. Secret fields are dropped.
        messages: the case's conversation.
        tools: the variant's canonical tools.
        trial: 0-based trial index (part of the key: trials never share an answer).
    """
    return digest({"provider": provider_id, "identity": strip_secrets(identity),
                   "messages": messages_digest(messages), "tools": tools_digest(tools),
                   "trial": trial})


class ResponseCache:
    """A SQLite file of provider answers.

    Args:
        path: the database file (created with its folder when missing, unless read-only).
        mode: ``off``, ``read`` (answers come from the cache when present), ``write`` (every
            answer is stored, none is read) or ``readwrite``.

    Raises:
        BenchError: an unknown mode, or a file that is not a bench cache.
    """

    def __init__(self, path: str | Path, mode: CacheMode = "readwrite") -> None:
        if mode not in CACHE_MODES:
            raise BenchError(f"unknown cache mode '{mode}' (use {', '.join(CACHE_MODES)})")
        self.path = Path(path)
        self.mode = mode
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        if mode != "off":
            if mode == "read" and not self.path.is_file():
                raise BenchError("cache file not found (record with --cache write)",
                                 file=self.path)
            self._connection()

    @property
    def reads(self) -> bool:
        """True when lookups are answered from the cache."""
        return self.mode in ("read", "readwrite")

    @property
    def writes_enabled(self) -> bool:
        """True when new answers are stored."""
        return self.mode in ("write", "readwrite")

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.mode != "read":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(SCHEMA)
            except sqlite3.DatabaseError as exc:
                raise BenchError(f"not a usable response cache: {exc}", file=self.path) from None
            self._local.conn = conn
        return conn

    def get(self, key: str) -> ProviderResponse | None:
        """The cached answer for ``key`` (counts a hit or a miss), or None."""
        if not self.reads:
            return None
        row = self._connection().execute("SELECT response FROM responses WHERE key = ?",
                                         (key,)).fetchone()
        with self._lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        return None if row is None else self._answer(key, row[0])

    def _answer(self, key: str, stored: Any) -> ProviderResponse:
        """The stored answer of row ``key``, validated.

        Raises:
            BenchError: the ``response`` column is not JSON or not an answer's shape (names
                the file, the row's key and the field).
        """
        try:
            return ProviderResponse.model_validate_json(stored)
        except ValidationError as exc:
            field, message = pydantic_error_field(exc)
            where = "response" + (f".{field}" if field else "")
            raise BenchError(f"corrupt cache row (key {key}): {message}; delete the file or "
                             "record again with --cache write", file=self.path,
                             field=where) from None

    def put(self, key: str, response: ProviderResponse, *, provider_id: str,
            base_url: str | None, messages: Sequence[Message], tools: Sequence[Tool],
            trial: int) -> None:
        """Store one answer (replacing an older one with the same key) under the public
        provider id (:func:`bench.redact.public_provider_id`); secrets in the answer's free
        text (raw answer, request id, prose, decode error) are redacted, its parsed calls
        kept as they are (:data:`bench.redact.ANSWER_FREE_TEXT`), so that a hit calls what
        the provider called."""
        if not self.writes_enabled:
            return
        answer = redact_fields(response.model_dump(mode="json"), ANSWER_FREE_TEXT)
        self._connection().execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (key, public_provider_id(provider_id), public_url(base_url),
             messages_digest(messages), tools_digest(tools), trial, dumps(answer),
             time.time()))
        with self._lock:
            self.writes += 1

    def find(self, messages_sha256: str, tools_sha256: str,
             trial: int) -> list[tuple[str, ProviderResponse]]:
        """Every stored ``(provider id, answer)`` for a conversation, tool list and trial.

        Used by ``replay``, which does not know the original provider's settings.
        """
        rows = self._connection().execute(
            "SELECT key, provider, response FROM responses WHERE messages_sha256 = ? AND "
            "tools_sha256 = ? AND trial = ? ORDER BY created_at",
            (messages_sha256, tools_sha256, trial)).fetchall()
        return [(str(provider), self._answer(key, body)) for key, provider, body in rows]

    def stats(self) -> ManifestCache:
        """``mode``, ``path``, ``hits``, ``misses``, ``writes``, for the manifest."""
        return ManifestCache(mode=self.mode, path=str(self.path) if self.mode != "off" else None,
                             hits=self.hits, misses=self.misses, writes=self.writes)

    def close(self) -> None:
        """Close this thread's connection (other threads' close when they end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
