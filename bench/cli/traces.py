"""``bench traces <run-id>``: failure rate and latency percentiles per tool of a run's calls."""

from __future__ import annotations

import json
import math
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.cli.output import terminal_text
from bench.executor.outcome import ERROR_CLASSES
from bench.executor.traces import TRACES, read_traces, summarize_traces
from bench.project import Project


def traces(
    run_id: Annotated[str, typer.Argument(help="A run id under reports/runs/.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
    = False,
) -> None:
    """Summarise a run's tool-call traces per tool: calls, retries, failure rate, latency."""
    store = Project.from_env().store(run_id)  # the command line's edge
    store.load_manifest()  # a clear error for an unknown run id
    summary = summarize_traces(read_traces(store.dir / TRACES))
    console = Console(width=200) if not Console().is_terminal else Console()
    if as_json:
        records = summary.to_dict("records")
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                  for k, v in r.items()} for r in records]
        typer.echo(json.dumps({"run_id": run_id, "tools": clean}, ensure_ascii=False,
                              indent=2))
        return
    table = Table(title=f"traces of run {run_id}", title_justify="left",
                  caption="error classes: failed attempts, with their error codes",
                  caption_justify="left")
    columns = ["tool", "calls", "attempts", "retries", "failure rate", "p50 ms", "p95 ms",
               "p99 ms", "max ms", *ERROR_CLASSES]
    for column in columns:
        table.add_column(column, justify="left" if column == "tool" else "right")
    for r in summary.to_dict("records"):
        table.add_row(terminal_text(str(r["tool"])), str(r["calls"]), str(r["attempts"]),
                      str(r["retries"]),
                      f"{r['failure_rate'] * 100:.1f}%", f"{r['p50_ms']:.2f}",
                      f"{r['p95_ms']:.2f}", f"{r['p99_ms']:.2f}", f"{r['max_ms']:.2f}",
                      *(class_cell(int(r.get(c, 0) or 0), (r.get("error_codes") or {}).get(c))
                        for c in ERROR_CLASSES))
    console.print(table)


def class_cell(count: int, codes: dict[str, int] | None) -> str:
    """An error class's cell: the attempts with their codes beside them, e.g. ``0``,
    ``2 permission_denied``, ``3: not_found 2, permission_denied 1`` (most frequent first).

    Args:
        count: attempts that failed with this class.
        codes: error code -> attempts for this class (None or {}: none recorded).
    """
    if not count or not codes:
        return str(count)
    if len(codes) == 1:
        return f"{count} {escape(next(iter(codes)))}"
    ranked = sorted(codes.items(), key=lambda item: (-item[1], item[0]))
    return f"{count}: " + ", ".join(f"{escape(code)} {n}" for code, n in ranked)
