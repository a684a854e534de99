"""Every check of the shipped datasets is live (no check passes by default):

- the ``oracle`` provider passes every single-answer case and every episode;
- the ``do-nothing`` agent fails every case that expects a call, an ask or a state change;
- each episode state check fails when the write it needs is removed from the oracle's
  trajectory (or, for a check that holds on the untouched state, the episode forbids the call
  that would break it), and each answer fact fails when it is left out of the final answer.

tau2-bench's users found a check that passed by default in 72 of 114 tasks
(sierra-research/tau2-bench issue 384); these tests keep bench's datasets from that.
"""

from __future__ import annotations

import json

import pytest

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.episodes.state import EpisodeDatabase
from bench.executor.outcome import RunContext
from bench.executor.pipeline import Executor, ExecutorConfig
from bench.models import Case, Message, ToolCall
from bench.providers.oracle import episode_step
from bench.scoring.episodes import answer_has_fact

SINGLE = ["ecommerce", "analytics", "logistics"]
EPISODES = ["ecommerce-episodes", "analytics-episodes", "logistics-episodes"]


def _rows(project, run_id: str) -> list[dict]:
    path = project / "reports" / "runs" / run_id / "results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("name", SINGLE + EPISODES)
def test_the_oracle_passes_every_case(name, project, run_bench):
    done = run_bench("run", "--dataset", name, "--provider", "oracle", "--variants", "l3",
                     "--split", "all", "--run-id", f"oracle-{name}", "--allow-writes",
                     "--allow-sensitive")
    assert done.returncode == 0, done.stderr
    failed = []
    for row in _rows(project, f"oracle-{name}"):
        m = row["metrics"]
        if "episode" in name:
            ok = m.get("task_success") is True
        else:
            ok = all(m.get(k) is not False for k in ("selection_correct", "arguments_correct",
                                                     "no_call_correct", "ask_correct"))
        if not ok:
            failed.append(row["case_id"])
    assert failed == []


@pytest.mark.slow
@pytest.mark.parametrize("name", SINGLE + EPISODES)
def test_the_do_nothing_agent_fails_every_case_that_expects_work(name, project, run_bench):
    done = run_bench("run", "--dataset", name, "--provider", "do-nothing", "--variants", "l3",
                     "--split", "all", "--run-id", f"idle-{name}")
    assert done.returncode == 0, done.stderr
    cases = {c.id: c for c in load_dataset(name).cases}
    passed = []
    for row in _rows(project, f"idle-{name}"):
        case, m = cases[row["case_id"]], row["metrics"]
        if case.kind == "episode":
            expects_work = bool(case.required_calls or (case.success and (
                case.success.state_checks or case.success.answer_facts)))
            if expects_work and m.get("task_success"):
                passed.append(case.id)
        elif case.expected.ask and m.get("ask_correct"):
            passed.append(case.id)  # silence is not asking
        elif case.expected.calls and m.get("selection_correct"):
            passed.append(case.id)
    assert passed == []


def _simulate(case: Case, tools, skip: int | None = None) -> tuple[list[dict], str, int]:
    """Run the oracle's trajectory of ``case`` on a private database copy, leaving out the
    ``skip``-th write call (answered as if it succeeded); returns (state check results,
    final answer, writes made)."""
    by_name = {t.name: t for t in tools}
    conversation = list(case.messages)
    replies = list(case.user_replies)
    writes = 0
    with EpisodeDatabase(case.state.overrides if case.state else []) as database:
        executor = Executor({case.toolset: database.backends()(case.toolset)},
                            ExecutorConfig(max_retries=0))
        context = RunContext(run_id="live", case_id=case.id, trial=0,
                             user_id=case.state.user_id if case.state else None,
                             allow_writes=True, allow_sensitive=True)
        final = ""
        try:
            for step in range(case.max_steps):
                answer = episode_step(case, conversation, tools)
                if not answer["tool_calls"]:
                    final = answer["text"] or ""
                    if replies:
                        conversation += [Message(role="assistant", content=final),
                                         Message(role="user", content=replies.pop(0))]
                        continue
                    break
                calls = [ToolCall(id=f"c{step}_{i}", name=c["name"], arguments=c["arguments"])
                         for i, c in enumerate(answer["tool_calls"])]
                conversation.append(Message(role="assistant", tool_calls=[
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]))
                for call in calls:
                    is_write = by_name[call.name].permission in ("write", "sensitive")
                    if is_write:
                        writes += 1
                    if is_write and writes - 1 == skip:
                        content, error = json.dumps({"success": True, "data": {}}), None
                    else:
                        result = executor.execute(call, by_name, case.toolset, context)
                        content = json.dumps({"success": result.success, "data": result.data,
                                              "error": result.error}, default=str)
                        error = None if result.success else True
                    conversation.append(Message(role="tool", tool_call_id=call.id,
                                                content=content, is_error=error))
        finally:
            executor.close()
        checks = database.check(case.success.state_checks) if case.success else []
    return checks, final, writes


def _episodes() -> list[Case]:
    return [c for name in EPISODES for c in load_dataset(name).cases]


@pytest.mark.slow
@pytest.mark.parametrize("case", _episodes(), ids=lambda c: c.id)
def test_each_state_check_and_fact_depends_on_the_work(case):
    tools = load_variant(case.toolset, "l3").tools
    checks, final, writes = _simulate(case, tools)
    assert all(c["ok"] for c in checks), checks
    facts = case.success.answer_facts if case.success else []
    for i, alternatives in enumerate(facts):
        assert answer_has_fact(final, alternatives)
        without = " ".join(a[0] for j, a in enumerate(facts) if j != i) or "Done."
        assert not answer_has_fact(without, alternatives), \
            f"fact {i} {alternatives} holds without being said"
    if not checks:
        return
    broken = [False] * len(checks)
    for skip in range(writes):
        mutated, _, _ = _simulate(case, tools, skip)
        broken = [b or not c["ok"] for b, c in zip(broken, mutated)]
    for i, (check, was_broken) in enumerate(zip(checks, broken)):
        if not was_broken:  # holds without any write: it can only guard a forbidden call
            assert case.forbidden_calls, f"state check {i} passes without the episode's " \
                                         f"writes: {check['sql']}"
