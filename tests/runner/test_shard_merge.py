"""`bench run --shard i/n` and `bench merge`: a plan split over machines and joined again.

Runs go through the real runner and the real openai-compat adapter (OpenAI SDK) against a
loopback server speaking the Chat Completions protocol; the server picks a tool from the
query's hash, so rows differ in their scores and a lost or doubled row would show.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections import Counter

import pytest

from bench.errors import BenchError
from bench.shard import parse_shard, shard_plan
from tests.fakeserver import FakeServer, Reply, chat_body
from tests.toolspace.test_toolspace import add_toolset, one_line_error


def pick_a_tool(request):
    """Call the tool the query's SHA-256 picks, with no arguments."""
    tools = [t["function"]["name"] for t in request.body["tools"]]
    query = str(request.body["messages"][-1]["content"])
    chosen = tools[int(hashlib.sha256(query.encode()).hexdigest(), 16) % len(tools)]
    return Reply(body=chat_body(calls=[(chosen, {})]))


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "sk-loopback")
    with FakeServer(handler=pick_a_tool) as fake:
        yield fake


def run(server, run_id, shard=None, **changes):
    """Run 8 cases x l3, l10 against ``server`` in this process; return the manifest."""
    from bench.runner import RunConfig, Runner
    settings = {"variants": ["l3", "l10"], "limit": 8, "execute": False, **changes}
    config = RunConfig(providers=[f"openai-compat:m@{server.url}/v1"], shard=shard,
                       **settings)
    return Runner(config, run_id=run_id, command=["bench", "run"]).run()


def rows_of(project, run_id):
    path = project / "reports" / "runs" / run_id / "results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def manifest_of(project, run_id):
    path = project / "reports" / "runs" / run_id / "manifest.json"
    return json.loads(path.read_text(encoding="utf-8"))


def scores(rows):
    """Key -> (metrics, calls made) of each row (a call's id is the server's counter)."""
    return {r["key"]: (r["metrics"], [(c["name"], c["arguments"]) for c in r["parsed"]["calls"]])
            for r in rows}


def refusal(*run_ids, **options):
    from bench.merge import merge_runs
    with pytest.raises(BenchError) as caught:
        merge_runs(run_ids, **options)
    return caught.value


def test_shards_partition_the_plan_evenly_whatever_its_order(project):
    from bench.datasets import load_dataset
    from bench.runner import load_variants, make_plan
    dataset = load_dataset("ecommerce")
    cases = list(dataset.cases[:23])
    plan = make_plan(cases, load_variants(dataset, ["l3", "l10"]), ["p1", "p2"], 2)
    keys = [item.key for item in plan]
    shuffled = list(plan)
    random.Random(7).shuffle(shuffled)
    for total in range(1, 6):
        slices = [shard_plan(plan, i, total) for i in range(1, total + 1)]
        sizes = [len(s) for s in slices]
        assert sum(sizes) == len(plan) and max(sizes) - min(sizes) <= 1
        assert sorted(k for s in slices for k in (i.key for i in s)) == sorted(keys)
        for part in slices:  # each provider and variant is spread evenly too
            per_group = Counter((i.provider_id, i.variant.name) for i in part)
            assert len(per_group) == 4
        groups = [Counter((i.provider_id, i.variant.name) for i in s) for s in slices]
        for group in {(i.provider_id, i.variant.name) for i in plan}:
            counts = [g[group] for g in groups]
            assert max(counts) - min(counts) <= 1, (total, group, counts)
        for index, part in enumerate(slices, start=1):
            assert [i.key for i in part] == [k for k in keys if k in {i.key for i in part}]
            assert {i.key for i in shard_plan(shuffled, index, total)} == \
                {i.key for i in part}
    assert [len(shard_plan(plan[:3], i, 5)) for i in range(1, 6)] == [1, 1, 1, 0, 0]


