"""A run's manifest (:class:`Manifest`) and its executor traces (:class:`TraceRecord`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from bench.results.base import SCHEMA_VERSION, _Record, migrate


class ManifestDataset(_Record):
    """The dataset a run read."""

    name: str | None = None
    path: str | None = Field(None, description="the cases file when the run started")
    sha256: str | None = Field(None, description="SHA-256 of the cases file")
    cases: int | None = Field(None, description="cases planned (after --limit / --case)")
    splits: bool | None = Field(None, description="its cases carry a dev/test split (bench "
                                "split); None: a run from before it was recorded")


class ManifestVariant(_Record):
    """One description variant of a run."""

    name: str | None = None
    toolset: str | None = None
    sha256: str | None = Field(None, description="SHA-256 of the variant's tools")
    source: str | None = Field(None, description="template or file it was rendered from")
    tools: int | None = Field(None, description="number of tools")
    mean_lines_per_tool: float | None = Field(None, description="description lines per tool")
    lines_per_tool: dict[str, int] | None = None
    draft_tools: list[str] | None = Field(None, description="tools whose description is an "
                                          "unreviewed draft (bench variants draft)")
    aliases: dict[str, str] | None = Field(None, description="renamed tools of the toolset: "
                                           "old name -> new name (labels naming the old "
                                           "name score against the new)")
    label: str | None = Field(None, description="a report's display label (never stored)")

    @property
    def shown(self) -> str | None:
        """The label to show: ``label`` when a report set one, else ``name``."""
        return self.label or self.name


class ManifestSpent(_Record):
    """What a run was billed."""

    billed_usd: float | None = Field(None, description="USD")
    billed_tokens: int | None = Field(None, description="tokens, prompt + completion")
    billed_requests: int | None = None


class Manifest(_Record):
    """``manifest.json``: a run's identity, configuration, inputs and status (written by the
    runner, replaced atomically). Required: ``run_id``, ``status``, ``config``, ``dataset``,
    ``variants``, ``rows_planned``.

    ``status``: ``running``, ``complete``, ``partial`` (a provider was skipped),
    ``interrupted``, ``budget_exhausted`` or ``failed``; readers may show ``crashed``
    (:meth:`bench.store.RunStore.shown_status`), which is never stored.
    """

    schema_version: int = Field(SCHEMA_VERSION, description="the contract's version")
    run_id: str
    status: str
    command: list[str] | None = Field(None, description="the argv that started the run")
    config: dict[str, Any] = Field(description="bench.runner.RunConfig as a dict")
    dataset: ManifestDataset
    cases_skipped: list[dict[str, Any]] | None = Field(None, description=(
        "invalid cases left out: {case, line, field, why}"))
    bfcl: dict[str, Any] | None = Field(None, description="BFCL source: {path, entries, sha256}")
    variants: list[ManifestVariant]
    toolspace: dict[str, Any] | None = Field(None, description=(
        "tool counts and retrievers (bench.toolspace): {settings: [{tools, retriever, "
        "top_k}], catalogs: [{toolset, variant, tools, own, sha256, sources, levels, "
        "collisions}]}"))
    providers: list[dict[str, Any]] | None = Field(None, description=(
        "each provider's describe(): {provider, model, ...}"))
    execution: dict[str, Any] | None = Field(None, description=(
        "toolset -> {mode (reference, mcp, python, none, off, no_backend), detail, writes}: "
        "how its calls were executed"))
    versions: dict[str, Any] | None = Field(None, description="package -> version")
    git_commit: str | None = None
    host: dict[str, Any] | None = None
    rows_planned: int = Field(ge=0)
    rows_done: int | None = Field(None, description="rows written at the last manifest write")
    started_at: str | None = Field(None, description="UTC ISO 8601")
    ended_at: str | None = Field(None, description="UTC ISO 8601")
    providers_skipped: list[dict[str, Any]] | None = Field(None, description=(
        "{provider, reason} of providers that could not run"))
    providers_paused: list[dict[str, Any]] | None = None
    pricing: dict[str, Any] | None = Field(None, description="price files used (USD per 1M "
                                                             "tokens)")
    spent: ManifestSpent | None = None
    budget: dict[str, Any] | None = Field(None, description="{max_usd (USD), max_total_tokens}")
    rate_limits: dict[str, Any] | None = Field(None, description=(
        "provider -> {rate_limited, retries, paused_s (seconds), min_limit}"))
    cache: dict[str, Any] | None = Field(None, description="response cache {hits, misses, "
                                                           "writes, ...}")
    error: str | None = Field(None, description="why a failed run failed")
    batch_errors: list[dict[str, Any]] | None = None
    request_errors: list[dict[str, Any]] | None = None
    merged_from: list[dict[str, Any]] | None = Field(None, description=(
        "a merged run's shards: {run_id, shard ('i/n'), status, rows, started_at, ended_at, "
        "git_commit, host, providers_skipped}"))
    shards_missing: list[str] | None = Field(None, description=(
        "shards ('i/n') a partial merge lacks"))

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: object) -> object:
        return migrate(data, "manifest")

    def variant_names(self) -> set[str | None]:
        """The names of the run's variants."""
        return {v.name for v in self.variants}

    def to_json_dict(self) -> dict[str, object]:
        """The manifest as ``manifest.json`` stores it (fields never set are left out)."""
        return self.model_dump(exclude_unset=True)


class TraceRecord(_Record):
    """One line of ``traces.jsonl``: one attempt of one tool call by the executor
    (:mod:`bench.executor.traces`). Arguments never reach the file, only their hash."""

    schema_version: int = Field(SCHEMA_VERSION, description="the contract's version")
    ts: str | None = Field(None, description="UTC ISO 8601 time, milliseconds")
    run_id: str | None = None
    case_id: str | None = None
    trial: int | None = None
    call_id: str | None = None
    tool: str = Field(description="the tool called")
    args_sha256: str | None = Field(None, description="SHA-256 of the canonical arguments "
                                                      "JSON")
    attempt: int | None = Field(None, description="0-based attempt (= retries before it)")
    status: str | None = Field(None, description="ok, error, fallback or rejected")
    final: bool | None = Field(None, description="the call's last attempt")
    error_class: str | None = Field(None, description="transient, rate_limited, timeout, "
                                                      "permanent, validation or "
                                                      "server_exited")
    error_code: str | None = None
    fault: str | None = Field(None, description="the injected fault, if any")
    waited_s: float | None = Field(None, allow_inf_nan=False,
                                   description="seconds of backoff / rate wait before it")
    duration_ms: float | None = Field(None, allow_inf_nan=False,
                                      description="milliseconds the attempt took")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: object) -> object:
        return migrate(data, "trace")
