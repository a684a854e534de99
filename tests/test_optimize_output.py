"""What bench optimize leaves: the output variant folder, the report, adoption; and the
command line (bench optimize run / adopt), after which bench compare treats the adopted
variant like any other."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

import bench
import bench.optimize as bo
from bench.errors import BenchError
from bench.optimize.output import adopt
from bench.project import Project
from test_optimize import REPO, TARGET, example


@pytest.fixture
def shop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "not-this-one"))
    return example.write_project(tmp_path / "proj")


def test_the_output_folder_and_report(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                      opt_id="out")
    folder = shop / "reports" / "optimize" / "out"
    assert run.folder == folder
    text = (folder / "variant" / "start-opt.yaml").read_text(encoding="utf-8")
    assert text.startswith("# optimized by bench optimize out from 'start' (accepted on test)")
    tools = yaml.safe_load(text)["tools"]
    assert tools[0]["description"].endswith("Also for parcel questions.")
    diff = (folder / "variant" / "diff.md").read_text(encoding="utf-8")
    assert "### track_shipment" in diff and "+Show where an order is" in diff
    provenance = json.loads((folder / "variant" / "provenance.json").read_text())
    assert provenance["proposer"] == "function:opt-good" and provenance["accepted"]
    assert provenance["prompts"] == ["work/proposals/r1.jsonl"]
    assert [r["purpose"] for r in provenance["runs"]] == ["dev r0", "propose r1", "dev r1",
                                                          "test"]
    report = (folder / "report.md").read_text(encoding="utf-8")
    for part in ("## Rounds (dev)", "## Candidates", "## Edit r1c1 (from start)",
                 "## Held-out test", "## Runs and costs", "**ACCEPTED**"):
        assert part in report
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "data:image/svg+xml;base64," in page and "<script" not in page


def test_model_text_is_escaped_in_the_html_report(shop):
    from bench.providers.function import register_function

    def hostile(messages, tools, trial):
        return [{"name": "propose_edit", "arguments": {
            "tool": "track_shipment", "reason": "<script>alert(1)</script>",
            "description": "Show where an order is. Also for parcel questions. <b>x</b>"}}]
    register_function("opt-hostile", hostile)
    bo.optimize("shop", "start", TARGET, "function:opt-hostile", project=shop, opt_id="esc")
    page = (shop / "reports" / "optimize" / "esc" / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_adopt_copies_an_accepted_variant_and_compare_uses_it(shop):
    bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop, opt_id="ok")
    project = Project(shop)
    path = adopt(project, "ok")
    assert path == shop / "descriptions" / "shop" / "variants" / "start-opt.yaml"
    with pytest.raises(BenchError, match="exists; pass --force"):
        adopt(project, "ok")
    evaluation = bench.evaluate("shop", ["start", "start-opt"], [TARGET], project=shop,
                                split="test", execute=False)
    comparison = evaluation.compare("start", "start-opt", metrics=["selection_correct"])
    assert comparison.tests[0].b_only == 8 and comparison.tests[0].verdict == "improvement"
    bo.optimize("shop", "start", TARGET, "function:opt-leaky", project=shop, opt_id="no")
    with pytest.raises(BenchError, match="was not accepted"):
        adopt(project, "no")
    with pytest.raises(BenchError, match="result.json is missing"):
        adopt(project, "never-ran")


@pytest.mark.slow
def test_the_command_line(shop):
    env = {**os.environ, "BENCH_HOME": str(shop), "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "benchmarks"),
                                          os.environ.get("PYTHONPATH", "")])}

    def bench_cli(*args):
        return subprocess.run([sys.executable, "-m", "bench", *args], cwd=shop, env=env,
                              capture_output=True, text=True, timeout=600)

    done = bench_cli("optimize", "run", "shop", "--variant", "start", "--target",
                     "function:optimize_example:target", "--proposer",
                     "function:optimize_example:good", "--id", "cli")
    assert done.returncode == 0, done.stderr
    assert "r1c1 ACCEPTED" in done.stdout
    assert "test function:optimize_example:target selection_correct: 61.9% -> 100.0% " \
           "(8 fixed, 0 broke" in done.stdout
    assert "adopt it with: bench optimize adopt cli" in done.stdout
    adopted = bench_cli("optimize", "adopt", "cli")
    assert adopted.returncode == 0 and "start-opt.yaml" in adopted.stdout
    refused = bench_cli("optimize", "run", "shop", "--variant", "start", "--target",
                        "function:optimize_example:target", "--proposer",
                        "function:optimize_example:leaky", "--id", "cli-leaky")
    assert refused.returncode == 1 and "leak: mirrors test case(s) test-01" in refused.stdout
    bad = bench_cli("optimize", "run", "shop", "--variant", "nope", "--target", "x",
                    "--proposer", "y")
    assert bad.returncode == 2 and "unknown variant 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr
