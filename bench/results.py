"""The results contract: typed models of what a run directory holds.

A run (``reports/runs/<run-id>/``) is ``manifest.json`` (:class:`Manifest`), ``results.jsonl``
(one :class:`Row` per line) and, when the executor ran, ``traces.jsonl`` (one
:class:`TraceRecord` per line). Every reader (report, compare, gate, traces, ``bench show``,
replay) gets these objects from :class:`bench.runstore.RunStore` and reads fields as
attributes; writers build them (or dicts of the same shape) and the store stamps
:data:`SCHEMA_VERSION`.

Versions: :data:`SCHEMA_VERSION` is the shape this bench writes. A record without
``schema_version`` was written by the release before the contract (version 0, the same fields
untyped) and is migrated on read (:func:`migrate`); a record with a higher version than this
bench knows is refused with one line that says to upgrade bench. Unknown extra fields are
kept (``extra="allow"``) so that a reader never drops what a newer writer added inside one
version.

Types are strict (no coercion: ``"1"`` is not a trial number, ``true`` is not a count), as
the hand-written checks they replace were: a corrupt row is named, not silently repaired.
Units: seconds (``*_s``), milliseconds (``*_ms``), tokens (``*_tokens``), US dollars
(``*_usd``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SCHEMA_VERSION = 1
"""The version of :class:`Row`, :class:`Manifest` and :class:`TraceRecord` this bench writes
(0: the release before the contract, records without ``schema_version``)."""

# allow_inf_nan=False: a hand-edited Infinity passed ``ge=0`` and broke every JSON writer
# downstream (the report's page data); bench itself writes non-finite numbers as null
_CONFIG = ConfigDict(extra="allow", strict=True, frozen=False, populate_by_name=True,
                     allow_inf_nan=False)


class SchemaTooNew(ValueError):
    """A record written by a newer bench (its ``schema_version`` is above
    :data:`SCHEMA_VERSION`)."""


def migrate(data: Any, kind: str) -> Any:
    """``data`` (a decoded record) in the current shape, for the models' before-validators.

    Version 0 (no ``schema_version``: the release before the contract) has the current fields
    untyped; its rows may name execution metrics ``exec_success`` / ``exec_match`` (an early
    executor), which become ``execution_success`` / ``execution_match``.

    Args:
        data: the decoded JSON value (anything; non-objects are left to validation).
        kind: ``row``, ``manifest`` or ``trace`` (only rows carry renamed metrics).

    Raises:
        SchemaTooNew: ``schema_version`` is above :data:`SCHEMA_VERSION`.
        ValueError: ``schema_version`` is negative.
    """
    if not isinstance(data, dict):
        return data
    version = data.get("schema_version", 0)
    if type(version) is int and version > SCHEMA_VERSION:
        raise SchemaTooNew(f"written by a newer bench (schema_version {version}; this bench "
                           f"reads up to {SCHEMA_VERSION}): upgrade bench to read it")
    if type(version) is int and version < 0:
        raise ValueError(f"schema_version {version} is not a version (0 to {SCHEMA_VERSION})")
    if version == SCHEMA_VERSION:
        return data
    if type(version) is int and version == 0:  # absent, or written out as 0 by hand
        data = {"schema_version": SCHEMA_VERSION,
                **{k: v for k, v in data.items() if k != "schema_version"}}
        metrics = data.get("metrics") if kind == "row" else None
        if isinstance(metrics, dict) and ("exec_success" in metrics or "exec_match" in metrics):
            renamed = dict(metrics)
            for old, new in (("exec_success", "execution_success"),
                             ("exec_match", "execution_match")):
                if old in renamed:
                    value = renamed.pop(old)
                    renamed.setdefault(new, value)
            data["metrics"] = renamed
    return data


class _Record(BaseModel):
    """Base of the contract's models: strict types, unknown fields kept."""

    model_config = _CONFIG


