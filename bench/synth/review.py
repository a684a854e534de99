"""``bench review``: a person accepts, fixes or rejects generated cases.

The unit of work is a **decisions file** (JSON, :class:`Decisions`): one entry per generated
case, ``pending``, ``accept``, ``fix`` (with the corrected ``expected`` label and/or ``query``)
or ``reject``. It is written by the terminal review (interactive, or a ``pending`` template
for editing by hand or by a script), or downloaded from the static HTML page
(:func:`render_html`), and applied by :func:`bench.synth.apply.apply_decisions`:

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
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.models import Case

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
