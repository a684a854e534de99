"""Run directories: atomic manifests, fsynced rows, half-written rows never read as complete."""

import json

import pytest

from bench.errors import BenchError
from bench.runstore import RunStore


def test_rows_skip_and_repair_cuts_half_written_line(tmp_path):
    store = RunStore(tmp_path, "r1")
    store.append({"key": "a", "n": 1})
    store.append({"key": "b", "text": "上海 🚚"})
    with store.results_path.open("ab") as handle:
        handle.write(b'{"key": "c", "n":')  # a crash mid-write
    assert [r["key"] for r in store.rows()] == ["a", "b"]
    removed = store.repair()
    assert removed == len(b'{"key": "c", "n":')
    assert store.results_path.read_bytes().endswith(b"\n")
    store.append({"key": "c"})
    assert [r["key"] for r in store.rows()] == ["a", "b", "c"]


def test_corrupt_complete_line_is_a_clear_error(tmp_path):
    store = RunStore(tmp_path, "r2")
    store.append({"key": "a"})
    with store.results_path.open("a") as handle:
        handle.write("not json\n")
    with pytest.raises(BenchError) as info:
        list(store.rows())
    assert info.value.line == 2


def test_manifest_is_replaced_atomically(tmp_path):
    store = RunStore(tmp_path, "r3")
    store.write_manifest({"status": "running"})
    store.write_manifest({"status": "complete"})
    assert json.loads(store.manifest_path.read_text())["status"] == "complete"
    assert [p.name for p in store.dir.iterdir()] == ["manifest.json"]  # no temp files left


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", "..", ".hidden"])
def test_run_id_cannot_choose_a_path(tmp_path, bad):
    with pytest.raises(BenchError, match="invalid run id"):
        RunStore(tmp_path, bad)
