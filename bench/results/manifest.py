"""A run's manifest (:class:`Manifest`) and its executor traces (:class:`TraceRecord`)."""

from __future__ import annotations

from typing import TypedDict

from pydantic import Field, JsonValue, model_validator

from bench.results.base import SCHEMA_VERSION, JsonObject, _Record, migrate


class ManifestDataset(_Record):
    """The dataset a run read."""

    name: str | None = None
    path: str | None = Field(default=None, description="the cases file when the run started")
    sha256: str | None = Field(default=None, description="SHA-256 of the cases file")
    cases: int | None = Field(default=None, description="cases planned (after --limit / --case)")
    splits: bool | None = Field(
        default=None, description="its cases carry a dev/test split (bench "
                "split); None: a run from before it was recorded")


class ManifestVariant(_Record):
    """One description variant of a run."""

    name: str | None = None
    toolset: str | None = None
    sha256: str | None = Field(default=None, description="SHA-256 of the variant's tools")
    source: str | None = Field(default=None, description="template or file it was rendered from")
    tools: int | None = Field(default=None, description="number of tools")
    mean_lines_per_tool: float | None = Field(
        default=None, description="description lines per tool")
    lines_per_tool: dict[str, int] | None = None
    draft_tools: list[str] | None = Field(
        default=None, description="tools whose description is an "
                "unreviewed draft (bench variants draft)")
    aliases: dict[str, str] | None = Field(
        default=None, description="renamed tools of the toolset: "
                "old name -> new name (labels naming the old "
                "name score against the new)")
    label: str | None = Field(default=None, description="a report's display label (never stored)")

    @property
    def shown(self) -> str | None:
        """The label to show: ``label`` when a report set one, else ``name``."""
        return self.label or self.name


class ManifestSpent(_Record):
    """What a run was billed."""

    billed_usd: float | None = Field(default=None, description="USD")
    billed_tokens: int | None = Field(default=None, description="tokens, prompt + completion")
    billed_requests: int | None = None


class ManifestSkippedCase(_Record):
    """A case ``--skip-invalid-cases`` left out: its label does not fit the tools."""

    case: str | None = Field(default=None, description="the case id")
    line: int | None = Field(default=None, description="its 1-based line in the dataset file")
    field: str | None = Field(default=None, description="the label's field at fault")
    why: str | None = None


class ManifestBfcl(_Record):
    """The BFCL source file of an imported BFCL dataset (its checker's verdicts)."""

    path: str | None = None
    entries: int | None = Field(default=None, description="entries read from it")
    sha256: str | None = Field(default=None, description="SHA-256 of the file")


class ManifestSpaceSetting(_Record):
    """One tool-space setting (:class:`bench.toolspace.ToolSpace`)."""

    tools: int | None = Field(default=None, description="tools in the catalog; None: the toolset "
                                                        "as it is")
    retriever: str | None = None
    top_k: int | None = None


class ManifestCollision(_Record):
    """A distractor renamed because its name was taken."""

    source: str | None = Field(default=None, description="the distractor's toolset")
    name: str | None = Field(default=None, description="its name there")
    renamed: str | None = Field(default=None, description="its name in the catalog")


class ManifestCatalog(_Record):
    """A variant grown with distractors (:class:`bench.toolspace.distractors.Expansion`)."""

    toolset: str | None = None
    variant: str | None = None
    tools: int | None = Field(default=None, description="tools in the catalog")
    own: int | None = Field(default=None, description="the variant's own tools among them")
    sha256: str | None = Field(default=None, description="SHA-256 of the catalog's tools")
    sources: dict[str, int] | None = Field(
        default=None, description="distractors per source toolset")
    levels: dict[str, str] | None = Field(default=None, description="the variant each source was "
                                                                    "rendered at")
    collisions: list[ManifestCollision] | None = None


class ManifestToolspace(_Record):
    """Tool counts and retrievers of a run (:mod:`bench.toolspace`)."""

    settings: list[ManifestSpaceSetting] | None = None
    catalogs: list[ManifestCatalog] | None = None


class ManifestExecution(_Record):
    """How one toolset's calls were executed (:func:`bench.executor.runhook.
    describe_execution`)."""

    mode: str | None = Field(default=None, description="reference, mcp, python, none, off or "
                                                       "no_backend")
    detail: str | None = Field(default=None, description="where or why, in a few words")
    labels: str | None = Field(default=None, description="where the expected results come from: "
                                                         "reference, reset or recorded")
    writes: str | list[str] | None = Field(default=None, description="'all' or the write tools "
                                                                     "allowed to run")


