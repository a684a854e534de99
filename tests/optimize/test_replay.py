"""A finished optimization resumed (same id) or replayed (new id, same response cache) gives
the same result and sends no request; a search stopped by its rounds continues when resumed
with more (rounds and budgets may change on a resume, nothing else)."""

from __future__ import annotations

import pytest

import bench.optimize as bo
from bench.errors import BenchError
from tests.api.test_evaluate import Sent  # counts the requests below the cache
from tests.optimize.test_optimize import TARGET



def _same(result) -> dict:
    """A result without what differs between two runs of it: the id, the runs' seconds and
    cache use."""
    return result.model_dump(exclude={"opt_id", "runs"})


def test_resumed_and_replayed_optimizations_send_nothing(shop):
    Sent.count = 0
    first = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                        opt_id="a", layers=[Sent])
    sent = Sent.count
    assert sent == first.result.requests == 13 + 1 + 13 + 42  # dev r0, propose, dev r1, test
    resumed = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                          opt_id="a", layers=[Sent])
    assert Sent.count == sent and resumed.result.requests == first.result.requests
    assert _same(resumed.result) == _same(first.result)
    replayed = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                           opt_id="b", layers=[Sent])
    assert Sent.count == sent and replayed.result.requests == 0
    assert all(r.cache_hits == r.rows for r in replayed.result.runs)
    assert _same(replayed.result) == _same(first.result)
    assert replayed.final.tools == first.final.tools


def test_a_stopped_search_resumes_with_more_rounds(shop):
    stopped = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                          opt_id="c", rounds=1)
    assert stopped.result.stop_reason == "1 round(s) done"
    more = bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                       opt_id="c", rounds=3)
    assert more.result.stop_reason == "no failures on dev in round 2"
    assert more.accepted and more.result.requests == stopped.result.requests
    with pytest.raises(BenchError, match="exists with other settings \\(min_gain\\)"):
        bo.optimize("shop", "start", TARGET, "function:opt-good", project=shop,
                    opt_id="c", min_gain=0.2)


# -- a corrupt stored config -------------------------------------------------------------------


@pytest.mark.parametrize("text, fragment", [('{"x":', "config.json:1: the optimization's "
                                                      "config is not valid JSON"),
                                            ("[1]", "must be a JSON object")])
def test_a_corrupt_optimization_config_is_one_error_not_a_traceback(tmp_path, text, fragment):
    from bench.optimize.config import OptimizeConfig
    from bench.optimize.workspace import Workspace
    from bench.project import Project

    workspace = Workspace(Project(tmp_path), "o1", "shop")
    workspace.root.mkdir(parents=True)
    (workspace.root / "config.json").write_text(text, encoding="utf-8")
    config = OptimizeConfig(dataset="shop", variant="l3", target="oracle", proposer="oracle")
    with pytest.raises(BenchError, match=fragment):
        workspace.prepare(config)
    assert (workspace.root / "config.json").read_text(encoding="utf-8") == text  # kept
