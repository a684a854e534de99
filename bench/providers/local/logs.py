"""llama.cpp's own log: captured (its ERROR lines name why a model failed to load, a missing
tensor or an unknown tokenizer, which llama-cpp-python's exception omits) and silenced
(:func:`quiet_native_stderr`: the native code writes to file descriptor 2 directly)."""

from __future__ import annotations

import ctypes
import os
import sys
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Iterator

# llama.cpp's log lines at ERROR level, newest last: the reason a load failed (a missing tensor,
# an unknown tokenizer) which llama-cpp-python's exception omits. Levels: ``enum ggml_log_level``
# in the vendored ggml/include/ggml.h of llama-cpp-python 0.3.16 (ERROR = 4, CONT = 5; the
# comment in llama-cpp-python's own _logger.py lists an older order).
_GGML_LOG_LEVEL_ERROR = 4
_GGML_LOG_LEVEL_CONT = 5
_native_errors: list[str] = []
_log_callback: Any = None  # kept referenced: llama.cpp calls it from native code


def capture_native_errors(llama_cpp: ModuleType) -> None:
    """Route llama.cpp's log through a callback that keeps its ERROR lines (last 20) in
    :data:`_native_errors` and drops the rest (bench prints its own messages).

    Args:
        llama_cpp: the imported ``llama_cpp`` module (``llama_log_set`` and the
            ``llama_log_callback`` ctypes type, llama-cpp-python 0.3.16 ``llama_cpp.py``).
    """
    global _log_callback
    if _log_callback is not None:
        return
    last_level = [0]

    def keep(level: int, text: bytes, _user_data: object) -> None:
        level = last_level[0] if level == _GGML_LOG_LEVEL_CONT else level
        last_level[0] = level
        if level == _GGML_LOG_LEVEL_ERROR:
            line = text.decode("utf-8", "replace").strip()
            if line:
                _native_errors[:] = [*_native_errors[-19:], line]

    _log_callback = llama_cpp.llama_log_callback(keep)
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


def last_native_error() -> str | None:
    """The most recent llama.cpp ERROR log line, or None."""
    return _native_errors[-1] if _native_errors else None


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Silence llama.cpp's native logging, which writes to file descriptor 2 directly (the
    descriptor is pointed at ``os.devnull`` for the block and restored after it)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