class ManifestHost(_Record):
    """The machine a run ran on."""

    platform: str | None = None


class ManifestProviderNote(_Record):
    """A provider and why it was skipped (could not start) or paused (its remaining items
    were not sent)."""

    provider: str | None = None
    reason: str | None = None


class ManifestPricingFile(_Record):
    """One price file a run used."""

    file: str | None = None
    source: str | None = Field(default=None, description="where its prices were copied from")
    date: str | None = None


class ManifestPricing(_Record):
    """The price files a run used (:meth:`bench.providers.pricing.Pricing.describe`)."""

    unit: str | None = Field(default=None, description="e.g. 'USD per 1000000 tokens'")
    files: list[ManifestPricingFile] | None = None


class ManifestBudget(_Record):
    """A run's budget (None: no limit)."""

    max_usd: float | None = Field(default=None, description="USD")
    max_total_tokens: int | None = Field(default=None, description="tokens")


class ManifestRateLimits(_Record):
    """One provider's rate limiting (:class:`bench.providers.ratelimit.GateStats`)."""

    rate_limited: int | None = Field(default=None, description="429 answers seen")
    retries: int | None = None
    paused_s: float | None = Field(default=None, description="seconds paused in all")
    min_limit: int | None = Field(default=None, description="the lowest concurrency cap reached")


class ManifestCache(_Record):
    """The response cache's statistics (:meth:`bench.providers.cache.ResponseCache.stats`),
    summed over a resumed run's sessions or a merge's shards. The counters are read as
    counts when summed (:func:`bench.runner.manifest.summed_cache`: anything else is 0), so
    a hand-edited value does not stop a resume."""

    mode: str | None = None
    path: str | None = None
    hits: JsonValue = None
    misses: JsonValue = None
    writes: JsonValue = None


class ManifestBatchError(_Record):
    """A request a batch answered with an error (left for the resume)."""

    key: str | None = Field(default=None, description="the row's key")
    batch: str | None = Field(default=None, description="the batch's id")
    error: str | None = None


class ManifestRequestError(_Record):
    """A request that failed after every retry (left for the resume)."""

    key: str | None = Field(default=None, description="the row's key")
    error: str | None = None


class ManifestShard(_Record):
    """One shard of a merged run (``bench merge``)."""

    run_id: str | None = None
    shard: str | None = Field(default=None, description="'i/n'")
    status: str | None = None
    rows: int | None = Field(default=None, description="rows taken from it")
    started_at: str | None = Field(default=None, description="UTC ISO 8601")
    ended_at: str | None = Field(default=None, description="UTC ISO 8601")
    git_commit: str | None = None
    host: ManifestHost | None = None
    providers_skipped: list[ManifestProviderNote] | None = None


