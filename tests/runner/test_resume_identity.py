"""A resumed run keeps the model it started with: rows of two models never mix in one table."""

from __future__ import annotations

import json

import pytest

import bench
from bench.errors import BenchError
from bench.runner import identity_mismatch
from conftest import requires_local_model
from tests.api.test_evaluate import _manifest

SMOLLM2 = {"provider": "local", "model": "smollm2-135m-instruct-q4_1",
           "model_sha256": "5" * 64, "model_preset": "smollm2-135m"}


def test_a_different_model_file_is_a_mismatch_naming_both_and_the_preset():
    now = {"local": {**SMOLLM2, "model": "qwen2.5-coder-0.5b-instruct-q4_k_m"}}
    why = identity_mismatch([SMOLLM2], now)
    assert why is not None
    assert "qwen2.5-coder" in why and "smollm2-135m-instruct-q4_1" in why
    assert "--model smollm2-135m" in why


def test_same_model_other_path_or_threads_is_no_mismatch():
    now = {"local": {**SMOLLM2, "model_path": "/elsewhere/model.gguf", "threads": 1}}
    assert identity_mismatch([{**SMOLLM2, "model_path": "/here/model.gguf"}], now) is None


def test_a_field_missing_on_one_side_and_other_providers_are_not_compared():
    assert identity_mismatch([{"provider": "local"}], {"local": SMOLLM2}) is None
    assert identity_mismatch([SMOLLM2], {"openai:gpt-4o": {"model": "gpt-4o"}}) is None
    assert identity_mismatch(["not a dict", 3], {"local": SMOLLM2}) is None


@requires_local_model
@pytest.mark.model
def test_resuming_a_run_that_another_model_started_is_refused(run_bench, project):
    """A run started by the previous release's default (SmolLM2) cannot be finished by
    today's default model: one line names both models and how to resume; the rows and the
    manifest are untouched, and the same model resumes it."""
    started = run_bench("run", "--variants", "l3", "--limit", "2", "--no-execute",
                        "--run-id", "mixed")
    assert started.returncode == 0, started.stderr
    run_dir = project / "reports" / "runs" / "mixed"
    results = run_dir / "results.jsonl"
    first_row = results.read_text().splitlines()[0]
    results.write_text(first_row + "\n")  # as if the run had been killed after one row
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    ours = dict(manifest["providers"][0])
    manifest["providers"][0].update(model=SMOLLM2["model"], model_sha256=SMOLLM2["model_sha256"],
                                    model_preset=SMOLLM2["model_preset"])
    manifest["status"] = "interrupted"
    manifest_path.write_text(json.dumps(manifest))

    refused = run_bench("run", "--resume", "mixed")
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    line = [l for l in refused.stderr.splitlines() if l.startswith("error:")]
    assert len(line) == 1, refused.stderr
    assert "smollm2-135m-instruct-q4_1" in line[0] and ours["model"] in line[0]
    assert "--model smollm2-135m" in line[0]
    assert results.read_text().splitlines() == [first_row]
    assert json.loads(manifest_path.read_text())["status"] == "interrupted"

    manifest["providers"][0] = ours
    manifest_path.write_text(json.dumps(manifest))
    resumed = run_bench("run", "--resume", "mixed")
    assert resumed.returncode == 0, resumed.stderr
    assert len(results.read_text().splitlines()) == 2


# -- resumes of hand-edited manifests ----------------------------------------------------------


@pytest.mark.parametrize("hits", ["lots", None])
def test_resume_of_a_manifest_with_bad_cache_counters_never_leaves_it_running(proj, hits):
    bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="h", limit=3,
                   cache="readwrite")
    run = proj / "reports" / "runs" / "h"
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["cache"]["hits"] = hits
    (run / "manifest.json").write_text(json.dumps(manifest))
    lines = (run / "results.jsonl").read_text().splitlines(keepends=True)
    (run / "results.jsonl").write_text("".join(lines[:-1]))  # one row left to do
    try:
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="h", limit=3,
                       cache="readwrite")
    except BenchError:
        pass
    assert _manifest(proj, "h")["status"] != "running"


def test_resume_of_a_manifest_naming_another_run_is_refused_or_read(proj):
    bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="x", limit=3)
    run = proj / "reports" / "runs" / "x"
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["run_id"] = "other"
    (run / "manifest.json").write_text(json.dumps(manifest))
    try:
        result = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=proj, run_id="x",
                                limit=3)
    except BenchError:
        return
    assert len(result.rows) == 3, result.warnings
