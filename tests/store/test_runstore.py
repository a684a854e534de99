"""Run directories: atomic manifests, fsynced rows, half-written rows never read as complete."""

import contextlib
import json
import subprocess
import sys

import pytest

from bench.errors import BenchError
from bench.results import Manifest, Row
from bench.store import ROW_FIELDS, RunStore
from tests.stored import row_dicts


def row(key, **extra):
    """A well-formed row (the writers take rows of the contract: bench.results.Row)."""
    typed = {"case_id": "c1", "toolset": "t", "variant": "v", "provider": "p", "trial": 0,
             "lang": "en", "metrics": {}, "usage": {}, "latency_s": 0.0}
    return Row.model_validate({**{field: None for field in ROW_FIELDS}, **typed, "key": key,
                               **extra})


def manifest(run_id, **fields):
    """A manifest of an empty run."""
    return Manifest.model_validate({"run_id": run_id, "status": "running", "config": {},
                                    "dataset": {}, "variants": [], "rows_planned": 0,
                                    **fields})


def test_rows_skip_and_repair_cuts_half_written_line(tmp_path):
    store = RunStore(tmp_path, "r1")
    store.append(row("a", n=1))
    store.append(row("b", text="上海 🚚"))
    with store.results_path.open("ab") as handle:
        handle.write(b'{"key": "c", "n":')  # a crash mid-write
    assert [r["key"] for r in row_dicts(store)] == ["a", "b"]
    removed = store.repair()
    assert removed == len(b'{"key": "c", "n":')
    assert store.results_path.read_bytes().endswith(b"\n")
    store.append(row("c"))
    assert [r["key"] for r in row_dicts(store)] == ["a", "b", "c"]


def test_a_whole_last_row_without_its_newline_is_kept_not_cut(tmp_path):
    # A results.jsonl edited by hand (or a write cut right before its newline) ends in a
    # finished row with no newline; resume used to cut that row off and send it again.
    store = RunStore(tmp_path, "r1")
    store.append(row("a"))
    store.append(row("b"))
    data = store.results_path.read_bytes()
    store.results_path.write_bytes(data.rstrip(b"\n"))
    assert [r["key"] for r in row_dicts(store)] == ["a", "b"]
    assert store.repair() == 0
    assert store.results_path.read_bytes() == data
    store.append(row("c"))
    assert [r["key"] for r in row_dicts(store)] == ["a", "b", "c"]
    # a last line that is JSON but not a whole row is still cut
    with store.results_path.open("ab") as handle:
        handle.write(b'{"key": "d"}')
    assert [r["key"] for r in row_dicts(store)] == ["a", "b", "c"]
    assert store.repair() == len(b'{"key": "d"}')


def test_corrupt_complete_line_is_a_clear_error(tmp_path):
    store = RunStore(tmp_path, "r2")
    store.append(row("a"))
    with store.results_path.open("a") as handle:
        handle.write("not json\n")
    with pytest.raises(BenchError) as info:
        row_dicts(store)
    assert info.value.line == 2


def test_manifest_is_replaced_atomically(tmp_path):
    store = RunStore(tmp_path, "r3")
    store.write_manifest(manifest("r3", status="running"))
    store.write_manifest(manifest("r3", status="complete"))
    assert json.loads(store.manifest_path.read_text())["status"] == "complete"
    assert [p.name for p in store.dir.iterdir()] == ["manifest.json"]  # no temp files left
    assert store.manifest_path.stat().st_mode & 0o777 == 0o644


def test_atomic_write_keeps_a_private_files_mode(tmp_path):
    from bench.importers.common import write_file
    from bench.store.files import atomic_write_text
    cases = tmp_path / "cases.jsonl"
    cases.write_text("old\n")
    cases.chmod(0o600)
    atomic_write_text(cases, "new\n")
    assert cases.read_text() == "new\n" and cases.stat().st_mode & 0o777 == 0o600
    write_file(cases, "newer\n", force=True)  # the importers' writer is the same one
    assert cases.read_text() == "newer\n" and cases.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "fresh.json"
    atomic_write_text(fresh, "{}")
    assert fresh.stat().st_mode & 0o777 == 0o644


