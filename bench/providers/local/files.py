"""A preset's packaged files on disk: located through the installed distributions' file lists
(``importlib.metadata``, each ``*.dist-info/RECORD``; nothing is imported or executed), checked
by size and SHA-256, and, for a model split into chunk packages, assembled once into the cache
folder. A JSON sidecar remembers a verification, so unchanged files are not hashed again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
from pathlib import Path
from typing import Sequence

from bench.errors import BenchError
from bench.providers.local.presets import ModelPreset, PackageFile

#: Version of the JSON sidecar that records a verified file's fingerprint.
SIDECAR_FORMAT = 1
_BLOCK = 1 << 20  # bytes per read when hashing and copying


def locate(preset: ModelPreset, item: PackageFile) -> Path:
    """The installed file of ``item``, found from its distribution's RECORD, never imported.

    Raises:
        BenchError: the distribution is missing or at another version, its RECORD does not list
            the file, or the file is missing (each naming the ``pip install`` command).
    """
    hint = f"run {preset.install_command}"
    try:
        dist = importlib.metadata.distribution(item.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise BenchError(f"model '{preset.name}' is not installed ({item.distribution} is "
                         f"missing): {hint}") from None
    if dist.version != item.version:
        raise BenchError(f"model '{preset.name}' needs {item.requirement}, found "
                         f"{item.distribution} {dist.version}: {hint}")
    listed = {str(f).replace("\\", "/") for f in (dist.files or ())}
    if item.path not in listed:
        raise BenchError(f"model '{preset.name}': {item.requirement} does not list "
                         f"{item.path} in its RECORD: reinstall with {hint}")
    path = Path(str(dist.locate_file(item.path)))
    if not path.is_file():
        raise BenchError(f"model '{preset.name}': the installed file is missing: {hint}",
                         file=path)
    return path


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _fingerprint(path: Path) -> list[object]:
    stat = path.stat()
    return [str(path), stat.st_size, stat.st_mtime_ns]


def _sidecar_record(preset: ModelPreset, target: Path, sources: Sequence[Path]
                    ) -> dict[str, object]:
    return {"format": SIDECAR_FORMAT, "preset": preset.name, "sha256": preset.sha256,
            "file": _fingerprint(target),
            "chunks": [_fingerprint(s) for s in sources] if preset.chunked else []}


def _sidecar_path(preset: ModelPreset, folder: Path) -> Path:
    return folder / f"{preset.name}.{preset.sha256[:16]}.verified.json"


def _sidecar_matches(sidecar: Path, preset: ModelPreset, target: Path,
                     sources: Sequence[Path]) -> bool:
    try:
        if target.stat().st_size != preset.size:
            return False
        with sidecar.open("rb") as handle:
            stored = json.loads(handle.read(1 << 16))
        return bool(stored == _sidecar_record(preset, target, sources))
    except (OSError, ValueError, RecursionError):
        return False


def _write_sidecar(sidecar: Path, preset: ModelPreset, target: Path,
                   sources: Sequence[Path]) -> None:
    """Record a verification; best effort (an unwritable cache only costs a re-hash)."""
    text = json.dumps(_sidecar_record(preset, target, sources), indent=1)
    try:
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=sidecar.parent, prefix="." + sidecar.name + ".",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, sidecar)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass


def verified_single(preset: ModelPreset, path: Path, folder: Path) -> Path:
    """``path``, the installed file of a single-file preset, once its size and SHA-256 match
    the preset's (or its sidecar in ``folder`` says they did and the file is unchanged).

    Raises:
        BenchError: the size or SHA-256 differs (naming both values).
        OSError: the file cannot be read.
    """
    sidecar = _sidecar_path(preset, folder)
    if _sidecar_matches(sidecar, preset, path, ()):
        return path
    size = path.stat().st_size
    if size != preset.size:
        raise BenchError(f"model '{preset.name}': size {size:,} bytes, expected "
                         f"{preset.size:,}: reinstall with {preset.install_command}", file=path)
    actual = file_sha256(path)
    if actual != preset.sha256:
        raise BenchError(f"model '{preset.name}': SHA-256 {actual}, expected {preset.sha256}",
                         file=path)
    _write_sidecar(sidecar, preset, path, ())
    return path


def assembled(preset: ModelPreset, sources: Sequence[Path], folder: Path) -> Path:
    """The chunked preset's model file in ``folder``, assembled from the chunk files ``sources``
    (in ``preset.files`` order) unless a verified copy is already there. Each chunk and the
    whole are checked against their SHA-256 while copying; a file that fails is not kept.

    Raises:
        BenchError: a chunk's size or SHA-256 differs, the whole's SHA-256 differs, or the
            folder cannot be written.
    """
    target = folder / preset.file_name
    sidecar = _sidecar_path(preset, folder)
    if _sidecar_matches(sidecar, preset, target, sources):
        return target
    try:
        if target.is_file() and target.stat().st_size == preset.size \
                and file_sha256(target) == preset.sha256:
            _write_sidecar(sidecar, preset, target, sources)
            return target
    except OSError:
        pass  # unreadable: assemble anew
    for item, path in zip(preset.files, sources):
        size = path.stat().st_size
        if size != item.size:
            raise BenchError(f"model '{preset.name}': chunk of {item.requirement} is "
                             f"{size:,} bytes, expected {item.size:,}: reinstall with "
                             f"{preset.install_command}", file=path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix="." + preset.file_name + ".",
                                        suffix=".partial")
    except OSError as exc:
        raise BenchError(f"cannot write the model cache ({exc.strerror or exc})",
                         file=folder) from None
    tmp = Path(tmp_name)
    try:
        whole = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for item, path in zip(preset.files, sources):
                part = hashlib.sha256()
                with path.open("rb") as handle:
                    for block in iter(lambda: handle.read(_BLOCK), b""):
                        part.update(block)
                        whole.update(block)
                        out.write(block)
                if part.hexdigest() != item.sha256:
                    raise BenchError(f"model '{preset.name}': chunk of {item.requirement} has "
                                     f"SHA-256 {part.hexdigest()}, expected {item.sha256}",
                                     file=path)
            out.flush()
            os.fsync(out.fileno())
        if whole.hexdigest() != preset.sha256:
            raise BenchError(f"model '{preset.name}': the assembled file has SHA-256 "
                             f"{whole.hexdigest()}, expected {preset.sha256} (not kept)",
                             file=target)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"cannot assemble model '{preset.name}' "
                         f"({exc.strerror or exc})", file=target) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)
    _write_sidecar(sidecar, preset, target, sources)
    return target


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
