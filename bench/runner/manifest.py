"""The manifest fields a finished run writes (``manifest.json``, :class:`bench.results.Manifest`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from bench.providers.ratelimit import ProviderGate
from bench.results import Manifest
from bench.runner.config import RunConfig
from bench.runner.ledger import Ledger
from bench.runner.rows import _now


def final_fields(*, status: str, rows_done: int, ledger: Ledger, config: RunConfig,
                 gates: Mapping[str, ProviderGate],
                 batch_errors: Sequence[Mapping[str, Any]],
                 request_errors: Sequence[Mapping[str, Any]], paused: Mapping[str, str],
                 cache: Mapping[str, Any] | None,
                 previous_cache: Mapping[str, Any]) -> dict[str, Any]:
    """What a finished run sets in its manifest.

    Args:
        status: the run's final status.
        rows_done: rows written in all (earlier sessions of a resumed run included).
        ledger: its spend (``spent``: USD, tokens, requests).
        config: its budget settings.
        gates: provider id -> its gate (``rate_limits``: 429s, retries, pause seconds,
            lowest cap).
        batch_errors, request_errors: requests left for the resume (first 100 kept).
        paused: provider id -> why its remaining items were not sent.
        cache: this session's response-cache statistics, or None with the cache off.
        previous_cache: the statistics stored by earlier sessions (counts are summed).
    """
    fields: dict[str, Any] = {
        "status": status, "rows_done": rows_done, "ended_at": _now(),
        "spent": ledger.describe(),
        "budget": {"max_usd": config.max_usd, "max_total_tokens": config.max_total_tokens},
        "rate_limits": {pid: vars(gate.stats) for pid, gate in gates.items()}}
    if batch_errors:
        fields["batch_errors"] = list(batch_errors[:100])
    if request_errors:
        fields["request_errors"] = list(request_errors[:100])
    if paused:
        fields["providers_paused"] = [{"provider": k, "reason": v} for k, v in paused.items()]
    if cache is not None or previous_cache:
        fields["cache"] = summed_cache([previous_cache, cache or {}])
    return fields


def summed_cache(stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Response-cache statistics of several sessions or shards as one: ``hits``, ``misses``
    and ``writes`` summed (a value that is not a count reads as 0), other fields (the path...)
    from the last that has them."""
    merged: dict[str, Any] = {}
    for one in stats:
        merged.update(one)
    merged.update({k: sum(_count(one.get(k)) for one in stats)
                   for k in ("hits", "misses", "writes")})
    return merged


def _count(value: object) -> int:
    """A stored counter as an int; 0 for what is not a count (a hand-edited manifest's
    ``"lots"`` or null must not stop the run from writing its manifest)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else 0


def with_fields(manifest: Manifest, **fields: object) -> Manifest:
    """A copy of ``manifest`` with ``fields`` set, validated as a :class:`Manifest`.

    Raises:
        pydantic.ValidationError: a value does not fit the contract (a bug in the writer).
    """
    return Manifest.model_validate({**manifest.to_json_dict(), **fields})


def without_fields(manifest: Manifest, *names: str) -> Manifest:
    """A copy of ``manifest`` without the fields ``names`` (absent from ``manifest.json``, as
    a run that never had them: a resumed run's stale error, say)."""
    return Manifest.model_validate({k: v for k, v in manifest.to_json_dict().items()
                                    if k not in names})