def test_atomic_write_writes_through_a_symbolic_link(tmp_path):
    from bench.importers.common import write_file
    from bench.store.files import atomic_write_text
    shared = tmp_path / "shared"
    shared.mkdir()
    real = shared / "cases.jsonl"
    real.write_text("old\n")
    link = tmp_path / "cases.jsonl"
    link.symlink_to(real)
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    write_file(link, "newer\n", force=True)
    assert link.is_symlink() and real.read_text() == "newer\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.jsonl", "shared"]
    assert [p.name for p in shared.iterdir()] == ["cases.jsonl"]  # no temporary file left


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", "..", ".hidden"])
def test_run_id_cannot_choose_a_path(tmp_path, bad):
    with pytest.raises(BenchError, match="invalid run id"):
        RunStore(tmp_path, bad)


def test_rows_with_missing_fields_or_wrong_shape_are_named(tmp_path):
    store = RunStore(tmp_path, "r4")
    store.append(row("a"))
    with store.results_path.open("a") as handle:
        handle.write('[1, 2]\n')
    with pytest.raises(BenchError, match="not a JSON object") as info:
        row_dicts(store)
    assert info.value.line == 2
    store.results_path.write_text('{"key": "a"}\n')
    with pytest.raises(BenchError) as info:
        row_dicts(store)
    assert info.value.field == "case_id"


def test_lone_surrogate_from_a_model_is_stored_escaped(tmp_path):
    store = RunStore(tmp_path, "r5")
    store.append(row("a", raw='{"city": "\ud800"}'))
    (stored,) = row_dicts(store)
    assert stored["raw"] == '{"city": "\ud800"}'
    store.results_path.read_bytes().decode("utf-8")  # the file stays valid UTF-8


def test_non_finite_numbers_from_a_model_are_stored_as_null(tmp_path):
    """NaN and infinities (a model's arguments, a provider's odd usage) would make the line
    invalid JSON for strict readers; they are stored as null, everything else unchanged."""
    store = RunStore(tmp_path, "r6")
    writer = store.writer()
    writer.append(row("a", parsed={"calls": [{"arguments": {"x": float("inf"), "y": 1.5,
                                                            "z": float("nan"), "n": 2}}]}))
    writer.close()
    line = store.results_path.read_text(encoding="utf-8")
    json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line!r}"))
    (stored,) = row_dicts(store)
    assert stored["parsed"]["calls"][0]["arguments"] == {"x": None, "y": 1.5, "z": None, "n": 2}


def test_manifest_missing_fields_is_a_clear_error(tmp_path):
    store = RunStore(tmp_path, "r6")
    store.make_dir()  # the store writes manifests of the contract: this one is written as text
    store.manifest_path.write_text(json.dumps({"run_id": "r6"}))
    with pytest.raises(BenchError) as info:
        store.load_manifest().to_json_dict()
    assert info.value.field == "status"
    store.manifest_path.write_text("[1]")
    with pytest.raises(BenchError, match="must be a JSON object"):
        store.load_manifest().to_json_dict()


def test_run_id_with_trailing_newline_is_rejected(tmp_path):
    with pytest.raises(BenchError, match="invalid run id"):
        RunStore(tmp_path, "fake1\n")


