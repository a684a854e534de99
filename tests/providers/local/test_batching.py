"""The embedded model decoding several cases at once over the shared tools block
(bench/providers/local/batching.py): the same answers as one case at a time, slots retired
and refilled as answers finish, saved tools-block states still used, and the provider's
overlapping requests answered by the batching worker.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from conftest import requires_local_model

pytestmark = [requires_local_model, pytest.mark.model, pytest.mark.slow]


def _engine(**options):
    from bench.providers.local import DEFAULT_NO_CALL_LAYOUT, NO_CALL_LAYOUTS, resolve_model_path
    from bench.providers.local.engine import LocalEngine
    return LocalEngine(resolve_model_path(None), n_ctx=4096, threads=2, seed=1234,
                       layout=NO_CALL_LAYOUTS[DEFAULT_NO_CALL_LAYOUT], speculative=False,
                       **options)


def _cases(count: int):
    from bench.datasets.loader import load_dataset
    cases = [c for c in load_dataset("ecommerce").cases if c.kind != "episode"]
    step = len(cases) // count
    return [cases[i * step] for i in range(count)]


@pytest.fixture(scope="module")
def l3():
    from bench.descriptions.variants import load_variant
    return load_variant("ecommerce", "l3")


def _single(variant, cases, budgets):
    engine = _engine(save_states=False)
    try:
        return [engine.complete(c.messages, variant.tools, variant_key=variant.name,
                                max_tokens=b).text for c, b in zip(cases, budgets)]
    finally:
        engine.close()


def _batched(engine, variant, cases, budgets):
    """Every case through the batch, refilled as slots free; (answer texts in case order,
    most sequences in flight at once, the engine's answers by case index)."""
    batcher = engine.batcher
    queue = list(enumerate(zip(cases, budgets)))
    answers = {}
    most = 0
    while queue or batcher.active:
        while queue and batcher.admit(queue[0][0], queue[0][1][0].messages, variant.tools,
                                      variant_key=variant.name, max_tokens=queue[0][1][1]):
            queue.pop(0)
        most = max(most, batcher.active)
        for key, answer in batcher.step():
            answers[key] = answer
    return [answers[i].text for i in range(len(cases))], most, answers


def test_batched_answers_equal_the_answers_decoded_one_at_a_time(l3):
    cases = _cases(6)
    budgets = [256] * len(cases)
    reference = _single(l3, cases, budgets)
    engine = _engine(save_states=False, batch=3)
    try:
        batched, most, answers = _batched(engine, l3, cases, budgets)
        steps = engine.batcher.steps
    finally:
        engine.close()
    assert batched == reference
    assert all(json.loads(text)["tool_calls"] for text in batched)
    assert most == 3
    # one at a time costs one evaluation per chosen token; one llama_decode serves three
    assert steps < 0.6 * sum(a.sampled_tokens for a in answers.values())


def test_finished_sequences_are_retired_and_their_slots_refilled(l3):
    """Answers end at different lengths (budgets of 2 and 256 tokens): each finished
    sequence leaves the KV cache and its slot takes the next case, and every case is
    answered. The cut answers are the ones decoded alone; a whole answer may differ from it
    where a near-tie flips (a token evaluated beside a new case's prompt goes through other
    matrix kernels): the second case here did on the project's machine, and
    benchmarks/local_batching.py measures the share (RESULTS.md)."""
    cases = _cases(5)
    budgets = [2, 256, 2, 256, 256]
    reference = _single(l3, cases, budgets)
    engine = _engine(save_states=False, batch=2)
    try:
        batched, most, answers = _batched(engine, l3, cases, budgets)
        lib, ctx = engine._lib, engine._ctx
        memory = lib.llama_get_memory(ctx)
        left = [lib.llama_memory_seq_pos_max(memory, seq) for seq in (1, 2)]
        shared = lib.llama_memory_seq_pos_max(memory, 0)
        prefix = len(engine._variants[l3.name].prefix)
    finally:
        engine.close()
    assert [batched[i] for i in (0, 2)] == [reference[i] for i in (0, 2)]
    assert all(json.loads(batched[i])["tool_calls"] for i in (1, 3, 4))
    reasons = [answers[i].finish_reason for i in range(len(cases))]
    assert reasons[0] == reasons[2] == "length" and reasons[1] == "stop"
    assert most == 2
    assert left == [-1, -1]  # retired sequences hold no cells
    assert shared == prefix - 1  # the tools block stays in sequence 0 for the next cases


def test_a_saved_tools_block_state_loads_into_a_batching_engine(l3, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    cases = _cases(3)
    budgets = [256] * len(cases)
    single = _engine(save_states=True)
    try:
        reference = [single.complete(c.messages, l3.tools, variant_key=l3.name,
                                     max_tokens=256).text for c in cases]
    finally:
        single.close()
    assert len(list((tmp_path / "local-state").glob("*.state"))) == 1
    engine = _engine(save_states=True, batch=2)
    notes: list[str] = []
    engine.notify = notes.append  # announced only when the tools block is read, not loaded
    try:
        batched, _, _ = _batched(engine, l3, cases, budgets)
    finally:
        engine.close()
    assert not [n for n in notes if "reading the tools block" in n], notes
    assert batched == reference


def test_the_provider_answers_overlapping_requests_as_one_at_a_time(l3):
    """Four requests in flight at once through a provider of batch 2 (the worker batches
    them; the rest wait and refill) get the answers of a provider that decodes one at a
    time."""
    from bench.providers.local import LocalProvider
    cases = _cases(4)

    async def ask(provider):
        return await asyncio.gather(*(provider.complete(c.messages, l3.tools,
                                                        variant_key=l3.name, trial=0)
                                      for c in cases))

    answers = {}
    for batch in (1, 2):
        provider = LocalProvider(threads=2, batch=batch, n_ctx=4096)
        try:
            assert provider.max_concurrency == batch
            answers[batch] = [r.raw for r in asyncio.run(ask(provider))]
        finally:
            provider.close()
    assert answers[2] == answers[1]
    assert all(answers[2])
