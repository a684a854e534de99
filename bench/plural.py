"""Counts in messages: ``1 row``, ``2 rows``, ``0 rows`` (never ``1 rows``)."""

from __future__ import annotations


def noun(n: int | float, singular: str, plural: str | None = None) -> str:
    """``singular`` when ``n`` is exactly 1, else ``plural`` (default: ``singular + "s"``).

    Args:
        n: the count the noun follows.
        singular: e.g. ``"row"``, ``"description line"``.
        plural: the plural form when it is not ``singular + "s"`` (``"matches"``).
    """
    return singular if n == 1 else (plural or singular + "s")


def count(n: int | float, singular: str, plural: str | None = None) -> str:
    """``"1 row"``, ``"3 rows"``: ``n`` and :func:`noun` of it."""
    return f"{n} {noun(n, singular, plural)}"


def first_few(items: list[str], shown: int = 5) -> str:
    """The first ``shown`` of ``items`` comma-separated, then ``"and N more"`` for the rest:
    ``"a, b, c and 4 more"`` (``""`` for none)."""
    listed = ", ".join(items[:shown])
    return listed + (f" and {len(items) - shown} more" if len(items) > shown else "")
