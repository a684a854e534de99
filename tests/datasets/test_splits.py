"""dev/test splits: the seeded, stratified assignment, ``bench split``, ``bench run --split``,
and the refusal to compare or gate runs of different splits."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from bench.datasets import load_dataset
from bench.datasets.sample import stratum
from bench.datasets.splits import (
    assign_splits,
    refuse_mixed_splits,
    resolve_split,
    select_split,
    split_stratum,
)
from bench.errors import BenchError
from bench.models import Case

SHIPPED = ["ecommerce", "analytics", "logistics", "ecommerce-episodes", "analytics-episodes",
           "logistics-episodes"]


def _case(i: int, tool: str | None, lang: str = "en", split: str | None = None) -> Case:
    expected = {"calls": [{"name": tool, "arguments": {}}]} if tool else {"no_call": True}
    return Case.model_validate({"id": f"c{i}", "toolset": "t", "lang": lang, "split": split,
                                "messages": [{"role": "user", "content": f"q{i}"}],
                                "expected": expected})


def test_each_stratum_gets_its_share_of_dev():
    cases = [_case(i, tool, lang) for i, (tool, lang) in enumerate(
        [("a", "en")] * 10 + [("a", "zh")] * 7 + [("b", "en")] * 5 + [(None, "en")] * 3)]
    split = assign_splits(cases, dev_fraction=0.3, seed=1)
    by_stratum: dict[str, Counter[str]] = {}
    for case in cases:
        by_stratum.setdefault(split_stratum(case), Counter())[split[case.id]] += 1
    for key, counts in by_stratum.items():
        n = sum(counts.values())
        assert counts["dev"] == math.ceil(0.3 * n), key


def test_forced_cases_go_to_dev_and_the_split_is_seeded_and_stable():
    cases = [_case(i, "a") for i in range(20)]
    first = assign_splits(cases, seed=7, forced_dev={"c3", "c4", "c5", "c6", "c7", "c8", "c9"})
    assert all(first[f"c{i}"] == "dev" for i in range(3, 10))
    assert Counter(first.values())["dev"] == 7  # the forced ones exceed the 30% target
    assert assign_splits(cases, seed=7) == assign_splits(cases, seed=7)
    assert assign_splits(cases, seed=7) != assign_splits(cases, seed=8)
    # a case's rank hashes its own id: adding cases to another stratum moves nobody
    more = cases + [_case(100 + i, "b") for i in range(5)]
    base = assign_splits(cases, seed=7)
    assert {k: v for k, v in assign_splits(more, seed=7).items() if k in base} == base


def test_resolve_and_select():
    marked = [_case(0, "a", split="dev"), _case(1, "a", split="test")]
    assert resolve_split(marked, None) == "test"
    assert [c.id for c in select_split(marked, "test")] == ["c1"]
    assert [c.id for c in select_split(marked, "all")] == ["c0", "c1"]
    plain = [_case(0, "a"), _case(1, "a")]
    assert resolve_split(plain, None) == "all"
    with pytest.raises(BenchError, match="no 'split' field"):
        resolve_split(plain, "test")
    with pytest.raises(BenchError, match="1 of 2 cases have no 'split'"):
        resolve_split([_case(0, "a", split="dev"), _case(1, "a")], None)


def test_mixed_splits_are_refused():
    refuse_mixed_splits({"a": "test", "b": "test"})
    with pytest.raises(BenchError, match="'a' ran the test split, 'b' ran the all split"):
        refuse_mixed_splits({"a": "test", "b": "all"})


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_datasets_have_a_stratified_split(name):
    cases = load_dataset(name).cases
    assert all(c.split in ("dev", "test") for c in cases)
    counts = Counter(c.split for c in cases)
    # forced mirrors add to the 30%: ecommerce's 27 reviewed paraphrase mirrors (its datasheet)
    # took it to 152 dev of 279 (54%)
    assert 0.25 <= counts["dev"] / len(cases) <= 0.55, counts
    # test measures every tool: each expected tool (and no-call, ask) with 4 or more cases has
    # test cases (a kind x tool x language stratum may be all dev when descriptions mirror
    # every case of it: the datasheet lists those)
    members = Counter((c.kind, stratum(c)) for c in cases)
    in_test = {(c.kind, stratum(c)) for c in cases if c.split == "test"}
    big = {s for s, n in members.items() if n >= 4}
    assert big <= in_test, big - in_test


def _write(path, cases):
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases),
                    encoding="utf-8")


def _plain_cases(n: int) -> list[dict]:
    tools = ["search_orders", "get_order_status"]
    return [{"id": f"u{i:03d}", "toolset": "ecommerce", "lang": "en",
             "messages": [{"role": "user", "content": f"question {i}"}],
             "expected": {"calls": [{"name": tools[i % 2],
                                     "arguments": {"order_id": ["ORD20260101"]}
                                     if tools[i % 2] == "get_order_status" else {}}]}
             if i % 3 else {"no_call": True}} for i in range(n)]


@pytest.mark.slow
def test_bench_split_writes_the_field_and_run_uses_test_by_default(project, run_bench):
    path = project / "mine.jsonl"
    _write(path, _plain_cases(12))
    before = run_bench("run", "--dataset", str(path), "--provider", "oracle", "--variants",
                       "l3", "--run-id", "plain", "--no-execute")
    assert before.returncode == 0, before.stderr
    assert "has no dev/test split: figures are on all its cases" in before.stderr
    assert "plain, all split" in before.stdout

    done = run_bench("split", str(path), "--no-leaks")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert {r["split"] for r in rows} == {"dev", "test"}
    assert list(rows[0])[:4] == ["id", "toolset", "lang", "split"]  # placed after lang
    test_ids = {r["id"] for r in rows if r["split"] == "test"}

    run = run_bench("run", "--dataset", str(path), "--provider", "oracle", "--variants",
                    "l3", "--run-id", "t1", "--no-execute")
    assert run.returncode == 0, run.stderr
    assert "t1, test split" in run.stdout
    manifest = json.loads((project / "reports/runs/t1/manifest.json").read_text())
    assert manifest["config"]["split"] == "test"
    stored = {json.loads(line)["case_id"] for line in
              (project / "reports/runs/t1/results.jsonl").read_text().splitlines()}
    assert stored == test_ids

    dev_id = next(r["id"] for r in rows if r["split"] == "dev")
    named = run_bench("run", "--dataset", str(path), "--provider", "oracle", "--variants",
                      "l3", "--cases", dev_id, "--no-execute", "--run-id", "named")
    assert named.returncode == 0, named.stderr  # cases named by id: every split
    assert "named, all split" in named.stdout
    wrong = run_bench("run", "--dataset", str(path), "--provider", "oracle", "--variants",
                      "l3", "--cases", dev_id, "--split", "test", "--no-execute")
    assert wrong.returncode == 2
    assert f"case '{dev_id}' is in the dev split, not test: add --split dev" in wrong.stderr

    run_bench("run", "--dataset", str(path), "--provider", "oracle", "--variants", "l3",
              "--run-id", "d1", "--split", "dev", "--no-execute")
    refused = run_bench("compare", "t1", "d1")
    assert refused.returncode == 2
    assert "cannot compare runs of different splits" in refused.stderr
    old = run_bench("compare", "t1", "plain")  # a run stored with all cases
    assert old.returncode == 2 and "'plain' ran the all split" in old.stderr


def test_a_baseline_of_another_split_is_refused():
    from bench.gate.config import GateConfig
    from bench.gate.core import evaluate

    config = GateConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"])
    baseline = {"dataset": {"name": "ecommerce"}, "variants": [], "summary": {},
                "outcomes": {}}  # recorded before splits: all cases
    with pytest.raises(BenchError, match="'the baseline' ran the all split, 'this gate run' "
                                         "ran the test split"):
        evaluate(config, [], baseline, split="test")
