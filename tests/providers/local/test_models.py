"""Model presets (bench/providers/local/models.py) and the GGUF header check (bench/providers/local/gguf.py).

No model runs and nothing is downloaded: GGUF files are synthetic (written with struct in
tmp_path), and chunked presets are fake distributions (a ``*.dist-info`` with a RECORD) put on
sys.path. The presets' real packages are used only where installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import struct
import sys
import tomllib
import tracemalloc
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.providers.local.models import (
    CONSTRAINTS_FILE, DEFAULT_MODEL, KNOWN_ARCHITECTURES, MODEL_ENV, MODEL_PRESETS, ModelPreset,
    PackageFile, check_gguf, read_gguf_header, resolve_model,
)

REPO = Path(__file__).resolve().parents[3]

# GGUF value types (gguf.md)
U8, U32, F32, STRING, ARRAY, U64 = 0, 4, 6, 8, 9, 10


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch):
    monkeypatch.delenv(MODEL_ENV, raising=False)


# ------------------------------------------------------------------------------------------
# synthetic GGUF files
# ------------------------------------------------------------------------------------------

def gstr(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, value_type: int, value: bytes) -> bytes:
    return gstr(key) + struct.pack("<I", value_type) + value


def kv_str(key: str, text: str) -> bytes:
    return kv(key, STRING, gstr(text))


def tensor_info(name: str, dims: list[int], ggml_type: int, offset: int) -> bytes:
    return (gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<I", ggml_type) + struct.pack("<Q", offset))


# Two tensors: F32 [8] (32 bytes at 0) and Q4_0 [32, 2] (2 blocks x 18 bytes at 32).
DEFAULT_TENSORS = [("w", [8], 0, 0), ("q", [32, 2], 2, 32)]
DEFAULT_DATA = 32 + 36


def gguf_bytes(*, version: int = 3, architecture: str | None = "llama",
               extra_kvs: list[bytes] = (), tensors=None, data_size: int | None = None,
               alignment: int = 32, n_kv: int | None = None, n_tensors: int | None = None,
               magic: bytes = b"GGUF") -> bytes:
    """A small GGUF: header, key-value pairs, tensor infos, padding, zeroed tensor data."""
    kvs = list(extra_kvs)
    if architecture is not None:
        kvs.insert(0, kv_str("general.architecture", architecture))
    kvs.append(kv_str("general.name", "synthetic"))
    tensors = DEFAULT_TENSORS if tensors is None else tensors
    body = b"".join(kvs) + b"".join(tensor_info(*t) for t in tensors)
    head = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    out = head + body
    out += b"\0" * (-len(out) % alignment)
    return out + b"\0" * (DEFAULT_DATA if data_size is None else data_size)


def write(tmp_path: Path, data: bytes, name: str = "model.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def error_of(path: Path, check=check_gguf) -> str:
    with pytest.raises(BenchError) as caught:
        check(path)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(str(path)), text  # names the file
    return text


# ------------------------------------------------------------------------------------------
# check_gguf / read_gguf_header
# ------------------------------------------------------------------------------------------

def test_valid_gguf_passes_and_reports_its_header(tmp_path):
    path = write(tmp_path, gguf_bytes())
    check_gguf(path)
    info = read_gguf_header(path)
    assert (info.version, info.tensor_count, info.kv_count) == (3, 2, 2)
    assert info.architecture == "llama" and info.name == "synthetic"
    assert info.alignment == 32 and info.data_offset % 32 == 0
    assert info.data_end == info.file_size == path.stat().st_size
    assert info.parameters == 8 + 64
    assert info.tensor_types == {"F32": 1, "Q4_0": 1}
    assert info.chat_template is False


def test_version_2_and_custom_alignment_pass(tmp_path):
    aligned = kv("general.alignment", U32, struct.pack("<I", 64))
    path = write(tmp_path, gguf_bytes(version=2, extra_kvs=[aligned], alignment=64,
                                      tensors=[("w", [8], 0, 0), ("q", [32, 2], 2, 64)],
                                      data_size=64 + 36))
    check_gguf(path)
    info = read_gguf_header(path)
    assert info.alignment == 64 and info.data_offset % 64 == 0 and info.version == 2


@pytest.mark.parametrize("content, expected", [
    (b"", "not a GGUF file (only 0 bytes)"),
    (b"hello world, this is text", "it starts with 'hell'"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n", "Git LFS pointer"),
    (b"PK\x03\x04" + b"\0" * 40, "zip archive"),
    (b"ggjt" + b"\0" * 40, "old GGML/GGJT"),
])
def test_not_gguf(tmp_path, content, expected):
    assert expected in error_of(write(tmp_path, content, "x.gguf"))


@pytest.mark.parametrize("version, expected", [
    (1, "version 1 is not supported"), (4, "version 4 is not supported"),
    (0x03000000, "byte-swapped"),
])
def test_unsupported_versions(tmp_path, version, expected):
    assert expected in error_of(write(tmp_path, gguf_bytes(version=version)))


def test_truncated_tensor_data(tmp_path):
    path = write(tmp_path, gguf_bytes()[:-1])
    text = error_of(path)
    assert "truncated" in text and "tensor data" in text


@pytest.mark.parametrize("cut", [6, 20, 40, 90])
def test_truncated_header(tmp_path, cut):
    path = write(tmp_path, gguf_bytes()[:cut])
    assert "truncated" in error_of(path) or "bytes left" in error_of(path)


def test_unknown_architecture_is_refused(tmp_path):
    text = error_of(write(tmp_path, gguf_bytes(architecture="llama9000")))
    assert "model architecture 'llama9000' is not one that llama.cpp" in text
    read_gguf_header(tmp_path / "model.gguf")  # the header itself is fine


def test_missing_or_mistyped_architecture(tmp_path):
    assert "general.architecture is missing" in error_of(
        write(tmp_path, gguf_bytes(architecture=None)))
    wrong = kv("general.architecture", U32, struct.pack("<I", 7))
    assert "not a string" in error_of(
        write(tmp_path, gguf_bytes(architecture=None, extra_kvs=[wrong])))


def test_duplicate_architecture_key(tmp_path):
    again = kv_str("general.architecture", "qwen2")
    assert "duplicate key 'general.architecture'" in error_of(
        write(tmp_path, gguf_bytes(extra_kvs=[again])))


def test_alignment_must_be_u32_power_of_two(tmp_path):
    as_u64 = kv("general.alignment", U64, struct.pack("<Q", 32))
    assert "not uint32" in error_of(write(tmp_path, gguf_bytes(extra_kvs=[as_u64])))
    odd = kv("general.alignment", U32, struct.pack("<I", 24))
    assert "not a power of 2" in error_of(write(tmp_path, gguf_bytes(extra_kvs=[odd])))


def test_all_known_metadata_types_are_skipped(tmp_path):
    extra = [kv("a.u8", U8, b"\x01"), kv("a.f32", F32, struct.pack("<f", 1.5)),
             kv("a.u64", U64, struct.pack("<Q", 9)),
             kv("a.strings", ARRAY, struct.pack("<IQ", STRING, 3) + gstr("x") + gstr("") +
                gstr("yz")),
             kv("a.ints", ARRAY, struct.pack("<IQ", U32, 4) + b"\0" * 16),
             kv_str("tokenizer.chat_template", "{{ messages }}")]
    path = write(tmp_path, gguf_bytes(extra_kvs=extra))
    check_gguf(path)
    assert read_gguf_header(path).chat_template is True


@pytest.mark.parametrize("field", ["n_kv", "n_tensors"])
def test_hostile_counts(tmp_path, field):
    path = write(tmp_path, gguf_bytes(**{field: 2**64 - 1}))
    assert "corrupt or hostile header" in error_of(path)
    path = write(tmp_path, gguf_bytes(**{field: 10_000}))  # under the cap, over the file
    assert "corrupt or hostile header" in error_of(path)


@pytest.mark.parametrize("bad_kv, expected", [
    (struct.pack("<Q", 2**63) + b"key", "truncated"),  # key length
    (kv("a.s", STRING, struct.pack("<Q", 2**62)), "truncated"),  # string value length
    (kv("a.arr", ARRAY, struct.pack("<IQ", STRING, 2**60)), "claims"),  # strings in array
    (kv("a.arr", ARRAY, struct.pack("<IQ", U64, 2**61)), "truncated"),  # fixed-size array
    (kv("a.arr", ARRAY, struct.pack("<IQ", ARRAY, 1)), "array of arrays"),
    (kv("a.x", 99, b""), "unknown value type 99"),
    (kv("a.arr", ARRAY, struct.pack("<IQ", 77, 1)), "unknown element type 77"),
])
def test_hostile_lengths_are_bounded_by_the_file(tmp_path, bad_kv, expected):
    path = write(tmp_path, gguf_bytes(extra_kvs=[bad_kv]))
    assert expected in error_of(path)


@pytest.mark.parametrize("tensors, expected", [
    ([("w", [8, 1, 1, 1, 1], 0, 0)], "5 dimensions"),
    ([("w" * 64, [8], 0, 0)], "name of 64 bytes"),
    ([("w", [2**62, 2**3], 0, 0)], "impossible shape"),
    ([("w", [8], 0, 4)], "not a multiple of the alignment"),
    ([("q", [33], 2, 0)], "not a multiple of its block size 32"),
    ([("w", [8], 0, 0), ("v", [8], 0, 64)], "expected 32"),
    ([], "holds no tensors"),
])
def test_bad_tensor_infos(tmp_path, tensors, expected):
    assert expected in error_of(write(tmp_path, gguf_bytes(tensors=tensors)))


def test_unknown_tensor_type_skips_the_size_check(tmp_path):
    path = write(tmp_path, gguf_bytes(tensors=[("w", [8], 0, 0), ("z", [7], 200, 32)],
                                      data_size=32))
    check_gguf(path)
    info = read_gguf_header(path)
    assert info.data_end is None and info.tensor_types == {"F32": 1, "type200": 1}
    # the tensors whose size is known are still checked
    path = write(tmp_path, gguf_bytes(tensors=[("w", [8], 0, 0), ("z", [7], 200, 32)],
                                      data_size=16))
    assert "tensor 'w' ends at byte" in error_of(path)


def test_a_huge_claimed_string_in_a_big_file_is_skipped_not_read(tmp_path):
    """A 3 GiB string inside a 4 GiB (sparse) file: bounded memory, no read of the string."""
    claimed = 3 << 30
    head = gguf_bytes(extra_kvs=[kv("a.big", STRING, struct.pack("<Q", claimed))])
    path = tmp_path / "big.gguf"
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(4 << 30)
    tracemalloc.start()
    try:
        text = error_of(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "truncated" in text or "offset" in text  # the string swallowed the tensor infos
    assert peak < 8 << 20


def test_folder_and_missing_file(tmp_path):
    folder = tmp_path / "dir.gguf"
    folder.mkdir()
    assert "is a folder" in error_of(folder)
    assert "model file not found" in error_of(tmp_path / "nope.gguf")


def test_known_architectures_cover_the_presets():
    assert len(KNOWN_ARCHITECTURES) == 88
    for preset in MODEL_PRESETS.values():
        assert preset.architecture in KNOWN_ARCHITECTURES


# ------------------------------------------------------------------------------------------
# presets: fake installed distributions
# ------------------------------------------------------------------------------------------

def fake_dist(site: Path, name: str, version: str, files: dict[str, bytes]) -> list[Path]:
    """Install a fake distribution (dist-info with METADATA and RECORD) into ``site``."""
    norm = name.replace("-", "_")
    info = site / f"{norm}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    paths = []
    for rel, data in files.items():
        target = site / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        paths.append(target)
    (info / "RECORD").write_text("".join(f"{rel},,\n" for rel in files)
                                 + f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    return paths


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def chunked_preset(site: Path, model: bytes, *, n: int = 3, name: str = "fake-chunks",
                   install: bool = True, **overrides) -> tuple[ModelPreset, list[Path]]:
    step = -(-len(model) // n)
    chunks = [model[i:i + step] for i in range(0, len(model), step)]
    files, paths = [], []
    for index, chunk in enumerate(chunks):
        dist = f"{name}-part{index + 1}"
        rel = f"{dist.replace('-', '_')}/data/part{index}.bin"
        if install:
            paths += fake_dist(site, dist, "1.0", {rel: chunk})
        files.append(PackageFile(dist, "1.0", rel, sha(chunk), len(chunk)))
    fields = dict(name=name, title="Fake", extra="fake", files=tuple(files), sha256=sha(model),
                  size=len(model), file_name="fake.gguf", architecture="llama", parameters=72,
                  quantisation="F32", license="none", source="tests")
    fields.update(overrides)
    return ModelPreset(**fields), paths


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_chunked_preset_is_assembled_verified_and_reused(site, tmp_path):
    model = gguf_bytes()
    preset, chunks = chunked_preset(site, model)
    cache = tmp_path / "cache"
    got = resolve_model("fake-chunks", None, presets={preset.name: preset}, cache_dir=cache)
    assert got.path == cache / "fake.gguf" and got.path.read_bytes() == model
    assert (got.preset, got.verified, got.source) == ("fake-chunks", True, "--model")
    assert oct(got.path.stat().st_mode & 0o777) == "0o644"
    assert leftovers(cache) == ["fake-chunks." + preset.sha256[:16] + ".verified.json",
                                "fake.gguf"]

    # unchanged sizes and mtimes: reused from the sidecar, the chunks are not read again
    stat = chunks[0].stat()
    chunks[0].write_bytes(b"\xff" * stat.st_size)
    os.utime(chunks[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = resolve_model("fake-chunks", None, presets={preset.name: preset}, cache_dir=cache)
    assert again.path == got.path and again.path.read_bytes() == model

    # the assembled file changed (same size, new mtime): verified again, rebuilt from the
    # chunks, whose tampered first chunk is now caught
    got.path.write_bytes(b"\0" * len(model))
    with pytest.raises(BenchError) as caught:
        resolve_model("fake-chunks", None, presets={preset.name: preset}, cache_dir=cache)
    text = str(caught.value)
    assert text.startswith(str(chunks[0])) and preset.files[0].sha256 in text
    assert sha(b"\xff" * stat.st_size) in text and "\n" not in text
    assert not [n for n in leftovers(cache) if n.endswith(".partial")]


def test_existing_assembled_file_with_new_chunk_mtimes_is_rehashed_not_rebuilt(site, tmp_path):
    model = gguf_bytes()
    preset, chunks = chunked_preset(site, model)
    cache = tmp_path / "cache"
    first = resolve_model(preset.name, None, presets={preset.name: preset}, cache_dir=cache)
    mtime = first.path.stat().st_mtime_ns
    os.utime(chunks[1], ns=(1, 1))  # e.g. a reinstall of the package
    again = resolve_model(preset.name, None, presets={preset.name: preset}, cache_dir=cache)
    assert again.verified and again.path.stat().st_mtime_ns == mtime


def test_chunk_hash_mismatch_leaves_nothing(site, tmp_path):
    model = gguf_bytes()
    preset, chunks = chunked_preset(site, model)
    chunks[1].write_bytes(b"x" * chunks[1].stat().st_size)
    cache = tmp_path / "cache"
    with pytest.raises(BenchError) as caught:
        resolve_model(preset.name, None, presets={preset.name: preset}, cache_dir=cache)
    text = str(caught.value)
    assert text.startswith(str(chunks[1])) and "SHA-256" in text
    assert preset.files[1].sha256 in text and sha(chunks[1].read_bytes()) in text
    assert leftovers(cache) == []  # no partial file, no target, no sidecar


def test_chunk_size_mismatch_is_caught_before_reading(site, tmp_path):
    preset, chunks = chunked_preset(site, gguf_bytes())
    chunks[2].write_bytes(chunks[2].read_bytes() + b"!")
    with pytest.raises(BenchError, match="bytes, expected"):
        resolve_model(preset.name, None, presets={preset.name: preset},
                      cache_dir=tmp_path / "cache")


def test_assembled_hash_mismatch_is_not_kept(site, tmp_path):
    model = gguf_bytes()
    wrong = "0" * 64
    preset, _ = chunked_preset(site, model, sha256=wrong)
    cache = tmp_path / "cache"
    with pytest.raises(BenchError) as caught:
        resolve_model(preset.name, None, presets={preset.name: preset}, cache_dir=cache)
    text = str(caught.value)
    assert text.startswith(str(cache / "fake.gguf"))
    assert wrong in text and sha(model) in text and "not kept" in text
    assert leftovers(cache) == []


def test_failed_rebuild_keeps_the_previous_file_whole(site, tmp_path):
    """os.replace only after verification: a failed rebuild never leaves a half file."""
    model = gguf_bytes()
    preset, chunks = chunked_preset(site, model)
    cache = tmp_path / "cache"
    cache.mkdir()
    old = b"previous" * 10
    (cache / "fake.gguf").write_bytes(old)  # a stale file of another size
    chunks[0].write_bytes(b"y" * chunks[0].stat().st_size)
    with pytest.raises(BenchError):
        resolve_model(preset.name, None, presets={preset.name: preset}, cache_dir=cache)
    assert (cache / "fake.gguf").read_bytes() == old
    assert leftovers(cache) == ["fake.gguf"]


def test_unwritable_cache_is_one_line(site, tmp_path):
    preset, _ = chunked_preset(site, gguf_bytes())
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(BenchError, match="cannot write the model cache"):
        resolve_model(preset.name, None, presets={preset.name: preset}, cache_dir=blocker)


def test_missing_package_names_the_install_command(site, tmp_path):
    preset, _ = chunked_preset(site, gguf_bytes(), name="absent-model", install=False)
    with pytest.raises(BenchError) as caught:
        resolve_model("absent-model", None, presets={preset.name: preset}, cache_dir=tmp_path)
    text = str(caught.value)
    assert text == (f"model 'absent-model' is not installed (absent-model-part1 is missing): "
                    f"run pip install -c {CONSTRAINTS_FILE} -e '.[fake]'")


def test_other_version_installed(site, tmp_path):
    fake_dist(site, "old-model-part1", "0.9", {"old_model_part1/data/part0.bin": b"x"})
    preset = ModelPreset(
        name="old-model", title="Old", extra="old",
        files=(PackageFile("old-model-part1", "1.0", "old_model_part1/data/part0.bin",
                           sha(b"x"), 1),),
        sha256=sha(b"x"), size=1, file_name="old.gguf", architecture="llama", parameters=1,
        quantisation="F32", license="none", source="tests")
    with pytest.raises(BenchError, match=r"needs old-model-part1==1.0, found old-model-part1 "
                                         r"0.9: run pip install -c .* -e '.\[old\]'"):
        resolve_model("old-model", None, presets={preset.name: preset}, cache_dir=tmp_path)


def test_single_file_preset_is_verified_in_place(site, tmp_path):
    model = gguf_bytes()
    path, = fake_dist(site, "one-file", "2.0", {"one_file/model.gguf": model})
    preset = ModelPreset(
        name="one", title="One", extra="one",
        files=(PackageFile("one-file", "2.0", "one_file/model.gguf", sha(model), len(model)),),
        sha256=sha(model), size=len(model), file_name="model.gguf", architecture="llama",
        parameters=72, quantisation="F32", license="none", source="tests")
    cache = tmp_path / "cache"
    got = resolve_model("one", None, presets={"one": preset}, cache_dir=cache)
    assert got.path == path and got.verified and leftovers(cache) == [
        "one." + preset.sha256[:16] + ".verified.json"]
    bad = bytearray(model)
    bad[-1] ^= 1
    path.write_bytes(bytes(bad))
    with pytest.raises(BenchError) as caught:
        resolve_model("one", None, presets={"one": preset}, cache_dir=cache)
    text = str(caught.value)
    assert text.startswith(str(path)) and sha(model) in text and sha(bytes(bad)) in text


def test_unknown_preset_name(tmp_path):
    with pytest.raises(BenchError, match="unknown model 'gpt-5' \\(known: gemma3-270m, "
                                         "qwen2.5-coder-0.5b, smollm2-135m"):
        resolve_model("gpt-5", None, cache_dir=tmp_path)


def test_model_path_wins_over_the_preset_and_env_over_the_default(tmp_path, monkeypatch):
    path = write(tmp_path, gguf_bytes())
    got = resolve_model("no-such-preset", str(path), cache_dir=tmp_path)
    assert (got.path, got.preset, got.verified, got.source) == (path, None, False,
                                                                "--model-path")
    monkeypatch.setenv(MODEL_ENV, str(path))
    got = resolve_model(None, None, cache_dir=tmp_path)
    assert (got.path, got.source) == (path, MODEL_ENV)
    with pytest.raises(BenchError, match="unknown model 'no-such-preset'"):
        resolve_model("no-such-preset", None, cache_dir=tmp_path)  # an explicit --model wins


def test_model_path_is_checked(tmp_path):
    missing = tmp_path / "missing.gguf"
    with pytest.raises(BenchError, match="missing.gguf: model file not found .from "
                                         "--model-path"):
        resolve_model(None, str(missing))
    text_file = write(tmp_path, b"just text, not a model", "notes.gguf")
    with pytest.raises(BenchError, match="not a GGUF file"):
        resolve_model(None, str(text_file))


# ------------------------------------------------------------------------------------------
# the real presets
# ------------------------------------------------------------------------------------------

def test_preset_tables_are_consistent():
    assert DEFAULT_MODEL in MODEL_PRESETS
    for preset in MODEL_PRESETS.values():
        assert re.fullmatch(r"[0-9a-f]{64}", preset.sha256)
        assert all(re.fullmatch(r"[0-9a-f]{64}", f.sha256) for f in preset.files)
        assert sum(f.size for f in preset.files) == preset.size
        if not preset.chunked:
            assert preset.files[0].sha256 == preset.sha256 and not preset.chunk_sha256s
    qwen = MODEL_PRESETS["qwen2.5-coder-0.5b"]
    assert qwen.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert len(qwen.chunk_sha256s) == 6


def test_extras_pin_exactly_the_preset_packages():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for preset in MODEL_PRESETS.values():
        assert set(preset.packages) <= set(extras[preset.extra]), preset.name


def test_qwen_requirements_file_pins_the_wheel_hashes():
    text = (REPO / "requirements" / "qwen-model.txt").read_text()
    pinned = dict(re.findall(r"^(\S+==\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})$", text, re.M))
    qwen = MODEL_PRESETS["qwen2.5-coder-0.5b"]
    assert pinned == {f.requirement: f.wheel_sha256 for f in qwen.files}


def test_model_env_matches_the_local_provider():
    from bench.providers import local
    assert MODEL_ENV == local.MODEL_ENV


def _installed(preset: ModelPreset) -> bool:
    for item in preset.files:
        try:
            if importlib.metadata.version(item.distribution) != item.version:
                return False
        except importlib.metadata.PackageNotFoundError:
            return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODEL_PRESETS))
def test_installed_presets_resolve_to_their_pinned_file(name, tmp_path):
    """Real packages only (skipped where not installed): smollm2 comes with the `local` extra."""
    preset = MODEL_PRESETS[name]
    if not _installed(preset):
        pytest.skip(f"{', '.join(preset.packages)} not installed ({preset.install_command})")
    got = resolve_model(name, None, cache_dir=tmp_path)
    digest = hashlib.sha256()
    with got.path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == preset.sha256 and got.verified
    info = read_gguf_header(got.path)
    assert info.architecture == preset.architecture
    assert info.parameters == preset.parameters
    assert info.data_end == info.file_size == preset.size  # the type-size table is exact
    assert info.chat_template is preset.chat_template


def test_models_cache_dir_is_one_per_user_not_per_project(monkeypatch, tmp_path):
    from bench.providers.local.models import models_cache_dir
    monkeypatch.delenv("BENCH_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    first = models_cache_dir()
    # neither the project folder nor the project's derived-data cache moves it
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "p1"))
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "c"))
    assert models_cache_dir() == first
    if sys.platform.startswith("linux"):
        assert first == tmp_path / "xdg" / "bench" / "models"
    monkeypatch.setenv("BENCH_MODEL_CACHE", str(tmp_path / "m"))
    assert models_cache_dir() == tmp_path / "m"


def test_user_cache_root_follows_each_system_convention(tmp_path):
    from bench.providers.local.models import user_cache_root
    assert user_cache_root({"XDG_CACHE_HOME": "/x"}, "linux") == Path("/x/bench")
    # a relative XDG_CACHE_HOME is invalid per the XDG spec and ignored
    assert user_cache_root({"XDG_CACHE_HOME": "rel"}, "linux") == \
        Path.home() / ".cache" / "bench"
    assert user_cache_root({}, "darwin") == Path.home() / "Library" / "Caches" / "bench"
    assert user_cache_root({"LOCALAPPDATA": "C:/L"}, "win32") == Path("C:/L/bench/Cache")


def test_a_relative_model_cache_is_refused(monkeypatch):
    from bench.providers.local.models import models_cache_dir
    monkeypatch.setenv("BENCH_MODEL_CACHE", "models")
    with pytest.raises(BenchError, match="BENCH_MODEL_CACHE must be an absolute folder"):
        models_cache_dir()


@pytest.mark.parametrize("name, path, expected", [
    ("", None, "--model is empty"), ("  ", None, "--model is empty"),
    (None, "", "--model-path is empty")])
def test_an_empty_model_name_or_path_is_refused_not_the_default(tmp_path, name, path, expected):
    with pytest.raises(BenchError, match=expected):
        resolve_model(name, path, cache_dir=tmp_path)


def test_doctor_refuses_both_model_and_model_path(run_bench, tmp_path):
    result = run_bench("doctor", "--model", "smollm2-135m", "--model-path", str(tmp_path / "x"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == \
        "error: --model and --model-path both name the model: give one"


def test_an_existing_path_that_is_not_a_file_is_named_as_such(tmp_path):
    with pytest.raises(BenchError, match="not a regular file") as caught:
        resolve_model(None, str(tmp_path), cache_dir=tmp_path)
    assert str(caught.value).count(str(tmp_path)) == 1
    with pytest.raises(BenchError, match="not a regular file"):
        resolve_model(None, "/dev/zero", cache_dir=tmp_path)


def test_an_empty_model_environment_variable_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_LOCAL_MODEL", " ")
    with pytest.raises(BenchError, match="set but empty"):
        resolve_model(None, None, cache_dir=tmp_path)
