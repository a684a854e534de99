"""Many tools: distractor catalogs, tool retrieval, their conditions, rows and metrics."""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench import evaluate
from bench.datasets import check_against_tools, load_dataset
from bench.descriptions import load_variant
from bench.episodes.factors import Factors, split_condition
from bench.errors import BenchError
from bench.models import Tool
from bench.providers.function import register_function
from bench.runner import RunConfig
from bench.toolspace.distractors import expand_variant, source_toolsets
from bench.vectors import VectorCache
from bench.toolspace.retrieval import (
    Bm25Retriever,
    EmbeddingRetriever,
    recall_at_k,
    tokenize,
    tool_document,
)
from bench.toolspace.signal import retrieval_signal
from bench.toolspace.space import MAX_TOOLS, ToolSpace, space_grid
from conftest import requires_local_model
from tests.scoring.test_assignment import python

# --- conditions ------------------------------------------------------------------------------


def test_tool_space_conditions_compose_with_variants_and_episode_factors():
    grid = space_grid([13, 40], ["none", "bm25"], [3])
    names = [space.condition("l3") for space in grid]
    assert names == ["l3~tools=13", "l3~tools=13~retriever=bm25~top_k=3", "l3~tools=40",
                     "l3~tools=40~retriever=bm25~top_k=3"]
    composed = Factors(fault="503").condition(grid[1].condition("l3"))
    assert composed == "l3~tools=13~retriever=bm25~top_k=3~fault=503"
    assert split_condition(composed) == ("l3", {"tools": "13", "retriever": "bm25",
                                                "top_k": "3", "fault": "503"})
    assert space_grid() == [] and space_grid([], ["none"]) == []  # the variants as they are
    assert space_grid([], ["bm25"]) == [ToolSpace(None, "bm25", 5)]  # default top-k


@pytest.mark.parametrize("settings, message", [
    ({"retrievers": ["tfidf"]}, "retriever must be one of none, bm25, embedding"),
    ({"top_k": [3]}, "--top-k needs a retriever"),
    ({"tools": [0]}, "tools must be between 1"),
])
def test_bad_tool_space_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**settings)


# --- distractor catalogs ---------------------------------------------------------------------


@pytest.fixture
def bfcl_tools(project):
    """The project with the BFCL sample's functions imported as toolset ``bfcl`` (its
    variant ``bfcl`` only: distractors, no dataset), as ``bench import bfcl`` writes them."""
    from conftest import bfcl_sample_dir

    from bench.importers.bfcl import import_bfcl
    from bench.importers.common import write_variant

    sample = bfcl_sample_dir()
    if sample is None:
        pytest.skip("the BFCL sample is not on this machine")
    files = [sample / f"BFCL_v4_{c}.json" for c in ("simple_python", "multiple")]
    imported = import_bfcl(files, toolset="bfcl")
    write_variant("bfcl", "bfcl", imported.toolset, root=project / "descriptions",
                  header="BFCL sample (test)")
    return project


def test_a_grown_catalog_keeps_every_own_tool_unchanged_and_draws_stratified(bfcl_tools):
    base = load_variant("ecommerce", "l3")
    grown = expand_variant(base, 40, seed=7)
    tools = {t.name: t for t in grown.variant.tools}
    assert len(grown.variant.tools) == 40 and len(tools) == 40  # names unique
    assert all(tools[t.name] == t for t in base.tools)  # own tools unchanged
    assert grown.own == tuple(t.name for t in base.tools)
    # three sources give 27 distractors, one each in turn
    assert source_toolsets("ecommerce") == ["analytics", "bfcl", "logistics"]
    assert grown.sources == {"analytics": 9, "bfcl": 9, "logistics": 9}
    # shipped toolsets at the case's level; BFCL's functions as imported (its one variant)
    assert grown.levels == {"analytics": "l3", "bfcl": "bfcl", "logistics": "l3"}
    # labels stay valid: every case's expected tools and arguments are in the catalog
    check_against_tools(load_dataset("ecommerce"), "ecommerce", grown.variant.tools)


def test_distractors_are_drawn_one_per_source_in_turn_and_nested(project):
    base = load_variant("ecommerce", "l30")
    small = expand_variant(base, 19, seed=1)
    large = expand_variant(base, 31, seed=1)
    assert small.sources == {"analytics": 3, "logistics": 3}
    assert large.sources == {"analytics": 9, "logistics": 9}
    assert {t.name for t in small.variant.tools} <= {t.name for t in large.variant.tools}
    assert small.levels == {"analytics": "l30", "logistics": "l30"}  # the case's level


