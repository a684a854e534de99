"""bench optimize end to end on the embedded model as target and proposer, on a few cases:
it runs, every proposal is either a candidate or a counted rejection with a reason, and the
decision says why (probably nothing is accepted by a 0.5B model)."""

from __future__ import annotations

import json

import pytest

import bench.optimize as bo
from conftest import requires_local_model


@requires_local_model
@pytest.mark.slow
def test_the_embedded_model_as_target_and_proposer(elsewhere):
    run = bo.optimize("ecommerce", "l3", "local", "local", project=elsewhere,
                      opt_id="local", limit=4, rounds=1, max_failures=2)
    result = run.result
    assert result.candidates[0].name == "l3" and result.candidates[0].dev_n == 4
    asked = sum(result.rounds[0].failures.values()) if result.rounds else 0
    if result.rounds and result.rounds[0].failures:
        # every tool asked about is either a candidate or a rejection with its reason
        tools = {t for c in result.candidates[1:] for t in c.tools} | \
            {r.tool for r in result.rejections}
        assert set(result.rounds[0].failures) <= tools and asked > 0
        assert all(r.reason for r in result.rejections)
    assert run.accepted or result.acceptance.reasons
    saved = json.loads((run.folder / "result.json").read_text())
    assert saved["acceptance"]["accepted"] == run.accepted
    assert (run.folder / "report.html").is_file()
