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


SPECULATIVE_ENV = "BENCH_LOCAL_SPECULATIVE"
# Tokens guessed by prompt lookup after each chosen token when speculation is on (2 wasted the
# least on guesses that fail, benchmarks/RESULTS.md).
DEFAULT_DRAFT_TOKENS = 2
# Whether speculation is on when neither the provider option nor the environment says.
SPECULATIVE_BY_DEFAULT = False


def resolve_draft_tokens(speculative: bool | int | None) -> int:
    """Tokens guessed per step by prompt-lookup speculation (0: off), from the provider
    option ``speculative`` (True/False, or a count), else ``$BENCH_LOCAL_SPECULATIVE``
    (``on``/``off``/``1``/``0``/``true``/``false``/``yes``/``no``, or a count such as ``12``;
    ``1`` means on),
    else :data:`SPECULATIVE_BY_DEFAULT` (with :data:`DEFAULT_DRAFT_TOKENS`).

    Raises:
        BenchError: the option or the variable is neither a switch nor a count from 0 to 64.
    """
    source = "speculative"
    value: object = speculative
    if speculative is None:
        text = os.environ.get(SPECULATIVE_ENV, "").strip().lower()
        if not text:
            return DEFAULT_DRAFT_TOKENS if SPECULATIVE_BY_DEFAULT else 0
        source = f"{SPECULATIVE_ENV}={text!r}"
        switches = {"on": True, "1": True, "yes": True, "true": True,
                    "off": False, "0": False, "no": False, "false": False}
        value = switches[text] if text in switches else text
    if isinstance(value, bool):
        return DEFAULT_DRAFT_TOKENS if value else 0
    try:
        count = int(str(value))
    except (TypeError, ValueError):
        count = -1
    if not 0 <= count <= 64:
        raise BenchError(f"{source}: give on/off or a count of guessed tokens from 0 to 64")
    return count


BATCH_ENV = "BENCH_LOCAL_BATCH"
# Answers the embedded model decodes at once when neither the provider option nor the
# environment says. 1 (one at a time): on the shared 2-core machine batching gained at most
# 1.85x at l3 (B=8) and changed 6-12% of answers (llama.cpp's sums differ with the batch), so
# it is opt-in (benchmarks/RESULTS.md, docs/embedded-model.md#batched-decoding).
DEFAULT_BATCH = 1
# The most: each sequence adds BATCH_ROOM_TOKENS KV cells (12 MiB for Qwen2.5-0.5B); at 16 a
# step already cost twice as much as at 8 for no gain (benchmarks/RESULTS.md).
MAX_BATCH = 16


def resolve_batch(batch: int | None) -> int:
    """Answers decoded at once (1: one at a time, as before batching), from the provider
    option ``batch``, else ``$BENCH_LOCAL_BATCH``, else :data:`DEFAULT_BATCH`.

    Raises:
        BenchError: the option or the variable is not an integer from 1 to :data:`MAX_BATCH`.
    """
    source = "batch"
    value: object = batch
    if batch is None:
        text = os.environ.get(BATCH_ENV, "").strip()
        if not text:
            return DEFAULT_BATCH
        source, value = f"{BATCH_ENV}={text!r}", text
    try:
        count = int(str(value))
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_BATCH:
        raise BenchError(f"{source}: give the count of answers decoded at once, "
                         f"from 1 to {MAX_BATCH}")
    return count