def test_shard_forms():
    assert parse_shard("1/4") == (1, 4) and parse_shard("4/4") == (4, 4)
    assert parse_shard("01/4") == (1, 4)
    assert parse_shard("10000/10000") == (10000, 10000)
    # "1/99999999999": merge listed every missing shard and built every slice (it hung);
    # "１/２": full-width digits matched \d
    for bad in ("0/4", "5/4", "a/b", "2", "1/0", "-1/4", " 1/4", "1/4/2", "1.0/4", "",
                "1/10001", "1/99999999999", "\uff11/\uff12"):
        with pytest.raises(ValueError, match="must be i/n with 1 <= i <= n <= 10000"):
            parse_shard(bad)
    from pydantic import ValidationError
    from bench.runner import RunConfig
    with pytest.raises(ValidationError, match="n <= 10000"):  # a stored config too
        RunConfig(shard="1/99999999999")


@pytest.mark.parametrize("form", ["0/4", "5/4", "a/b", "2"])
def test_a_bad_shard_is_a_one_line_usage_error(run_bench, form):
    result = run_bench("run", "--shard", form, "--limit", "1")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: bench run: Invalid value for '--shard'"), lines[0]
    assert f"must be i/n with 1 <= i <= n <= 10000, e.g. 1/4, not '{form}'" in lines[0]


def test_merged_shards_equal_the_unsharded_run(project, server, run_bench):
    whole = run(server, "whole", execute=True)
    first = run(server, "s1", "1/2", execute=True)
    second = run(server, "s2", "2/2", execute=True)
    assert first["config"]["shard"] == "1/2" and first["rows_planned"] == 8
    assert second["rows_planned"] == 8 and whole["rows_planned"] == 16
    assert not {r["key"] for r in rows_of(project, "s1")} & \
        {r["key"] for r in rows_of(project, "s2")}

    result = run_bench("merge", "s2", "s1", "--run-id", "merged")
    assert result.returncode == 0, result.stderr
    assert "merged 2 runs into run merged: 16 of 16 rows (complete)" in result.stderr
    merged = rows_of(project, "merged")
    assert scores(merged) == scores(rows_of(project, "whole")) and len(merged) == 16
    assert {r["run_id"] for r in merged} == {"merged"}
    manifest = manifest_of(project, "merged")
    assert manifest["status"] == "complete" and manifest["rows_done"] == 16
    assert manifest["config"] == whole["config"]  # shard unset: the whole plan
    assert manifest["dataset"] == whole["dataset"] and manifest["variants"] == whole["variants"]
    assert [(m["run_id"], m["shard"], m["rows"]) for m in manifest["merged_from"]] == \
        [("s1", "1/2", 8), ("s2", "2/2", 8)]
    traces = (project / "reports" / "runs" / "merged" / "traces.jsonl").read_text().splitlines()
    assert len(traces) == sum(len(r["parsed"]["calls"]) for r in merged) > 0
    assert {json.loads(t)["run_id"] for t in traces} == {"merged"}
    assert not list((project / "reports" / "runs").glob(".merge-*"))

    show = run_bench("show", "merged")
    assert show.returncode == 0 and "status: complete, rows 16/16" in show.stdout, show.stderr
    compare = run_bench("compare", "l3", "l10", "--run", "merged")
    assert compare.returncode == 0, compare.stderr
    report = run_bench("report", "merged")
    assert report.returncode == 0, report.stderr
    assert (project / "reports" / "merged" / "index.html").is_file()
    traced = run_bench("traces", "merged")
    assert traced.returncode == 0, traced.stderr


def test_a_shard_resumes_as_that_shard_and_is_not_merged_unfinished(project, server, run_bench):
    from bench.runner import Runner
    stopped = run(server, "s1", "1/2", concurrency=1, max_total_tokens=1)
    assert stopped["status"] == "budget_exhausted" and stopped["config"]["shard"] == "1/2"
    run(server, "s2", "2/2")
    refused = refusal("s1", "s2")
    assert "run 's1' (shard 1/2) is budget_exhausted with 1 of 8 rows" in refused.message
    assert "bench run --resume s1" in refused.message and refused.field == "status"
    from bench.merge import merge_runs
    from bench.report.data import merge_gaps
    part = merge_runs(["s1", "s2"], run_id="part", allow_partial=True)
    assert part.unfinished == [("s1", "budget_exhausted", 1, 8)] and not part.missing_shards
    assert part.manifest.status == "partial" and part.manifest.rows_done == 9
    assert merge_gaps(part.manifest) == "shard 1/2 (run s1) budget_exhausted"

    changed = run_bench("run", "--resume", "s1", "--shard", "2/2")
    assert changed.returncode == 2 and "--shard cannot change when resuming 's1'" in \
        changed.stderr, changed.stderr
    runner = Runner.resume("s1", overrides={"max_total_tokens": 10 ** 9})
    assert runner.config.shard == "1/2" and len(runner.pending()) == 7
    assert runner.run()["status"] == "complete"
    plan = Runner.resume("s1").plan
    assert sorted(r["key"] for r in rows_of(project, "s1")) == sorted(i.key for i in plan)
    assert len(plan) == 8


