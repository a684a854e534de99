"""Copies of a test query inside a longer text: substring and n-gram containment.

The leak checker's ``near-copy`` signal (:mod:`bench.descriptions.leaks`) compares a whole
description line with a whole query, so a query appended to a longer line, or put into a
parameter's description, passes it. This module finds a test query *inside* any text a model
sees: every line of a tool's description, every text of its JSON Schema (parameter
descriptions at any depth, titles, enum descriptions, examples, defaults), prompt templates,
synthesized cases. The measure is Broder's *containment* (A. Broder, "On the resemblance and
containment of documents", SEQUENCES 1997): the share of the query's n-grams that occur in
the text, ``|S(q) ∩ S(t)| / |S(q)|``; a query whose whole normalised text occurs in the text
scores 1.0.

Texts are compared after :func:`normalise`: Unicode NFKC (full-width letters and digits become
ASCII, ``ＡＢＣ`` -> ``abc``), case folding, invisible format characters removed, punctuation
and spaces collapsed, and the spaces between CJK characters removed (``我 的 包 裹`` ->
``我的包裹``). IDs and numbers are kept, not masked as the near-copy signal masks them: a
verbatim copy keeps them, while two different requests built on one template ("Top 10 products
by revenue in 2026" and the dev case "Top 10 products by revenue in October 2026?") share
most of their words once they are masked. The units are words (letters or digits) and single
CJK characters; the n-grams are word 5-grams for a query that is mostly words and character
4-grams for one that is mostly CJK.

Short queries are exempt: "Cancel my order" is contained, legitimately, in many descriptions.
A query counts only from :data:`MIN_WORDS` words or :data:`MIN_CJK` CJK characters (a mixed
query adds its words and 5/8 of its CJK characters: :func:`weight`).
Both values and :data:`CONTAINMENT_THRESHOLD` are justified from the shipped data in
``docs/descriptions-and-variants.md#the-leak-checker`` (``benchmarks/leak_threshold.py``
prints the distributions).

The public API is small so that other checkers can sit beside it: :func:`model_texts` (what a
model sees of a variant, with its location), :func:`find_copies` (``Copy`` findings: case id,
location, signal, score, evidence) and :func:`project_test_cases` (every test split of the
project).
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from bench.models import Case, Tool

#: Share (0-1) of a query's n-grams found in a text at or above which the text contains a copy
#: of the query; 1.0 is the whole query (a substring, after normalisation). Above the highest
#: share between a test query and a different dev query of the shipped datasets (0.73), which
#: a description may quote (docs/descriptions-and-variants.md#the-leak-checker).
CONTAINMENT_THRESHOLD = 0.75
#: A query counts from this many words or :data:`MIN_CJK` CJK characters: the run lengths
#: at which a run of a shipped test query occurs in the shipped (dev-derived) descriptions
#: about 1% of the time or less (docs/descriptions-and-variants.md#the-leak-checker).
MIN_WORDS = 5
MIN_CJK = 8
#: n-gram sizes: word n-grams for Latin queries, character n-grams for CJK ones.
WORD_N = 5
CJK_N = 4
#: Signal name of a containment finding (``Leak.signal`` and ``Copy.signal``).
SIGNAL = "containment"

_CJK_CHAR = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_UNIT = re.compile(rf"[{_CJK_CHAR}]|(?:(?![{_CJK_CHAR}])[^\W_])+")
_IS_CJK = re.compile(rf"[{_CJK_CHAR}]")
_SPACED_CJK = re.compile(rf"(?<=[{_CJK_CHAR}])\s+(?=[{_CJK_CHAR}])")
_SCHEMA_TEXT_KEYS = ("description", "title", "$comment")
_SCHEMA_VALUE_KEYS = ("examples", "example", "default", "const", "enum")
_ENUM_TEXT_KEYS = ("enumDescriptions", "x-enum-descriptions", "enum_descriptions",
                   "x-enumDescriptions", "markdownEnumDescriptions")


#: Cyrillic and Greek letters whose TR39 confusable prototype is one Latin letter (Unicode
#: Technical Standard #39, confusables.txt): in a word that mixes them with Latin letters
#: (TR39 section 5, mixed-script detection) they are read as that letter, so ``pаrcel`` with
#: a Cyrillic ``а`` is ``parcel``; a word of one script is left as it is.
CONFUSABLE_LATIN = str.maketrans(
    "аеорсухіјѕԁһӏԛԝАВЕКМНОРСТХІЈЅ" "οαινρυΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhlqwABEKMHOPCTXIJS" "oaivpuABEZHIKMNOPTYX")
_LATIN = re.compile(r"[A-Za-z]")
_CONFUSABLE = re.compile("[" + "".join(chr(c) for c in CONFUSABLE_LATIN) + "]")
_WORD = re.compile(r"[^\W\d_]+")
_LINE_HYPHEN = re.compile(r"(?<=[^\W\d_])-[ \t]*\r?\n\s*(?=[^\W\d_])")
# Combining Diacritical Marks on a Latin letter (after NFD): Cyrillic й keeps its breve
_DIACRITIC = re.compile("(?<=[A-Za-z])[\u0300-\u036f]+")


def _latin_word(match: re.Match[str]) -> str:
    word = match.group(0)
    if _LATIN.search(word) and _CONFUSABLE.search(word):
        return word.translate(CONFUSABLE_LATIN)
    return word


# a run of percent-escapes (RFC 3986 section 2.1) and of JSON \uXXXX escapes (RFC 8259
# section 7; a run keeps a surrogate pair together)
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_JSON_ESCAPE_RUN = re.compile(r"(?:\\u[0-9A-Fa-f]{4})+")


def _percent_run(match: re.Match[str]) -> str:
    run = match.group(0)
    try:
        return bytes.fromhex(run.replace("%", "")).decode("utf-8")
    except UnicodeDecodeError:  # not UTF-8 text: left as written
        return run


def _json_escape_run(match: re.Match[str]) -> str:
    decoded: str = json.loads('"' + match.group(0) + '"')
    # a lone surrogate is no character (it could not even be written out as UTF-8)
    return match.group(0) if any("\ud800" <= c <= "\udfff" for c in decoded) else decoded


def fold(text: str) -> str:
    """``text`` after JSON ``\\uXXXX`` escapes (``\\u0027`` is ``'``) and URL
    percent-escapes that spell UTF-8 text (``%20`` is a space; ``100%`` and ``%zz`` stay)
    are decoded, HTML entities decoded (``&#39;`` is ``'``), NFKC (full-width
    ``ＡＢＣ１`` is ``ABC1``), without format characters (zero-width spaces and joiners,
    Unicode category Cf), without Latin diacritics (``é`` is ``e``, so a combining accent
    does not split a word), with a word hyphenated across a line break joined
    (``arr-\\nived`` is ``arrived``), with Cyrillic and Greek look-alikes inside a Latin word
    read as Latin (:data:`CONFUSABLE_LATIN`) and without the whitespace between two CJK
    characters (``我 的 包 裹`` is ``我的包裹``); case is kept."""
    folded = _JSON_ESCAPE_RUN.sub(_json_escape_run, text) if "\\u" in text else text
    if "%" in folded:
        folded = _PERCENT_RUN.sub(_percent_run, folded)
    folded = html.unescape(folded) if "&" in folded else folded
    folded = unicodedata.normalize("NFKC", folded)
    folded = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    if not folded.isascii():
        folded = unicodedata.normalize(
            "NFC", _DIACRITIC.sub("", unicodedata.normalize("NFD", folded)))
        folded = _WORD.sub(_latin_word, folded)
    if "-" in folded:
        folded = _LINE_HYPHEN.sub("", folded)
    return _SPACED_CJK.sub("", folded)


def normalise(text: str) -> str:
    """``text`` as the containment signal compares it: its units (:func:`units`: after
    :func:`fold` and case folding) joined by one space, with no space between two CJK
    characters.

    >>> normalise("Ｗｈｅｒｅ  is SF123？ 我 的 包 裹")
    'where is sf123 我的包裹'
    """
    out: list[str] = []
    for unit in units(text):
        if out and _IS_CJK.match(unit) and _IS_CJK.match(out[-1][-1]):
            out[-1] += unit
        else:
            out.append(unit)
    return " ".join(out)


def units(text: str) -> list[str]:
    """The units of ``text`` after :func:`fold` and case folding: words (runs of letters and
    digits, IDs and numbers included) and each CJK character on its own. Punctuation and
    spaces separate units and are dropped."""
    return _UNIT.findall(fold(text).casefold())


def weight(query_units: Sequence[str]) -> float:
    """The length of a query (its :func:`units`) in words: each word 1, each CJK character
    ``MIN_WORDS / MIN_CJK``. A query counts for containment from ``MIN_WORDS``."""
    cjk = sum(1 for u in query_units if _IS_CJK.match(u))
    return len(query_units) - cjk + cjk * MIN_WORDS / MIN_CJK


def _n_for(query_units: Sequence[str]) -> int:
    cjk = sum(1 for u in query_units if _IS_CJK.match(u))
    return CJK_N if cjk > len(query_units) - cjk else WORD_N


def ngrams(seq: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The n-grams (tuples of ``n`` consecutive units) of ``seq``; empty when it is shorter."""
    return {tuple(seq[i:i + n]) for i in range(len(seq) - n + 1)}


@dataclass(frozen=True)
class ModelText:
    """One text a model sees: ``tool`` (or ``""`` for a prompt), ``location`` (``description
    line 4``, ``input_schema.properties.carrier.description``, ``prompt single.j2``...) and
    ``text``."""

    tool: str
    location: str
    text: str


@dataclass(frozen=True)
class Copy:
    """A text that contains (part of) a test query.

    Attributes:
        case_id: the test case; ``dataset``: its dataset name (``""`` when not known).
        tool, location, text: where (:class:`ModelText`).
        signal: ``containment``.
        score: the share of the query's n-grams found in the text (0-1; 1.0: the whole query).
        evidence: the longest run of the query found in the text (normalised).
    """

    case_id: str
    dataset: str
    tool: str
    location: str
    text: str
    signal: str
    score: float
    evidence: str


def schema_texts(schema: object, path: str = "input_schema") -> Iterator[tuple[str, str]]:
    """``(path, text)`` for every string a model reads in a JSON Schema: descriptions and
    titles at any depth (``properties``, ``items``, ``anyOf``/``oneOf``/``allOf``, ``$defs``,
    ``additionalProperties``...), enum descriptions (``enumDescriptions`` and its
    ``x-`` spellings), ``examples``, ``default``, ``const`` and ``enum`` string values."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            where = f"{path}.{key}"
            if key in _SCHEMA_TEXT_KEYS and isinstance(value, str):
                yield where, value
            elif key in _SCHEMA_VALUE_KEYS or key in _ENUM_TEXT_KEYS:
                yield from _strings(value, where)
            elif key == "properties" and isinstance(value, dict):
                for name, sub in value.items():  # a property's name is not prose
                    yield from schema_texts(sub, f"{where}.{name}")
            else:
                yield from schema_texts(value, where)
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from schema_texts(item, f"{path}[{index}]")


def _strings(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def tool_texts(tool: Tool) -> Iterator[ModelText]:
    """What a model sees of ``tool``: its whole description, then every schema text
    (:func:`schema_texts`)."""
    yield ModelText(tool.name, "description", tool.description)
    for path, text in schema_texts(tool.input_schema):
        yield ModelText(tool.name, path, text)


def model_texts(tools: Iterable[Tool]) -> list[ModelText]:
    """:func:`tool_texts` of each tool, in order."""
    return [t for tool in tools for t in tool_texts(tool)]


@dataclass(frozen=True)
class _Query:
    case_id: str
    dataset: str
    units: tuple[str, ...]
    n: int
    grams: frozenset[tuple[str, ...]]


class TestIndex:
    """The long enough user texts of some test cases, indexed by n-gram for containment.

    Args:
        cases: ``(dataset name, case)`` pairs (pass test cases only). Each user message and
            scripted reply of a case is a query of its own; those under :data:`MIN_WORDS` /
            :data:`MIN_CJK` (:func:`weight`) are left out.
    """

    __test__ = False  # not a pytest class

    def __init__(self, cases: Iterable[tuple[str, Case]]) -> None:
        self.queries: list[_Query] = []
        self._index: dict[tuple[str, ...], list[int]] = {}
        for dataset, case in cases:
            said = [m.content for m in case.messages if m.role == "user" and m.content]
            for text in dict.fromkeys(said + list(case.user_replies)):
                seq = tuple(units(text))
                if weight(seq) < MIN_WORDS:
                    continue
                n = _n_for(seq)
                grams = frozenset(ngrams(seq, n))
                if not grams:
                    continue
                self.queries.append(_Query(case.id, dataset, seq, n, grams))
                for gram in grams:
                    self._index.setdefault(gram, []).append(len(self.queries) - 1)

    def __len__(self) -> int:
        return len(self.queries)

    def scores(self, text: str) -> list[tuple[float, int]]:
        """``(containment, query index)`` for each query sharing an n-gram with ``text``,
        best first."""
        seq = units(text)
        hits: Counter[int] = Counter()
        for n in (WORD_N, CJK_N):
            for gram in ngrams(seq, n):
                for index in self._index.get(gram, ()):
                    if self.queries[index].n == n:
                        hits[index] += 1
        return sorted(((count / len(self.queries[i].grams), i) for i, count in hits.items()),
                      reverse=True)

    def copies(self, texts: Iterable[ModelText], threshold: float = CONTAINMENT_THRESHOLD
               ) -> list[Copy]:
        """A :class:`Copy` per (query, text) with containment at or above ``threshold``."""
        found: list[Copy] = []
        for item in texts:
            for score, index in self.scores(item.text):
                if score < threshold:
                    break
                query = self.queries[index]
                found.append(Copy(query.case_id, query.dataset, item.tool, item.location,
                                  item.text, SIGNAL, round(score, 3),
                                  _longest_run(query.units, units(item.text))))
        return found

    def case_copies(self, case: Case, threshold: float = CONTAINMENT_THRESHOLD) -> list[Copy]:
        """:meth:`copies` in what the user says in ``case``: each user message and scripted
        reply (location ``user message`` / ``user reply``), as the index reads a test case.
        Checks a case that is not a test case (a ``dev`` case, a generated or reviewed one)
        against the test queries."""
        texts = [ModelText("", "user message", m.content) for m in case.messages
                 if m.role == "user" and m.content]
        texts += [ModelText("", "user reply", reply) for reply in case.user_replies]
        return self.copies(texts, threshold)


def _longest_run(query: Sequence[str], text: Sequence[str]) -> str:
    """The longest run of consecutive units of ``query`` that occurs in ``text``, normalised
    (dynamic programming over the two sequences; both are short)."""
    best, end = 0, 0
    previous = [0] * (len(text) + 1)
    for i in range(1, len(query) + 1):
        current = [0] * (len(text) + 1)
        for j in range(1, len(text) + 1):
            if query[i - 1] == text[j - 1]:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, end = current[j], i
        previous = current
    return normalise(" ".join(query[end - best:end]))


def find_copies(texts: Iterable[ModelText], cases: Iterable[tuple[str, Case]],
                threshold: float = CONTAINMENT_THRESHOLD) -> list[Copy]:
    """Texts in ``texts`` that contain a query of ``cases`` (``(dataset, case)`` pairs; pass
    test cases), sorted by case id then tool and location. Build a :class:`TestIndex` once
    instead when checking many texts against the same cases."""
    found = TestIndex(cases).copies(texts, threshold)
    return sorted(found, key=lambda c: (c.case_id, c.tool, c.location))


def test_split(cases: Sequence[Case]) -> list[Case]:
    """The ``test`` cases of a dataset, or every case of a dataset without splits."""
    split = any(c.split for c in cases)
    return [c for c in cases if not split or c.split == "test"]


def project_test_cases(datasets_root: Path, extra: Mapping[str, Sequence[Case]] | None = None,
                       ) -> list[tuple[str, Case]]:
    """Every test case of a project as ``(dataset name, case)``: the :func:`test_split` of
    each dataset under ``datasets_root`` (a folder whose ``cases.jsonl`` is empty, as
    ``bench init`` writes it, is skipped), then of each of ``extra`` (``name -> cases``, e.g.
    a dataset given as a ``.jsonl`` path) whose name is not one of them.

    Raises:
        BenchError: a dataset that does not load (names the file and line).
    """
    from bench.datasets import available_datasets, load_dataset

    named: dict[str, Sequence[Case]] = {}
    for name in available_datasets(datasets_root):
        path = datasets_root / name / "cases.jsonl"
        if path.read_text(encoding="utf-8", errors="replace").strip():
            named[name] = load_dataset(name, datasets_root).cases
    for name, cases in (extra or {}).items():
        named.setdefault(name, cases)
    return [(name, case) for name, cases in named.items() for case in test_split(cases)]
