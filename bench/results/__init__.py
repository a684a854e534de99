"""The results contract: typed models of what a run directory holds.

A run (``reports/runs/<run-id>/``) is ``manifest.json`` (:class:`Manifest`), ``results.jsonl``
(one :class:`Row` per line) and, when the executor ran, ``traces.jsonl`` (one
:class:`TraceRecord` per line). Every reader (report, compare, gate, traces, ``bench show``,
replay) gets these objects from :class:`bench.store.RunStore` and reads fields as
attributes; writers build them (or dicts of the same shape) and the store stamps
:data:`SCHEMA_VERSION`.

Versions: :data:`SCHEMA_VERSION` is the shape this bench writes. A record without
``schema_version`` was written by the release before the contract (version 0, the same fields
untyped) and is migrated on read (:func:`migrate`); a record with a higher version than this
bench knows is refused with one line that says to upgrade bench. Unknown extra fields are
kept (``extra="allow"``) so that a reader never drops what a newer writer added inside one
version.

Types are strict (no coercion: ``"1"`` is not a trial number, ``true`` is not a count), as
the hand-written checks they replace were: a corrupt row is named, not silently repaired.
Units: seconds (``*_s``), milliseconds (``*_ms``), tokens (``*_tokens``), US dollars
(``*_usd``).
"""

from __future__ import annotations

from bench.results.answer import RowCall, RowParsed, RowUsage
from bench.results.base import (SCHEMA_VERSION, JsonObject, SchemaTooNew, migrate,
                                validation_problem)
from bench.results.episode import EpisodeStep, RowEpisode, StepCall, StepResult
from bench.results.manifest import (Manifest, ManifestBatchError, ManifestChanges, ManifestBfcl,
                                    ManifestBudget, ManifestCache, ManifestCatalog,
                                    ManifestCollision, ManifestDataset, ManifestExecution,
                                    ManifestHost, ManifestPricing, ManifestPricingFile,
                                    ManifestProviderNote, ManifestRateLimits,
                                    ManifestRequestError, ManifestShard, ManifestSkippedCase,
                                    ManifestSpaceSetting, ManifestSpent, ManifestToolspace,
                                    ManifestVariant, TraceRecord)
from bench.results.metrics import RowMetrics
from bench.results.rows import Row, RowExpected, RowRequest, RowResponse, as_row, as_rows

__all__ = ["SCHEMA_VERSION", "EpisodeStep", "JsonObject", "Manifest", "ManifestBatchError",
           "ManifestBfcl", "ManifestBudget", "ManifestCache", "ManifestCatalog",
           "ManifestChanges", "ManifestCollision", "ManifestDataset", "ManifestExecution", "ManifestHost",
           "ManifestPricing", "ManifestPricingFile", "ManifestProviderNote",
           "ManifestRateLimits", "ManifestRequestError", "ManifestShard", "ManifestSkippedCase",
           "ManifestSpaceSetting", "ManifestSpent", "ManifestToolspace", "ManifestVariant",
           "Row", "RowCall", "RowEpisode", "RowExpected", "RowMetrics",
           "RowParsed", "RowRequest", "RowResponse", "RowUsage", "SchemaTooNew", "StepCall",
           "StepResult", "TraceRecord", "as_row", "as_rows", "migrate",
           "validation_problem"]
