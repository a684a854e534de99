"""Test helper: a run's stored rows as the JSON objects ``results.jsonl`` holds, read through
the typed reader (:meth:`bench.store.RunStore.written_rows`)."""

from __future__ import annotations

from typing import Any

from bench.store import RunStore


def row_dicts(store: RunStore) -> list[dict[str, Any]]:
    """Every complete row of ``store``, in file order, as ``Row.to_json_dict()``.

    Raises:
        BenchError: a corrupt row (as :meth:`RunStore.written_rows`).
    """
    return [row.to_json_dict() for row in store.written_rows()]