def test_the_draw_and_the_order_are_seeded(project):
    base = load_variant("ecommerce", "l3")
    first = [t.name for t in expand_variant(base, 30, seed=5).variant.tools]
    again = [t.name for t in expand_variant(base, 30, seed=5).variant.tools]
    other = [t.name for t in expand_variant(base, 30, seed=6).variant.tools]
    assert first == again
    assert first != other
    assert first[:13] != [t.name for t in base.tools]  # own tools are not always first


def _write_toolset(project, name, tools, variant="v1"):
    folder = project / "descriptions" / name / "variants"
    folder.mkdir(parents=True)
    lines = ["tools:"]
    for tool_name, description in tools:
        lines += [f"  - name: {tool_name}", f"    description: {json.dumps(description)}",
                  "    input_schema: {type: object, properties: {q: {type: string}}}"]
    (folder / f"{variant}.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_name_collisions_are_renamed_and_reported_never_the_own_tools(project):
    _write_toolset(project, "dup", [("search_orders", "Search another shop's orders."),
                                    ("search_orders__dup", "Taken on purpose.")])
    base = load_variant("ecommerce", "l3")
    grown = expand_variant(base, 15, seed=1, sources=["dup"])
    names = [t.name for t in grown.variant.tools]
    assert names.count("search_orders") == 1
    assert base.tool("search_orders") in grown.variant.tools  # the own one kept its name
    renamed = {(c.source, c.name): c.renamed for c in grown.collisions}
    # the distractor search_orders is renamed search_orders__dup, or, when the other
    # distractor took that name first, that one is renamed in turn (draw order is seeded)
    assert renamed in ({("dup", "search_orders"): "search_orders__dup_2"},
                       {("dup", "search_orders"): "search_orders__dup",
                        ("dup", "search_orders__dup"): "search_orders__dup__dup"})
    assert len(set(names)) == 15 and set(renamed.values()) <= set(names)
    described = grown.describe()
    assert described.collisions and described.levels == {"dup": "v1"}


def test_a_source_without_the_level_gives_its_nearest_one(project):
    # an imported toolset has only its hand-written variant: that one is used at every level
    _write_toolset(project, "imported", [(f"tool_{i}", f"Tool number {i}.") for i in range(5)],
                   variant="bfcl")
    for level in ("l3", "l50"):
        grown = expand_variant(load_variant("ecommerce", level), 18, seed=1,
                               sources=["imported"])
        assert grown.levels == {"imported": "bfcl"}


def test_too_few_distractors_or_a_count_below_the_toolset_is_one_line(project):
    base = load_variant("ecommerce", "l3")
    with pytest.raises(BenchError, match="below the 13 tools of toolset 'ecommerce'"):
        expand_variant(base, 5, seed=1)
    with pytest.raises(BenchError, match=r"--tools 40: .* \(analytics, logistics\) 22: "
                                         "import more"):
        expand_variant(base, 40, seed=1)


# --- retrieval -------------------------------------------------------------------------------


def test_the_tokenizer_splits_cjk_into_bigrams_and_latin_into_words():
    assert tokenize("帮我查耳机订单 searchOrders ＡＢＣ 货") == [
        "帮我", "我查", "查耳", "耳机", "机订", "订单", "search", "orders", "abc", "货"]


def _tool(name, description):
    return Tool(name=name, description=description, input_schema={"type": "object"})


CATALOG = [_tool("cancel_order", "Cancel an order that has not shipped. 取消订单"),
           _tool("track_shipment", "Where a parcel is now: carrier, status, last scan. 查询物流"),
           _tool("refund_order", "Refund a delivered order. 退款")]


def test_bm25_ranks_the_matching_tool_first_in_english_and_chinese():
    rankings = Bm25Retriever().rank(CATALOG, ["where is my parcel now?", "帮我取消订单",
                                              "zzz"])
    assert rankings[0][0] == 1 and rankings[1][0] == 0
    assert rankings[2] == [0, 1, 2]  # nothing matches: catalog order (deterministic ties)
    assert recall_at_k(rankings[0], CATALOG, ["track_shipment"], 1) == 1.0
    assert recall_at_k(rankings[0], CATALOG, ["track_shipment", "refund_order"], 1) == 0.5
    assert recall_at_k(rankings[0], CATALOG, [], 1) is None


class BagOfWords:
    """A deterministic embedder for the ranking plumbing: one dimension per token of a fixed
    vocabulary (the real model is tested under the ``model`` marker)."""

    def __init__(self, vocabulary):
        self.index = {w: i for i, w in enumerate(vocabulary)}

    def embed(self, texts):
        out = np.zeros((len(texts), len(self.index)))
        for row, text in enumerate(texts):
            for token in tokenize(text):
                if token in self.index:
                    out[row, self.index[token]] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1)


