"""Per-tool figures as the report page and the terminal show them: selection precision,
recall and F1 per tool with intervals, the confusion pairs, and the required / forbidden
calls per tool (the figures: :mod:`bench.stats.pertool`).

Tool names can come from model output (a made-up tool): the page escapes them (jinja2
autoescaping) and both views cut them to :data:`bench.report.caps.NAME_LIMIT` characters.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
from rich.markup import escape
from rich.table import Table

from bench.errors import terminal_safe
from bench.report.caps import NAME_LIMIT, cap_text
from bench.report.table import format_rate
from bench.stats.pertool import call_checks, confusion_pairs, per_tool_table, shown_tool

# what the per-tool view says about its intervals (shown under every per-tool table)
METHOD_NOTE = ("precision and recall: 95% Wilson intervals over the calls counted; F1: 95% "
               "percentile bootstrap over cases (1,000 resamples, seed 0). A call of a tool "
               "the label does not list counts against that tool's precision; an expected "
               "call not made, against its recall. An episode counts every call of its "
               "trajectory against its required calls.")


def _rank(order: Sequence[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(order)}


def _name(name: Any, renamed: Mapping[str, str]) -> str:
    return cap_text(shown_tool(str(name), renamed), NAME_LIMIT) or ""


def per_tool_groups(frame: pd.DataFrame, order: Sequence[str] = (),
                    renamed: Mapping[str, str] | None = None,
                    drafts: Iterable[str] = ()) -> list[dict[str, Any]]:
    """One table of per-tool figures per (provider, variant), variants in ``order``.

    Args:
        frame: the results frame (single-answer and episode rows).
        order: variant labels in display order (others after them).
        renamed: old tool name -> new name (a toolset's aliases), shown as ``new (was old)``.
        drafts: variant labels whose descriptions are unreviewed drafts (marked in the
            label).

    Returns:
        ``[{"provider", "variant", "label", "draft": bool, "columns": [str], "rows":
        [[cell, ...]]}]``: cells are text (tool, needed, called, precision, recall, F1 with
        intervals, required made/needed, forbidden calls: on no-call cases / beyond the
        label).
    """
    renamed = dict(renamed or {})
    drafts = set(drafts)
    figures = per_tool_table(frame)
    checks = call_checks(frame)
    if figures.empty:
        return []
    keyed = {(r["provider"], r["variant"], r["tool"]): r for r in checks.to_dict("records")}
    rank = _rank(order)
    out = []
    pairs = list(dict.fromkeys(zip(figures["provider"], figures["variant"])))
    pairs.sort(key=lambda pv: (str(pv[0]), rank.get(pv[1], len(rank)), str(pv[1])))
    for provider, variant in pairs:
        part = figures[(figures["provider"] == provider) & (figures["variant"] == variant)]
        rows = []
        for record in part.to_dict("records"):
            check = keyed.get((provider, variant, record["tool"]), {})
            rows.append([
                _name(record["tool"], renamed), str(record["expected"]), str(record["called"]),
                format_rate(record["precision"], record["precision_low"],
                            record["precision_high"], record["called"]),
                format_rate(record["recall"], record["recall_low"], record["recall_high"],
                            record["expected"]),
                format_rate(record["f1"], record["f1_low"], record["f1_high"],
                            record["tp"] + record["fp"] + record["fn"]),
                f"{check.get('required_made', 0)}/{check.get('required', 0)}",
                f"{check.get('forbidden_on_no_call', 0)} / {check.get('forbidden_wrong_tool', 0)}",
            ])
        draft = variant in drafts
        out.append({"provider": str(provider), "variant": str(variant), "draft": draft,
                    "label": f"{provider} · {variant}" + (" (draft descriptions)" if draft
                                                          else ""),
                    "columns": list(PER_TOOL_HEADERS), "rows": rows})
    return out


PER_TOOL_HEADERS = ("tool", "needed", "called", "precision [95% CI]", "recall [95% CI]",
                    "F1 [95% CI]", "required made/needed",
                    "forbidden: no-call / beyond label")


def pairs_view(frame: pd.DataFrame, renamed: Mapping[str, str] | None = None,
               limit: int = 20) -> dict[str, Any] | None:
    """The confusion-pairs table (:func:`bench.stats.pertool.confusion_pairs`) as the page
    shows it: ``{"columns": [...], "rows": [[expected, chosen, count, count per provider ·
    variant...]]}``; None when every answer picked the expected tools."""
    pairs = confusion_pairs(frame, limit=limit)
    if pairs.empty:
        return None
    renamed = dict(renamed or {})
    groups = [c for c in pairs.columns if c not in ("expected", "chosen", "count")]
    rows = [[_name(r["expected"], renamed), _name(r["chosen"], renamed), int(r["count"]),
             *(int(r[g]) for g in groups)] for r in pairs.to_dict("records")]
    return {"columns": ["expected tool", "chosen instead", "calls", *groups], "rows": rows}


def per_tool_rich_tables(frame: pd.DataFrame, order: Sequence[str] = (),
                         renamed: Mapping[str, str] | None = None,
                         drafts: Iterable[str] = (), pairs_limit: int = 10) -> list[Table]:
    """Rich tables for the terminal (``bench show RUN --per-tool``): one per (provider,
    variant) with :func:`per_tool_groups`' columns, then the top confusion pairs. Cells
    wrap at spaces (an interval moves under its rate), never cut."""
    tables = []
    for group in per_tool_groups(frame, order, renamed, drafts):
        table = Table(title=f"per tool: {escape(terminal_safe(group['label']))}", title_justify="left",
                      caption=METHOD_NOTE, caption_justify="left")
        for index, column in enumerate(group["columns"]):
            table.add_column(column, overflow="fold", justify="left" if index == 0
                             else "right")
        for row in group["rows"]:
            table.add_row(*(escape(terminal_safe(cell)) for cell in row))
        tables.append(table)
    pairs = pairs_view(frame, renamed, limit=pairs_limit)
    if pairs:
        table = Table(title="confusion pairs (expected tool, chosen instead), most frequent "
                            "first", title_justify="left")
        for index, column in enumerate(pairs["columns"]):
            table.add_column(column, overflow="fold", justify="left" if index < 2
                             else "right")
        for row in pairs["rows"]:
            table.add_row(*(escape(terminal_safe(str(cell))) for cell in row))
        tables.append(table)
    return tables
