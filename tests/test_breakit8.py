"""Defects found by feeding the many-tools options (``--tools``, ``--retriever``, ``--top-k``,
``--distractors``), their BM25 tokenizer, and the resume and merge of their runs, bad, odd
and hostile input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli.options import option_value
from bench.errors import BenchError
from bench.models import Tool
from bench.runner import RunConfig
from bench.toolspace.retrieval import Bm25Retriever, tokenize
from bench.toolspace.space import MAX_TOOLS, ToolSpace
from conftest import requires_local_model


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
    path = project / "reports" / "runs" / run_id / "results.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def add_toolset(project: Path, name: str, tool: str = "zz_extra_tool") -> None:
    """A hand-written toolset under descriptions/ (a distractor source of every run)."""
    folder = project / "descriptions" / name / "variants"
    folder.mkdir(parents=True)
    (folder / "current.yaml").write_text(
        f"tools:\n- name: {tool}\n  description: Search orders and refunds.\n"
        "  input_schema: {type: object, properties: {q: {type: string}}}\n", encoding="utf-8")


# -- counts: str.isdigit() takes digits int() refuses; int() refuses 4,300+ digits ---------


@pytest.mark.parametrize("option, value, fragment", [
    ("tools", "²", "'²' is not a whole number"),            # isdigit() True, int() raises
    ("top_k", "13²", "'13²' is not a whole number"),
    ("tools", "１３", "is not a whole number"),               # full-width: not taken as 13
    ("tools", "9" * 5000, "(5000 characters)' is more than 5000"),  # int(): 4,300-digit cap
    ("tools", "5001", "'5001' is more than 5000"),
    ("top_k", "5001", "'5001' is more than 5000"),
    ("tools", "0000", "'0000' is not a whole number of at least 1"),
])
def test_counts_int_cannot_read_are_refused_in_one_line(option, value, fragment):
    with pytest.raises(BenchError, match="^--") as caught:
        option_value(option, [value])
    assert fragment in str(caught.value) and len(str(caught.value)) < 200


def test_counts_with_leading_zeros_are_the_number():
    assert option_value("tools", ["0040", "13"]) == [40, 13]
    assert option_value("top_k", ["0" * 5000 + "7"]) == [7]  # int() of 5,001 digits raised
    assert option_value("top_k", [f"{MAX_TOOLS}"]) == [MAX_TOOLS]


def test_a_top_k_past_the_largest_catalog_is_refused_by_the_config_too():
    """``--top-k 99999999999999999999999`` used to run, naming a condition ``top_k=9999...``."""
    with pytest.raises(ValueError, match=f"top_k must be between 1 and {MAX_TOOLS}"):
        ToolSpace(None, "bm25", MAX_TOOLS + 1)
    with pytest.raises(ValueError, match="top_k must be between"):
        RunConfig(retrievers=["bm25"], top_k=[10 ** 30])


@pytest.mark.slow  # subprocesses
def test_bad_counts_on_the_command_line_are_one_line_not_a_traceback(run_bench):
    one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                             "--no-execute", "--tools", "²"),
                   "--tools: '²' is not a whole number")
    one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                             "--no-execute", "--retriever", "bm25", "--top-k", "9" * 5000),
                   "--top-k: ", "is more than 5000")


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


# -- --distractors without --tools was ignored ---------------------------------------------


def test_distractors_without_a_tool_count_are_refused():
    with pytest.raises(ValueError, match="--distractors goes with --tools"):
        RunConfig(distractors=["analytics"])
    assert RunConfig(distractors=["analytics"], tools=[20]).distractors == ["analytics"]


@pytest.mark.slow
def test_distractors_without_a_tool_count_are_one_line(run_bench):
    one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                             "--no-execute", "--distractors", "analytics"),
                   "--distractors goes with --tools")


# -- BM25 tokens: a Latin word, a number or a plane-2 ideograph glued the Chinese after it ---


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


# -- a top-k that cuts nothing is said ------------------------------------------------------


@pytest.mark.slow
def test_a_top_k_at_least_the_catalog_is_noted(run_bench):
    done = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                     "--no-execute", "--retriever", "bm25", "--top-k", "5,13", "--run-id", "k")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: --top-k")]
    assert notes == ["note: --top-k 13 is at least the 13 tools of catalog ecommerce/l3: bm25 "
                     "sends every tool (ranked), nothing is left out"]


# -- resume and merge after the distractor toolsets changed ---------------------------------

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


@pytest.mark.slow
def test_a_merge_refuses_shards_whose_catalogs_were_drawn_from_other_toolsets(run_bench,
                                                                             project):
    args = ("run", "--provider", "oracle", "--variants", "l3", "--limit", "4", "--no-execute",
            "--tools", "20")
    first = run_bench(*args, "--shard", "1/2", "--run-id", "s1")
    assert first.returncode == 0, first.stderr
    add_toolset(project, "late")  # the second machine has another toolset
    second = run_bench(*args, "--shard", "2/2", "--run-id", "s2")
    assert second.returncode == 0, second.stderr
    merged = run_bench("merge", "s1", "s2", "--run-id", "m")
    line = one_line_error(merged, "toolspace.catalogs (ecommerce/l3 at 20 tools)")
    assert "s2" in line
    assert not (project / "reports" / "runs" / "m").exists()


# -- the embedding retriever's vector cache, damaged ----------------------------------------


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


@pytest.mark.slow
def test_native_retriever_refusals_name_the_option_once(run_bench, monkeypatch):
    """``error: field 'always_loaded': --always-loaded: ...`` named the setting twice."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")  # refused before any request
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    line = one_line_error(run_bench("run", "--provider", "anthropic:fake", "--variants", "l3",
                                    "--limit", "1", "--no-execute", "--retriever", "native",
                                    "--always-loaded", "nonexistent"),
                          "--always-loaded: 'nonexistent' is not a tool of ecommerce/l3")
    assert line.startswith("error: --always-loaded: ")


def test_naming_the_cases_own_toolset_as_distractors_says_why_nothing_was_drawn(project):
    from bench.descriptions import load_variant
    from bench.toolspace.distractors import expand_variant

    with pytest.raises(BenchError, match="--distractors ecommerce: a toolset is never its own "
                                         "distractor"):
        expand_variant(load_variant("ecommerce", "l3"), 20, seed=1, sources=["ecommerce"])


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


def test_a_folder_that_cannot_be_a_toolset_is_not_a_distractor_source(project):
    """A backup copy ``descriptions/ecommerce.bak`` (or a hidden folder) stopped every
    ``--tools`` run: ``invalid toolset name 'ecommerce.bak'``, a name the user never gave."""
    import shutil

    from bench.toolspace.distractors import source_toolsets

    for name in ("ecommerce.bak", ".hidden"):
        shutil.copytree(project / "descriptions" / "analytics", project / "descriptions" / name)
    assert source_toolsets("ecommerce") == ["analytics", "logistics"]


@pytest.mark.slow
def test_compare_running_now_on_conditions_says_to_give_a_run(run_bench):
    """``bench compare 'l3~tools=40' 'l50~tools=40'`` (no --run) said ``invalid variant name
    'l3~tools=40'``: the names are right, the command lacks --run."""
    one_line_error(run_bench("compare", "l3~tools=40", "l50~tools=40", "--provider", "oracle",
                             "--limit", "1"),
                   "'l3~tools=40' is a condition of a stored run", "give --run RUN")