def test_the_embedding_retriever_ranks_by_cosine_similarity():
    vocabulary = sorted({t for tool in CATALOG for t in tokenize(tool_document(tool))})
    ranking = EmbeddingRetriever(BagOfWords(vocabulary)).rank(CATALOG, ["refund my order"])
    assert ranking[0][0] == 2


def test_the_vector_cache_round_trips_through_sqlite(tmp_path):
    cache = VectorCache(tmp_path / "e.sqlite", "model-a")
    cache.put({"k1": np.array([1.0, 2.0], dtype=np.float32)})
    assert cache.get(["k1", "k2"])["k1"].tolist() == [1.0, 2.0]
    assert VectorCache(tmp_path / "e.sqlite", "model-b").get(["k1"]) == {}


# --- runs: a scripted model whose choice depends on the tools it sees ------------------------

SEEN: list[tuple[str, ...]] = []


def _expected_by_query():
    dataset = load_dataset("ecommerce")
    return {c.query: [call.name for call in c.expected.calls] for c in dataset.cases}


def scripted(messages, tools, trial):
    """Calls the expected tool when it is offered among at most 20 tools; with more it calls
    the first tool offered (confused); without it, the first tool offered too."""
    SEEN.append(tuple(t.name for t in tools))
    query = [m.content for m in messages if m.role == "user"][-1]
    wanted = scripted.labels.get(query) or []
    names = [t.name for t in tools]
    if wanted and all(w in names for w in wanted) and len(tools) <= 20:
        return [{"name": w, "arguments": {}} for w in wanted]
    if not wanted:
        return []
    return [{"name": names[0], "arguments": {}}]


def _run(project, run_id, **settings):
    scripted.labels = _expected_by_query()  # type: ignore[attr-defined]
    register_function("scripted_tools", scripted)
    return evaluate("ecommerce", ["l3"], ["function:scripted_tools"], project=project,
                    run_id=run_id, execute=False, limit=24, **settings)


def test_retrieval_metrics_split_errors_into_not_retrieved_and_confused(bfcl_tools):
    project = bfcl_tools
    SEEN.clear()
    result = _run(project, "split", tools=[13, 40], retrievers=["none", "bm25"], top_k=[3])
    by_condition: dict[str, list] = {}
    for row in result.rows:
        by_condition.setdefault(row.variant, []).append(row)
    assert sorted(by_condition) == ["l3~tools=13", "l3~tools=13~retriever=bm25~top_k=3",
                                    "l3~tools=40", "l3~tools=40~retriever=bm25~top_k=3"]
    for condition, rows in by_condition.items():
        count = int(split_condition(condition)[1]["tools"])
        for row in rows:
            m, r = row.metrics, row.retrieval
            assert row.tool_count == count and r["tools"] == count
            expected = r["expected"]
            if r["retriever"] == "none":
                assert r["missing"] == [] and r["tools_offered"] == count  # always present
            else:
                assert r["tools_offered"] == 3 and len(r["offered"]) == 3
                missing = [n for n in expected if n not in r["offered"]]
                assert r["missing"] == missing
                if expected:
                    assert m.retrieval_recall == pytest.approx(1 - len(missing) / len(expected))
                    assert m.retrieved_all is (not missing)
            wrong = not m.selection_correct
            assert m.error_not_retrieved is (wrong and bool(r["missing"]))
            assert m.error_confused is (wrong and not r["missing"])
            assert r["tool_tokens"] > 0
    # the scripted model: right whenever its tools are offered among <= 20, so every error
    # of a top-3 retrieval on 40 tools is a retrieval miss, and every error of the whole
    # 40-tool catalog is confusion
    top3 = by_condition["l3~tools=40~retriever=bm25~top_k=3"]
    assert all(row.metrics.error_confused is False for row in top3
               if row.retrieval["expected"])
    assert any(row.metrics.error_not_retrieved for row in top3)
    whole = by_condition["l3~tools=40"]
    assert all(not row.metrics.error_not_retrieved for row in whole)
    assert any(row.metrics.error_confused for row in whole)
    # the model saw exactly the tools the rows say were sent
    assert Counter(len(s) for s in SEEN) == Counter({13: 24, 40: 24, 3: 48})
    offered = {tuple(row.retrieval["offered"]) for row in top3}
    assert offered <= set(SEEN)
    # fewer tokens sent with retrieval
    tokens = {c: sum(r.retrieval["tool_tokens"] for r in rows) / len(rows)
              for c, rows in by_condition.items()}
    assert tokens["l3~tools=40~retriever=bm25~top_k=3"] < tokens["l3~tools=13"] < \
        tokens["l3~tools=40"]
    manifest = result.manifest
    catalogs = manifest.toolspace.catalogs
    assert {c.tools for c in catalogs} == {13, 40}


