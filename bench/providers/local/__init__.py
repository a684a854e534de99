"""The embedded ``local`` provider: a small GGUF model run by llama.cpp (llama-cpp-python) in
a worker process, no key, no network.

Modules, from the run's side to the native side:

- :mod:`~bench.providers.local.provider`: :class:`LocalProvider`, the run's handle on the
  worker process (start, restart once, stop);
- :mod:`~bench.providers.local.settings`: defaults, environment variables, the model file and
  thread count;
- :mod:`~bench.providers.local.prompt`: the tools block, the no-call layouts and the answer's
  JSON Schema (what the model is shown and held to);
- :mod:`~bench.providers.local.worker`: the child process's loop (requests over a pipe);
- :mod:`~bench.providers.local.engine`: llama.cpp in the worker, the variant's grammars and
  prompt prefix, the KV cache and its saved states
  (:mod:`~bench.providers.local.states`);
- :mod:`~bench.providers.local.decoding`: staged greedy grammar-constrained decoding;
- :mod:`~bench.providers.local.models` and :mod:`~bench.providers.local.gguf`: model presets,
  their packaged files, and the GGUF header check;
- :mod:`~bench.providers.local.logs`, :mod:`~bench.providers.local.vocab`: llama.cpp's own
  log, and token counts in the model's tokenizer.

Importing this package imports neither llama_cpp nor the model's packages: the engine imports
llama_cpp in the worker process, :func:`tools_block_tokens` and the grammar converter when
called.
"""

from __future__ import annotations

from bench.providers.local.prompt import (
    DEFAULT_NO_CALL_LAYOUT,
    EPISODE_NO_CALL_LAYOUT,
    GRAMMAR_MAX_ITEMS,
    GRAMMAR_MAX_STRING,
    MAX_PARALLEL_CALLS,
    NO_CALL_LAYOUTS,
    NoCallLayout,
    answer_schema,
    chat_messages,
    grammar_schema,
    json_schema_grammar,
    tools_block,
)
from bench.providers.local.provider import LocalProvider, WorkerDied, likely_cause
from bench.providers.local.settings import (
    ANSWER_TIMEOUT_S,
    DEFAULT_MAX_TOKENS,
    DEFAULT_N_CTX,
    DEFAULT_SEED,
    LOAD_TIMEOUT_S,
    MODEL_ENV,
    THREADS_ENV,
    find_default_model,
    resolve_model_path,
    resolve_threads,
)
from bench.providers.local.vocab import tools_block_tokens
from bench.providers.worker_process import signal_name

__all__ = [
    "ANSWER_TIMEOUT_S", "DEFAULT_MAX_TOKENS", "DEFAULT_NO_CALL_LAYOUT", "DEFAULT_N_CTX",
    "DEFAULT_SEED", "EPISODE_NO_CALL_LAYOUT", "GRAMMAR_MAX_ITEMS", "GRAMMAR_MAX_STRING",
    "LOAD_TIMEOUT_S", "LocalProvider", "MAX_PARALLEL_CALLS", "MODEL_ENV", "NO_CALL_LAYOUTS",
    "NoCallLayout", "THREADS_ENV", "WorkerDied", "answer_schema", "chat_messages",
    "find_default_model", "grammar_schema", "json_schema_grammar", "likely_cause",
    "resolve_model_path", "resolve_threads", "signal_name", "tools_block", "tools_block_tokens",
]
