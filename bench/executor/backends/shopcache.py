"""The cached shop database: generated once per project, atomically, possibly ahead of use.

The file is keyed by :data:`~bench.executor.backends.shopdb.GENERATOR_VERSION` and the seed,
written to a temporary name and renamed, so concurrent builders never see a half file. A run
that will execute reference tools starts the generation in a child process as soon as its
dataset is loaded (:func:`generate_ahead`, from :class:`bench.runner.session.RunSession`):
the child takes about 0.2 s of CPU (measured here) while the run loads its variants and
imports its providers (the openai SDK alone about 0.5 s), so on a second core the first label
check finds the file ready instead of stalling the run's event loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from bench.executor.backends import shopdb
from bench.executor.backends.shopdb import DEFAULT_SEED, GENERATOR_VERSION, write_whole
from bench.paths import cache_dir

__all__ = ["generate_ahead", "shop_db_path"]

#: Generations started by :func:`generate_ahead`, by the file each writes.
_AHEAD: dict[Path, subprocess.Popen[bytes]] = {}
_AHEAD_LOCK = threading.Lock()
#: The child's program: the generator run as a script, which imports only the standard
#: library, so the child starts with ``-I -S`` (no site, no environment) in about 20 ms.
_CHILD = str(Path(shopdb.__file__).resolve())


def _db_file(seed: int, folder: Path | None) -> Path:
    folder = folder or cache_dir() / "executor"
    return folder / f"shop-g{GENERATOR_VERSION}-s{seed}.sqlite"


def _looks_whole(path: Path) -> bool:
    """Whether ``path`` starts with an SQLite header whose page size times page count is the
    file's size (the header layout: https://www.sqlite.org/fileformat.html#the_database_header,
    offsets 0, 16, 24, 28 and 92). A cached file left empty, cut short or overwritten (a full
    disk, a copy stopped half way) fails this, and is built again rather than read as a shop
    without tables."""
    try:
        with open(path, "rb") as file:
            header = file.read(100)
            size = os.fstat(file.fileno()).st_size
    except OSError:
        return False
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return False
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # the page count is valid when the change counter matches "version-valid-for" (SQLite
    # 3.7.0 on always writes both)
    return header[24:28] == header[92:96] and pages > 0 and pages * page_size == size


def generate_ahead(seed: int = DEFAULT_SEED, folder: Path | None = None) -> None:
    """Start writing the cached database for ``seed`` in a child Python process, unless it is
    cached or already being written; :func:`shop_db_path` waits for it. Nothing is raised: a
    child that cannot start, or fails, leaves the file to be generated on first use."""
    path = _db_file(seed, folder)
    with _AHEAD_LOCK:
        if path in _AHEAD or (path.is_file() and _looks_whole(path)):
            return
        try:
            _AHEAD[path] = subprocess.Popen(
                [sys.executable, "-I", "-S", _CHILD, str(seed), str(path)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:
            return


def shop_db_path(seed: int = DEFAULT_SEED, folder: Path | None = None) -> Path:
    """The cached database for ``seed``, generated on first use (atomic rename), and again
    when the cached file is not a whole SQLite file (empty, cut short or overwritten). A
    generation started by :func:`generate_ahead` is waited for first.

    Returns:
        Path of ``shop-g<GENERATOR_VERSION>-s<seed>.sqlite`` in ``folder`` (default
        :func:`cache_dir` ``/executor``).

    Raises:
        OSError: the cache folder or file cannot be written.
    """
    path = _db_file(seed, folder)
    with _AHEAD_LOCK:
        ahead = _AHEAD.pop(path, None)
        if ahead is not None:
            ahead.wait()  # its file is renamed into place whole, or not at all
    if not (path.is_file() and _looks_whole(path)):
        write_whole(path, seed)
    return path
