"""A pure-Python check of GGUF model files, run before llama.cpp opens one.

:func:`check_gguf` reads the header (magic, version, metadata, tensor infos) and turns a
wrong, truncated, hostile or unsupported file into a one-line :class:`~bench.errors.BenchError`
instead of a native crash in llama.cpp. Used for every file the ``local`` provider loads
(``--model-path``, ``$BENCH_LOCAL_MODEL`` and the presets of
:mod:`bench.providers.local.models`).

Sources:
    GGUF format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
    llama.cpp's reader and the limits it enforces: ``ggml/src/gguf.cpp`` of the llama.cpp
    that llama-cpp-python 0.3.16 vendors; its architectures: ``src/llama-arch.cpp``
    (``LLM_ARCH_NAMES``); its tensor types: ``ggml/include/ggml.h`` and ``gguf-py/gguf/
    constants.py`` (``GGML_QUANT_SIZES``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.providers.local.gguf_reader import (MAX_KEPT_STRING, STRING, UINT32, Bad, Reader,
                                               skip_value, text, type_name)

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
                return _parse(Reader(handle, size), path)
            except Bad as exc:
                raise BenchError(str(exc), file=path) from None
    except IsADirectoryError:
        raise BenchError("is a folder, not a GGUF file", file=path) from None
    except FileNotFoundError:
        raise BenchError("model file not found", file=path) from None
    except OSError as exc:
        raise BenchError(f"cannot read the model file ({exc.strerror or exc})",
                         file=path) from None


def _parse(r: Reader, path: Path) -> GGUFInfo:
    """The header read by ``r`` (see :func:`read_gguf_header`); raises :class:`Bad`."""
    r.handle.seek(0)
    head = r.handle.read(32)
    if len(head) < 4 or head[:4] != GGUF_MAGIC:
        if len(head) < 4:
            raise Bad(f"not a GGUF file (only {r.size} bytes)")
        raise Bad(_describe_not_gguf(head))
    r.skip(4, "magic")
    version = r.u32("version")
    if version not in GGUF_VERSIONS:
        if version and version & 0xFFFF == 0:
            raise Bad(f"GGUF version {version:#x} looks byte-swapped: a big-endian GGUF, "
                      "which llama.cpp cannot load here")
        raise Bad(f"GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)")
    tensor_count = r.u64("tensor count")
    kv_count = r.u64("key-value count")
    # smallest key-value: 8-byte key length + 4-byte type + 1-byte value; smallest tensor
    # info: 8-byte name length + 4-byte n_dims + 4-byte type + 8-byte offset
    if kv_count > MAX_KV or kv_count * 13 > r.left():
        raise Bad(f"corrupt or hostile header: it claims {kv_count:,} key-value pairs "
                  f"(at most {MAX_KV:,}, and the file has {r.left():,} bytes left)")
    if tensor_count > MAX_TENSORS or tensor_count * 24 > r.left():
        raise Bad(f"corrupt or hostile header: it claims {tensor_count:,} tensors "
                  f"(at most {MAX_TENSORS:,}, and the file has {r.left():,} bytes left)")
    architecture, name, alignment, chat_template = _read_metadata(r, kv_count)
    parameters, data_end, types, tensors = _read_tensors(r, tensor_count, alignment)
    data_offset = _pad(r.pos, alignment)
    if tensor_count == 0:
        raise Bad("the file holds no tensors (a vocabulary-only GGUF?)")
    if data_end is not None and data_offset + data_end > r.size:
        raise Bad(f"truncated: the header puts the tensor data's end at byte "
                  f"{data_offset + data_end:,}, the file has {r.size:,} bytes")
    if data_end is None:  # at least check the tensors whose size is known
        for offset, nbytes, label in tensors:
            if data_offset + offset + nbytes > r.size:
                raise Bad(f"truncated: tensor '{label}' ends at byte "
                          f"{data_offset + offset + nbytes:,}, the file has {r.size:,} bytes")
    return GGUFInfo(version=version, tensor_count=tensor_count, kv_count=kv_count,
                    architecture=architecture, name=name, alignment=alignment,
                    data_offset=data_offset,
                    data_end=None if data_end is None else data_offset + data_end,
                    file_size=r.size, parameters=parameters, tensor_types=types,
                    chat_template=chat_template)


def _read_metadata(r: Reader, kv_count: int) -> tuple[str, str | None, int, bool]:
    """Read ``kv_count`` key-value pairs: (``general.architecture``, ``general.name`` or None,
    ``general.alignment`` in bytes, whether ``tokenizer.chat_template`` is a string).

    Raises:
        Bad: a duplicate, mistyped or missing key, or a value past the end of the file.
    """
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
                raise Bad(f"duplicate key '{key.decode()}'")
            seen_special.add(key)
        if key == b"general.architecture":
            if value_type != STRING:
                raise Bad("general.architecture is not a string "
                          f"(type {type_name(value_type)})")
            raw = r.string("general.architecture", keep=MAX_KEPT_STRING)
            architecture = text(raw, "general.architecture")
            continue
        if key == b"general.alignment":
            if value_type != UINT32:
                raise Bad(f"general.alignment has type {type_name(value_type)}, not uint32 "
                          "(llama.cpp would abort)")
            alignment = r.u32("general.alignment")
            if alignment == 0 or alignment & (alignment - 1):
                raise Bad(f"general.alignment {alignment} is not a power of 2")
            continue
        if key == b"tokenizer.chat_template":
            chat_template = value_type == STRING
        if key == b"general.name" and value_type == STRING:
            raw = r.string("general.name", keep=MAX_KEPT_STRING)
            name = text(raw, "general.name") if raw is not None else None
            continue
        skip_value(r, value_type, f"value of key {index}")
    if architecture is None:
        raise Bad("general.architecture is missing or longer than 1,024 bytes")
    return architecture, name, alignment, chat_template


def _read_tensors(r: Reader, tensor_count: int, alignment: int
                  ) -> tuple[int, int | None, dict[str, int], list[tuple[int, int, str]]]:
    """Read ``tensor_count`` tensor infos: (parameters, end of the data relative to the data
    section or None when a tensor's type is unknown, tensor count per type name, and
    (offset, bytes, name) of each tensor of known type).

    Raises:
        Bad: a name, shape, type or offset llama.cpp refuses, or infos past the end of the
            file.
    """
    parameters = 0
    data_end: int | None = 0
    expected_offset = 0
    types: dict[str, int] = {}
    tensors: list[tuple[int, int, str]] = []  # (offset, bytes, name) of known-type tensors
    for index in range(tensor_count):
        raw_name = r.string(f"name of tensor {index}", keep=GGML_MAX_NAME - 1)
        if raw_name is None:
            raise Bad(f"tensor {index}: name of {GGML_MAX_NAME} bytes or more "
                      "(llama.cpp refuses it)")
        label = raw_name.decode("utf-8", "replace")
        n_dims = r.u32(f"dimensions of tensor '{label}'")
        if n_dims > GGML_MAX_DIMS:
            raise Bad(f"tensor '{label}' has {n_dims} dimensions (llama.cpp allows "
                      f"{GGML_MAX_DIMS})")
        dims = [r.u64(f"dimension {j} of tensor '{label}'") for j in range(n_dims)]
        elements = 1
        for dim in dims:
            elements *= dim
        if any(dim >= 1 << 63 for dim in dims) or elements >= 1 << 63:
            raise Bad(f"tensor '{label}' has an impossible shape {dims}")
        type_id = r.u32(f"type of tensor '{label}'")
        offset = r.u64(f"offset of tensor '{label}'")
        parameters += elements
        known = GGML_TYPES.get(type_id)
        type_label = known[0] if known else f"type{type_id}"
        types[type_label] = types.get(type_label, 0) + 1
        if offset % alignment:
            raise Bad(f"tensor '{label}' starts at offset {offset}, not a multiple of the "
                      f"alignment {alignment}")
        if known is None:
            data_end = None  # unknown type: its size, and so the file's, cannot be checked
            continue
        _, block, type_size = known
        row = dims[0] if dims else 1
        if row % block:
            raise Bad(f"tensor '{label}' of type {known[0]} has rows of {row} elements, "
                      f"not a multiple of its block size {block}")
        nbytes = elements // block * type_size
        if data_end is not None:
            if offset != expected_offset:
                raise Bad(f"tensor '{label}' has offset {offset}, expected {expected_offset} "
                          "(llama.cpp requires the tensors in order, without gaps)")
            expected_offset = offset + _pad(nbytes, alignment)
            data_end = max(data_end, offset + nbytes)
        tensors.append((offset, nbytes, label))
    return parameters, data_end, types, tensors


def _pad(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


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
