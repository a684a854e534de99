"""``bench review``: a person accepts, fixes or rejects generated cases.

The unit of work is a **decisions file** (JSON, :class:`Decisions`): one entry per generated
case, ``pending``, ``accept``, ``fix`` (with the corrected ``expected`` label and/or ``query``)
or ``reject``. It is written by the terminal review (interactive, or a ``pending`` template
for editing by hand or by a script), or downloaded from the static HTML page
(:func:`render_html`), and applied by :func:`apply_decisions`:

- ``accept``: the case gets ``provenance.review`` ``{"decision": "accepted", ...}``;
- ``fix``: its label (and query) are replaced, checked like any case (the loader's model and
  :func:`bench.datasets.labels.iter_label_problems`), and it gets ``"fixed"``;
- ``reject``: it leaves ``cases.jsonl``.

A decisions file is applied to its own dataset only (:func:`same_dataset`), and no accepted
or fixed case may contain a test query of any dataset of the project (the containment signal
of :mod:`bench.descriptions.containment`): only ``dev`` cases may inform what a model is
shown, and a reviewed case may stay in ``dev``. The reviewer's name and the notes are stored
redacted (:func:`bench.redact.redact`).

Every applied decision is appended to the dataset's ``review.jsonl`` (the ledger rejected cases
are still counted from), the generated cases are split again
(:func:`bench.datasets.splits.assign_splits` over them alone: reviewed cases may now go to
``test``, unreviewed ones stay ``dev``; a hand-written case keeps its split, or none) and the datasheet's
review block gives the counts and the audited precision: accepted / reviewed, where reviewed
is accepted + fixed + rejected (a fixed label was wrong as generated), with its 95% Wilson
interval.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.models import Case, Tool

if TYPE_CHECKING:
    from bench.datasets.loader import Dataset

REVIEW_BEGIN, REVIEW_END = "<!-- review:begin -->", "<!-- review:end -->"
LEDGER = "review.jsonl"


class Decision(BaseModel):
    """One case's decision. ``expected`` (the corrected label, :class:`bench.models.Expected`
    as JSON) and ``query`` (the corrected user message) are read only for ``fix``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    decision: Literal["pending", "accept", "fix", "reject"] = "pending"
    expected: dict[str, Any] | None = None
    query: str | None = None
    note: str | None = None


class Decisions(BaseModel):
    """A decisions file: the dataset's ``cases.jsonl`` it is for, the reviewer's name, and
    one :class:`Decision` per case."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    reviewer: str | None = None
    decisions: list[Decision]


@dataclass(frozen=True)
class ReviewCounts:
    """Generated cases by review state: ``accepted``, ``fixed``, ``rejected`` (from the
    ledger), ``unreviewed``; ``precision`` = accepted / reviewed (None before any review)
    with its 95% Wilson interval ``low`` - ``high``."""

    accepted: int
    fixed: int
    rejected: int
    unreviewed: int

    @property
    def reviewed(self) -> int:
        """Accepted + fixed + rejected."""
        return self.accepted + self.fixed + self.rejected

    @property
    def precision(self) -> float | None:
        """Accepted / reviewed, or None when nothing was reviewed."""
        return self.accepted / self.reviewed if self.reviewed else None

    def interval(self) -> tuple[float, float] | None:
        """The Wilson interval of :attr:`precision` (95%), or None."""
        from bench.stats.intervals import wilson_interval
        return wilson_interval(self.accepted, self.reviewed) if self.reviewed else None


def generated(cases: Sequence[Case]) -> list[Case]:
    """The generated cases (with ``provenance``), in file order."""
    return [c for c in cases if c.provenance is not None]


def unreviewed(cases: Sequence[Case]) -> list[Case]:
    """The generated cases nobody reviewed yet, in file order."""
    return [c for c in generated(cases) if c.provenance is not None
            and c.provenance.review is None]


def dataset_file(target: str, datasets_dir: Path) -> Path:
    """The ``cases.jsonl`` that ``bench review TARGET`` reviews: a dataset name under
    ``datasets/``, its folder, or the file.

    Raises:
        BenchError: no such dataset.
    """
    path = Path(target)
    if path.suffix == ".jsonl":
        found = path
    elif path.is_dir():
        found = path / "cases.jsonl"
    else:
        from bench.datasets.loader import check_dataset_name
        found = datasets_dir / check_dataset_name(target) / "cases.jsonl"
    if not found.is_file():
        raise BenchError("no cases.jsonl to review", file=found)
    return found


def template(path: Path, cases: Sequence[Case], reviewer: str | None = None) -> Decisions:
    """A decisions file with every unreviewed generated case ``pending``."""
    return Decisions(dataset=str(path), reviewer=reviewer,
                     decisions=[Decision(id=c.id) for c in unreviewed(cases)])


def load_decisions(path: Path) -> Decisions:
    """Read and check a decisions file.

    Raises:
        BenchError: not JSON, or not the :class:`Decisions` shape (names the file and field).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"cannot read the decisions file: {exc}", file=path) from None
    except json.JSONDecodeError as exc:
        raise BenchError(f"malformed JSON: {exc.msg}", file=path, line=exc.lineno) from None
    try:
        return Decisions.model_validate(data)
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(message, file=path, field=field) from None


