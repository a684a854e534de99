"""Find description text that mirrors a test case ("teaching to the test").

A variant's prose (examples, edge cases, rules) may only draw on ``dev`` cases. A line of it
*mirrors* a ``test`` case when one of these signals holds:

- ``near-copy``: the line's text and the case's user text are nearly the same once IDs and
  numbers are masked (``ORD20251201`` and ``SF2020202020`` both become ``#``): Jaccard
  similarity of their token sets at or above :data:`NEAR_COPY_THRESHOLD`. Tokens are lower-cased
  words for Latin text and character bigrams for Chinese (Chinese has no spaces; bigrams are the
  usual unit of Chinese near-duplicate detection, e.g. Broder's shingling applied to characters).
  One exception (:func:`generic_statement`): a line of the tool's summary (its text before the
  first section heading) that names no ID, number or quoted phrase states what the tool does
  in general; a case whose text names an ID or number asks for it on a specific thing, so the
  two share the tool's own words by construction ("Mark a todo item as done." and "Mark T7
  as done"). Such a pair is not a near-copy: a query copied into a description keeps its ID
  or number slot (masked, it still matches), and one copied into an example section is
  compared as usual.
- ``trigger-phrase``: a phrase the line quotes (``'Top spender'``, ``“送礼”``) occurs in the case's
  user text: the description hands the model the mapping of that exact wording.
- ``reviewed``: a cross-language mirror (a translated example) listed in the dataset's datasheet
  under ``## Reviewed cross-language mirrors``; translation defeats token overlap, so these are
  found by review (helped by the ``argument-copy`` hint below) and kept on record.
- ``argument-copy`` (a hint, not an error): an example in another language whose arguments are
  exactly the case's expected call, literal values included (IDs masked). It points a reviewer
  at likely translations.
- ``containment``: the line, a schema text or the whole description contains the case's
  query, or most of its word 5-grams / CJK character 4-grams
  (:mod:`bench.descriptions.containment`): a query appended to a longer line, or put into a
  parameter's description, which the whole-line signals above miss. Run against every test
  split of the project, not only the datasets of the variant's toolset (``everywhere``).

Every line is compared after Unicode normalisation (:func:`bench.descriptions.containment.fold`:
NFKC, so full-width ``ＡＢＣ`` is ``ABC``; format characters dropped; spaces between CJK
characters removed, so ``我 的 包 裹`` is ``我的包裹``). The lines are those of each tool's
description and every text of its JSON Schema (parameter descriptions at any depth, titles,
enum descriptions, examples: :func:`bench.descriptions.containment.schema_texts`), whose
``section`` is the schema path (``input_schema.properties.carrier.description``).

The threshold is justified in ``docs/descriptions-and-variants.md#the-leak-checker`` from the
shipped data (``benchmarks/leak_threshold.py`` prints the distributions it rests on).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from bench.descriptions.containment import SIGNAL as CONTAINMENT
from bench.descriptions.containment import ModelText, TestIndex, fold, schema_texts
from bench.descriptions.variants import Variant
from bench.models import Case

#: Jaccard similarity (0-1) of masked token sets at or above which a description line is a
#: near-copy of a test query. See the module docstring for where the value comes from.
NEAR_COPY_THRESHOLD = 0.5
#: A quoted phrase counts as a trigger phrase from 2 Latin words ("Top spender") or 4 CJK
#: characters (退款不退货): one word, or a 2-3 character Chinese noun (上海仓, 优惠券), is the
#: vocabulary or a value of the tool, not a mirrored wording. IDs and numbers do not count.
MIN_PHRASE_WORDS = 2
MIN_PHRASE_CJK = 4
REVIEWED_HEADING = "## Reviewed cross-language mirrors"

# ASCII only after the first digit: ``\w`` would also take the Chinese words written right
# after an ID ("订单ORD20261011付款成功了吗" would keep only 订单)
_ID_OR_NUMBER = re.compile(r"[A-Za-z]*\d[A-Za-z0-9_\-:/.]*|[$¥￥€£]\s?\d[\d,.]*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_LATIN = re.compile(r"[a-z]+")
_QUOTED = re.compile(r"(?<![A-Za-z])'((?:[^']|(?<=[A-Za-z])'(?=[A-Za-z])){2,80}?)'(?![A-Za-z])|\"([^\"]{2,80})\"|“([^”]{2,80})”|「([^」]{2,80})」"
                     r"|‘([^’]{2,80})’")
_EXAMPLE = re.compile(r'^-\s*("(?:[^"\\]|\\.)*")\s*->\s*(.*)$')
_SECTION = re.compile(r"^([A-Z][A-Za-z ]{2,40}):\s*$")


@dataclass(frozen=True)
class Snippet:
    """One line of a variant's description: ``tool``, ``section`` (``Examples``,
    ``Edge cases``, ``Constraints``..., or ``summary`` before the first heading), ``text`` (an
    example's query alone), and for examples the ``arguments`` object shown (None otherwise)."""

    tool: str
    section: str
    text: str
    arguments: dict[str, object] | None = None


@dataclass(frozen=True)
class Leak:
    """A description line that mirrors a case.

    Attributes:
        case_id: the mirrored case.
        variant: the variant whose text mirrors it; ``tool``, ``section``, ``text``: the line.
        signal: ``near-copy``, ``trigger-phrase``, ``reviewed``, ``argument-copy`` or
            ``containment``.
        score: Jaccard similarity (0-1) for ``near-copy``; the share of the query's n-grams
            in the text for ``containment``; 1.0 otherwise.
        evidence: the matched phrase, the masked query, or the longest run of the query found.
        dataset: the mirrored case's dataset, where known (``containment`` against every
            test split names it); ``""`` otherwise.
    """

    case_id: str
    variant: str
    tool: str
    section: str
    text: str
    signal: str
    score: float
    evidence: str
    dataset: str = ""

    @property
    def is_hint(self) -> bool:
        """True for ``argument-copy``: a pointer for review, not a finding by itself."""
        return self.signal == "argument-copy"


def mask(text: str) -> str:
    """``text`` normalised (:func:`bench.descriptions.containment.fold`: NFKC, no format
    characters, no spaces between CJK characters), lower-cased, with IDs, dates, amounts and
    numbers replaced by ``#``."""
    return _ID_OR_NUMBER.sub("#", fold(text)).lower()


def tokens(text: str) -> frozenset[str]:
    """Masked tokens of ``text``: Latin words, ``#``, and bigrams of each run of CJK
    characters (a single CJK character stands alone)."""
    masked = mask(text)
    out: set[str] = set(_LATIN.findall(_CJK.sub(" ", masked))) - {"#"}
    for run in _CJK.findall(masked):
        out.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    return frozenset(out)


def generic_statement(snippet: Snippet) -> bool:
    """Whether ``snippet`` is a generic statement of what its tool does: a line of the
    tool's summary (section ``summary``, the text before the first heading) with no ID,
    number or quoted phrase in it. Such a line is not a near-copy of a case that names an ID
    or number (the module docstring)."""
    return snippet.section == "summary" and snippet.arguments is None \
        and not _ID_OR_NUMBER.search(snippet.text) and not _QUOTED.search(snippet.text)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0.0 for two empty sets)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def snippets(variant: Variant) -> Iterator[Snippet]:
    """Every non-blank line of every tool's description in ``variant``, bullets stripped,
    then every text of the tool's JSON Schema (section: its schema path)."""
    for tool in variant.tools:
        yield from _description_lines(tool.name, tool.description)
        for path, text in schema_texts(tool.input_schema):
            if text.strip():
                yield Snippet(tool.name, path, text.strip())


