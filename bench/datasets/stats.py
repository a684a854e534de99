"""Datasheet counts of a dataset: cases per category, language and expected tool.

The datasheets (``datasets/<name>/README.md``) paste the Markdown this module prints, so their
numbers are generated, never typed by hand::

    python -m bench.datasets.stats analytics

Categories are case tags (issue 3): ``simple``, ``multiple`` (one right tool among look-alikes),
``parallel`` (several calls of one tool in a turn), ``parallel-multiple`` (calls of different
tools in a turn), ``no_call``, ``ask`` and ``multi-turn`` (the conversation has earlier turns;
it combines with one of the others).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from bench.datasets.loader import Dataset, load_dataset
from bench.descriptions.specs import load_specs
from bench.errors import BenchError
from bench.paths import descriptions_dir

CATEGORIES = ("simple", "multiple", "parallel", "parallel-multiple", "no_call", "ask",
              "multi-turn")
LANGUAGES = ("zh", "en", "mixed")
NO_CALL_ROW = "(no call)"
ASK_ROW = "(ask)"


@dataclass(frozen=True)
class DatasetCounts:
    """Count tables of one dataset (pandas DataFrames with integer cells).

    Attributes:
        total: number of cases.
        by_category: index category, columns ``cases`` and ``share`` (percent of all cases).
        by_language: index language, columns ``cases`` and ``share``.
        by_tool: index tool name (plus ``(no call)`` and ``(ask)``), columns ``cases`` (cases
            expecting the tool at least once) and ``calls`` (expected calls).
        language_by_category: index language, one column per category.
        tags: index tag (every tag used), column ``cases``.
    """

    total: int
    by_category: pd.DataFrame
    by_language: pd.DataFrame
    by_tool: pd.DataFrame
    language_by_category: pd.DataFrame
    tags: pd.DataFrame


def _with_share(counter: Counter, keys: list[str], total: int) -> pd.DataFrame:
    frame = pd.DataFrame({"cases": [counter.get(k, 0) for k in keys]}, index=keys)
    frame["share"] = (100 * frame["cases"] / total).round(0).astype(int) if total else 0
    return frame


def dataset_counts(dataset: Dataset, tools: list[str] | None = None) -> DatasetCounts:
    """Count a dataset's cases by category tag, language and expected tool.

    Args:
        dataset: a loaded dataset.
        tools: tool names to list even when no case expects them (e.g. the toolset's tools),
            in this order; tools found only in the cases follow, sorted.

    Returns:
        a :class:`DatasetCounts`.
    """
    cases = dataset.cases
    total = len(cases)
    categories = Counter(t for c in cases for t in set(c.tags) if t in CATEGORIES)
    languages = Counter(c.lang for c in cases)
    tool_cases = Counter(name for c in cases for name in {k.name for k in c.expected.calls})
    tool_calls = Counter(k.name for c in cases for k in c.expected.calls)
    names = list(tools or [])
    names += sorted(set(tool_calls) - set(names))
    by_tool = pd.DataFrame({"cases": [tool_cases.get(n, 0) for n in names],
                            "calls": [tool_calls.get(n, 0) for n in names]}, index=names)
    by_tool.loc[NO_CALL_ROW] = [sum(c.expected.no_call for c in cases), 0]
    by_tool.loc[ASK_ROW] = [sum(c.expected.ask for c in cases), 0]
    cross = pd.DataFrame(0, index=list(LANGUAGES), columns=list(CATEGORIES))
    for case in cases:
        for tag in set(case.tags) & set(CATEGORIES):
            cross.loc[case.lang, tag] += 1
    tags = Counter(t for c in cases for t in set(c.tags))
    return DatasetCounts(
        total=total,
        by_category=_with_share(categories, list(CATEGORIES), total),
        by_language=_with_share(languages, list(LANGUAGES), total),
        by_tool=by_tool.astype(int),
        language_by_category=cross.astype(int),
        tags=pd.DataFrame({"cases": [tags[t] for t in sorted(tags)]}, index=sorted(tags)),
    )


def _markdown(frame: pd.DataFrame, first: str) -> str:
    header = [first, *map(str, frame.columns)]
    lines = ["| " + " | ".join(header) + " |",
             "|---|" + "---:|" * len(frame.columns)]
    for index, row in frame.iterrows():
        lines.append("| " + " | ".join([str(index), *(str(v) for v in row)]) + " |")
    return "\n".join(lines)


def counts_markdown(counts: DatasetCounts) -> str:
    """The count tables as Markdown (what a datasheet's "Counts" section pastes)."""
    return "\n\n".join([
        f"{counts.total} cases.",
        _markdown(counts.by_category, "category"),
        _markdown(counts.by_language, "lang"),
        _markdown(counts.by_tool, "expected tool"),
        _markdown(counts.language_by_category, "lang × category"),
        _markdown(counts.tags, "tag"),
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.datasets.stats NAME``: print the datasheet count tables of a dataset.

    Tools of the toolset of the same name are listed even when unused (0 rows show gaps).
    Returns the exit status (2 on bad input, with a one-line message on stderr).
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench.datasets.stats DATASET", file=sys.stderr)
        return 2
    try:
        dataset = load_dataset(args[0])
        tools: list[str] = []
        for toolset in dataset.toolsets:
            tools += [s.name for s in load_specs(descriptions_dir() / toolset)]
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(counts_markdown(dataset_counts(dataset, tools)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
