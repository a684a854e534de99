"""Batch mode behind an awaited call: the run loop awaits one answer per request, and the
:class:`Batcher` groups those requests into OpenAI Batch / Anthropic Message Batches jobs.

The loop treats a batched request like any other (``await batcher.answer(key, body)``), as
inspect_ai hides batching from its generate loop (``model/_providers/util/batch.py`` in
UKGovernmentBEIS/inspect_ai). The flow of :mod:`bench.providers.batch` is kept: submit, record
the batch id in the run's ledger *before* polling, poll, collect; a resumed run collects the
batches its ledger holds instead of submitting their requests again.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from bench.providers.base import HTTPProvider
from bench.providers.batch import (
    CHUNK,
    BatchJob,
    BatchKind,
    BatchLedger,
    custom_id,
    poll,
    results,
    submit,
)

# A request waits this long (s) for more to join its batch before the batch is submitted: the
# run loop hands over a provider's requests back to back, so one pause ends a burst.
FLUSH_AFTER_S = 0.05


class BatchFailed(Exception):
    """The batch answered this request with an error (it stays pending: a resume submits it
    again). ``batch_id`` names the batch, the message says what it reported."""

    def __init__(self, message: str, batch_id: str) -> None:
        super().__init__(message)
        self.batch_id = batch_id


BatchAnswer = tuple[dict[str, Any], str]  # (the response body, the batch id)


class Batcher:
    """One provider's batches: requests in, one awaited answer out per request.

    Args:
        provider: an OpenAI or Anthropic adapter.
        kind: its batch API (:func:`bench.providers.batch.batch_kind`).
        ledger: the run's ``batches.json`` (shared by every provider's batcher).
        poll_s: seconds between status polls of an open batch.
        sleep: how to wait between polls (tests replace it).
        chunk: the most requests per batch (:data:`bench.providers.batch.CHUNK`).
    """

    def __init__(self, provider: HTTPProvider, kind: BatchKind, ledger: BatchLedger, *,
                 poll_s: float, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 chunk: int = CHUNK) -> None:
        self.provider, self.kind, self.ledger = provider, kind, ledger
        self.poll_s, self.sleep, self.chunk = poll_s, sleep, chunk
        self._waiting: dict[str, asyncio.Future[BatchAnswer]] = {}  # custom_id -> its answer
        self._pending: dict[str, dict[str, Any]] = {}  # custom_id -> {key, body}, unsubmitted
        self._flush_handle: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._recorded = {cid: job for job in ledger.open_jobs()
                          if job.provider == provider.provider_id for cid in job.requests}
        self._collecting: set[str] = set()

    async def answer(self, key: str, body: dict[str, Any]) -> BatchAnswer:
        """The answer to one request: from a batch recorded by an earlier session when it
        holds this request, else from a new batch.

        Raises:
            BatchFailed: the batch reported an error for this request.
            ProviderError: a submit, poll or download request failed (the batch ids already
                saved are collected by a resume).
        """
        cid = custom_id(key)
        future: asyncio.Future[BatchAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[cid] = future
        job = self._recorded.get(cid)
        if job is not None:
            self._collect_later(job)
        else:
            self._pending[cid] = {"key": key, "body": body}
            if len(self._pending) >= self.chunk:
                self._submit_now()
            else:
                if self._flush_handle is not None:
                    self._flush_handle.cancel()
                self._flush_handle = asyncio.get_running_loop().call_later(
                    FLUSH_AFTER_S, self._submit_now)
        return await future

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a KeyboardInterrupt here already reached the run

    def _submit_now(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._pending:
            requests, self._pending = self._pending, {}
            self._spawn(self._submit_and_collect(requests))

    def _collect_later(self, job: BatchJob) -> None:
        if job.batch_id not in self._collecting:
            self._collecting.add(job.batch_id)
            self._spawn(self._collect(job))

    async def _submit_and_collect(self, requests: dict[str, dict[str, Any]]) -> None:
        try:
            job = await submit(self.provider, self.kind, requests)
        except Exception as exc:  # noqa: BLE001 - each request's caller gets it
            self._fail(requests, exc)
            return
        self.ledger.jobs.append(job)
        self.ledger.save()  # before polling: a crash from here on is resumable
        self._collecting.add(job.batch_id)
        await self._collect(job)

    async def _collect(self, job: BatchJob) -> None:
        """Poll ``job`` until it ends, then hand every waiting request its answer."""
        try:
            while not await poll(self.provider, job):
                await self.sleep(self.poll_s)
            async for cid, body, error in results(self.provider, job):
                future = self._waiting.pop(cid, None)
                if future is None or future.done():
                    continue  # not asked for now (a row already written), or unknown
                if body is None:
                    future.set_exception(BatchFailed(error or "no answer", job.batch_id))
                else:
                    future.set_result((body, job.batch_id))
        except Exception as exc:  # noqa: BLE001 - e.g. ProviderError; each caller gets it
            self._fail(job.requests, exc)
            return
        for cid in job.requests:  # asked, but absent from the batch's results
            future = self._waiting.pop(cid, None)
            if future is not None and not future.done():
                future.set_exception(BatchFailed("the batch returned no result for this "
                                                 "request", job.batch_id))
        job.status = "collected"
        self.ledger.save()

    def _fail(self, requests: dict[str, Any], exc: Exception) -> None:
        for cid in requests:
            future = self._waiting.pop(cid, None)
            if future is not None and not future.done():
                future.set_exception(exc)

    async def aclose(self) -> None:
        """Cancel the polls still running (a resume collects their batches)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