def _description_lines(tool: str, description: str) -> Iterator[Snippet]:
    section = "summary"
    for raw in description.splitlines():
        line = raw.strip()
        if not line:
            continue
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1)
            continue
        example = _EXAMPLE.match(line)
        if example:
            query = json.loads(example.group(1))
            try:
                args = json.loads(example.group(2).split(" (", 1)[0])
            except json.JSONDecodeError:
                args = None
            yield Snippet(tool, section, query, args if isinstance(args, dict) else None)
        else:
            yield Snippet(tool, section, line.lstrip("-• ").strip())


def case_text(case: Case) -> str:
    """What the user says in ``case``: its user messages and scripted replies, one per line."""
    said = [m.content for m in case.messages if m.role == "user" and m.content]
    return "\n".join(said + list(case.user_replies))


def quoted_phrases(text: str) -> list[str]:
    """Phrases quoted in ``text`` with '...', "...", “...”, ‘...’ or 「...」 of at least
    :data:`MIN_PHRASE_WORDS` Latin words or :data:`MIN_PHRASE_CJK` CJK characters."""
    found = ["".join(m).strip() for m in _QUOTED.findall(text)]
    return [p for p in found if len(_LATIN.findall(_CJK.sub(" ", mask(p)))) >= MIN_PHRASE_WORDS
            or sum(map(len, _CJK.findall(p))) >= MIN_PHRASE_CJK]


def _norm_phrase(text: str) -> str:
    return re.sub(r"\s+", " ", fold(text).casefold()).strip(" .?!,;:。？！，")


def _args_match(example: dict[str, object], case: Case, tool: str) -> bool:
    """The example's arguments equal one expected call of ``tool`` (IDs masked)."""
    for call in case.expected.calls:
        if call.name != tool or set(call.arguments) - {k for k, v in call.arguments.items()
                                                        if None in v} > set(example):
            continue
        if not set(example) <= set(call.arguments):
            continue
        if all(any(mask(json.dumps(value, ensure_ascii=False))
                   == mask(json.dumps(ok, ensure_ascii=False))
                   for ok in call.arguments[key] if not isinstance(ok, dict))
               for key, value in example.items()):
            return True
    return False


