"""``bench review --apply``: apply a decisions file to its dataset (the rules are in
:mod:`bench.synth.review`): accepted and fixed cases are marked, fixes checked like any case,
rejected cases leave ``cases.jsonl``, every decision goes to the ledger, the generated cases
are split again and the datasheet refreshed.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from bench.datasets import load_dataset
from bench.datasets.labels import iter_label_problems
from bench.datasets.loader import Dataset
from bench.datasets.splits import (DEFAULT_DEV_FRACTION, DEFAULT_SPLIT_SEED, Split,
                                   assign_splits)
from bench.descriptions import available_variants, load_variant
from bench.descriptions.containment import TestIndex, project_test_cases, test_split
from bench.descriptions.leaks import find_leaks, unique_cases
from bench.descriptions.variants import default_variant
from bench.errors import BenchError, pydantic_error_field
from bench.models import Case, Tool
from bench.project import current_project
from bench.redact import redact
from bench.store.files import atomic_write_text
from bench.synth.review import (LEDGER, Decisions, ReviewCounts, read_counts,
                                refresh_datasheet, same_dataset)


@dataclass(frozen=True)
class Applied:
    """What :func:`apply_decisions` did: decisions applied per kind, pending ones left,
    cases per split after the new split, and the review counts."""

    applied: dict[str, int]
    pending: int
    splits: dict[str, int]
    counts: ReviewCounts


def apply_decisions(path: Path, decisions: Decisions, *, date: str,
                    dev_fraction: float | None = None, seed: int | None = None,
                    source: Path | None = None, datasets_dir: Path | None = None) -> Applied:
    """Apply ``decisions`` to the dataset file ``path`` (see the module docstring).

    Args:
        path: the dataset's ``cases.jsonl``.
        decisions: the decisions (pending ones are left as they are).
        date: the review date, ISO 8601 (``2026-12-03``).
        dev_fraction: the new split's dev share (default :data:`bench.datasets.splits.
            DEFAULT_DEV_FRACTION`); seed: its seed (default the module's).
        source: the decisions file, named by the errors (None: decisions made on the
            terminal).
        datasets_dir: the project's datasets, whose test splits an accepted or fixed case
            may not copy (None: the current project's).

    The reviewer's name and the notes are stored redacted (:func:`bench.redact.redact`).

    Raises:
        BenchError: decisions for another dataset (``dataset``: :func:`same_dataset`), a
            decision for an unknown or not generated case, a case decided twice, a fix with
            an empty query, a fix whose case does not load or whose label does not fit the
            tools, or an accepted or fixed case that copies a test query of any dataset
            (names the decisions file and entry); nothing is written then.
    """
    if not same_dataset(decisions.dataset, path):
        raise BenchError(f"the decisions are for dataset '{decisions.dataset}', not {path}: "
                         "apply them to that dataset (or correct 'dataset')", file=source,
                         field="dataset")
    loaded = load_dataset(str(path))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    by_id = {row["id"]: row for row in rows}
    decided = _decide(by_id, decisions, path, date, source)
    kept_rows = [r for r in rows if r["id"] in by_id]
    if not kept_rows:
        raise BenchError("every case would be rejected: a dataset needs one case or more "
                         "(delete the folder instead)", file=path)
    cases = _checked_cases(kept_rows, decided.fixed_at, source)
    toolsets = _check_labels(path, loaded, cases, decided.fixed_at, source)
    _refuse_test_copies(path, loaded, [c for c in cases if c.id in decided.kept_at],
                        decided.kept_at, decided.fixed_at, source, datasets_dir)
    assignment = _new_splits(loaded, cases, toolsets, dev_fraction, seed)
    _write_cases(path, kept_rows, assignment)
    _append_ledger(path.parent / LEDGER, decided.ledger)
    refresh_datasheet(path.parent)
    final = load_dataset(str(path)).cases
    return Applied(dict(decided.applied), decided.pending, dict(Counter(assignment.values())),
                   read_counts(path.parent, final))


@dataclass
class _Decided:
    """What the decisions did to the rows (:func:`_decide`): ``fixed_at`` and ``kept_at``
    (case id -> its decisions entry, ``decisions.<i>``, of a fix, and of an accept or fix:
    for the errors), the ``ledger`` entries, decisions ``applied`` per kind and the
    ``pending`` ones left."""

    fixed_at: dict[str, str] = field(default_factory=dict)
    kept_at: dict[str, str] = field(default_factory=dict)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    applied: Counter[str] = field(default_factory=Counter)
    pending: int = 0


def _decide(by_id: dict[str, dict[str, Any]], decisions: Decisions, path: Path, date: str,
            source: Path | None) -> _Decided:
    """Apply each decision to its row of ``by_id`` (case id -> the row as JSON data, changed
    in place; a rejected case is removed): an accepted or fixed case gets its
    ``provenance.review``, a fix its corrected label and query. The reviewer's name and the
    notes are stored redacted.

    Raises:
        BenchError: a case decided twice, one that is not a generated case of ``path``, a
            fix without a correction or with an empty query (names the entry).
    """
    decided = _Decided()
    seen: set[str] = set()
    # stored in the dataset and its ledger: a token pasted as a name is not kept
    reviewer = redact(decisions.reviewer) if decisions.reviewer else None
    for i, decision in enumerate(decisions.decisions):
        where = f"decisions.{i}"
        if decision.id in seen:
            raise BenchError(f"case '{decision.id}' is decided twice", file=source,
                             field=where)
        seen.add(decision.id)
        if decision.decision == "pending":
            decided.pending += 1
            continue
        row = by_id.get(decision.id)
        if row is None or "provenance" not in row:
            raise BenchError(f"'{decision.id}' is not a generated case of {path}",
                             file=source, field=f"{where}.id")
        review = {"decision": "accepted", "date": date}
        if reviewer:
            review["reviewer"] = reviewer
        note = redact(decision.note) if decision.note else None
        if note:
            review["note"] = note
        if decision.decision == "reject":
            del by_id[decision.id]
        elif decision.decision == "fix":
            if decision.expected is None and decision.query is None:
                raise BenchError("a fix gives the corrected 'expected' and/or 'query'",
                                 file=source, field=where)
            if decision.query is not None and not decision.query.strip():
                raise BenchError("the corrected query is empty: give the user's request, or "
                                 "leave 'query' out to keep it", file=source,
                                 field=f"{where}.query")
            decided.fixed_at[decision.id] = where
            if decision.expected is not None:
                row["expected"] = decision.expected
            if decision.query is not None:
                row["messages"] = [{"role": "user", "content": decision.query}]
            review["decision"] = "fixed"
        if decision.decision != "reject":
            row["provenance"]["review"] = review
            decided.kept_at[decision.id] = where
        decided.ledger.append({"id": decision.id, "decision": decision.decision, "date": date,
                               "reviewer": reviewer, "note": note})
        decided.applied[decision.decision] += 1
    return decided


def _checked_cases(kept_rows: Sequence[dict[str, Any]], fixed_at: dict[str, str],
                   source: Path | None) -> list[Case]:
    """The kept rows as cases (the loader's model; split ``dev`` while they are checked).

    Raises:
        BenchError: a case that does not validate after its fix (names the entry and field).
    """
    cases: list[Case] = []
    for row in kept_rows:
        try:
            cases.append(Case.model_validate({**row, "split": "dev"}))
        except ValidationError as exc:
            field, message = pydantic_error_field(exc)
            raise BenchError(f"case '{row['id']}' after the fix: {message}", file=source,
                             field=_fix_field(fixed_at.get(row["id"]), field)) from None
    return cases


def _check_labels(path: Path, loaded: Dataset, cases: Sequence[Case],
                  fixed_at: dict[str, str], source: Path | None) -> list[str]:
    """Check every label against its toolset's tools
    (:func:`bench.datasets.labels.iter_label_problems`); returns the cases' toolsets.

    Raises:
        BenchError: the first label that does not fit (names the entry and field).
    """
    tools_of: dict[str, list[Tool]] = {}
    for toolset in {c.toolset for c in cases}:
        tools_of[toolset] = list(load_variant(toolset, _any_variant(toolset)).tools)
    check = Dataset(loaded.name, path, tuple(cases), loaded.sha256,
                    {c.id: n for n, c in enumerate(cases, 1)})
    for toolset, tools in tools_of.items():
        problem = next(iter_label_problems(check, toolset, tools), None)
        if problem is not None:
            raise BenchError(f"case '{problem.case_id}' after the fix: {problem.message}",
                             file=source,
                             field=_fix_field(fixed_at.get(problem.case_id), problem.field))
    return list(tools_of)


def _new_splits(loaded: Dataset, cases: Sequence[Case], toolsets: Sequence[str],
                dev_fraction: float | None, seed: int | None) -> dict[str, Split]:
    """Case id -> split after the review: a hand-written case keeps its split; the generated
    ones are split again (:func:`bench.datasets.splits.assign_splits`), those a description
    line of a variant of their toolsets mirrors forced into ``dev``."""
    mirrored: set[str] = set()
    for toolset in toolsets:
        for name in available_variants(toolset):
            mirrored |= unique_cases(find_leaks(load_variant(toolset, name), cases))
    # only generated cases are split here: a hand-written case keeps the split it has
    assignment = {c.id: c.split or "test" for c in loaded.cases if c.provenance is None}
    assignment |= assign_splits([c for c in cases if c.provenance is not None],
                                dev_fraction=DEFAULT_DEV_FRACTION
                                if dev_fraction is None else dev_fraction,
                                seed=DEFAULT_SPLIT_SEED if seed is None else seed,
                                forced_dev=mirrored)
    return assignment


def _write_cases(path: Path, kept_rows: Sequence[dict[str, Any]],
                 assignment: dict[str, Split]) -> None:
    """Write the kept rows to ``path`` with their new splits (``split`` right after
    ``lang``; a row of a dataset without splits as it is)."""
    lines = []
    for row in kept_rows:
        if "provenance" not in row and "split" not in row:
            lines.append(json.dumps(row, ensure_ascii=False))  # a dataset without splits
            continue
        rebuilt: dict[str, Any] = {}
        for key, value in row.items():
            if key != "split":
                rebuilt[key] = value
            if key == "lang":
                rebuilt["split"] = assignment[row["id"]]
        rebuilt.setdefault("split", assignment[row["id"]])
        lines.append(json.dumps(rebuilt, ensure_ascii=False))
    atomic_write_text(path, "\n".join(lines) + "\n")


def _append_ledger(ledger_path: Path, entries: Sequence[dict[str, Any]]) -> None:
    """Append the applied decisions to the ledger (``review.jsonl``); nothing without any."""
    if entries:
        old = ledger_path.read_text(encoding="utf-8") if ledger_path.is_file() else ""
        atomic_write_text(ledger_path, old + "".join(
            json.dumps(e, ensure_ascii=False) + "\n" for e in entries))


def _refuse_test_copies(path: Path, loaded: Dataset, kept: Sequence[Case],
                        kept_at: dict[str, str], fixed_at: dict[str, str],
                        source: Path | None, datasets_dir: Path | None) -> None:
    """Refuse an accepted or fixed case whose user text contains a test query of any
    dataset of the project (the containment signal,
    :meth:`bench.descriptions.containment.TestIndex.case_copies`, over every test split:
    :func:`bench.descriptions.containment.project_test_cases`), this dataset's own test
    cases included except the decided ones: only ``dev`` cases may inform what a model is
    shown, and a reviewed case may stay in ``dev``.

    Raises:
        BenchError: names the decisions entry, the case and the test case it copies.
    """
    root = datasets_dir if datasets_dir is not None else current_project().datasets_dir
    here = path.resolve()
    tests = [(name, case) for name, case in project_test_cases(root)
             if (root / name / "cases.jsonl").resolve() != here]
    tests += [(loaded.name, case) for case in test_split(loaded.cases)
              if case.id not in kept_at]
    index = TestIndex(tests)
    for case in kept:
        copies = index.case_copies(case)
        if copies:
            first = copies[0]
            fixed = case.id in fixed_at
            field = f"{kept_at[case.id]}.query" if fixed else kept_at[case.id]
            raise BenchError(f"case '{case.id}'{' after the fix' if fixed else ''} copies test "
                             f"case {first.case_id} of dataset {first.dataset} "
                             f"('{first.evidence[:80]}'): a case may not repeat a test query "
                             "of any dataset; give it another query or reject it",
                             file=source, field=field)


def _fix_field(entry: str | None, field: str | None) -> str | None:
    """The field of a fixed case's problem in the decisions file: ``decisions.<i>.`` before
    the case's own field (``expected.calls.0.name``); the case's field alone when no fix of
    the file made it (a ``query`` fix sets ``messages``)."""
    if entry is None or not field:
        return field
    return f"{entry}.{field}" if field.startswith("expected") else f"{entry} ({field})"


def _any_variant(toolset: str) -> str:
    """A variant of ``toolset`` to read its tools from (its default one)."""
    return default_variant(toolset)
