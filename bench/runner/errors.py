"""The user-facing error for a plan item whose request failed in a way that stops the run."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from bench.errors import BenchError, RunIncomplete
from bench.plural import count
from bench.providers.errors import ProviderError
from bench.providers.registry import is_recorded
from bench.providers.replay import ReplayMiss
from bench.results import ManifestBatchError, ManifestRequestError
from bench.runner.plan import PlanItem

if TYPE_CHECKING:  # the session imports this module's callers, not this module
    from bench.runner.session import RunSession


class ExecutorNotStarted(BenchError):
    """A run's executor could not start (its toolset's MCP server, Python module of tools or
    ``[tool.bench.toolsets.*]`` settings), before any row: a new run's folder then holds
    nothing worth keeping (:meth:`bench.runner.session.RunSession.failed_before_rows`)."""


def item_error(item: PlanItem, exc: Exception, dataset: str, resume: str) -> Exception:
    """The one-line error naming case, variant, provider and trial, and what to do.

    Args:
        item: the failed item.
        exc: what its request raised.
        dataset: the run's dataset setting (for the command that records a replay miss).
        resume: how to continue the run (``bench run --resume <run-id>``).

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
            f"proxy), then continue with: {resume} (finished rows are "
            "kept)")
    if isinstance(exc, ProviderError):
        status = f" HTTP {exc.status}" if exc.status else ""
        request = f" (request id {exc.request_id})" if exc.request_id else ""
        tried = " after retries" if exc.retryable else ""
        return BenchError(
            f"{item.provider_id}: {exc.error_class}{status} error{tried} on {where}: "
            f"{exc}{request}; finished rows are kept, continue with: "
            f"{resume}")
    return exc


def replay_misses_error(misses: Sequence[tuple[PlanItem, ReplayMiss]], dataset: str,
                        root: Path) -> BenchError:
    """The failure of a run whose replay provider lacked answers: every missing (case,
    variant, trial), and per (provider, variant, factors) the one command that records all of
    them, exactly: the project (``BENCH_HOME``), the dataset, the variant, every missing case
    (``--cases a,b,c``), enough trials, the factors, and for a cache source ``--cache write
    --cache-path <that file>`` (absolute), so that running the printed command and then the
    gate again finds every answer.

    Args:
        misses: each missed plan item with its :class:`ReplayMiss`.
        dataset: the run's dataset setting (a name, or a ``.jsonl`` path).
        root: the project folder (relative cache files are found there).

    Returns:
        One :class:`BenchError`: one line, the groups joined by ``"; "``, each ending in its
        command.
    """
    groups: dict[tuple[str, str, tuple[tuple[str, str], ...]],
                 tuple[list[PlanItem], ReplayMiss]] = {}
    for item, exc in misses:
        factors = tuple((item.factors.changed() if item.factors else {}).items())
        key = (item.provider_id, item.variant.name, factors)
        groups.setdefault(key, ([], exc))[0].append(item)
    lines = []
    for (provider_id, variant, factors), (items, exc) in groups.items():
        cases = list(dict.fromkeys(item.case.id for item in items))
        trials = max(item.trial for item in items) + 1
        recorded = sorted(p for p in exc.recorded_providers if not is_recorded(p))
        source = Path(exc.source)
        cache = (source if source.is_absolute() else root / source).resolve()
        is_cache = cache.is_file() or cache.suffix in (".sqlite", ".db")
        command = (f"BENCH_HOME={shlex.quote(str(root))} bench run --provider "
                   f"{shlex.quote(recorded[0]) if len(recorded) == 1 else '<provider>'} "
                   f"--dataset {shlex.quote(dataset)} --variants {shlex.quote(variant)} "
                   f"--cases {shlex.quote(','.join(cases))} --trials {trials}"
                   + "".join(f" --{name.replace('_', '-')} {shlex.quote(str(value))}"
                             for name, value in factors)
                   + (f" --cache write --cache-path {shlex.quote(str(cache))}" if is_cache
                      else " --cache write"))
        shown = ", ".join(cases[:10]) + (f" and {len(cases) - 10} more" if len(cases) > 10
                                         else "")
        lines.append(f"{provider_id}: no recorded answer for {count(len(items), 'item')} of "
                     f"variant '{variant}' (cases {shown}; the source holds answers from: "
                     f"{', '.join(exc.recorded_providers) or 'none'}); record "
                     + ("them" if len(items) > 1 else "it") + f" with: {command}"
                     + ("" if is_cache else " (then replay a run that has them: "
                        "replay:<run-id>, or the cache: replay:<cache file>)"))
    return BenchError("; ".join(lines))


def incomplete_error(request_errors: Sequence[ManifestRequestError],
                     batch_errors: Sequence[ManifestBatchError], paused: Mapping[str, str],
                     resume: str) -> RunIncomplete | None:
    """The failure of a run that left requests for its resume, or None.

    Args:
        request_errors: the key and error of requests that failed after every retry (empty
            when the run was interrupted: the signal is its ending).
        batch_errors: the key, batch and error of requests a batch answered with an error.
        paused: provider id -> why its remaining items were not sent.
        resume: how to continue the run (``bench run --resume <run-id>``).
    """
    if request_errors:
        first = request_errors[0]
        stopped = "".join(f"; stopped sending to {pid}: {why}" for pid, why in paused.items())
        return RunIncomplete(
            f"{count(len(request_errors), 'request')} failed after every retry "
            f"(first: {first.key}: {first.error}){stopped}; finished rows are "
            f"kept, send the rest again with: {resume}")
    if batch_errors:
        first_batch = batch_errors[0]
        return RunIncomplete(
            f"{count(len(batch_errors), 'batch request')} failed (first: "
            f"{first_batch.key}: {first_batch.error}); finished rows are kept, submit the "
            f"rest again with: {resume}")
    return None


def cancelled_error(item: PlanItem, resume: str) -> BenchError:
    """The failure of a request cancelled from inside (a provider or a layer raised
    :class:`asyncio.CancelledError`) while the run was not stopping."""
    return BenchError(
        f"{item.provider_id}: case '{item.case.id}', variant '{item.condition}', trial "
        f"{item.trial}: the request was cancelled by its provider or a layer "
        "(asyncio.CancelledError) while the run was not stopping; finished rows are kept, "
        f"continue with: {resume}")


def error_text(exc: BaseException) -> str:
    """How the manifest's ``error`` names a failure: bench's own one-line message, or the
    exception's type and message for anything else (a user layer's bug, say)."""
    return str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"


def left_over_error(misses: Sequence[tuple[PlanItem, ReplayMiss]],
                    request_errors: Sequence[ManifestRequestError],
                    batch_errors: Sequence[ManifestBatchError], paused: Mapping[str, str],
                    interrupted: bool, session: "RunSession") -> BenchError | RunIncomplete | None:
    """The failure of a run that is done sending: its replay misses (all named, with the
    commands that record them: :func:`replay_misses_error`) unless it was interrupted, else
    the requests it left for a resume (:func:`incomplete_error`; none are counted as failed
    when the run was interrupted: the signal is its ending), or None."""
    if misses and not interrupted:
        return replay_misses_error(misses, session.config.dataset, session.project.root)
    return incomplete_error([] if interrupted else request_errors, batch_errors, paused,
                            session.resume_hint)
