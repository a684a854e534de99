"""Run ids and the names of a run folder's files (``reports/runs/<run-id>/``)."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone

from bench.errors import BenchError

# Names bench itself uses in ``reports/`` (a run id also names its report folder,
# ``reports/<run-id>/``): the runs folder, the default response cache's folder
# (``reports/cache/responses.sqlite``) and the gate's JUnit file (docs/gate.md). The cache
# folder ``reports/.cache`` and merge's temporary ``reports/runs/.merge-*`` start with a dot,
# which no run id may. Compared case-insensitively: "Runs" is "runs" on macOS and Windows.
RESERVED_NAMES = ("runs", "cache", "gate-junit.xml")
RUN_ID_PATTERN = re.compile(r"(?!(?i:%s)\Z)[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
                            % "|".join(re.escape(name) for name in RESERVED_NAMES))
MANIFEST = "manifest.json"
RESULTS = "results.jsonl"

# Shown (never stored) for a run whose manifest says "running" while no process writes it.
CRASHED = "crashed"


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` when it can name a run (:data:`RUN_ID_PATTERN`).

    Raises:
        BenchError: one line: a reserved name (:data:`RESERVED_NAMES`, any case), or not
            1-100 letters, digits, ``.``, ``_``, ``-`` starting with a letter or digit
            (so that it chooses no path and no hidden folder).
    """
    if run_id.casefold() in RESERVED_NAMES:
        raise BenchError(f"invalid run id '{run_id}': bench uses reports/{run_id.casefold()} "
                         f"itself (reserved: {', '.join(RESERVED_NAMES)}); choose another "
                         "--run-id")
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise BenchError(f"invalid run id '{run_id}' (1-100 letters, digits, '.', '_', '-', "
                         "starting with a letter or digit)")
    return run_id


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` (UTC time and 4 random hex digits)."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
