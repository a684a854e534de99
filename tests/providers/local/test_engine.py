"""The embedded model's engine: its shortcuts change speed, never answers.

- checking the most likely tokens first gives the same answers as applying the grammar to the
  whole vocabulary at every step;
- a prefix state saved on disk gives the same answers as reading the tools block again;
- the default model answers a fixed set of cases exactly as recorded in
  ``tests/data/local_golden.json``, on every supported llama.cpp build (the portable build of
  the README; rerun with another build, e.g. ``PYTHONPATH=<avx512 build> pytest -k golden``).
  Re-record after an intended change with ``BENCH_RECORD_GOLDEN=1``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import requires_local_model

pytestmark = [requires_local_model, pytest.mark.model]

GOLDEN = Path(__file__).parents[2] / "data" / "local_golden.json"
GOLDEN_CASES = 8


def _engine(**options):
    from bench.providers.local import NO_CALL_LAYOUTS, DEFAULT_NO_CALL_LAYOUT, resolve_model_path
    from bench.providers.local.engine import LocalEngine
    return LocalEngine(resolve_model_path(None), n_ctx=4096, threads=2, seed=1234,
                       layout=NO_CALL_LAYOUTS[DEFAULT_NO_CALL_LAYOUT], **options)


def _cases(count: int):
    from bench.datasets.loader import load_dataset
    cases = list(load_dataset("ecommerce").cases)
    step = len(cases) // count
    return [cases[i * step] for i in range(count)]


def _answers(engine, variant, cases):
    return [engine.complete(c.messages, variant.tools, variant_key=variant.name,
                            max_tokens=256).text for c in cases]


@pytest.fixture(scope="module")
def l3():
    from bench.descriptions.variants import load_variant
    return load_variant("ecommerce", "l3")


def test_top_tokens_first_gives_the_answers_of_the_whole_vocabulary(l3):
    cases = _cases(4)
    fast = _engine(save_states=False)
    try:
        quick = _answers(fast, l3, cases)
    finally:
        fast.close()
    slow = _engine(save_states=False, top_first=False)
    try:
        reference = _answers(slow, l3, cases)
    finally:
        slow.close()
    assert quick == reference
    assert all(json.loads(text)["tool_calls"] for text in quick)


def test_a_saved_prefix_state_gives_the_same_answers(l3, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    cases = _cases(3)
    first = _engine(save_states=True)
    notes: list[str] = []
    first.notify = notes.append  # the worker relays these lines to the run's stderr
    try:
        computed = _answers(first, l3, cases)
    finally:
        first.close()
    saved = list((tmp_path / "local-state").glob("*.state"))
    assert len(saved) == 1
    assert len(notes) == 1 and "reading the tools block" in notes[0], notes
    assert "then saved" in notes[0]
    second = _engine(save_states=True)
    second.notify = notes.append
    try:
        answer = second.complete(cases[0].messages, l3.tools, variant_key="l3", max_tokens=256)
        loaded = [answer.text, *_answers(second, l3, cases[1:])]
    finally:
        second.close()
    assert answer.cached_tokens >= 2000  # the tools block came from the file
    assert loaded == computed
    assert len(notes) == 1  # a loaded state is not announced: it takes under a second


def test_the_default_model_gives_the_recorded_answers(l3):
    """Same raw answers on a fixed set of queries (greedy decoding is deterministic for a given
    model file; the llama.cpp build must not change it). The golden file keeps each query with
    its answer, so relabelling or editing the dataset does not move it."""
    from bench.models import Message
    recording = bool(os.environ.get("BENCH_RECORD_GOLDEN"))
    if recording:
        queries = {c.id: list(c.messages) for c in _cases(GOLDEN_CASES)}
    else:
        stored = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]
        queries = {cid: [Message.model_validate(m) for m in item["messages"]]
                   for cid, item in stored.items()}
    engine = _engine(save_states=False)
    try:
        answers = {cid: engine.complete(messages, l3.tools, variant_key=l3.name,
                                        max_tokens=256).text
                   for cid, messages in queries.items()}
        build = engine.system_info()
    finally:
        engine.close()
    if recording:
        GOLDEN.parent.mkdir(exist_ok=True)
        cases = {cid: {"messages": [m.model_dump(exclude_none=True) for m in queries[cid]],
                       "answer": answers[cid]} for cid in queries}
        GOLDEN.write_text(json.dumps({"recorded_with": build, "cases": cases},
                                     ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]
    assert answers == {cid: item["answer"] for cid, item in recorded.items()}, build


def test_speculative_decoding_gives_the_same_answers(l3):
    """Prompt-lookup speculation (guesses verified in one batch, the rest of the KV cache
    removed) gives the answers of one token at a time on these recorded queries (elsewhere a
    batch's slightly different logits can flip a near-tie: benchmarks/RESULTS.md)."""
    from bench.models import Message
    stored = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]
    queries = [[Message.model_validate(m) for m in item["messages"]]
               for item in list(stored.values())[:3]]
    engine = _engine(save_states=False, speculative=False)
    try:
        plain = [engine.complete(m, l3.tools, variant_key=l3.name, max_tokens=256)
                 for m in queries]
        engine.draft_tokens = 4
        drafted = [engine.complete(m, l3.tools, variant_key=l3.name, max_tokens=256)
                   for m in queries]
    finally:
        engine.close()
    assert [a.text for a in drafted] == [a.text for a in plain]
    assert [a.finish_reason for a in drafted] == [a.finish_reason for a in plain]
    assert sum(a.drafted_tokens for a in drafted) > 0  # guesses were made and verified
    assert all(a.drafted_tokens == 0 for a in plain)


