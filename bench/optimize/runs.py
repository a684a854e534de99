"""Every request of an optimization goes through :func:`bench.evaluate`: the target on
``dev`` and ``test``, the proposer on its prompts. This module names those runs, passes the
cache and settings, and counts what each run cost against the search's budget."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from bench.api import Evaluation, evaluate
from bench.optimize.config import OptimizeConfig
from bench.optimize.records import RunCost
from bench.optimize.workspace import PROPOSE_VARIANT, Workspace
from bench.providers.pipeline import LayerFactory
from bench.results import Row
from bench.runner.budget import ProgressHook
from bench.runner.startup import ProviderFactory

#: Run settings the proposer's runs take from the optimization's ``settings`` (model choice,
#: timeouts, pricing); the target-only ones (``execute``, ``factors``, ``trials``...) stay out.
PROPOSER_SETTINGS = ("model", "model_path", "threads", "request_timeout_s", "concurrency",
                     "attempts", "pricing", "stream")
#: Completion tokens a proposer answer may take: a rewritten description and its reason.
PROPOSER_MAX_TOKENS = 1024


def run_cost(result: Evaluation, purpose: str, seconds: float) -> RunCost:
    """What ``result``'s rows cost: requests sent, cache hits, USD and tokens billed."""
    rows = result.rows
    billed = [r for r in rows if (r.attempts or 0) > 0]
    tokens = sum((r.usage.prompt_tokens or 0) + (r.usage.completion_tokens or 0)
                 for r in billed if r.usage is not None)
    return RunCost(run_id=result.run_id, purpose=purpose, status=result.status,
                   rows=len(rows), requests=sum(r.attempts or 0 for r in rows),
                   cache_hits=sum(r.cache == "hit" for r in rows),
                   billed_usd=round(sum(r.billed_usd or 0.0 for r in rows), 6),
                   billed_tokens=tokens, seconds=round(seconds, 3))


class Runs:
    """The optimization's calls of :func:`bench.evaluate`, with their costs.

    Args:
        workspace: where the runs live; config: the optimization.
        provider_factory, layers, progress: passed to every :func:`bench.evaluate`.
    """

    def __init__(self, workspace: Workspace, config: OptimizeConfig, *,
                 provider_factory: ProviderFactory | None = None,
                 layers: Sequence[LayerFactory] = (),
                 progress: ProgressHook | None = None) -> None:
        self.workspace, self.config = workspace, config
        self.provider_factory, self.layers, self.progress = provider_factory, layers, progress
        self.costs: list[RunCost] = []
        #: the target's ``execute`` when the settings do not say (set for episode datasets)
        self.execute_default = False

    def spent(self) -> tuple[float, int]:
        """(USD, tokens) billed so far by the search's runs."""
        return (sum(c.billed_usd for c in self.costs), sum(c.billed_tokens for c in self.costs))

    def budget_left(self) -> str | None:
        """Why the search's budget is used up, or None while some is left."""
        usd, tokens = self.spent()
        if self.config.max_usd is not None and usd >= self.config.max_usd:
            return f"budget: {usd:.4f} USD billed of {self.config.max_usd} USD"
        if self.config.max_total_tokens is not None and tokens >= self.config.max_total_tokens:
            return f"budget: {tokens} tokens billed of {self.config.max_total_tokens}"
        return None

    def _limits(self, search: bool) -> dict[str, Any]:
        """The run's ``max_usd`` / ``max_total_tokens``: what the search has left (the final
        test run is not cut)."""
        if not search:
            return {}
        usd, tokens = self.spent()
        out: dict[str, Any] = {}
        if self.config.max_usd is not None:
            out["max_usd"] = max(self.config.max_usd - usd, 1e-9)
        if self.config.max_total_tokens is not None:
            out["max_total_tokens"] = max(self.config.max_total_tokens - tokens, 1)
        return out

    def _evaluate(self, purpose: str, run: str, dataset: str, variants: Sequence[str],
                  providers: Sequence[str], search: bool, **settings: Any) -> Evaluation:
        started = time.perf_counter()
        result = evaluate(dataset, list(variants), list(providers),
                          project=self.workspace.work, run_id=self.workspace.run_id(run),
                          layers=self.layers, provider_factory=self.provider_factory,
                          progress=self.progress, cache="readwrite",
                          cache_path=self.workspace.cache_path(self.config),
                          seed=self.config.seed, **self._limits(search), **settings)
        self.costs.append(run_cost(result, purpose, time.perf_counter() - started))
        return result

    def target(self, run: str, purpose: str, dataset: Path, variants: Sequence[str], *,
               split: str, providers: Sequence[str] | None = None) -> Evaluation:
        """The target (and ``providers``, default the target alone) on ``split``."""
        settings = dict(self.config.settings)
        settings.pop("cache_path", None)
        settings.setdefault("execute", self.execute_default)
        return self._evaluate(purpose, run, str(dataset), variants,
                              providers or [self.config.target], split != "test",
                              split=split, limit=self.config.limit, **settings)

    def proposer(self, round_no: int, cases: Path) -> Evaluation:
        """The proposer on round ``round_no``'s prompts (one case a tool)."""
        settings = {k: v for k, v in self.config.settings.items() if k in PROPOSER_SETTINGS}
        settings.setdefault("max_tokens", PROPOSER_MAX_TOKENS)
        return self._evaluate(f"propose r{round_no}", f"propose-r{round_no}", str(cases),
                              [PROPOSE_VARIANT], [self.config.proposer], True,
                              split="all", execute=False, **settings)


def variant_rows(result: Evaluation, variant: str, provider: str | None = None) -> list[Row]:
    """The rows of ``variant`` (and ``provider`` when given) in ``result``."""
    return [r for r in result.rows if r.variant == variant
            and (provider is None or r.provider == provider)]

