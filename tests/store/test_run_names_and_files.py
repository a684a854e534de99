"""Names that choose paths (run ids, dataset names) and run files the file system refuses:
each a one-line error naming the path and what to do, exit 2, and a truthful manifest."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from bench.datasets import load_dataset
from bench.errors import BenchError
from bench.results import Manifest, ManifestDataset
from bench.store import RESERVED_NAMES, RunStore


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line of a failed ``bench`` (exit 2, no traceback)."""
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and result.stderr.strip().endswith(errors[0]), result.stderr
    return errors[0]


# ---- reserved run ids ------------------------------------------------------------------

@pytest.mark.parametrize("run_id", [*RESERVED_NAMES, "Cache", "RUNS"])
def test_reserved_run_ids_are_refused(tmp_path, run_id):
    """`runs` and `cache` were accepted: a run's report folder reports/<id>/ then lands in
    bench's own reports/runs/ or reports/cache/ (the response cache)."""
    with pytest.raises(BenchError, match=f"^invalid run id '{run_id}': bench uses reports/"
                                         f"{run_id.casefold()} itself"):
        RunStore(tmp_path, run_id)
    assert not (tmp_path / run_id).exists()


@pytest.mark.parametrize("run_id", [".cache", ".merge-1234"])
def test_run_ids_starting_with_a_dot_are_refused(tmp_path, run_id):
    with pytest.raises(BenchError, match="starting with a letter or digit"):
        RunStore(tmp_path, run_id)


def test_names_like_reserved_ones_stay_valid(tmp_path):
    for run_id in ("cache2", "my-runs", "runs.1", "gate-junit"):
        assert RunStore(tmp_path, run_id).run_id == run_id


@pytest.mark.slow
def test_bench_run_merge_and_report_refuse_reserved_names(run_bench, project):
    line = one_error_line(run_bench("run", "--provider", "oracle", "--limit", "1",
                                    "--run-id", "cache"))
    assert "invalid run id 'cache': bench uses reports/cache itself" in line
    assert not (project / "reports" / "runs" / "cache").exists()
    # checked before the shards are read: no shard exists here
    line = one_error_line(run_bench("merge", "s1", "s2", "--run-id", "runs"))
    assert "invalid run id 'runs'" in line
    made = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                     "--no-execute", "--run-id", "ok")
    assert made.returncode == 0, made.stderr
    line = one_error_line(run_bench("report", "ok", "--name", "Cache"))
    assert "invalid report name 'Cache'" in line
    assert not (project / "reports" / "Cache").exists()


# ---- dataset names ---------------------------------------------------------------------

def write_dataset(folder: Path) -> Path:
    """A one-case dataset file in ``folder``; returns it."""
    folder.mkdir(parents=True)
    source = Path(__file__).resolve().parents[2] / "datasets" / "ecommerce" / "cases.jsonl"
    (folder / "cases.jsonl").write_text(source.read_text(encoding="utf-8").splitlines()[0]
                                        + "\n", encoding="utf-8")
    return folder / "cases.jsonl"


@pytest.mark.parametrize("name", ["../outside", "inner/../../outside", "nested/set",
                                  "..\\outside", "..", "", "."])
def test_a_dataset_name_that_is_a_path_is_refused(tmp_path, name):
    """`--dataset ../outside` read outside/cases.jsonl beside datasets/."""
    root = tmp_path / "datasets"
    write_dataset(tmp_path / "outside")
    write_dataset(root / "nested" / "set")
    with pytest.raises(BenchError, match=f"^invalid dataset name '{re.escape(name)}': a "
                                         "folder name under datasets/"):
        load_dataset(name, root)


def test_documented_dataset_forms_still_load(tmp_path):
    """A name, and a .jsonl path even through '..' (docs/datasets-and-labels.md)."""
    root = tmp_path / "datasets"
    write_dataset(root / "mine.v2")
    outside = write_dataset(tmp_path / "outside")
    assert load_dataset("mine.v2", root).name == "mine.v2"
    through = root / ".." / "outside" / "cases.jsonl"
    assert load_dataset(str(through), root).path == through
    assert load_dataset(str(outside), root).sha256 == load_dataset(str(through), root).sha256


# ---- file-system errors ------------------------------------------------------------------

@contextlib.contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """Make ``path`` unwritable for every process, root included: the immutable attribute
    (``chattr +i``: no write, no replace, no new entry in a folder) as root, else its write
    permissions removed. Skips where neither works (a file system without attributes)."""
    if os.geteuid() == 0:
        if not shutil.which("chattr"):
            pytest.skip("chattr is not installed")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"no immutable attribute here: {done.stderr.strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)


def interrupted_run(run_bench, project: Path, run_id: str) -> Path:
    """An oracle run of 3 cases stopped after its first row (manifest `interrupted`, as
    Ctrl-C leaves it); returns its folder."""
    made = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "3",
                     "--no-execute", "--run-id", run_id)
    assert made.returncode == 0, made.stderr
    folder = project / "reports" / "runs" / run_id
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(status="interrupted", rows_done=1)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    rows = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "results.jsonl").write_text(rows[0], encoding="utf-8")
    return folder


def status_of(folder: Path) -> str:
    return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["status"]


