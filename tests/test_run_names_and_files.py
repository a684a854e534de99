"""Names that choose paths (run ids, dataset names) and run files the file system refuses:
each a one-line error naming the path and what to do, exit 2, and a truthful manifest."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bench.datasets import load_dataset
from bench.errors import BenchError
from bench.runstore import RESERVED_NAMES, RunStore


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
    source = Path(__file__).resolve().parent.parent / "datasets" / "ecommerce" / "cases.jsonl"
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