def test_tool_lists_met_in_answers_past_the_first_save_no_state_and_few_grammars(
        l3, tmp_path, monkeypatch):
    """A retriever sends a new tool list with nearly every case: past the first lists met,
    none is saved to disk, and only the newest keep their grammars."""
    from bench.providers.local import engine as engine_module
    monkeypatch.setattr(engine_module, "TRANSIENT_KEPT", 1)
    monkeypatch.setattr(engine_module, "MIN_SAVED_PREFIX_TOKENS", 16)  # any list is saveable
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    case = _cases(1)[0]
    engine = _engine(save_states=True)
    try:
        for i in range(4):  # four different lists of two tools each
            engine.complete(case.messages, l3.tools[i:i + 2], variant_key=f"list{i}",
                            max_tokens=64)
        kept = set(engine._variants)
    finally:
        engine.close()
    assert len(list((tmp_path / "local-state").glob("*.state"))) == 1  # the first list only
    assert kept == {"list0", "list3"}  # the first, kept as prepared; the newest transient


def test_an_answer_costs_one_evaluation_per_chosen_token(l3):
    """llama.cpp evaluates tokens only when logits are read: the case's prompt with the first
    punctuation, then each chosen token with the punctuation after it; the last chosen token
    is never evaluated (docs/embedded-model.md, "Decoding")."""
    engine = _engine(save_states=False)
    calls: list[int] = []
    evaluate = engine.llm.eval

    def counted(tokens):
        calls.append(len(tokens))
        evaluate(tokens)

    try:
        engine.complete(_cases(1)[0].messages, l3.tools, variant_key=l3.name,
                        max_tokens=256)  # reads the tools block
        for case in _cases(4):
            engine.forget_case()
            calls.clear()
            engine.llm.eval = counted
            answer = engine.complete(case.messages, l3.tools, variant_key=l3.name,
                                     max_tokens=256)
            engine.llm.eval = evaluate
            assert answer.finish_reason == "stop", answer
            assert len(calls) == answer.sampled_tokens, (calls, answer)
            # the prompt's tail and the answer's first punctuation, '{"tool_calls": [', together
            assert calls[0] > len(engine.llm.tokenize(b'{"tool_calls": [', add_bos=False))
            assert sum(calls) == answer.prompt_tokens - answer.cached_tokens \
                + answer.completion_tokens - 1  # all but the last chosen token
    finally:
        engine.close()