# ----------------------------------------------------------------------------- result rows


class RowExpected(_Record):
    """The case's label as the row stores it (:class:`bench.models.Expected` dumped):
    exactly one of ``calls``, ``no_call``, ``ask``."""

    calls: list[dict[str, Any]] = Field(default_factory=list, description=(
        "expected calls: {name, arguments: {argument: [acceptable values]}}"))
    no_call: bool = Field(False, description="nothing fits: the model must not call")
    ask: bool = Field(False, description="information is missing: the model should ask")
    ordered: bool = Field(False, description="the calls must come in the listed order")


class RowRequest(_Record):
    """A summary of what was sent (the adapter's ``ProviderResponse.request`` plus hashes);
    adapters add their own keys (model, tool names, tool_choice...), kept as extras."""

    variant_sha256: str | None = Field(None, description="SHA-256 of the variant's tools")
    messages_sha256: str | None = Field(None, description="SHA-256 of the case's messages")
    tools_sha256: str | None = Field(None, description="SHA-256 of the tools sent "
                                                       "(equals variant_sha256)")


class RowResponse(_Record):
    """The provider's answer as received."""

    raw: Any = Field(None, description="raw answer: text (embedded model) or the JSON body "
                                       "(HTTP providers), as received")
    finish_reason: str | None = Field(None, description="stop, length, tool_calls... as the "
                                                        "provider said")
    request_id: str | None = Field(None, description="the provider's request id, if sent")


class RowCall(_Record):
    """One parsed tool call (:class:`bench.models.ToolCall` dumped); every field may be
    absent on rows written by hand or by early releases."""

    id: str | None = Field(None, description="the provider's call id, or call_<index>")
    name: str | None = Field(None, description="the tool name as received")
    arguments: Any = Field(default_factory=dict, description="decoded arguments (an object "
                                                             "when valid)")
    raw_arguments: Any = Field(None, description="the exact string or object received")
    notes: list[str] = Field(default_factory=list, description="decode notes "
                                                               "(double_encoded, truncated...)")
    valid: bool = Field(True, description="False when the arguments could not be decoded")


class RowParsed(_Record):
    """The answer in canonical form (:class:`bench.parse.ParsedAnswer` dumped)."""

    calls: list[RowCall] | None = Field(default_factory=list, description="tool calls in the "
                                                                          "order received")
    declined: bool = Field(False, description="the model said that no tool fits")
    error: str | None = Field(None, description="why the answer could not be decoded (one "
                                                "line); None when it could")
    error_code: str | None = Field(None, description="the code of error (bench.parse."
                                                     "ANSWER_ERROR_CODES)")
    text: str | None = Field(None, description="prose beside or instead of calls")