@pytest.mark.slow
def test_a_dangling_link_as_run_folder_is_named_not_file_exists(run_bench, project):
    """Before: `error: [Errno 17] File exists` for a new run (after its providers started),
    and `no run` for a resume."""
    runs = project / "reports" / "runs"
    runs.mkdir(parents=True)
    (runs / "gone").symlink_to(project / "missing")
    for args in (("run", "--provider", "oracle", "--limit", "1", "--run-id", "gone"),
                 ("run", "--resume", "gone"), ("show", "gone")):
        result = run_bench(*args)
        line = one_error_line(result)
        assert line.startswith(f"error: {runs / 'gone'}: the run folder cannot be made or read"
                               f": this is a symbolic link to '{project / 'missing'}', which "
                               "does not exist; remove the link or create its target"), line
        assert result.stderr.startswith("error: "), result.stderr  # before any provider
    assert not (project / "missing").exists()


def test_a_dangling_link_or_a_file_in_the_run_path_is_named_by_the_store(tmp_path):
    (tmp_path / "gone").symlink_to(tmp_path / "missing")
    with pytest.raises(BenchError, match="symbolic link") as info:
        with RunStore(tmp_path, "gone").writing():
            pass
    assert info.value.file == str(tmp_path / "gone")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    for act in (lambda s: s.check_dir(), lambda s: s.writer()):
        with pytest.raises(BenchError, match="this is a file, not a folder") as info:
            act(RunStore(tmp_path / "file", "r1"))  # reports/runs itself is a file
        assert info.value.file == str(tmp_path / "file")


def manifest(run_id: str, status: str) -> Manifest:
    """A manifest of an empty run (all the store needs to write one)."""
    return Manifest(run_id=run_id, status=status, config={}, dataset=ManifestDataset(),
                    variants=[], rows_planned=0)


@pytest.mark.parametrize("blocked", ["file", "folder"])
def test_a_manifest_that_cannot_be_replaced_is_named_not_its_temp_file(tmp_path, blocked):
    """A folder in the manifest's place, or a run folder that takes no new file: the error
    named `.manifest.json.<random>.tmp`, a file nobody ever sees."""
    store = RunStore(tmp_path, "r1")
    store.write_manifest(manifest("r1", "interrupted"))
    if blocked == "file":
        store.manifest_path.unlink()
        store.manifest_path.mkdir()
        context: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    else:
        context = unwritable(store.dir)
    with context, pytest.raises(OSError) as info:
        store.write_manifest(manifest("r1", "running"))
    assert info.value.filename == str(store.manifest_path)
    assert [p.name for p in store.dir.iterdir()] == ["manifest.json"]  # no temp file left


@pytest.mark.slow
@pytest.mark.parametrize("blocked", ["manifest.json", "."])
def test_a_resume_whose_manifest_cannot_be_written_says_so_and_keeps_it_true(
        run_bench, project, blocked):
    """An immutable manifest, or a run folder that takes no new file (where the manifest's
    temp file goes). Before: the error named the temp file and said nothing to do."""
    folder = interrupted_run(run_bench, project, "ro")
    with unwritable(folder / blocked):
        line = one_error_line(run_bench("run", "--resume", "ro"))
    assert f"error: {folder / 'manifest.json'}: " in line and ".tmp" not in line
    assert "make it and its folder writable" in line and "bench run --resume ro" in line
    assert status_of(folder) == "interrupted"  # it could not change: still true
    assert len((folder / "results.jsonl").read_text(encoding="utf-8").splitlines()) == 1


@pytest.mark.slow
def test_a_results_file_that_cannot_be_appended_fails_the_run_not_leaves_it_running(
        run_bench, project):
    """Before: the manifest said `running` (no process ran) and the error said nothing to
    do. Now `failed`, the error names results.jsonl, and the fixed run resumes."""
    folder = interrupted_run(run_bench, project, "ro")
    with unwritable(folder / "results.jsonl"):
        line = one_error_line(run_bench("run", "--resume", "ro"))
    assert line.startswith(f"error: {folder / 'results.jsonl'}: ")
    assert "finished rows are kept: make it and its folder writable" in line
    assert line.endswith("then: bench run --resume ro")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "failed" and manifest["error"] == line[len("error: "):]
    resumed = run_bench("run", "--resume", "ro")
    assert resumed.returncode == 0, resumed.stderr
    assert status_of(folder) == "complete"
    assert len((folder / "results.jsonl").read_text(encoding="utf-8").splitlines()) == 3


@pytest.mark.slow
def test_a_half_written_row_that_cannot_be_cut_is_named_with_what_to_do(run_bench, project):
    """A resume cuts a half-written last row off results.jsonl; on an immutable file that
    said only 'error: .../results.jsonl: Operation not permitted'."""
    folder = interrupted_run(run_bench, project, "ro")
    with (folder / "results.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"key": "half-writ')
    with unwritable(folder / "results.jsonl"):
        line = one_error_line(run_bench("run", "--resume", "ro"))
    assert line.startswith(f"error: {folder / 'results.jsonl'}: ")
    assert "finished rows are kept: make it and its folder writable" in line
    assert line.endswith("then: bench run --resume ro")
    resumed = run_bench("run", "--resume", "ro")
    assert resumed.returncode == 0, resumed.stderr
    assert len((folder / "results.jsonl").read_text(encoding="utf-8").splitlines()) == 3
