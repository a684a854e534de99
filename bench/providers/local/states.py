"""Saved prefix states of the embedded model: where they live and how the folder is kept
within :data:`STATE_CACHE_BYTES` (least recently used first, leftovers of killed writers)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the `local` extra
    from llama_cpp import Llama

def state_dir() -> Path:
    """Folder of saved prefix states: ``$BENCH_CACHE_DIR/local-state`` or
    ``<project>/reports/.cache/local-state``."""
    from bench.paths import cache_dir
    return cache_dir() / "local-state"


# Saved prefix states kept at most (bytes): a Qwen2.5-0.5B l50 state is about 330 MB, so the
# four default variants fit with room for a few edited ones; older states are read again.
STATE_CACHE_BYTES = 2 * 1024**3


def prune_states(folder: Path, keep_bytes: int = STATE_CACHE_BYTES, *,
                 keep: Path | None = None) -> list[Path]:
    """Delete leftovers and the least recently used states beyond ``keep_bytes``.

    Leftovers are ``.<name>.<pid>.partial`` files whose writer process is gone (a run killed
    while saving). States are ranked by modification time, which a load refreshes.

    Args:
        folder: the states' folder (:func:`state_dir`).
        keep_bytes: the most bytes of ``*.state`` files kept.
        keep: a state never deleted (the one just written).

    Returns:
        The files deleted. Files that vanish or cannot be deleted meanwhile are skipped.
    """
    deleted: list[Path] = []
    states: list[tuple[float, int, Path]] = []
    for path in folder.glob("*"):
        try:
            if path.name.endswith(".partial"):
                pid = int(path.name.rsplit(".", 2)[-2])
                if pid == os.getpid() or Path(f"/proc/{pid}").exists():
                    continue
                path.unlink()
                deleted.append(path)
            elif path.suffix == ".state":
                stat = path.stat()
                states.append((stat.st_mtime, stat.st_size, path))
        except (OSError, ValueError, IndexError):
            continue
    total = sum(size for _, size, _ in states)
    for _, size, path in sorted(states):
        if total <= keep_bytes:
            break
        if keep is not None and path == keep:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        deleted.append(path)
        total -= size
    return deleted


def load_state(llm: Llama, lib: ModuleType, ctx: object, path: Path, prefix: list[int]) -> bool:
    """Load the KV state saved at ``path`` into llama.cpp context ``ctx`` of ``llm`` (a
    ``llama_cpp.Llama``; ``lib`` the ``llama_cpp`` module); True when it holds exactly
    ``prefix`` (tokens). A stale or damaged file is deleted (the prefix is read again) and
    the context's tokens are dropped."""
    if not path.is_file():
        return False
    capacity = len(prefix) + 1
    tokens = (lib.llama_token * capacity)()
    count = ctypes.c_size_t(0)
    ok = lib.llama_state_load_file(ctx, str(path).encode(), tokens, capacity,
                                   ctypes.byref(count))
    if not ok or list(tokens[:count.value]) != prefix:
        llm.n_tokens = 0  # the next eval drops whatever the failed load left
        path.unlink(missing_ok=True)
        return False
    llm.input_ids[:len(prefix)] = prefix
    llm.n_tokens = len(prefix)
    try:
        os.utime(path)  # recently used: kept by prune_states
    except OSError:
        pass
    return True


def save_state(llm: Llama, lib: ModuleType, ctx: object, path: Path) -> None:
    """Save the KV state of ``llm``'s current tokens to ``path`` (written to a partial file,
    then renamed, so a reader never sees half a file), then :func:`prune_states`. Best
    effort: a cache that cannot be written is read again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        tokens = (lib.llama_token * llm.n_tokens)(*llm.input_ids[:llm.n_tokens])
        if lib.llama_state_save_file(ctx, str(partial).encode(), tokens, llm.n_tokens):
            os.replace(partial, path)
            prune_states(path.parent, keep=path)
        else:
            partial.unlink(missing_ok=True)
    except OSError:
        pass
