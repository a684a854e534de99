"""Embedding vectors on disk: one SQLite table per cache file, keyed by model identity and
text SHA-256, shared by tool retrieval (:mod:`bench.toolspace.embedding`) and the paraphrase
leak check (:mod:`bench.descriptions.paraphrase`), each under its own model key."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar

import numpy as np

from bench.errors import BenchError

_T = TypeVar("_T")


class Embedder(Protocol):
    """Turns texts into unit vectors."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float array, each row L2-normalised."""
        ...


def normalise(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with each row scaled to unit L2 norm (an all-zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


class VectorCache:
    """Embeddings on disk: SQLite table ``(model, text_sha256) -> float32 vector``.

    Args:
        path: the SQLite file (created with its folder).
        model: the model's identity (its SHA-256).
    """

    def __init__(self, path: Path, model: str) -> None:
        self.path, self.model = path, model
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BenchError(f"cannot create the embedding cache's folder: {exc.strerror}",
                             file=path.parent) from None
        with self._connect() as db:
            self._run(db.execute, "CREATE TABLE IF NOT EXISTS vectors (model TEXT, "
                      "text_sha256 TEXT, vector BLOB, PRIMARY KEY (model, text_sha256))")

    def _connect(self) -> sqlite3.Connection:
        return self._run(sqlite3.connect, self.path, timeout=30)

    def _run(self, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``call(*args, **kwargs)``, a damaged or unreadable file as one BenchError naming
        it (a cache: deleting it loses only time)."""
        try:
            return call(*args, **kwargs)
        except sqlite3.Error as exc:
            raise BenchError(f"not a usable embedding cache: {exc} (delete it: it is built "
                             "again)", file=self.path) from None

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``keys`` (text SHA-256s). A stored vector that is not
        whole float32 values, or is empty, is left out (embedded again).

        Raises:
            BenchError: the file is not a usable SQLite vector cache (names it).
        """
        found: dict[str, np.ndarray] = {}
        with self._connect() as db:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                cursor = self._run(db.execute,
                                   f"SELECT text_sha256, vector FROM vectors WHERE model = ? "
                                   f"AND text_sha256 IN ({marks})", [self.model, *chunk])
                for key, blob in self._run(cursor.fetchall):
                    if isinstance(blob, bytes) and blob and len(blob) % 4 == 0:
                        found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        """Store ``vectors`` (text SHA-256 -> vector) in one transaction.

        Raises:
            BenchError: the file is not a usable SQLite vector cache (names it).
        """
        with self._connect() as db:
            self._run(db.executemany, "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                      [(self.model, k, v.astype(np.float32).tobytes())
                       for k, v in vectors.items()])


def text_key(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), the cache key."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