@contextlib.contextmanager
def locked_by_another_process(root, run_id):
    """Hold run ``run_id``'s write lock from a second Python process for the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path\n"
         "from bench.store import RunStore\n"
         f"with RunStore(Path({str(root)!r}), {run_id!r}).writing():\n"
         "    print('locked', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_run_being_written_cannot_be_written_by_a_second_process(tmp_path):
    """Two `bench run --resume` of one run would both send the pending requests and write
    every row twice: the second gets a one-line error naming the run."""
    store = RunStore(tmp_path, "busy")
    with locked_by_another_process(tmp_path, "busy"):
        with pytest.raises(BenchError, match="run 'busy' is being written by another bench"):
            with store.writing():
                pass
        for entry in store.dir.iterdir():  # no lock file whose removal would free the run
            entry.unlink()
        with pytest.raises(BenchError, match="run 'busy' is being written by another bench"):
            with store.writing():
                pass
    with store.writing():  # released when the other process ends
        store.append(row("a"))
    assert [r["key"] for r in row_dicts(store)] == ["a"]


@pytest.mark.slow
def test_resuming_a_run_being_written_stops_before_reading_or_cutting_its_rows(run_bench):
    """The second `bench run --resume` of a run must not cut the other process's
    half-written last row (repair) nor print a progress line or start a provider first."""
    from bench.paths import runs_dir
    from tests.report_runs import expected_answer, make_run

    make_run("busy", expected_answer, variants=("l3",), limit=2)
    store = RunStore(runs_dir(), "busy")
    store.write_manifest(store.load_manifest().model_copy(update={"status": "interrupted"}))
    half = b'{"key": "half-writ'
    with store.results_path.open("ab") as handle:
        handle.write(half)
    with locked_by_another_process(runs_dir(), "busy"):
        result = run_bench("run", "--resume", "busy", timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "run 'busy' is being written by another bench process" in lines[0]
    assert store.results_path.read_bytes().endswith(half)


@pytest.mark.parametrize("line, message", [
    (b"[" * 100_000 + b"\n", "nested too deeply"),
    (b'{"key": "a", "raw": "\xed\xa0\x80"}\n', "not UTF-8"),
])
def test_rows_too_deep_or_with_encoded_surrogates_are_named(tmp_path, line, message):
    store = RunStore(tmp_path, "r7")
    store.dir.mkdir(parents=True)
    store.results_path.write_bytes(line)
    with pytest.raises(BenchError, match=message) as error:
        row_dicts(store)
    assert ":1" in str(error.value)


def test_integers_past_64_bits_stay_exact(tmp_path):
    store = RunStore(tmp_path, "r8")
    store.append(row("a", parsed={"calls": [{"arguments": {"n": 2**70 + 1, "m": -(2**65)}}]}))
    (stored,) = row_dicts(store)
    assert stored["parsed"]["calls"][0]["arguments"] == {"n": 2**70 + 1, "m": -(2**65)}


def test_row_writer_fsyncs_in_the_background_and_on_close(tmp_path, monkeypatch):
    import os
    import threading
    import time

    import bench.store.writer as runstore
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(runstore.os, "fsync", lambda fd: (
        synced.append(threading.current_thread().name), real_fsync(fd)))
    store = RunStore(tmp_path, "r9")
    writer = store.writer(sync_interval_s=0.01)
    writer.append(row("a"))
    deadline = time.monotonic() + 5
    while not synced and time.monotonic() < deadline:
        time.sleep(0.005)
    assert synced and synced[0] == "bench-rows-fsync"  # not the caller's thread
    writer.append(row("b"))
    writer.close()
    assert synced[-1] == threading.current_thread().name  # close syncs what is left
    assert [r["key"] for r in row_dicts(store)] == ["a", "b"]
    assert not any(t.name == "bench-rows-fsync" for t in threading.enumerate())


def test_a_failed_background_fsync_is_raised_to_the_writer(tmp_path, monkeypatch):
    import errno
    import time

    import bench.store.writer as runstore

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(runstore.os, "fsync", full)
    writer = RunStore(tmp_path, "r10").writer(sync_interval_s=0.01)
    writer.append(row("a"))
    deadline = time.monotonic() + 5
    while writer._error is None and time.monotonic() < deadline:
        time.sleep(0.005)
    with pytest.raises(OSError, match="No space"):
        writer.append(row("b"))
    with pytest.raises(OSError, match="No space"):
        writer.close()


def test_a_row_nested_past_any_parser_is_written_with_the_deep_part_dropped(tmp_path):
    from bench.jsonl import TOO_DEEP
    raw: dict = {}
    inner = raw
    for _ in range(1200):  # past orjson's 254 levels and json's recursion limit
        inner["a"] = {}
        inner = inner["a"]
    store = RunStore(tmp_path, "r11")
    writer = store.writer()
    writer.append(row("a", response={"raw": raw}))
    writer.close()
    (stored,) = row_dicts(store)
    depth, value = 0, stored["response"]["raw"]
    while isinstance(value, dict):
        value, depth = value["a"], depth + 1
    assert value == TOO_DEEP and 150 < depth < 260


# A run whose process dies mid-run (SIGKILL: no handler, no final manifest): two rows are
# written, the third request kills the process.
CRASHING_RUN = """
import os, signal, time
from bench.paths import runs_dir
from bench.runner import RunConfig, Runner
from bench.runner.core import _default_factory
asked, rows = [], runs_dir() / "crash" / "results.jsonl"
def factory(provider_id, config):
    provider = _default_factory(provider_id, config)
    complete = provider.complete
    async def complete_or_die(*args, **kwargs):
        asked.append(1)
        if len(asked) == 3:  # once the main thread has written the first two rows
            while rows.read_bytes().count(b"\\n") < 2:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
        return await complete(*args, **kwargs)
    provider.complete = complete_or_die
    return provider
config = RunConfig(variants=["l3"], providers=["replay:rec"], limit=5, concurrency=1,
                   execute=False)
