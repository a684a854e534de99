"""How often each error code occurs per (provider, variant)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from bench.results import Row


def error_code_counts(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """Count rows per error code in each (provider, variant) group.

    Args:
        rows: :class:`bench.results.Row` objects (``provider``, ``variant``,
            ``metrics.error_codes``); a row key seen
            twice counts once, as in :func:`bench.stats.summary.rows_frame`.

    Returns:
        ``[{"provider", "variant", "rows": int, "counts": {code: rows with it}}]`` in first-seen
        group order; a row with several codes counts once under each.
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    seen: set[str] = set()
    for row in rows:
        if row.key in seen:
            continue
        seen.add(row.key)
        group = groups.setdefault((row.provider, row.variant),
                                  {"provider": row.provider, "variant": row.variant,
                                   "rows": 0, "counts": Counter()})
        group["rows"] += 1
        group["counts"].update(set(row.metrics.error_codes or []))
    return [{**g, "counts": dict(g["counts"])} for g in groups.values()]
