"""A recorded episode run replays offline: ``bench run --cache readwrite`` against the
loopback fake server (OpenAI Chat Completions wire protocol), then ``--provider
replay:<cache>`` and ``replay:<run-id>`` with the server stopped give the same trajectories
(calls, results as sent back, answers, tokens) and the same metrics. Each step of an episode
is its own request, keyed on the conversation so far (docs/cache-replay-batch.md)."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from bench.descriptions import load_variant
from bench.models import Case
from bench.providers.replay import ReplayMiss, ReplayProvider
from tests.fakeserver import FakeServer, Reply, chat_body

pytestmark = pytest.mark.slow  # three `bench run` subprocesses

EPISODES = [
    {"id": "rep-parallel", "toolset": "ecommerce", "lang": "en", "kind": "episode",
     "messages": [{"role": "user", "content": "Check ORD20250002 and ORD99999999, then "
                                              "track the first one's parcel."}],
     "success": {"answer_facts": [["delivered"]]},
     "required_calls": [
         {"name": "get_order_status", "arguments": {"order_id": ["ORD20250002"]}},
         {"name": "track_shipment", "arguments": {"tracking_number": ["EA515077827CN"]},
          "after": [0]}],
     "max_steps": 5},
    {"id": "rep-single", "toolset": "ecommerce", "lang": "zh", "kind": "episode",
     "messages": [{"role": "user", "content": "ORD20250003 到了吗？"}],
     "success": {"answer_facts": [["delivered", "已签收"]]},
     "required_calls": [{"name": "get_order_status",
                         "arguments": {"order_id": ["ORD20250003"]}}],
     "max_steps": 4},
]
# per case, the calls of each step; after the last, a final answer naming the trial
SCRIPTS = {
    "Check ORD20250002": [[("get_order_status", {"order_id": "ORD20250002"}),
                           ("get_order_status", {"order_id": "ORD99999999"})],
                          [("track_shipment", {"tracking_number": "EA515077827CN"})]],
    "ORD20250003": [[("get_order_status", {"order_id": "ORD20250003"})]],
}


def answer(request):
    """The scripted model: the step is the number of assistant turns so far, so answers
    do not depend on the order in which concurrent episodes arrive."""
    messages = request.body["messages"]
    question = messages[0]["content"]
    script = next(steps for start, steps in SCRIPTS.items() if question.startswith(start))
    step = sum(1 for m in messages if m["role"] == "assistant")
    prompt = 100 + 10 * len(messages)  # tokens grow with the conversation, as real ones do
    if step < len(script):
        return Reply(body=chat_body(calls=script[step], usage=(prompt, 12, 0)))
    trial = request.body["seed"] - 1234
    return Reply(body=chat_body(text=f"delivered (trial {trial})", usage=(prompt, 5, 0)))


def rows_of(project, run_id):
    """The run's rows by ``<case>|<trial>``."""
    path = project / "reports" / "runs" / run_id / "results.jsonl"
    return {row["key"].split("|")[0] + f"|{row['trial']}": row
            for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def trajectory(row):
    """What replay must reproduce: every step without its timing and cache status."""
    return [{k: v for k, v in step.items() if k not in ("latency_s", "cache")}
            for step in row["episode"]["steps"]]


def test_recorded_episodes_replay_offline_from_the_cache_and_from_the_run(run_bench, project,
                                                                           tmp_path):
    dataset = tmp_path / "episodes.jsonl"
    dataset.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in EPISODES),
                       encoding="utf-8")
    common = ("run", "--dataset", str(dataset), "--variants", "l3", "--trials", "2")
    with FakeServer(handler=answer) as server:
        recorded = run_bench(*common, "--provider", f"openai-compat:fake@{server.url}/v1",
                             "--cache", "readwrite", "--run-id", "rec", timeout=600)
        sent = len(server.requests)
    assert recorded.returncode == 0, recorded.stderr
    # 2 trials x (3 steps + 2 steps): every step was asked once
    assert sent == 10
    cache = project / "reports" / "cache" / "responses.sqlite"
    original = rows_of(project, "rec")
    assert len(original) == 4
    assert [len(original[f"rep-parallel|{t}"]["episode"]["steps"]) for t in (0, 1)] == [3, 3]
    assert original["rep-parallel|1"]["episode"]["final_answer"] == "delivered (trial 1)"

    for source, run_id in ((str(cache), "from-cache"), ("rec", "from-run")):
        replayed = run_bench(*common, "--provider", f"replay:{source}", "--run-id", run_id,
                             timeout=600)  # the server is gone: nothing can be asked
        assert replayed.returncode == 0, replayed.stderr
        again = rows_of(project, run_id)
        assert sorted(again) == sorted(original)
        for key, row in original.items():
            assert trajectory(again[key]) == trajectory(row), (source, key)
            assert again[key]["metrics"] == row["metrics"], (source, key)
            assert again[key]["usage"] == row["usage"], (source, key)
            assert again[key]["episode"]["final_answer"] == row["episode"]["final_answer"]
            assert again[key]["episode"]["stop_reason"] == row["episode"]["stop_reason"]
            assert again[key]["provider"] == f"replay:{source}"

    # an episode row that does not record its steps' conversations (written before steps
    # carried them) answers nothing: a miss naming the case, never a one-step empty episode
    old = project / "reports" / "runs" / "old"
    shutil.copytree(project / "reports" / "runs" / "rec", old)
    rows = [json.loads(line) for line in
            (old / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    for row in rows:
        for step in row["episode"]["steps"]:
            del step["messages_sha256"], step["parsed"]
    (old / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                       encoding="utf-8")
    case = Case.model_validate(EPISODES[1])
    with pytest.raises(ReplayMiss):
        asyncio.run(ReplayProvider("replay:old").complete(
            case.messages, load_variant("ecommerce", "l3").tools, variant_key="l3", trial=0))
