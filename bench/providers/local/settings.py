"""The embedded model's settings: defaults (seed, token budget, context window, time limits),
the environment variables that change them, and where the model file and thread count come
from (:func:`resolve_model_path`, :func:`resolve_threads`). Imports nothing heavy: the model's
packages are read only when a preset is resolved."""

from __future__ import annotations

import os
from pathlib import Path

from bench.errors import BenchError

MODEL_ENV = "BENCH_LOCAL_MODEL"
THREADS_ENV = "BENCH_THREADS"
DEFAULT_SEED = 1234
DEFAULT_MAX_TOKENS = 512
# Default context window (tokens): the l30/l50 tools blocks of the 11-13 tool toolsets need
# 8.5k-13.5k. Qwen2.5-Coder was trained with 32,768; SmolLM2 with 8,192 (RoPE past its trained
# length: quality degrades there, which is part of what a long variant costs a small model).
DEFAULT_N_CTX = 16384
# Seconds the worker may take to load the model, and to answer one request, before it counts
# as hung (it is then killed and restarted once). Reading a 13.5k-token tools block took 199 s
# on a busy 2-core machine with the previous engine; the limit leaves room for slower machines.
LOAD_TIMEOUT_S = 300.0
ANSWER_TIMEOUT_S = 900.0


def find_default_model() -> Path | None:
    """The default preset's GGUF file (assembled and verified on first use), or None when its
    packages are not installed."""
    from bench.providers.local.models import preset_installed, resolve_model
    from bench.providers.local.presets import DEFAULT_MODEL, MODEL_PRESETS
    if not preset_installed(MODEL_PRESETS[DEFAULT_MODEL]):
        return None
    return resolve_model(DEFAULT_MODEL, None).path


def resolve_model_path(model_path: str | os.PathLike[str] | None,
                       model: str | None = None) -> Path:
    """The GGUF to load: ``model_path``, else preset ``model``, else ``$BENCH_LOCAL_MODEL``,
    else the default preset (see :func:`bench.providers.local.models.resolve_model`).

    Raises:
        BenchError: the file does not exist or is not a loadable GGUF, the preset is unknown
            or not installed, or its SHA-256 does not match.
    """
    from bench.providers.local.models import resolve_model
    return resolve_model(model, model_path).path


def resolve_threads(threads: int | None) -> int:
    """CPU threads for llama.cpp: ``threads`` (``--threads``), else ``$BENCH_THREADS``, else
    min(4, cores).

    Two llama.cpp processes that each take every core of a 2-core machine slow each other down
    badly (about 40x as observed on the project's machine), and llama.cpp's threads spin-wait,
    so more threads than cores only slows it: the count is explicit and capped at the cores.

    Raises:
        BenchError: the count is not a positive integer, or exceeds the logical cores.
    """
    cores = os.cpu_count() or 1
    source = "--threads"
    if threads is None:
        value = os.environ.get(THREADS_ENV)
        if not value:
            return max(1, min(4, cores))
        source = f"{THREADS_ENV}={value!r}"
        try:
            threads = int(value)
        except ValueError:
            threads = 0
    if threads < 1:
        raise BenchError(f"{source}: give a positive integer")
    if threads > cores:
        raise BenchError(f"{source}: {threads} threads for {cores} logical cores; llama.cpp's "
                         f"threads spin-wait, so give at most {cores}")
    return int(threads)
