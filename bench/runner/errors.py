"""The user-facing error for a plan item whose request failed in a way that stops the run."""

from __future__ import annotations

from bench.errors import BenchError
from bench.providers.errors import ProviderError
from bench.providers.replay import ReplayMiss
from bench.runner.plan import PlanItem


def item_error(item: PlanItem, exc: Exception, dataset: str, run_id: str) -> Exception:
    """The one-line error naming case, variant, provider and trial, and what to do.

    Args:
        item: the failed item.
        exc: what its request raised.
        dataset: the run's dataset setting (for the command that records a replay miss).
        run_id: the run's id (for the resume command).

    Returns:
        A :class:`BenchError` for a replay miss (the command that records it), a request the
        HTTP client refused to send (fix the settings, then resume) or any other
        :class:`ProviderError` (its class, status and request id); ``exc`` itself otherwise.
    """
    where = f"case '{item.case.id}', variant '{item.condition}', trial {item.trial}"
    if isinstance(exc, ReplayMiss):
        recorded = ", ".join(exc.recorded_providers) or "none"
        return BenchError(
            f"{item.provider_id}: no recorded answer for {where} (the source holds answers "
            f"from: {recorded}); record it with: bench run --provider <provider> "
            f"--dataset {dataset} --variants {item.variant.name} "
            f"--cases {item.case.id} --trials {item.trial + 1}"
            + "".join(f" --{name.replace('_', '-')} {value}" for name, value in
                      (item.factors.changed() if item.factors else {}).items())
            + " --cache write "
            "(or replay a run that has it: replay:<run-id>)")
    if isinstance(exc, ProviderError) and exc.error_class == "client":
        # nothing was asked: a setting on this machine, not the provider nor the model
        return BenchError(
            f"{item.provider_id}: {where}: {exc.detail}; nothing was asked of the model "
            "and no row is scored for it: fix the provider's settings (base URL, API key, "
            f"proxy), then continue with: bench run --resume {run_id} (finished rows are "
            "kept)")
    if isinstance(exc, ProviderError):
        status = f" HTTP {exc.status}" if exc.status else ""
        request = f" (request id {exc.request_id})" if exc.request_id else ""
        tried = " after retries" if exc.retryable else ""
        return BenchError(
            f"{item.provider_id}: {exc.error_class}{status} error{tried} on {where}: "
            f"{exc}{request}; finished rows are kept, continue with: "
            f"bench run --resume {run_id}")
    return exc
