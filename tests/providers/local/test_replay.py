"""The local model's recorded answers replay without the model (what CI does)."""

import json

from conftest import requires_local_model


@requires_local_model
def test_local_run_replays_without_the_model(run_bench, project, monkeypatch):
    recorded = run_bench("run", "--limit", "2", "--variants", "l3", "--run-id", "rec",
                         "--cache", "write")
    assert recorded.returncode == 0, recorded.stderr
    monkeypatch.setenv("BENCH_LOCAL_MODEL", "/nonexistent.gguf")  # replay never loads it
    replayed = run_bench("run", "--limit", "2", "--variants", "l3", "--run-id", "rep",
                         "--provider", "replay:rec")
    assert replayed.returncode == 0, replayed.stderr
    cache = project / "reports" / "cache" / "responses.sqlite"
    from_cache = run_bench("run", "--limit", "2", "--variants", "l3", "--run-id", "rep2",
                           "--provider", f"replay:{cache}")
    assert from_cache.returncode == 0, from_cache.stderr

    def rows(run_id):
        path = project / "reports" / "runs" / run_id / "results.jsonl"
        return {r["case_id"]: r for r in map(json.loads, path.read_text().splitlines())}

    original = rows("rec")
    for run_id in ("rep", "rep2"):
        again = rows(run_id)
        assert again.keys() == original.keys()
        for case_id, row in again.items():
            assert row["parsed"] == original[case_id]["parsed"]
            assert row["metrics"] == original[case_id]["metrics"]
    manifest = json.loads((project / "reports" / "runs" / "rec" / "manifest.json").read_text())
    assert manifest["cache"]["writes"] == 2 and manifest["cache"]["mode"] == "write"