def read_counts(folder: Path, cases: Sequence[Case]) -> ReviewCounts:
    """The review counts of a dataset folder: its cases' review states and the rejections
    in its ledger (``review.jsonl``)."""
    states = Counter(c.provenance.review.decision if c.provenance and c.provenance.review
                     else "unreviewed" for c in generated(cases))
    rejected = 0
    ledger = folder / LEDGER
    if ledger.is_file():
        for line in ledger.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rejected += json.loads(line).get("decision") == "reject"
    return ReviewCounts(states["accepted"], states["fixed"], rejected, states["unreviewed"])


def review_block(counts: ReviewCounts) -> str:
    """The datasheet's review block (Markdown)."""
    if counts.precision is None:
        precision = "not audited yet (no generated case reviewed)"
    else:
        low, high = counts.interval() or (0.0, 0.0)
        precision = (f"{100 * counts.precision:.1f}% [{100 * low:.1f}-{100 * high:.1f}] "
                     f"({counts.accepted} accepted / {counts.reviewed} reviewed)")
    return "\n".join([
        "Generated cases (`bench synth`) and their review (`bench review`): only reviewed "
        "cases may be in `test`; unreviewed ones stay in `dev`.", "",
        "| review | cases |", "|---|---:|",
        f"| accepted | {counts.accepted} |", f"| fixed | {counts.fixed} |",
        f"| rejected (left the dataset) | {counts.rejected} |",
        f"| unreviewed (dev only) | {counts.unreviewed} |", "",
        f"Audited precision (accepted / reviewed, 95% Wilson interval): {precision}."])


def _replace_block(text: str, begin: str, end: str, block: str) -> str:
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        return f"{head}{begin}\n{block}\n{end}{tail}"
    return f"{text.rstrip()}\n\n{begin}\n{block}\n{end}\n"


def refresh_datasheet(folder: Path, toolset: str | None = None) -> Path:
    """Write (or refresh) the datasheet ``README.md`` of a dataset folder: its counts block
    (:func:`bench.datasets.stats.markdown`) and its review block (:func:`review_block`);
    a new datasheet gets a title and a note on where the cases came from.

    Raises:
        BenchError: the folder's ``cases.jsonl`` does not load.
    """
    from bench.datasets import load_dataset
    from bench.datasets.stats import BEGIN, END, markdown
    from bench.descriptions.datasheet import toolset_tools
    from bench.store.files import atomic_write_text

    dataset = load_dataset(str(folder / "cases.jsonl"))
    readme = folder / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else (
        f"# Dataset `{folder.name}` — datasheet\n\n"
        f"Cases for the `{toolset or ', '.join(dataset.toolsets)}` toolset generated by "
        "`bench synth` (each case's `provenance` names the generator, prompt template and "
        "hash, seed and verification verdicts; `synth-report.md` counts every rejection by "
        "reason) and reviewed with `bench review` (docs/synth.md).\n\n## Counts\n")
    text = _replace_block(text, BEGIN, END, markdown(dataset, toolset_tools(dataset)))
    text = _replace_block(text, REVIEW_BEGIN, REVIEW_END,
                          review_block(read_counts(folder, dataset.cases)))
    atomic_write_text(readme, text)
    return readme


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
    from bench.datasets import load_dataset
    from bench.datasets.labels import iter_label_problems
    from bench.datasets.loader import Dataset
    from bench.datasets.splits import (DEFAULT_DEV_FRACTION, DEFAULT_SPLIT_SEED,
                                       assign_splits)
    from bench.descriptions import available_variants, load_variant
    from bench.descriptions.leaks import find_leaks, unique_cases
    from bench.redact import redact
    from bench.store.files import atomic_write_text

    if not same_dataset(decisions.dataset, path):
        raise BenchError(f"the decisions are for dataset '{decisions.dataset}', not {path}: "
                         "apply them to that dataset (or correct 'dataset')", file=source,
                         field="dataset")
    loaded = load_dataset(str(path))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    by_id = {row["id"]: row for row in rows}
    seen: set[str] = set()
    fixed_at: dict[str, str] = {}  # case id -> its fix's decisions entry, for the errors
    kept_at: dict[str, str] = {}  # case id -> its accept or fix entry
    ledger: list[dict[str, Any]] = []
    applied: Counter[str] = Counter()
    pending = 0
    # stored in the dataset and its ledger: a token pasted as a name is not kept
    reviewer = redact(decisions.reviewer) if decisions.reviewer else None
    for i, decision in enumerate(decisions.decisions):
        where = f"decisions.{i}"
        if decision.id in seen:
            raise BenchError(f"case '{decision.id}' is decided twice", file=source,
                             field=where)
        seen.add(decision.id)
        if decision.decision == "pending":
            pending += 1
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
            fixed_at[decision.id] = where
            if decision.expected is not None:
                row["expected"] = decision.expected
            if decision.query is not None:
                row["messages"] = [{"role": "user", "content": decision.query}]
            review["decision"] = "fixed"
        if decision.decision != "reject":
            row["provenance"]["review"] = review
            kept_at[decision.id] = where
        ledger.append({"id": decision.id, "decision": decision.decision, "date": date,
                       "reviewer": reviewer, "note": note})
        applied[decision.decision] += 1
    kept_rows = [r for r in rows if r["id"] in by_id]
    if not kept_rows:
        raise BenchError("every case would be rejected: a dataset needs one case or more "
                         "(delete the folder instead)", file=path)
    cases: list[Case] = []
    for row in kept_rows:
        try:
            cases.append(Case.model_validate({**row, "split": "dev"}))
        except ValidationError as exc:
            field, message = pydantic_error_field(exc)
            raise BenchError(f"case '{row['id']}' after the fix: {message}", file=source,
                             field=_fix_field(fixed_at.get(row["id"]), field)) from None
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
    _refuse_test_copies(path, loaded, [c for c in cases if c.id in kept_at], kept_at,
                        fixed_at, source, datasets_dir)
    mirrored: set[str] = set()
    for toolset in tools_of:
        for name in available_variants(toolset):
            mirrored |= unique_cases(find_leaks(load_variant(toolset, name), cases))
    # only generated cases are split here: a hand-written case keeps the split it has
    assignment = {c.id: c.split or "test" for c in loaded.cases if c.provenance is None}
    assignment |= assign_splits([c for c in cases if c.provenance is not None],
                                dev_fraction=DEFAULT_DEV_FRACTION
                                if dev_fraction is None else dev_fraction,
                                seed=DEFAULT_SPLIT_SEED if seed is None else seed,
                                forced_dev=mirrored)
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
    if ledger:
        old = (path.parent / LEDGER).read_text(encoding="utf-8") \
            if (path.parent / LEDGER).is_file() else ""
        atomic_write_text(path.parent / LEDGER, old + "".join(
            json.dumps(e, ensure_ascii=False) + "\n" for e in ledger))
    refresh_datasheet(path.parent)
    final = load_dataset(str(path)).cases
    return Applied(dict(applied), pending, dict(Counter(assignment.values())),
                   read_counts(path.parent, final))


