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
from tests.optimize.test_optimize import REPO, TARGET


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
    adopted = adopt(project, "ok")
    assert adopted.path == shop / "descriptions" / "shop" / "variants" / "start-opt.yaml"
    assert adopted.rebased == ""  # the start is as the run saw it
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


def _edit_start(shop, edit) -> None:
    """Change the project's start variant (descriptions/shop/variants/start.yaml) in place."""
    path = shop / "descriptions" / "shop" / "variants" / "start.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit({t["name"]: t for t in data["tools"]}, data["tools"])
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _tool_and_required_parameter_added(by_name, tools) -> None:
    tools.append({"name": "cancel_order", "description": "Cancel an order not yet shipped.",
                  "input_schema": {"type": "object", "properties": {}}})
    track = by_name["track_shipment"]["input_schema"]
    track["properties"]["order_id"] = {"type": "string"}
    track["required"] = ["order_id"]


@pytest.mark.slow
def test_adopt_rebases_the_edits_onto_a_tool_and_a_required_parameter_added_since(shop):
    from typer.testing import CliRunner

    from bench.cli import app

    bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop, opt_id="ok")
    project = Project(shop)
    adopt(project, "ok")
    _edit_start(shop, _tool_and_required_parameter_added)
    adopted = adopt(project, "ok", force=True)
    written = shop / "descriptions" / "shop" / "variants" / "start-opt.yaml"
    tools = {t["name"]: t for t in yaml.safe_load(written.read_text())["tools"]}
    # nothing the start gained since the run is dropped, and the winning edit is there
    assert list(tools) == ["track_shipment", "refund_order", "search_products", "cancel_order"]
    assert tools["track_shipment"]["input_schema"]["required"] == ["order_id"]
    assert tools["track_shipment"]["description"].endswith("Also for parcel questions.")
    assert adopted.rebased.startswith("rebased: variant 'start' changed since optimization "
                                      "'ok' ran (required parameter track_shipment.order_id "
                                      "added; tool cancel_order added); its edits "
                                      "(track_shipment) applied cleanly")
    said = CliRunner().invoke(app, ["optimize", "adopt", "ok", "--force"],
                              env={"BENCH_HOME": str(shop)})
    assert said.exit_code == 0, said.output
    assert said.output.splitlines() == [adopted.rebased, f"wrote {written}"]
    assert result_start_sha(shop, "ok") is not None  # recorded when the run started


def result_start_sha(shop, opt_id):
    """``start_sha256`` of an optimization's result.json."""
    path = shop / "reports" / "optimize" / opt_id / "result.json"
    return json.loads(path.read_text(encoding="utf-8")).get("start_sha256")


@pytest.mark.slow
def test_adopt_refuses_when_an_edited_text_changed_since_and_names_it(shop):
    bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop, opt_id="ok")
    project = Project(shop)
    adopt(project, "ok")
    written = shop / "descriptions" / "shop" / "variants" / "start-opt.yaml"
    first = written.read_text(encoding="utf-8")

    def reworded(by_name, tools) -> None:
        by_name["track_shipment"]["description"] = "Where an order is, and when it comes."
        _tool_and_required_parameter_added(by_name, tools)
    _edit_start(shop, reworded)
    with pytest.raises(BenchError) as info:
        adopt(project, "ok", force=True)
    said = str(info.value)
    assert "variant 'start' changed since optimization 'ok' ran (track_shipment's " \
           "description changed; required parameter track_shipment.order_id added; tool " \
           "cancel_order added); its edits do not apply to it (track_shipment's description " \
           "changed since)" in said and "\n" not in said
    # the file adopted before is left as it was
    assert written.read_text(encoding="utf-8") == first


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


# -- a result.json without a field -------------------------------------------------------------


def test_a_result_json_missing_a_field_names_it(tmp_path):
    from bench.optimize.output import load_result

    (tmp_path / "result.json").write_text("{}", encoding="utf-8")
    with pytest.raises(BenchError, match="field 'opt_id': not an optimization result"):
        load_result(tmp_path)
