"""``bench show RUN --per-tool``: each tool's selection figures of a stored run in the
terminal (:mod:`bench.report.pertool`)."""

from __future__ import annotations

from typing import Sequence

from rich.console import Console

from bench.results import Manifest
from bench.runstore import RunStore


def print_per_tool(out: Console, store: RunStore, manifest: Manifest,
                   order: Sequence[str]) -> None:
    """Print the per-tool tables of the run in ``store`` to ``out``: single-answer rows only
    (an episode's calls live in its trajectory); a line says so when the run has none."""
    from bench.report.pertool import per_tool_rich_tables
    from bench.stats.frame import results_frame

    rows = [row for row in store.load_rows(manifest) if row.episode is None]
    if not rows:
        out.print("per tool: no single-answer rows (episodes are scored on their "
                  "trajectories)", markup=False)
        return
    renamed: dict[str, str] = {}
    for variant in manifest.variants:
        renamed.update(variant.aliases or {})
    drafts = {v.name for v in manifest.variants if v.draft_tools and v.name}
    from bench.report.table import fitted_tables

    for table in per_tool_rich_tables(results_frame(rows), order, renamed, drafts):
        for part in fitted_tables(table, out.width, keys=1):
            out.print(part)
