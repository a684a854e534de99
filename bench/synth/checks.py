"""``bench synth``'s checks that need no run: the language of a query, the ``schema`` of a
candidate's label, ``duplicate`` and ``leak`` (near-duplicates by masked n-gram Jaccard,
test copies by containment, description lines that mirror a case), and the refusal of a
generation prompt that quotes a test case (step 2 of :mod:`bench.synth.core`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Sequence

from bench.errors import BenchError
from bench.models import Case, Tool
from bench.synth.candidates import DUPLICATE_THRESHOLD, Candidate, Request
from bench.synth.proposals import missing_required

_ID_OR_NUMBER = re.compile(r"[A-Za-z]*[0-9][A-Za-z0-9_\-:/.]*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def query_tokens(text: str) -> frozenset[str]:
    """Tokens for near-duplicate detection: ids and numbers masked (ASCII-only pattern, so a
    Chinese word after an id stays), then the leak checker's tokens (Latin words, CJK
    character bigrams: :func:`bench.descriptions.leaks.tokens`)."""
    from bench.descriptions.leaks import tokens

    return tokens(_ID_OR_NUMBER.sub(" # ", text))


def near_duplicate(query: str, kept: Sequence[tuple[str, frozenset[str]]],
                   threshold: float = DUPLICATE_THRESHOLD) -> tuple[str, float] | None:
    """The first kept case (id, similarity) whose query is a near-duplicate of ``query``:
    Jaccard similarity of :func:`query_tokens` at or above ``threshold``; None if none."""
    from bench.descriptions.leaks import jaccard

    mine = query_tokens(query)
    for case_id, theirs in kept:
        score = jaccard(mine, theirs)
        if score >= threshold:
            return case_id, score
    return None


def language_problem(query: str, lang: str) -> str | None:
    """Why ``query`` is not in ``lang`` (en: no CJK character; zh: some; mixed: CJK and a
    Latin word of 2+ letters beside ids and numbers), or None."""
    cjk = bool(_CJK.search(query))
    latin = bool(_LATIN_WORD.search(_ID_OR_NUMBER.sub(" ", query)))
    if lang == "en" and cjk:
        return "asked for English, the query has CJK characters"
    if lang in ("zh", "mixed") and not cjk:
        return f"asked for {lang}, the query has no CJK character"
    if lang == "mixed" and not latin:
        return "asked for mixed, the query has no Latin word"
    return None


def check_schema(candidates: Sequence[Candidate], tools: Sequence[Tool], toolset: str,
                 work: Path) -> None:
    """The ``schema`` check of every candidate still alive: its line loads with bench's
    dataset loader (:func:`bench.datasets.load_dataset`), its label fits the tools
    (:func:`bench.datasets.labels.iter_label_problems`) and every expected call has its
    tool's required arguments."""
    from bench.datasets import load_dataset
    from bench.datasets.labels import iter_label_problems
    from bench.store.files import atomic_write_text

    path = work / "candidate.jsonl"
    for candidate in candidates:
        if candidate.reason is not None or candidate.case is None:
            continue
        atomic_write_text(path, json.dumps(candidate.case, ensure_ascii=False) + "\n")
        try:
            loaded = load_dataset(str(path))
        except BenchError as exc:
            candidate.fail("schema", str(exc).split(": ", 1)[-1])
            continue
        problem = next(iter_label_problems(loaded, toolset, tools), None)
        why = f"{problem.field}: {problem.message}" if problem is not None else \
            missing_required(loaded.cases[0].expected, tools)
        if why:
            candidate.fail("schema", why)
        else:
            candidate.verdicts["schema"] = "pass"
    path.unlink(missing_ok=True)


def check_duplicates_and_leaks(candidates: Sequence[Candidate], existing: Sequence[Case],
                               toolset: str, threshold: float,
                               tests: Sequence[tuple[str, Case]] = ()) -> None:
    """The ``duplicate`` check (against the dataset's cases and the candidates kept before,
    in order) and the ``leak`` check of each live candidate: a near-duplicate (``threshold``)
    of a test case of ``tests`` (``(dataset, case)``: every test split of the project,
    :func:`bench.descriptions.containment.project_test_cases`), a user text that contains
    one (:class:`bench.descriptions.containment.TestIndex`), or a line of a variant of the
    toolset that mirrors it (:func:`bench.descriptions.leaks.find_leaks`)."""
    from bench.descriptions import available_variants, load_variant
    from bench.descriptions.containment import ModelText, TestIndex
    from bench.descriptions.leaks import case_text, find_leaks

    variants = [load_variant(toolset, name) for name in available_variants(toolset)]
    kept = [(c.id, query_tokens(case_text(c))) for c in existing if c.toolset == toolset]
    index = TestIndex(tests)
    test_tokens = [(f"{c.id} of dataset {name}", query_tokens(case_text(c)))
                   for name, c in tests]
    for candidate in candidates:
        if candidate.reason is not None or candidate.case is None:
            continue
        case = Case.model_validate(candidate.case)
        twin = near_duplicate(case.query, kept, threshold)
        if twin is not None:
            candidate.fail("duplicate", f"{twin[0]} (similarity {twin[1]:.2f} >= "
                                        f"{threshold})")
            continue
        candidate.verdicts["duplicate"] = "pass"
        copied = near_duplicate(case_text(case), test_tokens, threshold)
        if copied is not None:
            candidate.fail("leak", f"a near-duplicate of test case {copied[0]} (similarity "
                                   f"{copied[1]:.2f} >= {threshold})")
            continue
        contained = index.copies(ModelText("", "user text", text)
                                 for text in case_text(case).splitlines())
        if contained:
            copy = contained[0]
            candidate.fail("leak", f"contains test case {copy.case_id} of dataset "
                                   f"{copy.dataset} ({copy.score:.0%} of its n-grams: "
                                   f"'{copy.evidence[:80]}')")
            continue
        leaks = [k for v in variants for k in find_leaks(v, [case]) if not k.is_hint]
        if leaks:  # a whole-line signal first: it names the line that is the copy
            first = min(leaks, key=lambda k: k.signal == "containment")
            candidate.fail("leak", f"{first.signal} of {first.variant} {first.tool} "
                                   f"'{first.text[:80]}'")
            continue
        candidate.verdicts["leak"] = "pass"
        kept.append((candidate.id, query_tokens(case.query)))


def check_prompts(requests: Sequence[Request], tests: Sequence[tuple[str, Case]]) -> None:
    """Refuse to send a generation prompt that contains a test query (``tests``: ``(dataset,
    case)`` pairs; the containment signal of :mod:`bench.descriptions.containment`): the
    template (``--templates``) or a tool's description quotes a test case, and only ``dev``
    cases may inform prompts.

    Raises:
        BenchError: the first such prompt, naming its template, the case and the words.
    """
    from bench.descriptions.containment import ModelText, TestIndex

    index = TestIndex(tests)
    for request in requests:
        found = index.copies([ModelText(request.tool, request.template, request.text)])
        if found:
            first = found[0]
            raise BenchError(f"the generation prompt {request.id} ({request.template}, tool "
                             f"{request.tool}) contains test case {first.case_id} of dataset "
                             f"{first.dataset}: '{first.evidence[:80]}'; prompts may quote "
                             "dev cases only (rewrite the template or the description)")
