"""Plan and execute a run: case x variant x provider x trial -> one scored row each.

Data flow (BRIEF §3), one module per step: :mod:`~bench.runner.config` (what to run) ->
:mod:`~bench.runner.plan` (the items) -> :mod:`~bench.runner.session` (dataset, variants, plan,
manifest, store) -> :mod:`~bench.runner.startup` (providers) -> :mod:`~bench.runner.scheduler`
(the asyncio loop; every request through :mod:`bench.providers.pipeline`) ->
:mod:`~bench.runner.rows` (scored rows), with :mod:`~bench.runner.ledger` (cost, spend,
budgets) and :mod:`~bench.runner.signals` (Ctrl-C, SIGTERM). :mod:`~bench.runner.core`'s
:class:`Runner` ties them together.
"""

from bench.runner.budget import ProgressHook, Spend
from bench.runner.config import (
                                 FAILED_IN_A_ROW_TO_PAUSE,
                                 IDENTITY_FIELDS,
                                 RESUME_OVERRIDES,
                                 STOP_GRACE_S,
                                 RunConfig,
                                 identity_mismatch,
)
from bench.runner.core import Runner
from bench.runner.session import RunSession
from bench.runner.plan import (
                                 PlanItem,
                                 load_variants,
                                 make_plan,
                                 select_cases,
                                 skip_invalid_cases,
)
from bench.providers.pipeline import Outcome
from bench.runner.rows import build_row, summarize_case
from bench.runner.signals import StopSignals

__all__ = ["FAILED_IN_A_ROW_TO_PAUSE", "IDENTITY_FIELDS", "RESUME_OVERRIDES", "STOP_GRACE_S",
           "Outcome", "PlanItem", "ProgressHook", "RunConfig", "RunSession", "Runner", "Spend", "StopSignals",
           "build_row", "identity_mismatch", "load_variants", "make_plan",
           "select_cases", "skip_invalid_cases", "summarize_case"]
