"""``dev`` / ``test`` splits of a dataset.

Only ``dev`` cases may inform descriptions, prompts or optimizers; figures are reported on
``test``. A case records its split in its ``split`` field; :func:`assign_splits` makes a
seeded split stratified by kind (single answer or episode), what the case expects
(:func:`bench.datasets.sample.stratum`: the expected tool, several tools, no call, ask) and
language, so that each stratum is split in the same proportion. Cases that a description
mirrors (:mod:`bench.descriptions.leaks`) can be forced into ``dev``: a description may quote
``dev`` cases, never ``test`` ones.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, Mapping, Sequence

from bench.datasets.sample import stratum
from bench.errors import BenchError
from bench.models import Case

Split = Literal["dev", "test"]
SplitChoice = Literal["dev", "test", "all"]
SPLITS: tuple[Split, ...] = ("dev", "test")
SPLIT_CHOICES: tuple[SplitChoice, ...] = ("dev", "test", "all")
#: Share of each stratum that goes to ``dev`` (before forced cases): enough dev cases per tool to
#: write examples from, while ``test`` keeps about 70% of the cases for the headline figures.
DEFAULT_DEV_FRACTION = 0.3
DEFAULT_SPLIT_SEED = 20261203


def split_stratum(case: Case) -> str:
    """The stratum a split is balanced on: ``kind/expected/lang``, e.g.
    ``single/search_orders/zh`` or ``episode/(several tools)/en``."""
    return f"{case.kind}/{stratum(case)}/{case.lang}"


def _rank(seed: int, case_id: str) -> str:
    return hashlib.sha256(f"{seed}/{case_id}".encode("utf-8")).hexdigest()


def assign_splits(cases: Sequence[Case], *, dev_fraction: float = DEFAULT_DEV_FRACTION,
                  seed: int = DEFAULT_SPLIT_SEED,
                  forced_dev: Iterable[str] = ()) -> dict[str, Split]:
    """A seeded, stratified split: ``case id -> "dev" | "test"``.

    In each :func:`split_stratum`, ``ceil(dev_fraction * n)`` cases (at least the forced ones
    in it) go to ``dev``: the forced ones first, then the others in a seeded order (SHA-256 of
    seed and case id, so a case's split does not move when other cases are added). A stratum of
    one case goes to ``test`` unless forced. A generated case nobody reviewed (``provenance``
    without ``review``, :class:`bench.models.Provenance`) is always forced into ``dev``: only
    reviewed labels may carry the ``test`` figures.

    Args:
        cases: the dataset's cases (unique ids).
        dev_fraction: share of each stratum for ``dev``, 0 <= f < 1.
        seed: the split's seed (recorded in the datasheet).
        forced_dev: ids that must be ``dev`` (cases a description mirrors).

    Raises:
        ValueError: ``dev_fraction`` outside [0, 1).
    """
    if not 0 <= dev_fraction < 1:
        raise ValueError(f"dev_fraction must be in [0, 1), not {dev_fraction}")
    forced = set(forced_dev) | {c.id for c in cases
                                if c.provenance is not None and c.provenance.review is None}
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(split_stratum(case), []).append(case)
    out: dict[str, Split] = {}
    for members in groups.values():
        target = math.ceil(dev_fraction * len(members)) if len(members) > 1 else 0
        ordered = sorted(members, key=lambda c: (c.id not in forced, _rank(seed, c.id)))
        n_dev = max(target, sum(c.id in forced for c in members))
        for i, case in enumerate(ordered):
            out[case.id] = "dev" if i < n_dev else "test"
    return out


def select_split(cases: Sequence[Case], split: SplitChoice) -> list[Case]:
    """The cases of ``split`` (``all``: every case), in file order. A dataset whose cases carry
    no split has only ``all``: asking it for ``dev`` or ``test`` gives every case (the run
    records ``all``; :func:`resolve_split`)."""
    if split == "all":
        return list(cases)
    return [c for c in cases if c.split == split]


def has_splits(cases: Sequence[Case]) -> bool:
    """True when every case records a split."""
    return bool(cases) and all(c.split is not None for c in cases)


def resolve_split(cases: Sequence[Case], asked: SplitChoice | None) -> SplitChoice:
    """The split a run uses: ``asked``, or ``test`` by default when the dataset has splits.

    Raises:
        BenchError: ``dev``/``test`` asked of a dataset without splits, or of one where only
            some cases carry a split (the line of the first case without one is not known
            here; the message names the count).
    """
    marked = sum(c.split is not None for c in cases)
    if 0 < marked < len(cases):
        raise BenchError(f"{len(cases) - marked} of {len(cases)} cases have no 'split' "
                         "(a dataset's cases all name one, or none does)")
    if asked is None:
        return "test" if marked else "all"
    if asked != "all" and not marked:
        raise BenchError(f"--split {asked}: this dataset's cases have no 'split' field; use "
                         "--split all, or give them one with 'bench split'")
    return asked


def run_split(config: Mapping[str, object]) -> str:
    """The split a stored run's ``config`` (the manifest's) ran: ``all`` for runs stored before
    splits existed."""
    split = config.get("split")
    return split if isinstance(split, str) else "all"


def refuse_mixed_splits(named: dict[str, str], what: str = "compare") -> None:
    """Refuse to pair rows of different splits.

    Args:
        named: a label (run id, ``baseline``) -> its split.
        what: the operation, for the message.

    Raises:
        BenchError: two labels name different splits (dev and test cases are different cases:
            pairing them by case would pair nothing, and their rates measure different sets).
    """
    if len(set(named.values())) > 1:
        parts = ", ".join(f"'{k}' ran the {v} split" for k, v in named.items())
        raise BenchError(f"cannot {what} runs of different splits: {parts}; run both on one "
                         "split (bench run --split ...)")


@dataclass(frozen=True)
class SplitSummary:
    """Cases per split and per stratum after :func:`write_splits`: ``counts`` maps
    ``split -> cases``; ``by_stratum`` maps ``stratum -> {split: cases}``; ``forced``: cases
    put in ``dev`` because a description mirrors them; ``moved``: cases whose split changed."""

    counts: dict[str, int]
    by_stratum: dict[str, dict[str, int]]
    forced: int
    moved: int


def render_splits(path: Path, cases: Sequence[Case], assignment: dict[str, Split],
                  forced: Iterable[str] = ()) -> tuple[str, SplitSummary]:
    """The text of ``path`` (a ``cases.jsonl``) with ``assignment`` recorded in each line as
    a ``split`` field placed after ``lang``; every other field keeps its order and value.
    The caller writes it (atomically: :func:`bench.store.files.atomic_write_text`).

    Raises:
        BenchError: a line that is not a JSON object, or a case id missing from ``assignment``.
    """
    out: list[str] = []
    moved = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            out.append(line)
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or row.get("id") not in assignment:
            raise BenchError("no split for this line", file=path, line=number, field="id")
        moved += row.get("split") not in (None, assignment[row["id"]])
        row.pop("split", None)
        rebuilt: dict[str, object] = {}
        for key, value in row.items():
            rebuilt[key] = value
            if key == "lang":
                rebuilt["split"] = assignment[row["id"]]
        if "split" not in rebuilt:
            rebuilt["split"] = assignment[row["id"]]
        out.append(json.dumps(rebuilt, ensure_ascii=False))
    counts: Counter[str] = Counter(assignment.values())
    by_stratum: dict[str, Counter[str]] = {}
    for case in cases:
        by_stratum.setdefault(split_stratum(case), Counter())[assignment[case.id]] += 1
    return "\n".join(out) + "\n", SplitSummary(
        dict(counts), {k: dict(v) for k, v in sorted(by_stratum.items())}, len(set(forced)),
        moved)