def same_dataset(named: str, path: Path) -> bool:
    """Whether a decisions file's ``dataset`` (a ``cases.jsonl`` path, a dataset folder or a
    dataset name, as :func:`template` and the review page write it) is the dataset file
    ``path``: the same file once resolved, or the same dataset name (the folder of a
    ``cases.jsonl``, else the file's stem), so a project moved since keeps its decisions."""
    given = Path(named)
    for candidate in (given, given / "cases.jsonl"):
        try:
            if candidate.resolve() == path.resolve():
                return True
        except OSError:  # a name that is no path on this system
            pass
    return _dataset_name(given) == _dataset_name(path)


def _dataset_name(path: Path) -> str:
    if path.name == "cases.jsonl":
        return path.parent.name
    return path.stem if path.suffix == ".jsonl" else path.name


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
    from bench.descriptions.containment import TestIndex, project_test_cases, test_split
    from bench.project import current_project

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
    from bench.descriptions.variants import default_variant
    return default_variant(toolset)


def case_summary(case: Case) -> dict[str, Any]:
    """What a reviewer sees of a case: id, lang, tags, query, label (JSON data),
    generator, template, verdicts."""
    provenance = case.provenance
    return {"id": case.id, "lang": case.lang, "tags": case.tags, "query": case.query,
            "expected": case.expected.model_dump(exclude_defaults=True),
            "generator": provenance.generator if provenance else None,
            "template": provenance.template if provenance else None,
            "verdicts": provenance.verdicts if provenance else {}}


def render_html(path: Path, cases: Sequence[Case]) -> str:
    """A static review page for the unreviewed generated cases of ``path``.

    Every model-written text (queries, labels, verdicts) goes through jinja2's HTML
    autoescaping into element text or attribute values; the page's script reads it back from
    the DOM, never from text spliced into the script. The page lets the reviewer accept, fix
    (edit the query and the label as JSON) or reject each case and downloads
    ``decisions.json``, which ``bench review --apply`` applies.
    """
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(
        str(Path(__file__).resolve().parent / "templates")), autoescape=True)
    items = [{**case_summary(c), "label_json": json.dumps(
        c.expected.model_dump(exclude_defaults=True), ensure_ascii=False, indent=1)}
        for c in unreviewed(cases)]
    return env.get_template("review.html.j2").render(dataset=str(path), cases=items)