class Manifest(_Record):
    """``manifest.json``: a run's identity, configuration, inputs and status (written by the
    runner, replaced atomically). Required: ``run_id``, ``status``, ``config``, ``dataset``,
    ``variants``, ``rows_planned``.

    ``status``: ``running``, ``complete``, ``partial`` (a provider was skipped),
    ``interrupted``, ``budget_exhausted`` or ``failed``; readers may show ``crashed``
    (:meth:`bench.store.RunStore.shown_status`), which is never stored.
    """

    schema_version: int = Field(default=SCHEMA_VERSION, description="the contract's version")
    run_id: str
    status: str
    command: list[str] | None = Field(default=None, description="the argv that started the run")
    config: JsonObject = Field(description=(
        "bench.runner.RunConfig as a dict (as stored: older runs' settings are migrated when "
        "read, bench.runner.config.stored_run_config)"))
    dataset: ManifestDataset
    cases_skipped: list[ManifestSkippedCase] | None = Field(default=None, description=(
        "invalid cases left out: {case, line, field, why}"))
    bfcl: ManifestBfcl | None = Field(
        default=None, description="BFCL source: {path, entries, sha256}")
    variants: list[ManifestVariant]
    toolspace: ManifestToolspace | None = Field(default=None, description=(
        "tool counts and retrievers (bench.toolspace): {settings: [{tools, retriever, "
        "top_k}], catalogs: [{toolset, variant, tools, own, sha256, sources, levels, "
        "collisions}]}"))
    providers: list[JsonObject] | None = Field(default=None, description=(
        "each provider's describe(): {provider, model, ...}, a shape of its own"))
    execution: dict[str, ManifestExecution] | None = Field(default=None, description=(
        "toolset -> {mode (reference, mcp, python, none, off, no_backend), detail, labels, "
        "writes}: how its calls were executed"))
    versions: dict[str, str] | None = Field(default=None, description="package -> version")
    git_commit: str | None = None
    host: ManifestHost | None = None
    rows_planned: int = Field(ge=0)
    rows_done: int | None = Field(
        default=None, description="rows written at the last manifest write")
    started_at: str | None = Field(default=None, description="UTC ISO 8601")
    ended_at: str | None = Field(default=None, description="UTC ISO 8601")
    providers_skipped: list[ManifestProviderNote] | None = Field(default=None, description=(
        "{provider, reason} of providers that could not run"))
    providers_paused: list[ManifestProviderNote] | None = Field(default=None, description=(
        "{provider, reason} of providers whose remaining items were not sent"))
    pricing: ManifestPricing | None = Field(
        default=None, description="price files used (USD per 1M "
                                  "tokens)")
    spent: ManifestSpent | None = None
    budget: ManifestBudget | None = Field(default=None, description="{max_usd (USD), "
                                                                    "max_total_tokens}")
    rate_limits: dict[str, ManifestRateLimits] | None = Field(default=None, description=(
        "provider -> {rate_limited, retries, paused_s (seconds), min_limit}"))
    cache: ManifestCache | None = Field(
        default=None, description="response cache {mode, path, hits, "
                                  "misses, writes}")
    error: str | None = Field(default=None, description="why a failed run failed")
    batch_errors: list[ManifestBatchError] | None = None
    request_errors: list[ManifestRequestError] | None = None
    merged_from: list[ManifestShard] | None = Field(default=None, description=(
        "a merged run's shards: {run_id, shard ('i/n'), status, rows, started_at, ended_at, "
        "git_commit, host, providers_skipped}"))
    shards_missing: list[str] | None = Field(default=None, description=(
        "shards ('i/n') a partial merge lacks"))
    # last: written after every other field, as when it was an extra field
    merged_at: str | None = Field(default=None, description="UTC ISO 8601 time of bench merge")

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

    def without(self, *names: str) -> "Manifest":
        """A copy without the fields ``names`` (left out of ``manifest.json``, as in a run
        that never had them: a resumed run's stale error, say); the values kept are not
        validated again (they were when set)."""
        fields = {name: getattr(self, name) for name in type(self).model_fields
                  if name not in names}
        extra = {k: v for k, v in (self.model_extra or {}).items() if k not in names}
        return type(self).model_construct(self.model_fields_set - set(names),
                                          **fields, **extra)


class ManifestChanges(TypedDict, total=False):
    """What a run changes in its manifest as it goes, each key of its :class:`Manifest`
    field's type: the ``update`` of ``manifest.model_copy(update=ManifestChanges(...))``,
    which does not validate again (mypy checks the values here instead)."""

    config: JsonObject
    status: str
    rows_done: int
    ended_at: str | None
    error: str
    providers: list[JsonObject]
    providers_skipped: list[ManifestProviderNote]
    providers_paused: list[ManifestProviderNote]
    pricing: ManifestPricing
    spent: ManifestSpent
    budget: ManifestBudget
    rate_limits: dict[str, ManifestRateLimits]
    cache: ManifestCache
    batch_errors: list[ManifestBatchError]
    request_errors: list[ManifestRequestError]


class TraceRecord(_Record):
    """One line of ``traces.jsonl``: one attempt of one tool call by the executor
    (:mod:`bench.executor.traces`). Arguments never reach the file, only their hash."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="the contract's version")
    ts: str | None = Field(default=None, description="UTC ISO 8601 time, milliseconds")
    run_id: str | None = None
    case_id: str | None = None
    trial: int | None = None
    call_id: str | None = None
    tool: str = Field(description="the tool called")
    args_sha256: str | None = Field(default=None, description="SHA-256 of the canonical arguments "
                                                              "JSON")
    attempt: int | None = Field(default=None, description="0-based attempt (= retries before it)")
    status: str | None = Field(default=None, description="ok, error, fallback or rejected")
    final: bool | None = Field(default=None, description="the call's last attempt")
    error_class: str | None = Field(default=None, description="transient, rate_limited, timeout, "
                                                              "permanent, validation or "
                                                              "server_exited")
    error_code: str | None = None
    fault: str | None = Field(default=None, description="the injected fault, if any")
    waited_s: float | None = Field(default=None, allow_inf_nan=False,
                                           description="seconds of backoff / rate wait before it")
    duration_ms: float | None = Field(default=None, allow_inf_nan=False,
                                              description="milliseconds the attempt took")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: object) -> object:
        return migrate(data, "trace")
