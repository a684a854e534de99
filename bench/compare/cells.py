"""Table cells of a comparison, shared by ``bench compare``'s terminal table and the HTML and
Markdown reports (plain text; each renderer escapes it), and a flipped case's label and
answers in short form. No heavy imports: the command line loads this before the statistics."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.results import Row, RowExpected


def pct(value: float | None) -> str:
    """A rate (fraction) as ``"87.5%"``; ``"-"`` when there is none (NaN or None)."""
    return "-" if value is None or math.isnan(value) else f"{value * 100:.1f}%"


def points(value: float | None) -> str:
    """A difference of rates (fraction) in signed percentage points, ``"+3.1"``; ``"-"`` when
    there is none."""
    return "-" if value is None or math.isnan(value) else f"{value * 100:+.1f}"


def p_value(value: float) -> str:
    """A p-value to 3 significant digits, ``"<0.001"`` below 0.001."""
    return f"{value:.3g}" if value >= 0.001 else "<0.001"


def mdd(value: float) -> str:
    """A minimum detectable difference (fraction) in points; NaN means that even a 100-point
    difference would not reach the power with this few pairs
    (:func:`bench.compare.paired.minimum_detectable_difference`)."""
    return "none (too few pairs)" if math.isnan(value) else f"{value * 100:.1f} pts"


def short_expected(expected: RowExpected | None) -> str:
    """A label in short form, ``name(arg=value|value)`` per call (``omit``: the argument may
    be left out), or what a no-call or ask label says; ``""`` without one."""
    if expected is None:
        return ""
    if expected.no_call:
        return "(no call: nothing fits)"
    if expected.ask:
        return "(no call: ask the user)"
    parts = []
    for call in expected.calls:
        args = ", ".join(
            f"{k}=" + "|".join("omit" if v is None else json.dumps(v, ensure_ascii=False)
                               for v in values)
            for k, values in (call.get("arguments") or {}).items())
        parts.append(f"{call.get('name')}({args})")
    return "; ".join(parts)


def short_answer(row: Row, limit: int = 300) -> str:
    """A row's answer in short form, cut to ``limit`` characters: its calls with their
    arguments, ``(no call)``, ``(unparseable: ...)``, or an episode's trajectory."""
    if row.episode is not None:  # an episode: its calls, results and ending
        return row.episode.trajectory_text(limit)
    if row.parsed is not None and row.parsed.error:
        text = f"(unparseable: {row.parsed.error})"
    elif not row.calls():
        text = "(no call)"
    else:
        text = "; ".join(
            f"{c.name}({json.dumps(c.arguments, ensure_ascii=False, default=str)})"
            for c in row.calls())
    return text if len(text) <= limit else text[:limit - 1] + "…"