Runner(config, run_id="crash", command=["bench", "run"], provider_factory=factory).run()
"""


@pytest.mark.slow
def test_a_crashed_run_shows_crashed_and_resumes(run_bench, project):
    """A run whose process died stays `running` in its manifest: `bench show` and `bench
    report` call it crashed (no process holds its lock), `running` while one does, the
    manifest is not rewritten by them, and `bench run --resume` finishes it."""
    import os
    from bench.paths import runs_dir
    from conftest import REPO
    from tests.report_runs import expected_answer, make_run

    make_run("rec", expected_answer, variants=("l3",), limit=5, first=False)
    died = subprocess.run([sys.executable, "-c", CRASHING_RUN], cwd=project, timeout=300,
                          env={**os.environ, "BENCH_HOME": str(project), "PYTHONPATH": str(REPO)})
    assert died.returncode == -9
    store = RunStore(runs_dir(), "crash")
    assert store.load_manifest().to_json_dict()["status"] == "running"
    assert len(row_dicts(store)) == 2

    shown = run_bench("show", "crash")
    assert shown.returncode == 0, shown.stderr
    assert "status: crashed, rows 2/5; finish with: bench run --resume crash" in shown.stdout
    summary = run_bench("report", "crash", "-f", "md", "-o", "-")
    assert summary.returncode == 0, summary.stderr
    assert "`crash` (crashed," in summary.stdout
    with locked_by_another_process(runs_dir(), "crash"):
        assert "status: running, rows 2/5" in run_bench("show", "crash").stdout
    assert store.load_manifest().to_json_dict()["status"] == "running"  # shown, never written by readers

    resumed = run_bench("run", "--resume", "crash")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 of 5 rows already done" in resumed.stderr
    assert store.load_manifest().to_json_dict()["status"] == "complete"
    assert len(row_dicts(store)) == 5
    assert "status: complete, rows 5/5" in run_bench("show", "crash").stdout


def keyed(case_id, **extra):
    """A well-formed row of case ``case_id`` whose key matches its fields."""
    return row(f"{case_id}|v|p|0", case_id=case_id, **extra)


def test_read_rows_counts_the_first_copy_of_a_key_and_names_differing_copies(tmp_path):
    # 50 copies of one key with other metrics were dropped without a word
    store = RunStore(tmp_path, "r")
    store.append(keyed("c1", latency_s=1.0))
    store.append(keyed("c2"))
    for copy in range(50):
        store.append(keyed("c1", latency_s=2.0 + copy))
    store.append(keyed("c2"))  # identical: dropped quietly, counted
    store.append(keyed("c2"))
    read = store.read_rows()
    assert [(r.key, r.latency_s) for r in read.rows] == [("c1|v|p|0", 1.0), ("c2|v|p|0", 0.0)]
    assert read.conflicts == [("c1|v|p|0", [1, *range(3, 53)])]
    assert read.identical_copies == 2
    path = store.results_path
    assert read.report() == [
        f"warning: {path}: lines 1, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 41 more hold row "
        "'c1|v|p|0' with different content; the first (line 1) is counted",
        f"note: {path}: 2 identical copies of rows dropped (each key counts once)"]
    # the readers' view: the resume too keeps the first (a key in the file is done)
    assert [r.latency_s for r in store.load_rows(plan=lambda r: None, warn=[].append)] == \
        [1.0, 0.0]


def test_read_rows_leaves_out_rows_outside_the_plan_and_reports_a_cut_last_line(tmp_path):
    store = RunStore(tmp_path, "r")
    store.append(keyed("c1"))
    store.append(keyed("c9"))
    store.append(keyed("c2"))
    with store.results_path.open("ab") as handle:
        handle.write(json.dumps(keyed("c3").to_json_dict()).encode()[:40])  # cut mid-way
    read = store.read_rows(plan=lambda r: None if r.case_id != "c9" else "not planned")
    assert [r.case_id for r in read.rows] == ["c1", "c2"]
    assert read.outside == [(2, "c9|v|p|0", "not planned")] and read.cut_line == 4
    path = store.results_path
    assert read.report() == [
        f"warning: {path}:2: row 'c9|v|p|0' is not in this run's plan (not planned); "
        "not counted",
        f"warning: {path}:4: the last line is cut mid-way (a half-written row); not counted"]
    # while a process writes the run, its last line is the row being written
    assert read.report(writing=True) == read.report()[:1]
    warned = []
    assert len(list(store.load_rows(plan=lambda r: None, warn=warned.append))) == 3
    assert warned == [read.report()[1]]
    # a key that contradicts its own fields is corrupt, not another plan's row
    store.repair()
    store.append(keyed("c4").model_copy(update={"key": "c5|v|p|0"}))
    with pytest.raises(BenchError) as info:
        store.read_rows()
    assert (info.value.line, info.value.field) == (4, "key")


def oracle_run(run_bench, run_id, *options):
    """A run of 4 ecommerce cases on l3 with the oracle provider (no model, no network)."""
    made = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "4",
                     "--no-execute", "--run-id", run_id, *options)
    assert made.returncode == 0, made.stderr


@pytest.mark.slow
def test_show_counts_the_rows_in_the_file_not_the_manifest(run_bench, project):
    # a results.jsonl that lost rows showed "complete, rows 4/4" from the manifest
    oracle_run(run_bench, "cut")
    results = project / "reports" / "runs" / "cut" / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:2]))
    shown = run_bench("show", "cut")
    assert shown.returncode == 0, shown.stderr
    assert "status: incomplete (manifest says complete), rows 2/4; bench run --resume cut " \
           "redoes the missing rows" in shown.stdout
    summary = run_bench("report", "cut", "-f", "md", "-o", "-")
    assert summary.returncode == 0, summary.stderr
    assert "**Incomplete run: 2 of 4 planned rows.** Run cut is incomplete (its manifest says " \
           "complete, but rows are missing from its results.jsonl)" in summary.stdout
    # a last line cut mid-way is named and not counted
    results.write_bytes(b"".join(lines[:3]) + lines[3][:30])
    shown = run_bench("show", "cut")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert f"warning: {results}:4: the last line is cut mid-way (a half-written row); not " \
           "counted" in shown.stderr.splitlines()
    assert "status: incomplete (manifest says complete), rows 3/4" in shown.stdout
    resumed = run_bench("run", "--resume", "cut")
    assert resumed.returncode == 0, resumed.stderr
    shown = run_bench("show", "cut")
    assert "status: complete, rows 4/4" in shown.stdout and not shown.stderr.strip()


@pytest.mark.slow
def test_show_of_a_shard_leaves_out_rows_of_other_shards_and_cases_and_differing_copies(
        run_bench, project):
    oracle_run(run_bench, "s1", "--shard", "1/2")
    oracle_run(run_bench, "s2", "--shard", "2/2")
    runs = project / "reports" / "runs"
    mine = [json.loads(line) for line in (runs / "s1" / "results.jsonl").read_text(
        encoding="utf-8").splitlines()]
    theirs = json.loads((runs / "s2" / "results.jsonl").read_text(
        encoding="utf-8").splitlines()[0])
    unplanned = "ecom-0001"
    assert unplanned not in {r["case_id"] for r in mine} | {theirs["case_id"]}
    appended = [{**theirs, "run_id": "s1"},  # another shard's row
                {**mine[0], "case_id": unplanned,  # a case the run did not select
                 "key": mine[0]["key"].replace(mine[0]["case_id"], unplanned)},
                {**mine[0], "latency_s": 99.0}]  # a second copy, unlike the first
    results = runs / "s1" / "results.jsonl"
    with results.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in appended)
    shown = run_bench("show", "s1")
    assert shown.returncode == 0, shown.stderr
    warnings = shown.stderr.splitlines()
    assert f"warning: {results}:3: row '{theirs['key']}' is not in this run's plan (not in " \
           "shard 1/2: another shard's row, or a case the run did not select); not counted" \
           in warnings
    assert f"warning: {results}:4: row '{appended[1]['key']}' is not in this run's plan" \
           in shown.stderr
    assert f"warning: {results}: lines 1, 5 hold row '{mine[0]['key']}' with different " \
           "content; the first (line 1) is counted" in warnings
    assert "status: complete, rows 2/2" in shown.stdout


# -- a run folder that bench did not leave empty -----------------------------------------------


def test_a_run_folder_with_a_row_or_another_file_is_never_discarded(tmp_path):
    from bench.store import RunStore

    store = RunStore(tmp_path, "r")
    store.make_dir()
    store.manifest_path.write_text("{}", encoding="utf-8")
    store.results_path.write_text('{"key": "x"}\n', encoding="utf-8")
    assert not store.discard_if_empty() and store.results_path.is_file()
    store.results_path.write_text("", encoding="utf-8")
    (store.dir / "batches.json").write_text("{}", encoding="utf-8")
    assert not store.discard_if_empty() and store.dir.is_dir()
    (store.dir / "batches.json").unlink()
    assert store.discard_if_empty() and not store.dir.exists()
