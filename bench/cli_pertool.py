"""``bench show RUN --per-tool``: each tool's selection figures of a stored run in the
terminal (:mod:`bench.report.pertool`)."""

from __future__ import annotations

from typing import Sequence

from rich.console import Console

from bench.plural import count
from bench.results import Manifest
from bench.store import RunStore


def print_per_tool(out: Console, store: RunStore, manifest: Manifest,
                   order: Sequence[str]) -> None:
    """Print the per-tool tables of the run in ``store`` to ``out``: single-answer rows and
    episode rows (an episode by its trajectory's calls, :mod:`bench.stats.pertool`).

    When there is nothing to count, one line says why instead of a table: the run has no
    finished row yet, or none of its rows expects or calls a tool (every case is no-call
    or ask and no answer called one).
    """
    from bench.report.pertool import per_tool_rich_tables
    from bench.stats.frame import results_frame

    rows = list(store.load_rows(manifest))
    if not rows:
        out.print(f"per tool: run {store.run_id} has no finished row yet: nothing to count "
                  f"(rows 0/{manifest.rows_planned})", markup=False)
        return
    renamed: dict[str, str] = {}
    for variant in manifest.variants:
        renamed.update(variant.aliases or {})
    drafts = {v.name for v in manifest.variants if v.draft_tools and v.name}
    from bench.report.table import fitted_tables

    tables = per_tool_rich_tables(results_frame(rows), order, renamed, drafts)
    if not tables:
        out.print(f"per tool: no tool was expected or called in the "
                  f"{count(len(rows), 'finished row')} (every case is no-call or ask, and no "
                  "answer called a tool): nothing to count", markup=False)
        return
    for table in tables:
        for part in fitted_tables(table, out.width, keys=1):
            out.print(part)
