"""Saved prefix states of the embedded model: where they live and how the folder is kept
within :data:`STATE_CACHE_BYTES` (least recently used first, leftovers of killed writers)."""

from __future__ import annotations

import os
from pathlib import Path

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
