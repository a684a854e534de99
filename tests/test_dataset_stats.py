"""Datasheet counts (bench.datasets.stats) on a small dataset written for the test."""

from __future__ import annotations

import json

import pytest

from bench.datasets.loader import available_datasets, load_dataset
from bench.datasets.stats import (BEGIN, counts_markdown, dataset_counts, datasheet_counts, main,
                                  replace_counts_block)
from bench.errors import BenchError
from bench.paths import datasets_dir

GENERATED = [name for name in available_datasets()
             if BEGIN in (datasets_dir() / name / "README.md").read_text(encoding="utf-8")]


def _case(i, lang, expected, tags, turns=1):
    messages = [{"role": "user", "content": f"q{i}"}]
    if turns > 1:
        messages = [{"role": "user", "content": f"earlier {i}"},
                    {"role": "assistant", "content": "which one?"}, *messages]
    return {"id": f"t-{i}", "toolset": "demo", "lang": lang, "messages": messages,
            "expected": expected, "tags": tags}


def _dataset(tmp_path):
    call_a = {"name": "tool_a", "arguments": {}}
    rows = [
        _case(1, "zh", {"calls": [call_a]}, ["simple"]),
        _case(2, "en", {"calls": [call_a, call_a]}, ["parallel", "date"]),
        _case(3, "mixed", {"no_call": True}, ["no_call", "code"]),
        _case(4, "en", {"ask": True}, ["ask", "multi-turn"], turns=2),
    ]
    path = tmp_path / "demo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_dataset(str(path))


def test_counts_per_category_language_and_tool(tmp_path):
    counts = dataset_counts(_dataset(tmp_path), tools=["tool_a", "tool_b"])
    assert counts.total == 4
    assert counts.by_category.loc["parallel", "cases"] == 1
    assert counts.by_category.loc["multi-turn", "cases"] == 1
    assert counts.by_category.loc["parallel-multiple", "cases"] == 0
    assert counts.by_language.loc["en", "cases"] == 2
    assert counts.by_language.loc["en", "share"] == 50
    assert counts.by_tool.loc["tool_a"].tolist() == [2, 3]  # 2 cases, 3 expected calls
    assert counts.by_tool.loc["tool_b"].tolist() == [0, 0]  # listed although unused
    assert counts.by_tool.loc["(no call)", "cases"] == 1
    assert counts.by_tool.loc["(ask)", "cases"] == 1
    assert counts.language_by_category.loc["en", "ask"] == 1
    assert counts.language_by_category.loc["zh", "ask"] == 0
    assert counts.tags.loc["code", "cases"] == 1


def test_markdown_has_one_row_per_tool(tmp_path):
    text = counts_markdown(dataset_counts(_dataset(tmp_path), tools=["tool_a"]))
    assert "| tool_a | 2 | 3 |" in text
    assert text.startswith("4 cases.")


def test_main_rejects_unknown_dataset(capsys):
    assert main(["no-such-dataset"]) == 2
    assert "unknown dataset" in capsys.readouterr().err


def test_replace_counts_block_needs_both_markers(tmp_path):
    with pytest.raises(BenchError, match="no counts block"):
        replace_counts_block("# datasheet without markers\n", "x", tmp_path / "README.md")


def test_datasheets_with_markers_exist():
    assert {"analytics", "logistics"} <= set(GENERATED)


@pytest.mark.parametrize("name", GENERATED)
def test_datasheet_counts_are_up_to_date(name):
    """The counts in the datasheet equal what the script generates from cases.jsonl now."""
    readme = (datasets_dir() / name / "README.md").read_text(encoding="utf-8")
    assert datasheet_counts(load_dataset(name)) in readme, (
        f"run: python -m bench.datasets.stats {name} --write")