def test_a_missing_shard_is_named_and_allow_partial_leaves_a_resumable_run(
        project, server, run_bench):
    from bench.runner import Runner
    run(server, "whole")
    run(server, "s1", "1/2")
    missing = run_bench("merge", "s1")
    lines = [line for line in missing.stderr.splitlines() if line.strip()]
    assert missing.returncode == 2 and len(lines) == 1, missing.stderr
    assert lines[0] == ("error: shard 2/2 missing (given: 1/2); merge every shard, or pass "
                        "--allow-partial and finish the merged run with bench run --resume")

    partial = run_bench("merge", "s1", "--allow-partial", "--run-id", "half")
    assert partial.returncode == 3, partial.stderr
    assert "shard 2/2 missing" in partial.stderr
    assert "merged 1 run into run half: 8 of 16 rows (partial)" in partial.stderr
    assert "finish it with: bench run --resume half" in partial.stderr
    manifest = manifest_of(project, "half")
    assert manifest["status"] == "partial" and manifest["shards_missing"] == ["2/2"]
    report = run_bench("report", "half")
    assert report.returncode == 0, report.stderr
    html = (project / "reports" / "half" / "index.html").read_text(encoding="utf-8")
    assert "shard 2/2 missing" in html

    runner = Runner.resume("half")
    assert len(runner.pending()) == 8
    assert runner.run()["status"] == "complete"
    assert scores(rows_of(project, "half")) == scores(rows_of(project, "whole"))


def test_merge_refuses_runs_that_are_not_shards_of_one_run(project, server):
    runs = project / "reports" / "runs"
    run(server, "whole")
    run(server, "s1", "1/2")
    run(server, "s2", "2/2")
    run(server, "s1-again", "1/2")
    run(server, "seed", "2/2", seed=99)
    run(server, "third", "1/3")

    error = refusal("s1", "whole")
    assert "run 'whole' is not a shard (it ran without --shard)" in error.message
    assert error.field == "config.shard" and error.file == str(runs / "whole" / "manifest.json")
    assert refusal("s1", "s1").message == "run 's1' is given twice"
    error = refusal("s1", "seed")
    assert error.message.startswith("run 'seed' (shard 2/2) differs from run 's1' in "
                                    "config.seed: 99, not 1234")
    assert error.field == "config.seed"
    error = refusal("s1", "third")
    assert "differs from run 's1' in config.shard: '1/3', not '1/2'" in error.message
    error = refusal("s1", "s1-again", "s2")
    assert "runs 's1' and 's1-again' are both shard 1/2; give each shard once" in error.message
    assert refusal("s1", "s2", run_id="whole").message.startswith(
        "run 'whole' already exists")

    # what a resume may change may differ between shards: it is not what is measured
    run(server, "s2-faster", "2/2", concurrency=3, attempts=2)
    from bench.merge import merge_runs
    assert merge_runs(["s1", "s2-faster"]).manifest.status == "complete"

    # two shards of a local model with different files
    for name, digest in (("s1", "a"), ("s2", "b")):
        shutil.copytree(runs / name, runs / f"{name}-model")
        manifest = manifest_of(project, f"{name}-model")
        manifest["run_id"] = f"{name}-model"
        manifest["providers"][0]["model_sha256"] = digest * 64
        (runs / f"{name}-model" / "manifest.json").write_text(json.dumps(manifest))
    error = refusal("s1-model", "s2-model")
    assert f"provider 'openai-compat:m@{server.url}/v1''s model_sha256: '{'b' * 64}', not " \
           f"'{'a' * 64}'" in error.message
    assert error.field == f"providers.openai-compat:m@{server.url}/v1.model_sha256"

    # a row of shard 2 smuggled into shard 1
    shutil.copytree(runs / "s1", runs / "s1-extra")
    manifest = manifest_of(project, "s1-extra")
    manifest["run_id"] = "s1-extra"
    (runs / "s1-extra" / "manifest.json").write_text(json.dumps(manifest))
    rows = [{**r, "run_id": "s1-extra"} for r in rows_of(project, "s1")]
    stray = {**rows_of(project, "s2")[0], "run_id": "s1-extra"}
    (runs / "s1-extra" / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [*rows, stray]))
    error = refusal("s1-extra", "s2")
    assert f"holds row '{stray['key']}', which is not in its shard of the plan" in error.message
    assert not list(runs.glob(".merge-*")) and not (runs / "merged").exists()


