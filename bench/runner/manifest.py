"""The manifest fields a finished run writes (``manifest.json``, :class:`bench.results.Manifest`)."""

from __future__ import annotations

from typing import Mapping, Sequence

from bench.providers.ratelimit import ProviderGate
from bench.results import (ManifestBatchError, ManifestBudget, ManifestCache, ManifestChanges,
                           ManifestProviderNote, ManifestRateLimits, ManifestRequestError)
from bench.runner.config import RunConfig
from bench.runner.ledger import Ledger
from bench.runner.rows import _now


def final_fields(*, status: str, rows_done: int, ledger: Ledger, config: RunConfig,
                 gates: Mapping[str, ProviderGate],
                 batch_errors: Sequence[ManifestBatchError],
                 request_errors: Sequence[ManifestRequestError], paused: Mapping[str, str],
                 cache: ManifestCache | None,
                 previous_cache: ManifestCache | None) -> ManifestChanges:
    """What a finished run sets in its manifest (``manifest.model_copy(update=...)``).

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
        previous_cache: the statistics stored by earlier sessions (counts are summed), or
            None.
    """
    fields = ManifestChanges(
        status=status, rows_done=rows_done, ended_at=_now(), spent=ledger.describe(),
        budget=ManifestBudget(max_usd=config.max_usd,
                              max_total_tokens=config.max_total_tokens),
        rate_limits={pid: ManifestRateLimits(
            rate_limited=gate.stats.rate_limited, retries=gate.stats.retries,
            paused_s=gate.stats.paused_s, min_limit=gate.stats.min_limit)
            for pid, gate in gates.items()})
    if batch_errors:
        fields["batch_errors"] = list(batch_errors[:100])
    if request_errors:
        fields["request_errors"] = list(request_errors[:100])
    if paused:
        fields["providers_paused"] = [ManifestProviderNote(provider=k, reason=v)
                                      for k, v in paused.items()]
    stored = previous_cache is not None and bool(previous_cache.model_fields_set)
    if cache is not None or stored:
        fields["cache"] = summed_cache([c for c in (previous_cache, cache) if c is not None])
    return fields


def summed_cache(stats: Sequence[ManifestCache]) -> ManifestCache:
    """Response-cache statistics of several sessions or shards as one: ``hits``, ``misses``
    and ``writes`` summed (a value that is not a count reads as 0), other fields (the path...)
    from the last that has them."""
    merged = ManifestCache()
    for one in stats:
        merged = merged.model_copy(update={k: getattr(one, k) for k in one.model_fields_set})
    return merged.model_copy(update={k: sum(_count(getattr(one, k)) for one in stats)
                                     for k in ("hits", "misses", "writes")})


def _count(value: object) -> int:
    """A stored counter as an int; 0 for what is not a count (a hand-edited manifest's
    ``"lots"`` or null must not stop the run from writing its manifest)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else 0