class RowMetrics(_Record):
    """Per-row scores (:class:`bench.scoring.metrics.CaseScore`, the executor's
    ``execution_*`` and BFCL's ``bfcl_*``); None where a metric does not apply, absent on rows
    written before it existed. Binary metrics are booleans, fractions are in [0, 1]."""

    selection_correct: bool | None = Field(None, description="expected tool names equal the "
                                                             "called ones (multiset)")
    selection_precision: float | None = Field(
        None, ge=0, le=1, description="fraction; None on no-call/ask")
    selection_recall: float | None = Field(
        None, ge=0, le=1, description="fraction; None on no-call/ask")
    selection_f1: float | None = Field(
        None, ge=0, le=1, description="fraction; None on no-call/ask")
    arguments_correct: bool | None = None
    task_success: bool | None = Field(None, description="episodes: state checks and answer "
                                                        "facts hold (bench.scoring.episodes)")
    trajectory_recall: float | None = Field(None, ge=0, le=1, description="episodes: fraction")
    trajectory_precision: float | None = Field(None, ge=0, le=1,
                                               description="episodes: fraction")
    recovery: float | None = Field(None, ge=0, le=1, description="episodes: fraction of error "
                                                                 "results recovered from")
    steps: int | None = Field(None, ge=0, description="episodes: model answers")
    tool_calls: int | None = Field(None, ge=0, description="episodes: calls made")
    repeated_calls: int | None = Field(None, ge=0, description="episodes: identical repeats")
    forbidden_attempted: bool | None = None
    arguments_correct_lenient: bool | None = None
    argument_results: dict[str, bool] | None = Field(None, description=(
        "'<call index>.<argument>' -> acceptable"))
    schema_valid: bool | None = None
    schema_valid_lenient: bool | None = None
    no_call_correct: bool | None = None
    ask_correct: bool | None = Field(None, description=(
        "ask cases: no call and the reply names what is missing (before ask_for labels: no "
        "call)"))
    ask_no_call: bool | None = Field(None, description="ask cases: no call was made")
    hallucinated_tool: bool | None = None
    hallucinated_argument: bool | None = None
    missing_required: bool | None = None
    enum_case_error: bool | None = None
    type_error: bool | None = None
    lenient_repairs: list[str] | None = None
    error_codes: list[str] | None = Field(None, description="sorted distinct error codes")
    argument_errors: list[str] | None = Field(None, description=(
        "'tool.argument: expected -> got' for wrong values"))
    execution_success: bool | None = Field(None, description="every call ran without error "
                                                             "(executor)")
    execution_match: bool | None = Field(None, description="the calls' results equal the "
                                                           "label's (executor)")
    execution_errors: dict[str, Any] | None = Field(None, description=(
        "error class -> failed calls (executor)"))
    bfcl_valid: bool | None = Field(None, description="BFCL's own checker verdict (imported "
                                                      "BFCL datasets)")
    bfcl_error_type: str | None = Field(None, description="BFCL's error type, None when valid")


class RowUsage(_Record):
    """Token usage of the request (tokens; :class:`bench.providers.base.Usage` dumped)."""

    prompt_tokens: int | None = Field(None, description="tokens, prompt (cached included)")
    completion_tokens: int | None = Field(None, description="tokens, output (reasoning "
                                                            "included)")
    cached_tokens: int | None = Field(None, description="tokens of the prompt served from "
                                                        "the provider's prefix cache")
    reasoning_tokens: int | None = Field(None, description="tokens of reasoning, None when "
                                                           "not reported separately")


class RowEpisode(_Record):
    """An episode row's trajectory and ending (:mod:`bench.episodes.loop`).

    ``steps``: one object per model answer: ``step`` (0-based), ``text`` (the answer's prose),
    ``calls`` (``{id, name, arguments, valid}``, and ``raw_arguments`` as received when
    not valid), ``results`` (``{call_id, tool, content,
    is_error, error_code, success}``: exactly what was sent back), ``error`` (the answer
    could not be decoded), ``usage`` (tokens), ``latency_s`` (seconds), ``cache``,
    ``finish_reason``, ``messages_sha256`` (the digest of the conversation the step was
    asked with, :func:`bench.providers.cache.messages_digest`) and ``parsed`` (the answer as
    :class:`bench.parse.ParsedAnswer` dumped: ``replay:<run>`` answers the step from it); a
    scripted user reply adds ``user_reply``.

    A text over 64 KB (a result's ``content``, ``text``, ``final_answer``, a call's
    ``arguments`` or ``raw_arguments`` as JSON text, a state check's ``got``, ``sql`` or
    ``expect``) is stored as its head and tail with ``<field>_chars``, its full length
    (``got_rows`` too: the rows returned), once: ``parsed`` leaves out what ``text`` and
    ``calls`` hold cut, and such a step has ``stored_cut: true`` and is not replayed
    (:mod:`bench.episodes.stored`, docs/episodes.md).
    """

    stop_reason: str = Field(description="final_answer, step_limit, loop_guard or unparseable")
    final_answer: str | None = None
    steps: list[dict[str, Any]] = Field(default_factory=list)
    state_checks: list[dict[str, Any]] | None = Field(
        None, description="{sql, expect, got, ok} per check; None when not run")

    def trajectory_text(self, limit: int = 300) -> str:
        """The trajectory in one line, cut to ``limit`` characters (with "…"):
        ``get_order_status({"order_id": "ORD1"}) -> error http_503; ... ; final answer:
        "..."`` (``-> ok`` for a result sent back without ``is_error``, ``-> not run``
        for a call without a result) or the stop reason when it is not a final answer."""
        parts = []
        for step in self.steps:
            results = {r.get("call_id"): r for r in step.get("results") or []
                       if isinstance(r, dict)}
            for call in step.get("calls") or []:
                if not isinstance(call, dict):
                    continue
                result = results.get(call.get("id"))
                shown = ("not run" if result is None else
                         f"error {result.get('error_code') or ''}".rstrip()
                         if result.get("is_error") else "ok")
                arguments = json.dumps(call.get("arguments"), ensure_ascii=False,
                                       default=str)
                parts.append(f"{call.get('name')}({arguments}) -> {shown}")
            if step.get("error"):
                parts.append(f"(unparseable: {step['error']})")
        if self.stop_reason == "final_answer":
            parts.append("final answer: "
                         + json.dumps(self.final_answer or "", ensure_ascii=False))
        else:
            parts.append(f"stopped: {self.stop_reason}")
        text = " ".join("; ".join(parts).split())
        return text if len(text) <= limit else text[:limit - 1] + "…"


