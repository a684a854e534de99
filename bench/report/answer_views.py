"""The report's views of single answers (a single answer's views leave episode rows out: an
episode's calls live in its trajectory): which tool was chosen for which expected one
(:func:`confusion_matrices`, panels sharing :func:`confusion_layout`) and the most frequent
argument errors (:func:`top_errors_table`). Model-written names are cut
(:mod:`bench.report.caps`).
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from bench.report.caps import ERROR_LIMIT, NAME_LIMIT, cap_text
from bench.stats.aggregate import selection_confusion, top_argument_errors

MAX_CONFUSION_CHARTS = 8
MAX_CONFUSION_COLUMNS = 12


def confusion_layout(frame: pd.DataFrame, limit: int = MAX_CONFUSION_COLUMNS
                     ) -> tuple[list[str], list[str], list[str]]:
    """The rows and columns every confusion panel of a report shares, chosen once from all
    its rows (so that panels line up: the same tool sits in the same column of l3 and l50).

    Columns: every expected tool (never folded away: a correct pick always has its own
    column), then the most frequent other chosen names (made-up tools, ``(no call)``,
    ``(unparseable)``) while fewer than ``limit`` columns are taken; the remaining chosen
    names are summed into one ``(other N)`` column.

    Returns:
        ``(rows, columns, folded)``: the expected tools (matrix order), the shown chosen
        names (the matrix's order: tools sorted, special columns last), and the chosen names
        summed into ``(other N)`` (empty when none).
    """
    whole = selection_confusion(frame)
    if whole.empty:
        return [], [], []
    rows = list(whole.index)
    expected = [c for c in whole.columns if c in set(rows)]
    others = whole[[c for c in whole.columns if c not in set(rows)]].sum()
    room = max(0, limit - len(expected) - 1)
    ranked = list(others.sort_values(ascending=False, kind="stable").index)
    kept = set(ranked[:room] if len(ranked) > room + 1 else ranked)
    columns = [c for c in whole.columns if c in set(expected) or c in kept]
    folded = [c for c in whole.columns if c not in set(columns)]
    return rows, columns, folded


def confusion_matrices(frame: pd.DataFrame, order: Sequence[str]
                       ) -> list[tuple[str, pd.DataFrame]]:
    """The matrices of :func:`confusion_charts`: ``[(label, counts)]``, one per (provider,
    variant), or one per provider when there would be more than
    :data:`MAX_CONFUSION_CHARTS`; every matrix has the rows and columns of
    :func:`confusion_layout` (chosen once from all of ``frame``), names cut to
    :data:`bench.report.caps.NAME_LIMIT`."""
    if frame.empty:
        return []
    keys = ["provider", "variant"]
    if frame.groupby(keys).ngroups > MAX_CONFUSION_CHARTS:
        keys = ["provider"]
    rank = {name: i for i, name in enumerate(order)}
    groups = sorted(frame.groupby(keys, sort=False),
                    key=lambda item: tuple(rank.get(k, -1) if i else k
                                           for i, k in enumerate(item[0])))
    rows, columns, folded = confusion_layout(frame)
    out = []
    for key, part in groups:
        matrix = selection_confusion(part)
        matrix = matrix.reindex(index=rows, columns=[*columns, *folded], fill_value=0)
        if folded:
            matrix = matrix[columns].assign(
                **{f"(other {len(folded)})": matrix[folded].sum(axis=1)})
        # made-up tool names are model output: cut them (issue 19, item 5)
        matrix = matrix.rename(columns=lambda c: cap_text(str(c), NAME_LIMIT),
                               index=lambda c: cap_text(str(c), NAME_LIMIT))
        label = " · ".join(str(k) for k in key) + (" (all variants)" if len(keys) == 1 else "")
        out.append((label, matrix))
    return out


def top_errors_table(frame: pd.DataFrame, order: Sequence[str], limit: int = 20
                     ) -> dict[str, Any] | None:
    """The ``limit`` most frequent argument errors over all rows
    (:func:`bench.stats.aggregate.top_argument_errors`) with their count per (provider,
    variant); None when there is none."""
    top = top_argument_errors(frame, limit=limit)
    if top.empty:
        return None
    per_group = top_argument_errors(frame, limit=10**9, by=("provider", "variant"))
    per_group = per_group[per_group["argument_error"].isin(set(top["argument_error"]))]
    pairs = sorted(set(zip(per_group["provider"], per_group["variant"])),
                   key=lambda pv: (pv[0], order.index(pv[1]) if pv[1] in order else 10**6))
    counts = {(r["provider"], r["variant"], r["argument_error"]): r["count"]
              for r in per_group.to_dict("records")}
    several = len({p for p, _ in pairs}) > 1
    columns = ["argument error (tool.argument: expected -> got)", "rows"] + \
        [f"{p} · {v}" if several else v for p, v in pairs]
    rows = [[cap_text(r["argument_error"], ERROR_LIMIT), r["count"],
             *[counts.get((p, v, r["argument_error"]), 0) for p, v in pairs]]
            for r in top.to_dict("records")]
    return {"columns": columns, "rows": rows}