def test_the_same_seed_plans_the_same_catalogs_and_retrievals(project):
    first = _run(project, "seed-a", tools=[30], retrievers=["bm25"], top_k=[5], seed=3)
    again = _run(project, "seed-b", tools=[30], retrievers=["bm25"], top_k=[5], seed=3)
    other = _run(project, "seed-c", tools=[30], retrievers=["bm25"], top_k=[5], seed=4)

    def offered(result):
        return {row.case_id: row.retrieval["offered"] for row in result.rows}

    def sha(result):
        return result.manifest.toolspace.catalogs[0].sha256

    assert offered(first) == offered(again) and sha(first) == sha(again)
    assert sha(first) != sha(other)


def test_the_retrieval_signal_gives_recall_at_k_per_variant(project):
    dataset = load_dataset("ecommerce")
    variants = [load_variant("ecommerce", name) for name in ("l3", "l50")]
    records = retrieval_signal(dataset.cases, variants, ["bm25"], ks=(1, 5))
    assert [r["variant"] for r in records] == ["l3", "l50"]
    calls = sum(1 for c in dataset.cases if c.expected.calls)
    assert {r["cases"] for r in records} == {calls}
    for record in records:
        assert 0 <= record["recall@1"] <= record["recall@5"] <= 1
        assert record["recall@1_low"] <= record["recall@1"] <= record["recall@1_high"]
    assert records == retrieval_signal(dataset.cases, variants, ["bm25"], ks=(1, 5))


@pytest.mark.slow
def test_bench_run_tools_retriever_and_compare_across_conditions(run_bench, project):
    (project / "first.py").write_text(
        "def answer(messages, tools, trial):\n"
        "    return [{'name': tools[0].name, 'arguments': {}}]\n", encoding="utf-8")
    result = run_bench("run", "--provider", "function:first:answer", "--variants", "l3",
                       "--limit", "6", "--no-execute", "--tools", "13,20",
                       "--retriever", "bm25", "--top-k", "2", "--run-id", "many")
    assert result.returncode == 0, result.stderr
    assert "catalog ecommerce/l3: 20 tools = 13 own + " in result.stderr
    assert "retrieval signal" in result.stdout and "l3~tools=20~retriever=bm25~top_k=2" in \
        result.stdout
    compared = run_bench("compare", "l3~tools=13~retriever=bm25~top_k=2",
                         "l3~tools=20~retriever=bm25~top_k=2", "--run", "many")
    assert compared.returncode == 0, compared.stderr
    assert "retrieved_all" in compared.stdout
    bad = run_bench("run", "--provider", "oracle", "--tools", "5", "--run-id", "few")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "below the 13 tools of toolset 'ecommerce'" in bad.stderr
    resumed = run_bench("run", "--resume", "many", "--tools", "13,40")
    assert resumed.returncode == 2 and "--tools" in resumed.stderr, resumed.stderr


@pytest.mark.model
def test_the_embedded_model_embeds_and_caches(tmp_path):
    from conftest import has_local_model
    if not has_local_model():
        pytest.skip("the embedded model is not installed")
    from bench.toolspace.embedding import LlamaEmbedder
    embedder = LlamaEmbedder(cache_path=tmp_path / "e.sqlite", threads=2)
    vectors = embedder.embed(["查询物流 where is my parcel", "cancel my order"])
    assert vectors.shape[0] == 2 and math.isclose(float(np.linalg.norm(vectors[0])), 1.0,
                                                  rel_tol=1e-5)
    embedder._llm = None  # a second embedder reads the cache: no model load
    again = LlamaEmbedder(cache_path=tmp_path / "e.sqlite", threads=2)
    assert np.allclose(again.embed(["cancel my order"]), vectors[1:])
    assert again._llm is None