class Row(_Record):
    """One line of ``results.jsonl``: one planned item (case x variant x provider x trial),
    as :func:`bench.runner.build_row` writes it.

    Required (present, possibly null where typed ``| None``): ``key``, ``case_id``,
    ``toolset``, ``variant``, ``provider``, ``trial``, ``lang``, ``metrics``, ``usage``,
    ``latency_s``. Everything else may be absent (hand-made or early rows).
    """

    schema_version: int = Field(SCHEMA_VERSION, description="the contract's version")
    key: str = Field(description="'<case_id>|<variant>|<provider>|<trial>'")
    run_id: str | None = Field(None, description="the run that wrote the row")
    case_id: str
    toolset: str
    variant: str = Field(description="variant name (or a report's relabelled '<run>/<name>')")
    provider: str = Field(description="provider id, credentials removed")
    trial: int = Field(ge=0, description="0-based repetition number")
    lang: str | None = Field(description="the case's language (zh, en, mixed)")
    tags: list[str] | None = None
    info: str | None = Field(None, description=(
        "the case's information bucket: the lowest description level carrying what it needs "
        "(schema, l10, l30, l50; None: untagged)"))
    query: str | None = Field(None, description="the case's last user message")
    expected: RowExpected | None = None
    request: RowRequest | None = None
    response: RowResponse | None = None
    parsed: RowParsed | None = None
    metrics: RowMetrics
    usage: RowUsage | None
    cost_usd: float | None = Field(None, description="USD, the request's tokens at list price; "
                                                     "None without a price")
    billed_usd: float | None = Field(None, description="USD this run paid for it (0 for cache "
                                                       "hits and replays)")
    attempts: int | None = Field(None, description="requests sent (retries included; 0 for a "
                                                   "cache hit)")
    cache: str | None = Field(None, description="hit, miss, or None (cache off)")
    tool_definition_tokens: int | None = Field(None, description="tokens the tool definitions "
                                                                 "take (provider tokenizer)")
    # >= 0: a hand-edited negative latency showed as a negative p50
    latency_s: float | None = Field(ge=0, description="seconds, wall time of the request")
    finished_at: str | None = Field(None, description="UTC ISO 8601 time the row was scored")
    factors: dict[str, str] | None = Field(None, description="an episode's factor settings "
                                                             "(bench.episodes.factors)")
    episode: RowEpisode | None = Field(None, description="an episode's trajectory")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate(data, "row")

    @property
    def unparseable(self) -> bool:
        """True when the answer could not be decoded (a parse error or the ``unparseable``
        code)."""
        return bool((self.parsed is not None and self.parsed.error)
                    or "unparseable" in (self.metrics.error_codes or ()))

    def calls(self) -> list[RowCall]:
        """The parsed calls ([] without any)."""
        return list(self.parsed.calls or ()) if self.parsed is not None else []

    def extra(self, name: str) -> Any:
        """A field outside the contract (kept from the file), or None."""
        return (self.model_extra or {}).get(name)

    def to_json_dict(self) -> dict[str, Any]:
        """The row as the JSON object ``results.jsonl`` stores (extras included; fields the
        writer never set are left out, as they were absent from what it built)."""
        return {"schema_version": self.schema_version, **self.model_dump(exclude_unset=True)}