def reviewed_mirrors(datasheet: Path) -> dict[str, list[tuple[str, str]]]:
    """The reviewed cross-language mirrors of a datasheet: ``case id -> [(tool, line)]``.

    The section is a list under :data:`REVIEWED_HEADING`, one item per mirror:
    ``- case-id | tool | the description line (or a unique part of it)``.
    A datasheet without the section gives ``{}``.
    """
    return datasheet_case_list(datasheet, REVIEWED_HEADING)


def datasheet_case_list(datasheet: Path, heading: str) -> dict[str, list[tuple[str, str]]]:
    """The ``- case-id | tool | text`` items listed under the ``## heading`` section of a
    datasheet, as ``case id -> [(tool, text)]`` (backquotes stripped); ``{}`` without the
    file or the section."""
    if not datasheet.is_file():
        return {}
    out: dict[str, list[tuple[str, str]]] = {}
    inside = False
    for line in datasheet.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            inside = line.strip() == heading
            continue
        if inside and line.startswith("- ") and line.count("|") >= 2:
            case_id, tool, text = (p.strip().strip("`") for p in line[2:].split("|", 2))
            out.setdefault(case_id, []).append((tool, text))
    return out


def find_leaks(variant: Variant, cases: Sequence[Case],
               reviewed: dict[str, list[tuple[str, str]]] | None = None,
               threshold: float = NEAR_COPY_THRESHOLD,
               everywhere: TestIndex | None = None) -> list[Leak]:
    """Lines of ``variant`` that mirror one of ``cases`` (pass the ``test`` cases).

    Args:
        variant: a rendered variant (any level, template or hand-written).
        cases: the cases the description must not mirror (the test split of the datasets
            of the variant's toolset).
        reviewed: :func:`reviewed_mirrors` of the dataset's datasheet.
        threshold: Jaccard similarity for ``near-copy`` (0-1).
        everywhere: the test queries the ``containment`` signal looks for (every test split
            of the project: :func:`bench.descriptions.containment.project_test_cases`);
            None: ``cases``.

    Returns:
        One :class:`Leak` per (case, line, signal), sorted by case id then tool.
    """
    lines = list(snippets(variant))
    line_tokens = [tokens(s.text) for s in lines]
    generic = [generic_statement(s) for s in lines]
    phrases = [(s, [(p, _norm_phrase(p)) for p in quoted_phrases(s.text)]) for s in lines]
    leaks: list[Leak] = []
    for case in cases:
        said = case_text(case)
        said_tokens = tokens(said)
        said_norm = _norm_phrase(said)
        specific = bool(_ID_OR_NUMBER.search(said))
        for snip, toks, general in zip(lines, line_tokens, generic):
            score = jaccard(said_tokens, toks)
            if score >= threshold and not (general and specific):
                leaks.append(Leak(case.id, variant.name, snip.tool, snip.section, snip.text,
                                  "near-copy", round(score, 3), mask(said)))
            elif snip.arguments is not None and _lang(snip.text) != _lang(said) \
                    and _args_match(snip.arguments, case, snip.tool):
                leaks.append(Leak(case.id, variant.name, snip.tool, snip.section, snip.text,
                                  "argument-copy", 1.0, json.dumps(snip.arguments,
                                                                   ensure_ascii=False)))
        for snip, found in phrases:
            for phrase, norm in found:
                if norm and norm in said_norm:
                    leaks.append(Leak(case.id, variant.name, snip.tool, snip.section, snip.text,
                                      "trigger-phrase", 1.0, phrase))
        for tool, text in (reviewed or {}).get(case.id, []):
            hits = [s for s in lines if s.tool == tool and text.casefold() in s.text.casefold()]
            for snip in hits[:1]:
                leaks.append(Leak(case.id, variant.name, snip.tool, snip.section, snip.text,
                                  "reviewed", 1.0, text))
    index = everywhere if everywhere is not None else TestIndex(("", c) for c in cases)
    leaks += contained(variant, lines, index)
    return sorted(leaks, key=lambda k: (k.case_id, k.tool, k.signal, k.text))


def contained(variant: Variant, lines: Sequence[Snippet], index: TestIndex) -> list[Leak]:
    """``containment`` findings: ``lines`` (:func:`snippets` of ``variant``) that contain a
    query of ``index``; then each tool's whole description, for a query split across lines
    (reported only where no line of that tool holds it)."""
    found = [Leak(c.case_id, variant.name, c.tool, c.location, c.text, CONTAINMENT, c.score,
                  c.evidence, c.dataset)
             for c in index.copies(ModelText(s.tool, s.section, s.text) for s in lines)]
    held = {(k.case_id, k.tool) for k in found}
    whole = index.copies(ModelText(t.name, "description", t.description)
                         for t in variant.tools)
    found += [Leak(c.case_id, variant.name, c.tool, "description (across lines)", c.text,
                   CONTAINMENT, c.score, c.evidence, c.dataset)
              for c in whole if (c.case_id, c.tool) not in held]
    return found


def _lang(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


def unique_cases(leaks: Iterable[Leak], hints: bool = False) -> set[str]:
    """Ids of the cases with at least one finding (``hints``: count ``argument-copy`` too)."""
    return {k.case_id for k in leaks if hints or not k.is_hint}
