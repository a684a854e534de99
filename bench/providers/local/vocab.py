"""Tokens of a tools block in the embedded model's own tokenizer (the GGUF's vocabulary only,
no weights), for the token-cost figures of ``bench variants``."""

from __future__ import annotations

from typing import Sequence

from bench.errors import BenchError
from bench.models import Tool
from bench.providers.local.logs import quiet_native_stderr
from bench.providers.local.prompt import DEFAULT_NO_CALL_LAYOUT, NO_CALL_LAYOUTS, tools_block
from bench.providers.local.settings import resolve_model_path


def tools_block_tokens(tools_by_name: dict[str, Sequence[Tool]], model_path: str | None = None,
                       layout: str = DEFAULT_NO_CALL_LAYOUT) -> dict[str, int]:
    """Tokens of each tools block (as :class:`LocalProvider` shows it) in the model's tokenizer.

    Loads only the GGUF's vocabulary (no weights), so it is quick.

    Args:
        tools_by_name: variant name -> its tools.
        model_path: GGUF file (default as :func:`resolve_model_path`).
        layout: the no-call layout whose tools block is counted.

    Raises:
        BenchError: llama-cpp-python or the model file is missing.
    """
    try:
        from llama_cpp import Llama
    except ImportError:
        raise BenchError("counting local tokens needs llama-cpp-python: "
                         "pip install -e '.[local]'") from None
    path = resolve_model_path(model_path)
    try:
        with quiet_native_stderr():
            vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise BenchError(f"cannot load the model's vocabulary: {exc}", file=path) from None
    try:
        return {name: len(vocab.tokenize(tools_block(tools, NO_CALL_LAYOUTS[layout])
                                         .encode("utf-8"), add_bos=False))
                for name, tools in tools_by_name.items()}
    finally:
        vocab.close()
