"""The optimization's report (placeholder until the full report lands)."""

from __future__ import annotations

from bench.descriptions.variants import Variant
from bench.optimize.config import OptimizeConfig
from bench.optimize.records import OptimizeResult
from bench.optimize.workspace import Workspace


def write_report(workspace: Workspace, config: OptimizeConfig, result: OptimizeResult,
                 start: Variant, final: Variant) -> None:
    """Write ``report.md`` and ``report.html`` (not yet)."""