def test_the_report_draws_tool_count_curves_and_the_error_split(bfcl_tools):
    from bench.report.data import load_runs
    from bench.report.html import render_html
    from bench.report.toolspace import toolspace_table

    result = _run(bfcl_tools, "curves", tools=[13, 40], retrievers=["none", "bm25"],
                  top_k=[3])
    table = toolspace_table(result.rows)
    assert set(zip(table["retriever"], table["tools"])) == {
        ("none", 13), ("none", 40), ("bm25 k=3", 13), ("bm25 k=3", 40)}
    for record in table.to_dict("records"):
        assert record["selection"] + record["not_retrieved"] + record["confused"] == \
            pytest.approx(1.0)
        assert record["selection_low"] <= record["selection"] <= record["selection_high"]
    page = render_html(load_runs(["curves"]), "curves <b>")
    assert 'id="toolspace"' in page and 'id="chart-toolspace"' in page
    assert "curves &lt;b&gt;" in page and "curves <b>" not in page
    # rows of another episode factor setting make their own line; k sorts as a number
    other = [r.model_copy(update={"variant": f"{r.variant}~fault=timeout"})
             for r in result.rows]
    wide = [r.model_copy(update={"retrieval": {**r.retrieval, "top_k": 10}})
            for r in result.rows if r.retrieval and r.retrieval.get("top_k") == 3]
    table = toolspace_table([*result.rows, *other, *wide])
    assert set(table["variant"]) == {"l3", "l3~fault=timeout"}
    assert int(table[table["variant"] == "l3~fault=timeout"]["n"].sum()) == len(other)
    plain = table[table["variant"] == "l3"]
    assert list(dict.fromkeys(plain["retriever"])) == ["bm25 k=3", "bm25 k=10", "none"]


# -- bad, odd and hostile many-tools options: one error line -----------------------------------


def one_line_error(result, *fragments: str) -> str:
    """The one ``error:`` line of a refused command (exit 2, no traceback)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def rows(project: Path, run_id: str) -> list[dict]:
    """The stored rows of run ``run_id``, as JSON objects."""
    path = project / "reports" / "runs" / run_id / "results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def add_toolset(project: Path, name: str, tool: str = "zz_extra_tool") -> None:
    """A hand-written toolset under descriptions/ (a distractor source of every run)."""
    folder = project / "descriptions" / name / "variants"
    folder.mkdir(parents=True)
    (folder / "current.yaml").write_text(
        f"tools:\n- name: {tool}\n  description: Search orders and refunds.\n"
        "  input_schema: {type: object, properties: {q: {type: string}}}\n", encoding="utf-8")


def test_a_top_k_past_the_largest_catalog_is_refused_by_the_config_too():
    """``--top-k 99999999999999999999999`` used to run, naming a condition ``top_k=9999...``."""
    with pytest.raises(ValueError, match=f"top_k must be between 1 and {MAX_TOOLS}"):
        ToolSpace(None, "bm25", MAX_TOOLS + 1)
    with pytest.raises(ValueError, match="top_k must be between"):
        RunConfig(retrievers=["bm25"], top_k=[10 ** 30])


@pytest.mark.slow
def test_config_refusals_carry_no_pydantic_prefix(run_bench):
    """``error: Value error, retriever must be one of ...`` (pydantic's prefix leaked)."""
    line = one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3",
                                    "--no-execute", "--retriever", "BM25"),
                          "retriever must be one of none, bm25", "got 'BM25'")
    assert "Value error" not in line
    line = one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3",
                                    "--no-execute", "--top-k", "3"), "--top-k needs a retriever")
    assert "Value error" not in line


def test_distractors_without_a_tool_count_are_refused():
    with pytest.raises(ValueError, match="--distractors goes with --tools"):
        RunConfig(distractors=["analytics"])
    assert RunConfig(distractors=["analytics"], tools=[20]).distractors == ["analytics"]


@pytest.mark.slow
def test_distractors_without_a_tool_count_are_one_line(run_bench):
    one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                             "--no-execute", "--distractors", "analytics"),
                   "--distractors goes with --tools")


