"""Dataset statistics for datasheets: counts per category, language and tool.

:func:`markdown` makes the Markdown tables and :func:`write_block` replaces the block between
``<!-- stats:begin -->`` and ``<!-- stats:end -->`` in the dataset's ``README.md`` so that the
datasheet's figures are generated, never typed (the command is
``python -m bench.descriptions.datasheet ecommerce --write``: it needs the toolset's tool
names, which the descriptions tier above this one reads).

Categories (one tag per case, after BFCL's simple / multiple / parallel / parallel-multiple /
irrelevance split, plus ask and multi-turn): see :data:`CATEGORIES` and
:func:`structural_category`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path


from bench.datasets.loader import Dataset
from bench.errors import BenchError
from bench.models import Case
from bench.plural import count

CATEGORIES = ("simple", "multiple", "parallel", "parallel-multiple", "no_call", "ask",
              "multi-turn")
LANGS = ("zh", "en", "mixed")
BEGIN, END = "<!-- stats:begin -->", "<!-- stats:end -->"


def declared_category(case: Case) -> str | None:
    """The case's category tag, or None when it has none or several."""
    found = [t for t in case.tags if t in CATEGORIES]
    return found[0] if len(found) == 1 else None


def structural_category(case: Case) -> str:
    """The category a case's shape implies.

    ``multi-turn``: an assistant turn precedes the last user message (whatever is expected);
    else ``no_call`` / ``ask`` from ``expected``; several calls of one tool: ``parallel``, of
    several tools: ``parallel-multiple``; one call: ``multiple`` when the case is tagged
    ``lookalike`` (the right tool sits among look-alikes), else ``simple``.
    """
    if any(m.role == "assistant" for m in case.messages):
        return "multi-turn"
    if case.expected.no_call:
        return "no_call"
    if case.expected.ask:
        return "ask"
    names = [c.name for c in case.expected.calls]
    if len(names) > 1:
        return "parallel" if len(set(names)) == 1 else "parallel-multiple"
    return "multiple" if "lookalike" in case.tags else "simple"


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(dataset: Dataset, tools: list[str] | None = None) -> str:
    """Markdown tables: category × language, tags, per tool the cases and calls, and (when
    the cases carry them) splits × language and information buckets × split.

    Args:
        dataset: the loaded dataset.
        tools: the toolset's tool names, so that tools no case uses show as 0 (default: the
            tools the cases name).
    """
    cases = dataset.cases
    total = len(cases)
    cat: Counter[tuple[str, str]] = Counter(
        (declared_category(c) or "(untagged)", c.lang) for c in cases)
    cats = [k for k in CATEGORIES if any(k == a for a, _ in cat)] + \
        sorted({a for a, _ in cat if a not in CATEGORIES})
    rows = [[k, *(cat[(k, lang)] for lang in LANGS), sum(cat[(k, lang)] for lang in LANGS),
             f"{100 * sum(cat[(k, lang)] for lang in LANGS) / total:.0f}%"] for k in cats]
    langs: Counter[str] = Counter(c.lang for c in cases)
    rows.append(["**total**", *(langs[lang] for lang in LANGS), total, "100%"])
    parts = [f"{count(total, 'case')}.", "",
             _table(["category", *LANGS, "cases", "share"], rows)]

    tags = Counter(t for c in cases for t in c.tags if t not in CATEGORIES)
    parts += ["", "Feature tags (a case can carry several):", "",
              _table(["tag", "cases"], [[t, n] for t, n in sorted(tags.items())])]

    names = sorted(tools or {k.name for c in cases for k in c.expected.calls})
    in_case = Counter(n for c in cases for n in {k.name for k in c.expected.calls})
    in_calls = Counter(k.name for c in cases for k in c.expected.calls)
    per_lang: Counter[tuple[str, str]] = Counter(
        (n, c.lang) for c in cases for n in {k.name for k in c.expected.calls})
    rows = [[f"`{n}`", in_case[n], in_calls[n], *(per_lang[(n, lang)] for lang in LANGS)]
            for n in names]
    calls_total = sum(in_calls.values())
    parts += ["", f"Expected tools ({count(calls_total, 'expected call')}; \"cases\" counts "
              "cases that expect the tool at least once):", "",
              _table(["tool", "cases", "calls", *LANGS], rows)]
    splits: Counter[tuple[str, str]] = Counter((c.split or "(none)", c.lang) for c in cases)
    if any(c.split for c in cases):
        rows = [[name, *(splits[(name, lang)] for lang in LANGS),
                 sum(splits[(name, lang)] for lang in LANGS)]
                for name in ("dev", "test", "(none)") if any(k == name for k, _ in splits)]
        parts += ["", "Splits (`bench split`; only dev cases may inform descriptions, figures "
                  "are on test):", "", _table(["split", *LANGS, "cases"], rows)]
    buckets: Counter[tuple[str, str]] = Counter(
        (c.info or "(untagged)", c.split or "(none)") for c in cases)
    if any(c.info for c in cases):
        order = ("schema", "l10", "l30", "l50", "(untagged)")
        split_names = sorted({k for _, k in buckets})
        rows = [[name, *(buckets[(name, k)] for k in split_names),
                 sum(buckets[(name, k)] for k in split_names)]
                for name in order if any(b == name for b, _ in buckets)]
        parts += ["", "Information buckets (the lowest description level whose text carries "
                  "what the case needs):", "", _table(["info", *split_names, "cases"], rows)]
    turns = Counter(len(c.messages) for c in cases)
    history_calls = sum(len(m.tool_calls or []) for c in cases for m in c.messages)
    parts += ["", f"Messages per case: {', '.join(f'{n}: {turns[n]}' for n in sorted(turns))} "
              f"(earlier tool calls in histories: {history_calls})."]
    return "\n".join(parts)


def write_block(readme: Path, block: str) -> bool:
    """Replace the stats block of a datasheet; return True if the file changed.

    Raises:
        BenchError: the README lacks the begin/end markers.
    """
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise BenchError(f"no '{BEGIN}' ... '{END}' block to replace", file=readme)
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{block}\n{END}{tail}"
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return new != text
