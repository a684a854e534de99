"""Batch mode: OpenAI Batch API and Anthropic Message Batches for large runs.

Requests are the adapters' exact bodies (``build_request``); answers go through the same
``parse_body``, so a batched row is scored like an interactive one. Flow (OpenAI "Batch API"
guide: upload a JSONL file with ``purpose="batch"``, ``POST /v1/batches``, poll
``GET /v1/batches/{id}`` until ``completed``, download ``output_file_id`` / ``error_file_id``;
Anthropic "Message Batches": ``POST /v1/messages/batches`` with ``requests[{custom_id,
params}]``, poll until ``processing_status == "ended"``, stream ``results_url`` JSONL):

1. submit, 2. record the batch id in the run directory (``batches.json``, atomic) *before*
polling, 3. poll, 4. collect. A crash after step 2 loses nothing: resuming the run polls and
collects the recorded batches instead of submitting again.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, AsyncIterator, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from bench.errors import BenchError, pydantic_error_field
from bench.providers.base import HTTPProvider
from bench.providers.errors import error_from_exception
from bench.providers.replies import MalformedReply, ReplyModel, read_reply
from bench.redact import one_line
from bench.store.files import atomic_write_json

BatchKind = Literal["openai", "anthropic"]
LEDGER = "batches.json"
# Per-batch request caps documented by the providers are 50,000 (OpenAI) and 100,000
# (Anthropic); smaller chunks let a budget stop between them.
CHUNK = 10_000
OPENAI_DONE = {"completed", "failed", "expired", "cancelled"}


class BatchJob(BaseModel):
    """One submitted batch, as recorded in ``batches.json``.

    Attributes:
        provider: the provider id.
        kind: ``openai`` or ``anthropic``.
        batch_id: the provider's batch id.
        endpoint: the request path each line targets (OpenAI), e.g. ``/v1/chat/completions``.
        requests: custom_id -> ``{"key": row key, "body": the request body}``.
        status: last status seen (``submitted``, the provider's statuses, ``collected``).
        submitted_at: UNIX time in seconds.
    """

    provider: str
    kind: BatchKind
    batch_id: str
    endpoint: str
    requests: dict[str, dict[str, Any]] = Field(default_factory=dict)
    status: str = "submitted"
    submitted_at: float = 0.0

    @field_validator("requests")
    @classmethod
    def _entries(cls, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        # the runner reads entry["key"] and entry["body"] of every request
        for cid, entry in requests.items():
            if not isinstance(entry.get("key"), str):
                raise ValueError(f"request '{cid}': 'key' must be a string")
            if not isinstance(entry.get("body"), dict):
                raise ValueError(f"request '{cid}': 'body' must be an object")
        return requests


class BatchLedger:
    """``<run dir>/batches.json``: every batch of the run (written atomically).

    Args:
        run_dir: the run directory.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LEDGER
        self.jobs: list[BatchJob] = []
        if self.path.exists() and not self.path.is_file():
            raise BenchError("unreadable batch ledger: not a file", file=self.path)
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except RecursionError:
                raise BenchError("unreadable batch ledger: JSON nested too deeply",
                                 file=self.path) from None
            except ValueError as exc:  # not UTF-8, not JSON
                raise BenchError(f"unreadable batch ledger: {exc}".splitlines()[0],
                                 file=self.path) from None
            batches = data.get("batches") if isinstance(data, dict) else None
            if not isinstance(batches, list):
                raise BenchError("unreadable batch ledger: must be an object whose 'batches' "
                                 "is a list", file=self.path, field="batches")
            for index, job in enumerate(batches):
                try:
                    self.jobs.append(BatchJob.model_validate(job))
                except ValidationError as exc:
                    field, message = pydantic_error_field(exc)
                    raise BenchError("unreadable batch ledger: "
                                     + message.removeprefix("Value error, "), file=self.path,
                                     field=f"batches.{index}" + (f".{field}" if field else "")
                                     ) from None

    def save(self) -> None:
        """Replace the file atomically."""
        atomic_write_json(self.path, {"batches": [job.model_dump() for job in self.jobs]})

    def open_jobs(self) -> list[BatchJob]:
        """Batches submitted but not yet collected."""
        return [job for job in self.jobs if job.status != "collected"]


def batch_kind(provider: object) -> BatchKind | None:
    """Which batch API serves a provider: ``openai`` (``openai:`` and ``openai-responses:``),
    ``anthropic``, or None (kinds registered without ``batch`` in
    :mod:`bench.providers.registry`: Gemini, OpenAI-compatible servers, local, replay...)."""
    from bench.providers.registry import provider_spec

    if not isinstance(provider, HTTPProvider):
        return None
    spec = provider_spec(provider.provider_id)
    if spec is not None and not spec.batch:  # the registry's capability decides
        return None
    kind = getattr(provider, "kind", "")
    if kind in ("openai", "openai-responses"):
        return "openai"
    if kind == "anthropic":
        return "anthropic"
    return None


def custom_id(key: str) -> str:
    """A row key as a batch ``custom_id`` (Anthropic allows ``^[a-zA-Z0-9_-]{1,64}$``)."""
    return "r" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


async def submit(provider: HTTPProvider, kind: BatchKind,
           requests: dict[str, dict[str, Any]]) -> BatchJob:
    """Submit one batch; return its (not yet saved) ledger entry.

    Args:
        provider: an OpenAI or Anthropic adapter.
        kind: from :func:`batch_kind`.
        requests: custom_id -> ``{"key", "body"}``.

    Raises:
        ProviderError: the upload or the create call failed.
    """
    client = getattr(provider, "_client")
    try:
        if kind == "openai":
            lines = "".join(json.dumps({"custom_id": cid, "method": "POST",
                                        "url": provider.endpoint, "body": entry["body"]},
                                       ensure_ascii=False) + "\n"
                            for cid, entry in requests.items())
            upload = await client.files.create(file=("bench-batch.jsonl", lines.encode("utf-8")),
                                         purpose="batch")
            batch = await client.batches.create(input_file_id=upload.id, endpoint=provider.endpoint,
                                          completion_window="24h",
                                          metadata={"source": "bench"})
        else:
            batch = await client.messages.batches.create(requests=[
                {"custom_id": cid, "params": entry["body"]} for cid, entry in requests.items()])
    except Exception as exc:  # noqa: BLE001 - classified for the runner
        raise error_from_exception(exc) from exc
    return BatchJob(provider=provider.provider_id, kind=kind, batch_id=batch.id,
                    endpoint=provider.endpoint, requests=requests, submitted_at=time.time())


async def poll(provider: HTTPProvider, job: BatchJob) -> bool:
    """Refresh ``job.status``; True once the batch has ended (results can be collected).

    Raises:
        ProviderError: the status request failed.
    """
    client = getattr(provider, "_client")
    try:
        if job.kind == "openai":
            batch = await client.batches.retrieve(job.batch_id)
            job.status = batch.status
            return batch.status in OPENAI_DONE
        batch = await client.messages.batches.retrieve(job.batch_id)
        job.status = batch.processing_status
        return bool(batch.processing_status == "ended")
    except Exception as exc:  # noqa: BLE001
        raise error_from_exception(exc) from exc


class BatchOutputResponse(ReplyModel):
    """``response`` of one OpenAI Batch output line."""

    status_code: int | None = None
    body: Any = None


class BatchOutputLine(ReplyModel):
    """One line of an OpenAI Batch output or error file: ``custom_id``, ``response``
    (``status_code``, ``body``: what the endpoint answered) or ``error``."""

    custom_id: str
    response: BatchOutputResponse | None = None
    error: Any = None


def _openai_line(number: int, line: str) -> tuple[str, dict[str, Any] | None, str | None] | None:
    """One OpenAI Batch output line as ``results`` yields it; None for a line that names no
    request (not JSON, or no ``custom_id``: that request stays pending). A line of another
    shape is that request's error; its ``body`` is parsed like an interactive reply (a body of
    unexpected shape is then its invalid answer)."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    custom = data.get("custom_id") if isinstance(data, dict) else None
    if not isinstance(custom, str):
        return None
    try:
        entry = read_reply(BatchOutputLine, data)
    except MalformedReply as exc:
        return custom, None, f"malformed batch output line {number}: {exc}"
    response = entry.response or BatchOutputResponse()
    if entry.error or response.status_code != 200:
        error = entry.error
        if error is None and isinstance(response.body, dict):
            error = response.body.get("error")
        return custom, None, f"HTTP {response.status_code}: {error}"
    return custom, response.body, None


async def results(provider: HTTPProvider, job: BatchJob
                  ) -> AsyncIterator[tuple[str, dict[str, Any] | None, str | None]]:
    """``(custom_id, response body or None, error or None)`` for each request of an ended
    batch; a request the batch did not answer (or whose result line names no request) is not
    yielded (it stays pending). A result of unexpected shape is yielded as that request's
    error, never raised.

    Raises:
        ProviderError: a download failed.
    """
    client = getattr(provider, "_client")
    try:
        if job.kind == "openai":
            batch = await client.batches.retrieve(job.batch_id)
            for file_id in (batch.output_file_id, batch.error_file_id):
                if not file_id:
                    continue
                content = await client.files.content(file_id)
                for number, line in enumerate(content.text.splitlines(), 1):
                    if line.strip():
                        found = _openai_line(number, line)
                        if found is not None:
                            yield found
        else:
            async for entry in await client.messages.batches.results(job.batch_id):
                custom = getattr(entry, "custom_id", None)
                if not isinstance(custom, str):
                    continue
                try:
                    result = entry.result
                    if result.type == "succeeded":
                        found = (custom, result.message.to_dict(), None)
                    else:
                        detail = getattr(result, "error", None)
                        found = (custom, None, f"{result.type}: "
                                 f"{detail.to_dict() if detail else ''}")
                except (AttributeError, TypeError, ValueError) as exc:
                    found = (custom, None, f"malformed batch result ({type(exc).__name__}: "
                                           f"{one_line(str(exc), 200)})")
                yield found
    except Exception as exc:  # noqa: BLE001
        raise error_from_exception(exc) from exc