@pytest.mark.slow
def test_a_top_k_at_least_the_catalog_is_noted(run_bench):
    done = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                     "--no-execute", "--retriever", "bm25", "--top-k", "5,13", "--run-id", "k")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: --top-k")]
    assert notes == ["note: --top-k 13 is at least the 13 tools of catalog ecommerce/l3: bm25 "
                     "sends every tool (ranked), nothing is left out"]


def test_naming_the_cases_own_toolset_as_distractors_says_why_nothing_was_drawn(project):
    from bench.descriptions import load_variant
    from bench.toolspace.distractors import expand_variant

    with pytest.raises(BenchError, match="--distractors ecommerce: a toolset is never its own "
                                         "distractor"):
        expand_variant(load_variant("ecommerce", "l3"), 20, seed=1, sources=["ecommerce"])


def test_a_folder_that_cannot_be_a_toolset_is_not_a_distractor_source(project):
    """A backup copy ``descriptions/ecommerce.bak`` (or a hidden folder) stopped every
    ``--tools`` run: ``invalid toolset name 'ecommerce.bak'``, a name the user never gave."""
    import shutil

    from bench.toolspace.distractors import source_toolsets

    for name in ("ecommerce.bak", ".hidden"):
        shutil.copytree(project / "descriptions" / "analytics", project / "descriptions" / name)
    assert source_toolsets("ecommerce") == ["analytics", "logistics"]


# -- BM25 tokens: a Latin word, a number or a plane-2 ideograph glued the Chinese after it -----


def test_latin_words_and_numbers_written_against_chinese_are_tokens_of_their_own():
    assert tokenize("查询SKU订单状态") == ["查询", "sku", "订单", "单状", "状态"]
    assert tokenize("2026年的订单") == ["2026", "年的", "的订", "订单"]  # was '2026年的订单'
    assert tokenize("帮我查iPhone15的订单") == ["帮我", "我查", "i", "phone15", "的订", "订单"]


def test_a_cjk_extension_b_ideograph_is_bigrammed_like_the_others():
    # U+20BB7 (CJK Extension B): it used to make '𠮷野家的订单' one token, losing '订单'
    assert tokenize("帮我查𠮷野家的订单") == ["帮我", "我查", "查𠮷", "𠮷野", "野家", "家的",
                                          "的订", "订单"]
    assert tokenize("𠀀") == ["𠀀"]


def test_bm25_finds_the_order_tool_for_a_query_with_a_number_against_chinese():
    tools = [Tool(name="get_weather", description="查询天气", input_schema={}),
             Tool(name="search_orders", description="查询订单", input_schema={})]
    ranking = Bm25Retriever().rank(tools, ["查2026年的订单"])[0]
    assert tools[ranking[0]].name == "search_orders"


# -- a resume after the distractor toolsets changed --------------------------------------------

STOPPER = '''
import os
from pathlib import Path

COUNT = Path(os.environ["STOP_COUNT"])


def answer(messages, tools, trial):
    done = int(COUNT.read_text()) if COUNT.exists() else 0
    COUNT.write_text(str(done + 1))
    if done == 3 and not os.environ.get("STOP_NEVER"):
        raise KeyboardInterrupt
    return [{"name": tools[0].name, "arguments": {}}]
'''


@pytest.mark.slow
def test_a_resume_refuses_a_catalog_whose_distractor_toolsets_changed(run_bench, project,
                                                                      tmp_path, monkeypatch):
    """A toolset imported between the interrupt and the resume used to change the 20-tool
    catalog silently: the rows after the resume were drawn from another pool under the same
    condition name."""
    (project / "stopper.py").write_text(STOPPER, encoding="utf-8")
    monkeypatch.setenv("STOP_COUNT", str(tmp_path / "count"))
    args = ("--provider", "function:stopper:answer", "--variants", "l3", "--limit", "4",
            "--no-execute", "--tools", "20", "--retriever", "none,bm25", "--top-k", "3",
            "--concurrency", "1")
    stopped = run_bench("run", *args, "--run-id", "r")
    assert stopped.returncode == 130, stopped.stderr
    kept = rows(project, "r")
    assert 0 < len(kept) < 8
    add_toolset(project, "late")
    refused = run_bench("run", "--resume", "r")
    one_line_error(refused, "cannot resume 'r': the catalog ecommerce/l3 at 20 tools changed "
                            "since the run started")
    assert rows(project, "r") == kept  # nothing written
    shown = run_bench("show", "r")  # the plan's keys do not depend on the distractors
    assert shown.returncode == 0 and "rows not checked" not in shown.stderr, shown.stderr
    (project / "descriptions" / "late" / "variants" / "current.yaml").unlink()
    (project / "descriptions" / "late" / "variants").rmdir()
    (project / "descriptions" / "late").rmdir()
    monkeypatch.setenv("STOP_NEVER", "1")
    finished = run_bench("run", "--resume", "r")
    assert finished.returncode == 0, finished.stderr
    after = rows(project, "r")
    assert after[:len(kept)] == kept  # nothing computed is lost
    assert len(after) == 8 and len({r["key"] for r in after}) == 8  # no row twice


