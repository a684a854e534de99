"""Load labeled datasets (``datasets/<name>/cases.jsonl``) and check them against a toolset."""

from __future__ import annotations

import hashlib
import json
import re

import jsonschema
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pydantic import ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.models import Case, Tool
from bench.paths import datasets_dir

MATCHER_KEYS = ("$regex", "$any")


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset.

    Attributes:
        name: folder name under ``datasets/``.
        path: the ``cases.jsonl`` file.
        cases: cases in file order.
        sha256: hash of the file's bytes (recorded in the manifest).
        lines: 1-based line number of each case id (for error messages).
    """

    name: str
    path: Path
    cases: tuple[Case, ...]
    sha256: str
    lines: dict[str, int]

    @property
    def toolsets(self) -> list[str]:
        """The toolsets the cases use, sorted."""
        return sorted({c.toolset for c in self.cases})


def available_datasets(root: Path | None = None) -> list[str]:
    """Names of the folders under ``datasets/`` that hold a ``cases.jsonl``."""
    root = root or datasets_dir()
    return sorted(p.parent.name for p in root.glob("*/cases.jsonl"))


def load_dataset(name: str, root: Path | None = None) -> Dataset:
    """Load ``datasets/<name>/cases.jsonl`` (or a path to a ``.jsonl`` file).

    Raises:
        BenchError: unknown dataset (lists the known ones), a line that is not JSON, a case
            that does not fit the format, or a duplicate id; each names file, line and field.
    """
    root = root or datasets_dir()
    path = Path(name) if name.endswith(".jsonl") else root / name / "cases.jsonl"
    if not path.is_file():
        known = ", ".join(available_datasets(root)) or "none"
        raise BenchError(f"unknown dataset '{name}' (known: {known})")
    raw = path.read_bytes()
    cases: list[Case] = []
    lines: dict[str, int] = {}
    # Split on "\n" only: str.splitlines() would also split inside strings at U+2028 etc.
    for number, raw_line in enumerate(raw.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        try:
            line = raw_line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise BenchError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path,
                             line=number) from None
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"malformed JSON: {exc.msg} (column {exc.colno})",
                             file=path, line=number) from None
        if not isinstance(obj, dict):
            raise BenchError("a case must be a JSON object", file=path, line=number)
        try:
            case = Case.model_validate(obj)
        except ValidationError as exc:
            field, msg = pydantic_error_field(exc)
            raise BenchError(msg, file=path, line=number, field=field) from None
        if case.id in lines:
            raise BenchError(f"duplicate case id '{case.id}' (first on line {lines[case.id]})",
                             file=path, line=number, field="id")
        _check_matchers(case, path, number)
        lines[case.id] = number
        cases.append(case)
    if not cases:
        raise BenchError("dataset has no cases", file=path)
    return Dataset(name=path.parent.name if path.name == "cases.jsonl" else path.stem,
                   path=path, cases=tuple(cases), sha256=hashlib.sha256(raw).hexdigest(),
                   lines=lines)


def _check_matchers(case: Case, path: Path, line: int) -> None:
    for i, call in enumerate(case.expected.calls):
        for arg, values in call.arguments.items():
            field = f"expected.calls.{i}.arguments.{arg}"
            if not values:
                raise BenchError("an acceptable-values list cannot be empty (use [null] for "
                                 "'must be omitted')", file=path, line=line, field=field)
            for value in values:
                if isinstance(value, dict) and any(k.startswith("$") for k in value):
                    unknown = [k for k in value if k not in MATCHER_KEYS]
                    if unknown or len(value) != 1 or value.get("$any", True) is not True:
                        raise BenchError(f"unknown matcher {value} (use one of "
                                         f"{', '.join(MATCHER_KEYS)})",
                                         file=path, line=line, field=field)
                    if "$regex" in value:
                        try:
                            re.compile(value["$regex"])
                        except (re.error, TypeError) as exc:
                            raise BenchError(f"invalid $regex: {exc}", file=path, line=line,
                                             field=field) from None


def check_against_tools(dataset: Dataset, toolset: str, tools: Sequence[Tool]) -> None:
    """Check that every case of ``toolset`` names known tools and known arguments.

    Args:
        dataset: the loaded dataset.
        toolset: the toolset whose cases are checked.
        tools: that toolset's tools (any variant: names and schemas agree across variants).

    Raises:
        BenchError: naming the file, line and field of the first unknown tool or argument.
    """
    from bench.datasets.labels import iter_label_problems  # labels imports this module

    problem = next(iter_label_problems(dataset, toolset, tools), None)
    if problem is not None:
        raise BenchError(problem.message, file=dataset.path, line=problem.line,
                         field=problem.field)
