"""End to end on the real embedded model: bench run, the run directory, the table, resume."""

import json
import signal
import subprocess
import sys
import os
from pathlib import Path
import time

from conftest import REPO, requires_local_model

pytestmark = [requires_local_model]

ROW_FIELDS = {"key", "case_id", "variant", "provider", "trial", "request", "response", "parsed",
              "metrics", "usage", "tool_definition_tokens", "latency_s"}
METRICS = {"selection_correct", "arguments_correct", "schema_valid", "no_call_correct"}


def read_rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_run_writes_run_directory_and_prints_table(run_bench, project):
    result = run_bench("run", "--limit", "5", "--variants", "l3,l10", "--run-id", "e2e")
    assert result.returncode == 0, result.stderr
    run_dir = project / "reports" / "runs" / "e2e"

    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "complete" and manifest["rows_done"] == 10
    assert manifest["command"][-6:] == ["--limit", "5", "--variants", "l3,l10", "--run-id", "e2e"]
    assert len(manifest["dataset"]["sha256"]) == 64
    assert [v["name"] for v in manifest["variants"]] == ["l3", "l10"]
    assert all(len(v["sha256"]) == 64 for v in manifest["variants"])
    (local,) = manifest["providers"]
    from bench.providers.local.models import DEFAULT_MODEL, MODEL_PRESETS
    default = MODEL_PRESETS[DEFAULT_MODEL]
    assert local["model"] == Path(default.file_name).stem
    assert local["model_sha256"] == default.sha256
    assert "llama_cpp_python" in manifest["versions"] and manifest["started_at"]
    assert manifest["ended_at"] >= manifest["started_at"]

    rows = read_rows(run_dir / "results.jsonl")
    assert len(rows) == 10 and len({r["key"] for r in rows}) == 10
    for row in rows:
        assert ROW_FIELDS <= row.keys()
        assert METRICS <= row["metrics"].keys()
        # The grammar makes every answer well-formed; only the token cap can cut one short.
        if row["parsed"]["error"] is not None:
            assert row["response"]["finish_reason"] == "length", row["response"]
            assert row["parsed"]["error"].startswith("truncated")
            assert row["metrics"]["error_codes"] == ["unparseable"]
        assert row["usage"]["prompt_tokens"] > row["tool_definition_tokens"] > 0
        assert row["latency_s"] > 0
    assert sum(row["parsed"]["error"] is None for row in rows) >= 8
    # cases are grouped by variant, so all but the first case of a variant reuse the tools prefix
    for variant in ("l3", "l10"):
        group = [r for r in rows if r["variant"] == variant]
        assert [r["variant"] for r in rows].count(variant) == 5
        assert all(r["usage"]["cached_tokens"] >= r["tool_definition_tokens"] for r in group[1:])
    l3 = next(r for r in rows if r["variant"] == "l3")["tool_definition_tokens"]
    l10 = next(r for r in rows if r["variant"] == "l10")["tool_definition_tokens"]
    assert l10 > l3

    table = result.stdout
    # header cells may wrap over several lines: join each column's parts
    cells = [line.split("┃")[1:-1] for line in table[:table.index("┡")].splitlines()
             if "┃" in line]
    headers = {" ".join(" ".join(row[i] for row in cells).split()) for i in range(len(cells[0]))}
    for header in ("tool selection", "arguments", "schema valid", "no-call",
                   "tool-def tokens", "mean prompt tokens", "p50 latency s"):
        assert header in headers, headers
    for row_name in ("l3", "l10"):
        assert any(line.split("│")[2:3] and line.split("│")[2].strip() == row_name
                   for line in table.splitlines()), table


def test_interrupted_run_resumes_without_redoing_rows(run_bench, project):
    env = {**os.environ, "BENCH_HOME": str(project),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--limit", "6", "--variants", "l3",
         "--run-id", "intr"], cwd=project, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    results = project / "reports" / "runs" / "intr" / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if results.exists() and len(results.read_bytes().splitlines()) >= 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert "bench run --resume intr" in stderr and "Traceback" not in stderr
    manifest = json.loads(results.with_name("manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "interrupted"
    kept = read_rows(results)
    assert 2 <= len(kept) < 6

    with results.open("ab") as handle:  # a row half-written when the machine died
        handle.write(b'{"key": "ecom-0006|l3|local|0", "metrics": {')

    resumed = run_bench("run", "--resume", "intr")
    assert resumed.returncode == 0, resumed.stderr
    rows = read_rows(results)
    assert len(rows) == 6 and len({r["key"] for r in rows}) == 6
    assert rows[:len(kept)] == kept  # finished rows were kept, not redone
    manifest = json.loads(results.with_name("manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "complete" and manifest["rows_done"] == 6
