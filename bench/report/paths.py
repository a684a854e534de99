"""Where ``bench report`` writes: its formats and their file names, and the report folder's
name (checked, with the ``--compare`` pair's suffix)."""

from __future__ import annotations

import hashlib
import re
from enum import Enum
from pathlib import Path

from bench.errors import BenchError
from bench.project import Project, current_project
from bench.store import RESERVED_NAMES


class ReportFormat(str, Enum):
    """Output formats and their file names under ``reports/<name>/``."""

    html = "html"
    md = "md"
    junit = "junit"


FILE_NAMES = {ReportFormat.html: "index.html", ReportFormat.md: "summary.md",
              ReportFormat.junit: "junit.xml"}


# A run id's characters plus '+', which joins several run ids in the default name.
MAX_REPORT_NAME = 200
REPORT_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,%d}" % (MAX_REPORT_NAME - 1))


def compare_suffix(pair: list[str]) -> str:
    """What ``--compare A,B`` adds to the default report folder name (at most 53 characters):
    ``.A+B`` when both are plain variant names (no name has a '+', so the pair is
    unambiguous), else (``run/variant``, other characters, long names) a cut of the pair and a
    digest of it, with no '+': two different pairs never share a folder."""
    plain = all(re.fullmatch(r"[A-Za-z0-9._-]+", name) for name in pair)
    wanted = "+".join(pair)
    if plain and len(wanted) <= 52:
        return "." + wanted
    cut = re.sub(r"[^A-Za-z0-9._-]", "_", "-".join(pair))[:41]
    return f".{cut}-{hashlib.sha256(wanted.encode('utf-8')).hexdigest()[:10]}"


def report_path(name: str, fmt: ReportFormat, project: Project | None = None) -> Path:
    """``<project>/reports/<name>/<file>`` for a format (``project`` default
    :func:`bench.project.current_project`).

    Raises:
        BenchError: ``name`` is not a plain folder name (letters, digits, ``.``, ``_``, ``-``,
            ``+``), or is one bench uses itself (:data:`bench.store.ids.RESERVED_NAMES`).
    """
    if not REPORT_NAME_PATTERN.fullmatch(name) or name.casefold() in RESERVED_NAMES:
        raise BenchError(f"invalid report name '{name}' (letters, digits, '.', '_', '-', '+'; "
                         f"not {', '.join(RESERVED_NAMES)})")
    return (project or current_project()).reports_dir / name / FILE_NAMES[fmt]
