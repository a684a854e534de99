"""Result rows: one :class:`Row` per line of ``results.jsonl``."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from pydantic import Field, model_validator

from bench.results.answer import RowCall, RowParsed, RowUsage
from bench.results.base import SCHEMA_VERSION, _Record, migrate
from bench.results.episode import RowEpisode
from bench.results.metrics import RowMetrics


class RowExpected(_Record):
    """The case's label as the row stores it (:class:`bench.models.Expected` dumped):
    exactly one of ``calls``, ``no_call``, ``ask``."""

    calls: list[dict[str, Any]] = Field(default_factory=list, description=(
        "expected calls: {name, arguments: {argument: [acceptable values]}}"))
    no_call: bool = Field(default=False, description="nothing fits: the model must not call")
    ask: bool = Field(default=False, description="information is missing: the model should ask")
    ordered: bool = Field(default=False, description="the calls must come in the listed order")
    ask_for: list[list[str]] = Field(default_factory=list, description=(
        "ask cases: what is missing, one list of alternatives per item"))
    not_executable: str | None = Field(default=None, description=(
        "why the label's calls cannot run on their own (absent: they can)"))


class RowRequest(_Record):
    """A summary of what was sent (the adapter's ``ProviderResponse.request`` plus hashes);
    adapters add their own keys (model, tool names, tool_choice...), kept as extras."""

    variant_sha256: str | None = Field(default=None, description="SHA-256 of the variant's tools")
    messages_sha256: str | None = Field(default=None, description="SHA-256 of the case's messages")
    tools_sha256: str | None = Field(default=None, description="SHA-256 of the tools sent "
                                                               "(equals variant_sha256 unless a "
                                                               "retriever picked them)")


class RowResponse(_Record):
    """The provider's answer as received."""

    raw: Any = Field(
        default=None, description="raw answer: text (embedded model) or the JSON body "
                                  "(HTTP providers), as received")
    finish_reason: str | None = Field(
        default=None, description="stop, length, tool_calls... as the "
                                  "provider said")
    request_id: str | None = Field(default=None, description="the provider's request id, if sent")


class Row(_Record):
    """One line of ``results.jsonl``: one planned item (case x variant x provider x trial),
    as :func:`bench.runner.build_row` writes it.

    Required (present, possibly null where typed ``| None``): ``key``, ``case_id``,
    ``toolset``, ``variant``, ``provider``, ``trial``, ``lang``, ``metrics``, ``usage``,
    ``latency_s``. Everything else may be absent (hand-made or early rows).
    """

    schema_version: int = Field(default=SCHEMA_VERSION, description="the contract's version")
    key: str = Field(description="'<case_id>|<variant>|<provider>|<trial>'")
    run_id: str | None = Field(default=None, description="the run that wrote the row")
    case_id: str
    toolset: str
    variant: str = Field(description="variant name (or a report's relabelled '<run>/<name>')")
    provider: str = Field(description="provider id, credentials removed")
    trial: int = Field(ge=0, description="0-based repetition number")
    lang: str | None = Field(description="the case's language (zh, en, mixed)")
    tags: list[str] | None = None
    info: str | None = Field(default=None, description=(
        "the case's information bucket: the lowest description level carrying what it needs "
        "(schema, l10, l30, l50; None: untagged)"))
    query: str | None = Field(default=None, description="the case's last user message")
    expected: RowExpected | None = None
    request: RowRequest | None = None
    response: RowResponse | None = None
    parsed: RowParsed | None = None
    metrics: RowMetrics
    usage: RowUsage | None
    cost_usd: float | None = Field(
        default=None, description="USD, the request's tokens at list price; "
                                  "None without a price")
    billed_usd: float | None = Field(
        default=None, description="USD this run paid for it (0 for cache "
                                  "hits and replays)")
    attempts: int | None = Field(
        default=None, description="requests sent (retries included; 0 for a "
                                  "cache hit)")
    cache: str | None = Field(default=None, description="hit, miss, or None (cache off)")
    tool_definition_tokens: int | None = Field(
        default=None, description="tokens the tool definitions "
                                  "take (provider tokenizer)")
    # >= 0: a hand-edited negative latency showed as a negative p50
    latency_s: float | None = Field(ge=0, description="seconds, wall time of the request")
    finished_at: str | None = Field(
        default=None, description="UTC ISO 8601 time the row was scored")
    factors: dict[str, str] | None = Field(
        default=None, description="an episode's factor settings "
                                  "(bench.episodes.factors)")
    episode: RowEpisode | None = Field(default=None, description="an episode's trajectory")
    tool_count: int | None = Field(default=None, ge=0, description=(
        "tools in the catalog (--tools: own plus distractors; bench.toolspace)"))
    retrieval: dict[str, Any] | None = Field(default=None, description=(
        "tool-space settings and what was sent: {tools, retriever, top_k, tools_offered, "
        "tool_tokens (o200k_base tokens of the tools sent), offered (names; None without a "
        "retriever), expected, missing}"))
    nearest_description: dict[str, Any] | None = Field(default=None, description=(
        "the description unit (example, edge case or quoted phrase) nearest the case's query "
        "in this variant, precomputed: {text, tool, section, similarity (cosine + 0.5 x "
        "Jaccard), mirrored (at or above the paraphrase threshold)}; absent when not "
        "precomputed for this variant and query (bench.descriptions.paraphrase)"))

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: object) -> object:
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

    def extra(self, name: str) -> object:
        """A field outside the contract (kept from the file), or None."""
        return (self.model_extra or {}).get(name)

    def to_json_dict(self) -> dict[str, object]:
        """The row as the JSON object ``results.jsonl`` stores (extras included; fields the
        writer never set are left out, as they were absent from what it built)."""
        return {"schema_version": self.schema_version, **self.model_dump(exclude_unset=True)}


def as_row(row: Row | Mapping[str, object]) -> Row:
    """``row`` as a :class:`Row` (a dict of the row's JSON shape is validated and migrated).

    Raises:
        pydantic.ValidationError: the dict does not fit the contract.
    """
    return row if isinstance(row, Row) else Row.model_validate(row)


def as_rows(rows: Iterable[Row | Mapping[str, object]]) -> list[Row]:
    """:func:`as_row` of each row."""
    return [as_row(r) for r in rows]

