"""Embeddings for tool retrieval: the embedded model's GGUF, mean pooled, cached on disk.

The model is the one ``bench run`` already ships and verifies (the ``local`` provider's
preset, by default Qwen2.5-Coder-0.5B-Instruct Q4_K_M, Apache-2.0, packaged from Qwen's own
GGUF release; its SHA-256 is pinned in :mod:`bench.providers.local.presets` and checked by
:func:`bench.providers.local.models.resolve_model` before any load). llama.cpp loads it with
``embedding=True`` and mean pooling (``LLAMA_POOLING_TYPE_MEAN``): the average of the last
hidden states over the text's tokens, L2-normalised. It is a decoder, not a trained
retrieval encoder; it is chosen because it is multilingual (Qwen2.5 covers Chinese and
English), runs on the CPU offline, and needs no second download: the network here reaches
package registries only, and a hub download (fastembed, sentence-transformers) fails. How
well it retrieves is measured, not assumed (``docs/many-tools.md``: recall@k per variant).

Vectors are cached per (model SHA-256, text SHA-256) in ``<cache>/embeddings.sqlite``
(:func:`bench.paths.cache_dir`, :class:`bench.vectors.VectorCache`), so a text is embedded once
per model; SQLite commits each batch atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from bench.errors import BenchError
from bench.vectors import VectorCache, normalise, text_key

MAX_EMBED_TOKENS = 2048
"""Context of the embedding model: a longer text is cut to its first tokens (an l50 tool's
document is about 900 tokens)."""


class LlamaEmbedder:
    """Mean-pooled embeddings from a GGUF through llama-cpp-python, cached.

    Args:
        model: ``--model`` preset name (None: the default preset).
        model_path: a GGUF file instead (its SHA-256 is computed for the cache key).
        threads: CPU threads (default: ``$BENCH_THREADS``, else ``min(4, cores)``).
        cache_path: the vector cache (default ``<cache>/embeddings.sqlite``).

    Raises:
        BenchError: llama-cpp-python is not installed, or the model cannot be resolved
            (:func:`bench.providers.local.models.resolve_model`); on first use, the model
            cannot be loaded (a damaged GGUF).
    """

    def __init__(self, model: str | None = None, model_path: str | None = None, *,
                 threads: int | None = None, cache_path: Path | None = None) -> None:
        from bench.paths import cache_dir
        from bench.providers.local.models import resolve_model
        from bench.providers.local.presets import MODEL_PRESETS

        resolved = resolve_model(model, model_path)
        self.path = resolved.path
        if resolved.preset is not None:
            self.sha256 = MODEL_PRESETS[resolved.preset].sha256
        else:
            from bench.providers.local.files import file_sha256
            self.sha256 = file_sha256(resolved.path)
        self.threads = threads
        self.cache = VectorCache(cache_path or cache_dir() / "embeddings.sqlite", self.sha256)
        self._llm: object | None = None

    def _model(self) -> object:
        if self._llm is None:
            try:
                import llama_cpp
            except ImportError:
                raise BenchError("the embedding retriever needs llama-cpp-python: pip install "
                                 "-c constraints.txt -e '.[local]'") from None
            from bench.providers.local.logs import (capture_native_errors, last_native_error,
                                                    quiet_native_stderr)
            from bench.providers.local.settings import resolve_threads
            capture_native_errors(llama_cpp)  # llama.cpp's per-call log lines are dropped
            try:  # a GGUF header over a damaged body passes resolve_model's check
                with quiet_native_stderr():
                    self._llm = llama_cpp.Llama(
                        str(self.path), embedding=True, n_ctx=MAX_EMBED_TOKENS,
                        n_batch=MAX_EMBED_TOKENS, n_ubatch=MAX_EMBED_TOKENS,
                        n_threads=resolve_threads(self.threads),
                        pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, verbose=False)
            except (ValueError, RuntimeError) as exc:  # as the local provider's engine says it
                reason = last_native_error()
                raise BenchError(f"cannot load the model for the embedding retriever: {exc}"
                                 + (f" (llama.cpp: {reason[:300]})" if reason else ""),
                                 file=self.path) from None
        return self._llm

    def _embed_one(self, text: str) -> np.ndarray:
        llm = self._model()
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True)  # type: ignore[attr-defined]
        if not tokens:  # '' (Qwen adds no BOS): llama_decode of no token fails (returns -1)
            # and left the process to abort at exit ("double free or corruption"); no text,
            # no direction: a zero vector, which ranks the catalog in its order (as BM25 does)
            return np.zeros(llm.n_embd(), dtype=np.float32)  # type: ignore[attr-defined]
        if len(tokens) > MAX_EMBED_TOKENS:
            text = llm.detokenize(tokens[1:MAX_EMBED_TOKENS - 8]).decode(  # type: ignore[attr-defined]
                "utf-8", "ignore")
        vector = llm.embed(text)  # type: ignore[attr-defined]
        return np.asarray(vector, dtype=np.float32).reshape(-1)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` unit vectors; texts already cached are not embedded again."""
        keys = [text_key(t) for t in texts]
        found = self.cache.get(list(dict.fromkeys(keys)))
        fresh: dict[str, np.ndarray] = {}
        for key, text in zip(keys, texts):
            if key not in found and key not in fresh:
                fresh[key] = self._embed_one(text)
        if fresh:
            self.cache.put(fresh)
            found.update(fresh)
        return normalise(np.stack([found[k] for k in keys]).astype(np.float64))