def test_merge_refuses_other_datasets_and_descriptions(project, server):
    run(server, "s1", "1/2")
    cases = project / "datasets" / "ecommerce" / "cases.jsonl"
    original = cases.read_text(encoding="utf-8")
    cases.write_text(original + "\n", encoding="utf-8")  # another file, the same cases
    run(server, "s2-data", "2/2")
    error = refusal("s1", "s2-data")
    assert "differs from run 's1' in dataset.sha256" in error.message
    assert error.field == "dataset.sha256"
    run(server, "s1-data", "1/2")
    cases.write_text(original, encoding="utf-8")
    error = refusal("s1-data", "s2-data")  # the shards agree; this checkout does not
    assert "is not the one the shards ran with (its SHA-256 differs)" in error.message

    spec = sorted((project / "descriptions" / "ecommerce" / "specs").glob("*.yaml"))[0]
    spec.write_text(spec.read_text(encoding="utf-8").replace("summary: ", "summary: Now ", 1),
                    encoding="utf-8")
    run(server, "s2-spec", "2/2")
    error = refusal("s1", "s2-spec")
    assert "differs from run 's1' in variants.l3.sha256 (toolset 'ecommerce')" in error.message


def test_merge_refuses_a_shard_trace_line_that_breaks_the_contract(project, server):
    # merge checked only for a JSON object: the bad line moved into the merged run, whose
    # `bench traces` then named the merged file instead of the shard's
    runs = project / "reports" / "runs"
    run(server, "s1", "1/2", execute=True)
    run(server, "s2", "2/2", execute=True)
    traces = runs / "s2" / "traces.jsonl"
    lines = traces.read_text(encoding="utf-8").splitlines()
    traces.write_text("\n".join([*lines, json.dumps({"tool": 5})]) + "\n", encoding="utf-8")
    error = refusal("s1", "s2", run_id="merged")
    assert "corrupt trace line" in error.message and error.field == "tool"
    assert (error.file, error.line) == (str(traces), len(lines) + 1)
    assert not list(runs.glob(".merge-*")) and not (runs / "merged").exists()


def test_an_empty_shard_says_there_is_nothing_to_report(run_bench):
    result = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "2",
                       "--no-execute", "--shard", "3/3", "--run-id", "empty-shard")
    assert result.returncode == 0, result.stderr
    assert "planned no rows" in result.stderr and "next: bench report" not in result.stderr


