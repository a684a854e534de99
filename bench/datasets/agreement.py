"""Inter-rater agreement on a dataset's information buckets, read from its datasheet.

A case's ``info`` bucket (``schema``, ``l10``, ``l30``, ``l50``: the lowest description level
whose text carries what the case needs; the rubric is in
docs/datasets-and-labels.md#information-buckets-info) is a judgement. Each shipped dataset was bucketed twice, by two independent
labelling passes, and its datasheet (``datasets/<name>/README.md``) records how far they
agree in a block bench reads::

    <!-- info-agreement:begin -->
    - first pass: schema 217, l10 23, l30 37, l50 2
    - second pass: schema 192, l10 29, l30 45, l50 13
    - same bucket: 233
    - Cohen's kappa: 0.62
    <!-- info-agreement:end -->

Cohen's kappa (Cohen 1960, unweighted) is ``(p_o - p_e) / (1 - p_e)``: ``p_o`` the share of
cases both passes put in the same bucket, ``p_e`` the agreement expected by chance from each
pass's own bucket counts, ``sum_c n_first(c) * n_second(c) / n**2``. The block states the
kappa to two decimals and :func:`read_agreement` checks it against the counts, so the figure
printed is computed, never only typed.

A per-bucket table is printed only for a dataset whose kappa is above :data:`KAPPA_MIN`
(0.60): Landis & Koch (1977, Biometrics 33:159-174) call 0.41-0.60 "moderate" and
0.61-0.80 "substantial" agreement, so a bucket table needs at least substantial agreement;
kappa exactly 0.60 is still "moderate" and is not shown. Below that, a case's bucket says as
much about who labelled it as about the case, and a table of rates per bucket misleads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from bench.errors import BenchError

BEGIN, END = "<!-- info-agreement:begin -->", "<!-- info-agreement:end -->"
#: Kappa a dataset's buckets must exceed to be tabulated: the top of Landis & Koch's (1977)
#: "moderate" band; "substantial" agreement starts above it.
KAPPA_MIN = 0.60
#: Where the rubric and this rule are written down (named in the lines bench prints).
RUBRIC = "docs/datasets-and-labels.md#information-buckets-info"
_BUCKETS = ("schema", "l10", "l30", "l50")
_COUNT = re.compile(r"(schema|l10|l30|l50)\s+(\d+)")


@dataclass(frozen=True)
class InfoAgreement:
    """The information-bucket agreement of one dataset (or why there is none).

    Attributes:
        dataset: the dataset's name, as the run recorded it.
        datasheet: the datasheet as shown (relative to the project when inside it); None
            when the dataset has none (an ``hf:`` spec, a loose ``.jsonl`` file).
        kappa: Cohen's kappa as the datasheet states it (two decimals, checked against the
            counts); None without an agreement block.
        first / second: each pass's bucket counts (bucket -> cases).
        agreed: cases both passes put in the same bucket.
    """

    dataset: str
    datasheet: str | None
    kappa: float | None = None
    first: Mapping[str, int] | None = None
    second: Mapping[str, int] | None = None
    agreed: int | None = None

    @property
    def shown(self) -> bool:
        """The bucket table may be printed: kappa is known and above :data:`KAPPA_MIN`."""
        return self.kappa is not None and self.kappa > KAPPA_MIN

    def line(self) -> str:
        """One sentence for the terminal table, the Markdown and the HTML report: the kappa
        beside a shown table, or why the table is not shown."""
        where = self.datasheet or f"dataset '{self.dataset}' has no datasheet"
        if self.kappa is None:
            return (f"information buckets of '{self.dataset}' not shown: no inter-rater kappa "
                    f"recorded ({where}; see {RUBRIC})")
        if not self.shown:
            return (f"information buckets of '{self.dataset}' not shown: inter-rater kappa "
                    f"{self.kappa:.2f} is not above {KAPPA_MIN:.2f} ({where}; Landis & Koch "
                    "1977: above 0.60 is substantial agreement)")
        return (f"information buckets of '{self.dataset}': inter-rater kappa "
                f"{self.kappa:.2f} between two labelling passes ({where})")


def cohen_kappa(first: Mapping[str, int], second: Mapping[str, int], agreed: int) -> float:
    """Unweighted Cohen's kappa from two raters' category counts and their agreements.

    Args:
        first / second: category -> items the rater put there (same total).
        agreed: items both raters put in the same category.

    Returns:
        ``(p_o - p_e) / (1 - p_e)``; 1.0 when chance agreement is already 1 (one category
        only, both raters: nothing to disagree on).

    Raises:
        ValueError: the totals differ, are 0, or ``agreed`` exceeds what the counts allow.
    """
    n = sum(first.values())
    if n == 0 or n != sum(second.values()):
        raise ValueError(f"the two passes count {n} and {sum(second.values())} cases")
    most = sum(min(first.get(c, 0), second.get(c, 0)) for c in {*first, *second})
    if not 0 <= agreed <= most:
        raise ValueError(f"{agreed} agreements, but the counts allow at most {most}")
    p_o = agreed / n
    p_e = sum(first.get(c, 0) * second.get(c, 0) for c in {*first, *second}) / (n * n)
    return 1.0 if p_e == 1 else (p_o - p_e) / (1 - p_e)


def _counts(text: str, where: str) -> dict[str, int]:
    found = {bucket: int(count) for bucket, count in _COUNT.findall(text)}
    if not found:
        raise BenchError(f"{where}: expected bucket counts such as 'schema 217, l10 23'")
    return {b: found.get(b, 0) for b in _BUCKETS}


def read_agreement(datasheet: Path, dataset: str = "", shown_as: str | None = None
                   ) -> InfoAgreement:
    """The agreement block of ``datasheet`` (see the module docstring).

    Args:
        datasheet: a dataset's ``README.md``.
        dataset: the dataset's name (for the lines printed).
        shown_as: how to name the datasheet in them (default: the path as given).

    Returns:
        The parsed agreement; ``kappa`` None when the file or its block is missing.

    Raises:
        BenchError: a block that is malformed (a missing line, counts that do not add up),
            or whose stated kappa is not the one its counts give; the message names the
            file, the line and the field.
    """
    name = shown_as or str(datasheet)
    if not datasheet.is_file():
        return InfoAgreement(dataset, None)
    lines = datasheet.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == BEGIN)
    except StopIteration:
        return InfoAgreement(dataset, name)
    fields: dict[str, tuple[int, str]] = {}
    for number in range(start + 1, len(lines)):
        line = lines[number].strip()
        if line == END:
            break
        if line.startswith("- ") and ":" in line:
            key, value = line[2:].split(":", 1)
            fields[key.strip().lower()] = (number + 1, value.strip())
    else:
        raise BenchError(f"{name}:{start + 1}: '{BEGIN}' has no '{END}'")
    for key in ("first pass", "second pass", "same bucket", "cohen's kappa"):
        if key not in fields:
            raise BenchError(f"{name}:{start + 1}: the agreement block lacks its "
                             f"'- {key}: ...' line")
    first = _counts(fields["first pass"][1], f"{name}:{fields['first pass'][0]}: first pass")
    second = _counts(fields["second pass"][1],
                     f"{name}:{fields['second pass'][0]}: second pass")
    line_of = {key: f"{name}:{number}: {key}" for key, (number, _) in fields.items()}
    try:
        agreed = int(fields["same bucket"][1])
        stated = float(fields["cohen's kappa"][1])
    except ValueError:
        raise BenchError(f"{line_of['same bucket']} / cohen's kappa: expected a whole "
                         "number and a decimal") from None
    try:
        computed = cohen_kappa(first, second, agreed)
    except ValueError as exc:
        raise BenchError(f"{line_of['same bucket']}: {exc}") from None
    if round(computed, 2) != round(stated, 2):
        kappa_line = line_of["cohen's kappa"]
        raise BenchError(f"{kappa_line}: states {stated:.2f}, but the counts give "
                         f"{computed:.4f}")
    return InfoAgreement(dataset, name, round(stated, 2), first, second, agreed)


def dataset_agreement(name: str | None, path: str | None, root: Path | None = None
                      ) -> InfoAgreement:
    """The agreement of a run's dataset (its manifest's ``dataset.name`` and ``path``): the
    datasheet ``README.md`` beside its ``cases.jsonl``, else ``<root>/datasets/<name>/
    README.md``; none for ``hf:`` specs.

    Args:
        name / path: the dataset as the run recorded it (either may be None).
        root: the project folder (names the datasheet relative to it; finds it by name).

    Raises:
        BenchError: a malformed agreement block (:func:`read_agreement`).
    """
    label = name or path or "?"
    candidates: list[Path] = []
    if path and not path.startswith("hf:"):
        candidates.append(Path(path).parent / "README.md")
    if root is not None and name and "/" not in name and not name.startswith("hf:"):
        candidates.append(root / "datasets" / name / "README.md")
    for sheet in candidates:
        if sheet.is_file():
            shown = str(sheet)
            if root is not None:
                try:
                    shown = sheet.resolve().relative_to(root.resolve()).as_posix()
                except ValueError:
                    pass
            return read_agreement(sheet, label, shown)
    return InfoAgreement(label, None)