class ManifestDataset(_Record):
    """The dataset a run read."""

    name: str | None = None
    path: str | None = Field(None, description="the cases file when the run started")
    sha256: str | None = Field(None, description="SHA-256 of the cases file")
    cases: int | None = Field(None, description="cases planned (after --limit / --case)")


class ManifestVariant(_Record):
    """One description variant of a run."""

    name: str | None = None
    toolset: str | None = None
    sha256: str | None = Field(None, description="SHA-256 of the variant's tools")
    source: str | None = Field(None, description="template or file it was rendered from")
    tools: int | None = Field(None, description="number of tools")
    mean_lines_per_tool: float | None = Field(None, description="description lines per tool")
    lines_per_tool: dict[str, int] | None = None
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
    (:meth:`bench.runstore.RunStore.shown_status`), which is never stored.
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
    providers: list[dict[str, Any]] | None = Field(None, description=(
        "each provider's describe(): {provider, model, ...}"))
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
    def _migrate(cls, data: Any) -> Any:
        return migrate(data, "manifest")

    def variant_names(self) -> set[str | None]:
        """The names of the run's variants."""
        return {v.name for v in self.variants}

    def to_json_dict(self) -> dict[str, Any]:
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
                                                      "permanent or validation")
    error_code: str | None = None
    fault: str | None = Field(None, description="the injected fault, if any")
    waited_s: float | None = Field(None, allow_inf_nan=False,
                                   description="seconds of backoff / rate wait before it")
    duration_ms: float | None = Field(None, allow_inf_nan=False,
                                      description="milliseconds the attempt took")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate(data, "trace")


def as_row(row: Row | Mapping[str, Any]) -> Row:
    """``row`` as a :class:`Row` (a dict of the row's JSON shape is validated and migrated).

    Raises:
        pydantic.ValidationError: the dict does not fit the contract.
    """
    return row if isinstance(row, Row) else Row.model_validate(row)


def as_rows(rows: Iterable[Row | Mapping[str, Any]]) -> list[Row]:
    """:func:`as_row` of each row."""
    return [as_row(r) for r in rows]


def validation_problem(exc: ValidationError) -> tuple[str | None, str]:
    """(dotted field path, a few words) of the first error of ``exc``, for one-line messages
    such as ``corrupt result row: missing field`` with ``field=case_id``."""
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in error.get("loc", ())) or None
    kind = error.get("type", "")
    if kind == "missing":
        return where, "missing field"
    if kind == "value_error":
        message = str(error.get("ctx", {}).get("error") or error.get("msg"))
        return where, message.removeprefix("Value error, ")
    return where, str(error.get("msg", kind)).lower().replace("input should be",
                                                               "must be")


def row_from_build(row: Row | Mapping[str, Any]) -> Row:
    """The :class:`Row` of a row (returned as is) or of a dict of its JSON shape.

    Raises:
        pydantic.ValidationError: the dict does not fit the contract (a bug in the writer).
    """
    return row if isinstance(row, Row) else Row.model_validate(dict(row))