# A merge killed (kill -9: no cleanup) once it has written its rows, before its traces.
KILLED_MERGE = """
import os, signal
import bench.merge as merge
def die(*args):
    os.kill(os.getpid(), signal.SIGKILL)
merge._copy_traces = die
merge.merge_runs(["s1", "s2"], run_id="killed")
"""
# A process holding a merge's folder, as a merge in progress does, until stdin closes.
LIVE_MERGE = """
import sys
from bench.merge import MERGE_PREFIX
from bench.owner import claim
from bench.paths import runs_dir
folder = runs_dir() / f"{MERGE_PREFIX}alive"
folder.mkdir()
owner = claim(folder)
print(folder, flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
def test_the_next_merge_removes_the_folders_of_killed_merges_only(project, server, run_bench):
    import os
    import subprocess
    import sys
    from conftest import REPO
    run(server, "s1", "1/2")
    run(server, "s2", "2/2")
    runs = project / "reports" / "runs"
    env = {**os.environ, "BENCH_HOME": str(project), "PYTHONPATH": str(REPO)}
    killed = subprocess.run([sys.executable, "-c", KILLED_MERGE], env=env, timeout=300,
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    (left,) = runs.glob(".merge-*")
    assert (left / "killed" / "results.jsonl").is_file()  # the killed merge's rows
    old = runs / ".merge-by-an-older-bench"  # no .owner: whose it is cannot be told
    old.mkdir()
    alive = subprocess.Popen([sys.executable, "-c", LIVE_MERGE], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        held = alive.stdout.readline().strip()
        merged = run_bench("merge", "s1", "s2", "--run-id", "merged")
        assert merged.returncode == 0, merged.stderr
        assert not left.exists()
        assert sorted(p.name for p in runs.glob(".merge-*")) == \
            [".merge-alive", ".merge-by-an-older-bench"] and os.path.samefile(
                held, runs / ".merge-alive")
    finally:
        alive.communicate("")
    assert not (runs / "killed").exists() and (runs / "merged" / "manifest.json").is_file()


def test_merge_keeps_the_first_copy_of_a_key_and_names_copies_that_differ(project, server):
    from bench.merge import merge_runs
    run(server, "s1", "1/2")
    run(server, "s2", "2/2")
    results = project / "reports" / "runs" / "s2" / "results.jsonl"
    first = rows_of(project, "s2")[0]
    with results.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({**first, "latency_s": 99.0}) + "\n")
        handle.write(json.dumps(first) + "\n")
    result = merge_runs(["s1", "s2"], run_id="merged")
    assert result.warnings == [
        f"warning: {results}: lines 1, 9 hold row '{first['key']}' with different content; "
        "the first (line 1) is counted",
        f"note: {results}: 1 identical copy of rows dropped (each key counts once)"]
    merged = {r["key"]: r for r in rows_of(project, "merged")}
    assert len(merged) == 16 and merged[first["key"]]["latency_s"] == first["latency_s"]


def test_a_merged_run_id_that_is_a_dangling_link_is_named_before_anything_is_written(
        project, server):
    # the final rename failed as ".../.merge-0a68c6da/gone: Not a directory", naming the
    # hidden folder instead of the link
    runs = project / "reports" / "runs"
    run(server, "s1", "1/2")
    run(server, "s2", "2/2")
    (runs / "gone").symlink_to(project / "nowhere")
    error = refusal("s1", "s2", run_id="gone")
    assert error.file == str(runs / "gone")
    assert f"symbolic link to '{project / 'nowhere'}', which does not exist" in error.message
    assert not list(runs.glob(".merge-*")) and not (project / "nowhere").exists()
    (runs / "gone").unlink()
    from bench.merge import merge_runs
    assert merge_runs(["s1", "s2"], run_id="gone").manifest.status == "complete"


def test_merge_sums_the_shards_response_cache_statistics(project, server, run_bench):
    cache = {"cache": "readwrite", "cache_path": str(project / "shared.sqlite")}
    first = run(server, "c1", "1/2", **cache)["cache"]
    run(server, "warm", "2/2", **cache)  # the second shard's answers are in the cache now
    second = run(server, "c2", "2/2", **cache)["cache"]
    assert (first["misses"], second["hits"]) == (8, 8)
    result = run_bench("merge", "c1", "c2", "--run-id", "cached")
    assert result.returncode == 0, result.stderr
    merged = manifest_of(project, "cached")["cache"]
    assert {k: merged[k] for k in ("hits", "misses", "writes")} == \
        {k: first[k] + second[k] for k in ("hits", "misses", "writes")}


# -- shards whose catalogs were drawn from other toolsets --------------------------------------


@pytest.mark.slow
def test_a_merge_refuses_shards_whose_catalogs_were_drawn_from_other_toolsets(run_bench,
                                                                             project):
    args = ("run", "--provider", "oracle", "--variants", "l3", "--limit", "4", "--no-execute",
            "--tools", "20")
    first = run_bench(*args, "--shard", "1/2", "--run-id", "s1")
    assert first.returncode == 0, first.stderr
    add_toolset(project, "late")  # the second machine has another toolset
    second = run_bench(*args, "--shard", "2/2", "--run-id", "s2")
    assert second.returncode == 0, second.stderr
    merged = run_bench("merge", "s1", "s2", "--run-id", "m")
    line = one_line_error(merged, "toolspace.catalogs (ecommerce/l3 at 20 tools)")
    assert "s2" in line
    assert not (project / "reports" / "runs" / "m").exists()
