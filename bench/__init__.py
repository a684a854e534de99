"""bench: evaluation and benchmarking of LLM tool descriptions.

The public API, imported lazily (PEP 562 ``__getattr__``) so that ``import bench`` and the CLI
start without loading pandas, the SDKs or llama.cpp::

    from bench import evaluate
    result = evaluate("ecommerce", ["l3", "l50"], ["oracle"], limit=5, project=".")
    result.summary                      # the table `bench run` prints

Names and where they live are listed in :data:`__all__` and ``_EXPORTS``; everything else is
internal and may change between releases.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

try:
    __version__ = importlib.metadata.version("bench")
except importlib.metadata.PackageNotFoundError:  # run from a checkout without installing
    __version__ = "0+unknown"

# public name -> the module that defines it
_EXPORTS = {
    # running
    "evaluate": "bench.api",
    "Evaluation": "bench.api",
    "RunConfig": "bench.runner.config",
    "RunSession": "bench.runner.session",
    "Runner": "bench.runner.core",
    "PlanItem": "bench.runner.plan",
    # data
    "Case": "bench.models",
    "Message": "bench.models",
    "Tool": "bench.models",
    "ToolCall": "bench.models",
    "load_dataset": "bench.datasets.loader",
    "load_variant": "bench.descriptions.variants",
    # providers
    "Provider": "bench.providers.base",
    "HTTPProvider": "bench.providers.base",
    "ProviderResponse": "bench.providers.base",
    "Usage": "bench.providers.base",
    "ProviderError": "bench.providers.errors",
    "make_provider": "bench.providers",
    "ModelRequest": "bench.providers.pipeline",
    "Outcome": "bench.providers.pipeline",
    "Layer": "bench.providers.pipeline",
    "Exchange": "bench.providers.pipeline",
    "provider": "bench.providers.registry",
    "register_function": "bench.providers.function",
    # scoring and metrics
    "ParsedAnswer": "bench.parse",
    "score_case": "bench.scoring.metrics",
    "MetricSpec": "bench.scoring.registry",
    "register_metric": "bench.scoring.registry",
    # statistics: the results frame, the per-variant summary, paired comparison
    "results_frame": "bench.stats.frame",
    "summarize": "bench.stats.summary",
    "compare_rows": "bench.compare.core",
    # stored runs: the results contract and where a project keeps its files
    "Row": "bench.results",
    "Manifest": "bench.results",
    "TraceRecord": "bench.results",
    "RunStore": "bench.store",
    "Project": "bench.project",
    # errors
    "BenchError": "bench.errors",
    "RunIncomplete": "bench.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import a public name on first use.

    Raises:
        AttributeError: ``name`` is not part of the public API.
    """
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The public names (and the module's own dunder names)."""
    return sorted(set(__all__) | {"__version__"})