# -- the embedding retriever's vector cache and model, damaged or given an empty query ---------


@pytest.mark.parametrize("content", [b"garbage\n", b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_damaged_embedding_cache_is_one_error_naming_it(tmp_path, content):
    """``sqlite3.DatabaseError: file is not a database`` came out as a traceback (a run with
    ``--retriever embedding``, or its retrieval signal)."""
    from bench.toolspace.embedding import VectorCache

    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(content)
    with pytest.raises(BenchError, match="not a usable embedding cache") as caught:
        VectorCache(path, "model-sha")
    assert str(path) in str(caught.value)


def test_a_stored_vector_of_broken_bytes_is_embedded_again(tmp_path):
    import sqlite3

    import numpy as np

    from bench.toolspace.embedding import VectorCache

    cache = VectorCache(tmp_path / "embeddings.sqlite", "m")
    cache.put({"good": np.ones(4)})
    with sqlite3.connect(cache.path) as db:
        db.executemany("INSERT INTO vectors VALUES ('m', ?, ?)",
                       [("cut", b"\x00\x00\x80"), ("empty", b""), ("text", "not bytes")])
    found = cache.get(["good", "cut", "empty", "text"])
    assert list(found) == ["good"] and found["good"].tolist() == [1.0] * 4


def test_a_damaged_gguf_for_the_embedding_retriever_is_one_error(tmp_path):
    """A damaged GGUF given to the embedding retriever is one error naming it (the header
    check, before llama.cpp sees it)."""
    from bench.toolspace.embedding import LlamaEmbedder

    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 4096)
    with pytest.raises(BenchError, match="broken.gguf: corrupt or hostile header"):
        LlamaEmbedder(model_path=str(path), cache_path=tmp_path / "vectors.sqlite")


@requires_local_model
def test_an_empty_query_embeds_as_a_zero_vector(tmp_path):
    """``LlamaEmbedder().embed([""])`` raised ``RuntimeError: llama_decode returned -1`` (a case
    with no user text under ``--retriever embedding``) and the process then aborted at exit
    (``double free or corruption``)."""
    from bench.toolspace.embedding import LlamaEmbedder

    embedder = LlamaEmbedder(threads=1, cache_path=tmp_path / "vectors.sqlite")
    vectors = embedder.embed(["", "find my orders"])
    assert vectors.shape[0] == 2 and not vectors[0].any() and vectors[1].any()


# -- the BM25 signal's thread held up the exit of a run stopped or failed mid-way until the
# whole signal was computed (2.8 s instead of 0.4 s after Ctrl-C on 20,000 cases by 4 variants)
# ----------------------------------------------------------------------------------------------

STOPPED = """
import threading
from types import SimpleNamespace
from bench.cli.toolspace import SignalAhead
from bench.datasets import load_dataset

class Unfinished:
    '''A variant whose toolset never comes: stands for a signal still being computed.'''
    name = "l3"

    @property
    def toolset(self):
        threading.Event().wait()

runner = SimpleNamespace(cases=load_dataset("ecommerce").cases[:3], variants=[Unfinished()])
seen = []
hook = SignalAhead(runner, lambda done, total, item=None: seen.append(done))
hook(1, 10, object())  # the first row written: the signal starts
assert hook.future is not None and not hook.future.done() and seen == [1]
print("stopping", flush=True)
raise SystemExit(130)  # the run stopped: nothing waits for the signal
"""


def test_a_stopped_run_exits_without_waiting_for_its_retrieval_signal():
    try:
        result = python(STOPPED, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the process waited for the unfinished signal thread at exit")
    assert result.returncode == 130, result.stderr
    assert result.stdout == "stopping\n" and "Traceback" not in result.stderr
