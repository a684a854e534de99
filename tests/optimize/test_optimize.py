"""bench.optimize with a scripted target and proposers (``function:`` providers, no network):
it finds and accepts a real fix, paired on dev and decided once on test."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import bench.optimize as bo
from bench.errors import BenchError
from tests.importers.test_own_tools import CASE, bench, error_lines, python_project

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("optimize_example",
                                               REPO / "benchmarks" / "optimize_example.py")
assert _SPEC is not None and _SPEC.loader is not None
example = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(example)
example.register()
TARGET = "function:opt-target"


def test_finds_and_accepts_a_real_fix(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                      opt_id="fix", rounds=3)
    result = run.result
    assert run.accepted and result.final == "r1c1"
    start, fix = result.candidate("start"), result.candidate("r1c1")
    # dev: the four parcel questions failed at the start, the edit fixes them, breaks none
    assert (start.dev_k, start.dev_n) == (9, 13) and (fix.dev_k, fix.dev_n) == (13, 13)
    assert fix.fixed == ["dev-02", "dev-03", "dev-04", "dev-05"] and fix.broke == []
    assert result.rounds[0].failures == {"track_shipment": 4}
    assert result.stop_reason == "no failures on dev in round 2"
    # test, once: eight parcel cases fixed, nothing broken, no-call restraint kept
    tests = {t.metric: t for t in result.acceptance.tests}
    assert (tests["selection_correct"].b_only, tests["selection_correct"].a_only) == (8, 0)
    assert tests["selection_correct"].verdict == "improvement"
    assert tests["no_call_correct"].rate_final == 1.0
    assert result.acceptance.flips["fixed"] == [f"test-{i:02d}" for i in range(1, 9)]
    assert result.acceptance.token_ratio <= 1.1
    # the accepted diff: the parcel sentence in track_shipment, nothing else
    (tool,) = [t for t in run.final.tools if t.description != _start_description(t.name)]
    assert tool.name == "track_shipment" and tool.description.endswith(
        "Also for parcel questions.")
    # the test split never reached the proposer
    prompts = (run.folder / "work" / "proposals" / "r1.jsonl").read_text(encoding="utf-8")
    assert "parcel" in prompts and not any(q in prompts for q, _ in example.TEST)


def test_the_target_metric_must_gain_on_test(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                      opt_id="strict", min_gain=0.5)
    assert not run.accepted
    assert run.result.acceptance.reasons == [
        "selection_correct gains +38.1% on test (at least +50.0% and above 0 needed)"]


def test_bad_settings_and_datasets_are_one_line_errors(shop, tmp_path):
    with pytest.raises(BenchError, match="min_gain"):
        bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop, min_gain=2)
    with pytest.raises(BenchError, match="unknown metric 'nope'"):
        bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop, metric="nope")
    cases = shop / "datasets" / "shop" / "cases.jsonl"
    lines = [json.loads(line) for line in cases.read_text().splitlines()]
    for line in lines:
        line.pop("split")
    unsplit = tmp_path / "unsplit.jsonl"
    unsplit.write_text("".join(json.dumps(c) + "\n" for c in lines))
    with pytest.raises(BenchError, match="dev/test split"):
        bo.optimize(str(unsplit), "start", TARGET, "function:opt-good", project=shop)


def _start_description(name: str) -> str:
    return next(t["description"] for t in example.TOOLS if t["name"] == name)


def test_also_provider_must_hold_on_test(shop):
    run = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                      opt_id="also", also_provider="oracle")
    providers = {t.provider for t in run.result.acceptance.tests}
    assert providers == {TARGET, "oracle"} and run.accepted
    oracle = [t for t in run.result.acceptance.tests if t.provider == "oracle"]
    assert all(t.verdict == "no significant difference" for t in oracle)


def test_proposals_edit_descriptions_and_parameters():
    from bench.models import Tool
    from bench.optimize.proposals import Proposal, Rejected, apply_proposal
    tool = Tool(name="t", description="Track.", input_schema={
        "type": "object", "properties": {"order_id": {"type": "string"}}})
    (edited,) = apply_proposal([tool], Proposal(tool="t", parameters={
        "order_id": "The order number, e.g. ORD1."}, reason="ids"))
    assert edited.input_schema["properties"]["order_id"]["description"] == \
        "The order number, e.g. ORD1." and edited.description == "Track."
    assert "description" not in tool.input_schema["properties"]["order_id"]  # a copy
    with pytest.raises(Rejected, match="has no parameter 'nope'"):
        apply_proposal([tool], Proposal(tool="t", parameters={"nope": "x"}))
    with pytest.raises(Rejected, match="does not change") as raised:
        apply_proposal([tool], Proposal(tool="t", description="Track."))
    assert raised.value.kind == "no-op"


# -- bench optimize run with a bad provider leaves no optimization folder ----------------------


def split_project(tmp_path: Path) -> Path:
    """:func:`python_project` with four cases, two ``dev`` and two ``test``."""
    project = python_project(tmp_path)
    cases = [{**CASE, "id": f"c{i}", "split": "dev" if i % 2 else "test",
              "messages": [{"role": "user", "content": f"add 1 and 2, request {i}"}]}
             for i in range(4)]
    (project / "datasets" / "proj" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return project


@pytest.mark.parametrize("option, value, fragment", [
    ("--target", "nosuch:model", "target: unknown provider 'nosuch:model'"),
    ("--proposer", "nosuch", "proposer: unknown provider 'nosuch'"),
    ("--also-provider", "bad id", "also_provider: unknown provider 'bad id'"),
    ("--target", "function:no_such_module:answer", "cannot import 'no_such_module'"),
])
def test_optimize_with_a_bad_provider_leaves_no_folder(tmp_path, option, value, fragment):
    project = split_project(tmp_path)
    providers = {"--target": "function:ans:answer", "--proposer": "function:ans:answer",
                 option: value}
    result = bench(project, "optimize", "run", "proj", "--variant", "current",
                   *[arg for pair in providers.items() for arg in pair])
    assert fragment in error_lines(result)[0]
    assert not (project / "reports" / "optimize").exists()
