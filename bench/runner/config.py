"""A run's configuration (:class:`RunConfig`) and the settings a resume may change."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bench.errors import BenchError, FieldValueError, pydantic_error_field
from bench.limits import (
    DEFAULT_ATTEMPTS,
    DEFAULT_CONCURRENCY,
    DEFAULT_PROVIDERS,
    DEFAULT_VARIANTS,
    MAX_ATTEMPTS,
    MAX_CONCURRENCY,
   
    MAX_TRIALS,
)
from bench.providers.cache import (
    CACHE_MODES,
)
from bench.shard import format_shard, parse_shard
from bench.toolset_config import checked_error_pattern

DEFAULT_CACHE_PATH = ("reports", "cache", "responses.sqlite")
# After a stop signal, requests in flight get their SDK timeout plus this (s) to answer; then
# they are cancelled (a stuck one never holds the stop). A second signal cancels them at once.
STOP_GRACE_S = 5.0
# A provider whose requests fail this many times in a row after every retry (no answer between)
# is down: its other items are not sent (they stay pending for --resume); other providers go on.
FAILED_IN_A_ROW_TO_PAUSE = 5
# Settings a resumed run may change (they decide how, not what, is computed).
RESUME_OVERRIDES = ("concurrency", "max_usd", "max_total_tokens", "cache",
                    "cache_path", "pricing", "attempts", "batch", "batch_poll_s",
                    # where the model is found may change (another machine); the model may not:
                    # a resume checks the provider's identity (:func:`provider_identity`)
                    "model", "model_path")
# Fields of :meth:`Provider.describe` that say which model answers; a resumed run must match.
IDENTITY_FIELDS = ("model", "model_sha256")


def identity_mismatch(stored: Sequence[object], current: dict[str, dict[str, Any]]) -> str | None:
    """Why the providers now differ from those a run started with, or None.

    Args:
        stored: the manifest's ``providers`` list (each a :meth:`Provider.describe` dict).
        current: provider id -> its :meth:`Provider.describe` now.

    Returns:
        One clause naming the provider and both values of the first :data:`IDENTITY_FIELDS`
        field that differs (a field missing on either side is not compared), else None.
    """
    for before in stored:
        if not isinstance(before, dict) or before.get("provider") not in current:
            continue
        now = current[before["provider"]]
        for field in IDENTITY_FIELDS:
            if field in before and field in now and before[field] != now[field]:
                preset = before.get("model_preset")
                hint = f" (--model {preset})" if preset else ""
                return (f"provider '{before['provider']}' now has {field} {now[field]!r}, but the "
                        f"run started with {before[field]!r}{hint}")
    return None


class RunConfig(BaseModel):
    """Everything that defines a run (stored in the manifest; ``--resume`` reuses it).

    Attributes:
        dataset: dataset name or path to a ``.jsonl`` file.
        variants: variant names, e.g. ``["l3", "l10", "l30", "l50"]``.
        providers: provider ids, e.g. ``["local"]``; a base URL's ``user:password@`` is
            stored as ``***@`` (:func:`bench.redact.public_provider_id`).
        trials: repetitions per case (>= 1).
        limit: only N cases (None: all): a sample stratified by expected tool (no-call and
            ask cases are strata too), seeded by ``seed``, in dataset order
            (:mod:`bench.datasets.sample`).
        limit_sampling: how ``limit`` picks: ``stratified`` (the sample above) or ``first``
            (the first N in file order: what runs recorded before the sample existed did; a
            resumed run keeps its own).
        split: the dataset split to run: ``dev``, ``test`` or ``all``; None resolves to
            ``all`` when ``case_ids`` names the cases, else ``test`` for a dataset with splits
            and ``all`` for one without
            (:func:`bench.datasets.splits.resolve_split`). A run stores the resolved value;
            runs stored before splits existed read as ``all``.
        case_ids: only these cases (None: all).
        model: the local provider's model preset (None: default).
        model_path: GGUF for the local provider (None: the preset).
        seed: base sampling seed.
        max_tokens: completion cap in tokens.
        no_call_layout: the local provider's "no tool fits" layout (None: its default).
        threads: CPU threads of the local model (None: ``$BENCH_THREADS`` or min(4, cores)).
        tool_choice: HTTP providers: ``auto``, ``required``, ``none`` or a tool name.
        parallel_tool_calls: HTTP providers: allow several calls per answer (None: default).
        openai_strict: OpenAI strict mode for tool schemas.
        stream: HTTP providers: receive answers as server-sent events.
        request_timeout_s: per-request timeout in seconds: HTTP providers, and each call
            of a ``function:`` provider (:mod:`bench.providers.function`).
        concurrency: requests in flight per provider (a provider may allow fewer: ``local``
            runs one at a time).
        attempts: the most attempts per request (429, 5xx and timeouts are retried).
        max_usd: stop the run (status ``budget_exhausted``, resumable) once the billed cost
            reaches this many USD; None: no limit.
        max_total_tokens: the same for prompt + completion tokens billed.
        cache: response cache mode, one of ``off``, ``read``, ``write``, ``readwrite``.
        cache_path: the cache's SQLite file (None: ``reports/cache/responses.sqlite``).
        pricing: a pricing YAML overriding the built-in table (None: built-in, plus
            ``$BENCH_HOME/pricing.yaml`` when present).
        batch: send OpenAI and Anthropic requests through their batch APIs (half price,
            answers within 24 h); other providers run interactively.
        batch_poll_s: seconds between batch status polls.
        execute: run each answer's calls on the reference backends (execution metrics).
        allow_writes / allow_sensitive: let write / sensitive tools run when executing.
        mcp_server: execute on this MCP server (argv, started over stdio) instead of the
            reference backends.
        error_pattern: with ``mcp_server`` (``--error-pattern``): a Python regular
            expression searched in each text result of its tools, a match failing the call
            as a toolset's ``error_pattern`` does (:mod:`bench.toolset_config`); None: only
            ``isError`` fails a call.
        skip_invalid_cases: leave out (and list) the cases whose labels do not fit the
            tools (unknown tool or argument, an acceptable value the schema rejects) instead
            of refusing the dataset.
        shard: ``"i/n"``: run only shard i (1-based) of n of the plan (:mod:`bench.shard`);
            None: the whole plan.
        factors: episode factors to cross with the variants, ``{factor: [settings]}``
            (:data:`bench.episodes.factors.FACTORS`; a factor not named keeps its default).
            Episode cases only; single-answer cases run once per variant.
        tools: tool counts to grow each case's toolset to with distractors (``--tools``,
            :mod:`bench.toolspace.distractors`); empty: the toolsets as they are.
        retrievers: tool retrievers (``--retriever``: ``none``, ``bm25``, ``embedding``,
            :mod:`bench.toolspace.retrieval`; ``native``, ``native-bm25``: the provider's
            own tool search, Anthropic only, :mod:`bench.providers.tool_search`); empty:
            ``none`` (every tool is sent).
        top_k: tools each bm25 / embedding retriever passes to the model (``--top-k``;
            default 5).
        always_loaded: with a native retriever, the tools sent without ``defer_loading``
            (``--always-loaded``); empty: every tool is deferred.
        distractors: the toolsets distractors are drawn from (None: every other toolset
            under ``descriptions/``); only with ``tools`` (a ValueError otherwise).
    """

    dataset: str = "ecommerce"
    variants: list[str] = Field(default_factory=lambda: list(DEFAULT_VARIANTS))
    providers: list[str] = Field(default_factory=lambda: list(DEFAULT_PROVIDERS))
    trials: int = Field(default=1, ge=1, le=MAX_TRIALS)
    limit: int | None = Field(default=None, ge=1)
    limit_sampling: Literal["stratified", "first"] = "stratified"
    split: Literal["dev", "test", "all"] | None = None
    case_ids: list[str] | None = None
    model: str | None = None
    model_path: str | None = None
    seed: int = 1234
    max_tokens: int = Field(default=512, ge=16)
    no_call_layout: str | None = None
    # provider settings (bench.providers; issue 5)
    threads: int | None = Field(default=None, ge=1)
    tool_choice: str = "auto"
    parallel_tool_calls: bool | None = None
    openai_strict: bool = False
    stream: bool = False
    request_timeout_s: float = Field(default=60.0, gt=0)
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY)
    attempts: int = Field(default=DEFAULT_ATTEMPTS, ge=1, le=MAX_ATTEMPTS)
    max_usd: float | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, gt=0)
    cache: str = "off"
    cache_path: str | None = None
    pricing: str | None = None
    batch: bool = False
    batch_poll_s: float = Field(default=30.0, ge=0)
    execute: bool = True
    allow_writes: bool = False
    allow_sensitive: bool = False
    mcp_server: list[str] | None = None
    error_pattern: str | None = Field(default=None, min_length=1)
    skip_invalid_cases: bool = False
    shard: str | None = None
    factors: dict[str, list[str]] = Field(default_factory=dict)
    tools: list[int] = Field(default_factory=list)
    retrievers: list[str] = Field(default_factory=list)
    top_k: list[int] = Field(default_factory=list)
    distractors: list[str] | None = None
    always_loaded: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _tool_space(self) -> "RunConfig":
        from bench.toolspace.space import native_check, space_grid
        space_grid(self.tools, self.retrievers, self.top_k)  # ValueError names the setting
        if self.distractors is not None and not self.tools:
            raise ValueError("--distractors goes with --tools (distractors are drawn only to "
                             "grow a catalog to a tool count)")
        native_check(self.retrievers, self.providers, self.always_loaded)
        return self

    @field_validator("error_pattern")
    @classmethod
    def _a_regular_expression(cls, value: str | None) -> str | None:
        """``error_pattern`` compiles as a toolset's does
        (:func:`bench.toolset_config.checked_error_pattern`)."""
        return checked_error_pattern(value)

    @model_validator(mode="after")
    def _error_pattern_with_a_server(self) -> "RunConfig":
        """``error_pattern`` goes with ``mcp_server``: a project's toolset declares its own
        in its table."""
        if self.error_pattern is not None and not self.mcp_server:
            raise ValueError("--error-pattern goes with --execute-mcp (a toolset of your "
                             "project declares error_pattern in its [tool.bench.toolsets."
                             "<name>] table)")
        return self

    @field_validator("mcp_server")
    @classmethod
    def _secrets_of_mcp_server(cls, value: list[str] | None) -> list[str] | None:
        """Register as secrets what :func:`bench.redact.reference_secrets` finds in the
        server's argv (``--password X``, ``--token X``...: option names that :func:`redact`
        alone does not know), so the manifest and logs of the run never hold them."""
        if value:
            from bench.redact import reference_secrets, register_secret
            try:
                _, found = reference_secrets(value)
            except ValueError:  # a shape redact() masks anyway
                found = {}
            for secret in found.values():
                register_secret(secret)
        return value

    @field_validator("tools", "retrievers", "top_k")
    @classmethod
    def _once(cls, values: list[Any]) -> list[Any]:
        return list(dict.fromkeys(values))

    @field_validator("factors")
    @classmethod
    def _factors(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        """Known factors and settings, each setting once; a bad setting's error is located
        at ``factors.<factor>`` (:class:`FieldValueError`), so that the CLI names the
        factor's option (``--error-style``), not ``--factors``."""
        from bench.episodes.factors import FACTORS, factor_grid
        for name, settings in value.items():
            try:
                factor_grid({name: settings})  # raises ValueError naming the setting
            except ValueError as exc:
                if name not in FACTORS:
                    raise  # an unknown factor: the field itself is wrong
                raise FieldValueError(name, str(exc)) from None
        return {k: list(dict.fromkeys(v)) for k, v in value.items() if v}

    @field_validator("cache")
    @classmethod
    def _cache_mode(cls, value: str) -> str:
        if value not in CACHE_MODES:
            raise ValueError(f"cache mode must be one of {', '.join(CACHE_MODES)}")
        return value

    @field_validator("cache_path", "pricing")
    @classmethod
    def _absolute_file(cls, value: str | None) -> str | None:
        return str(Path(value).resolve()) if value else value

    @field_validator("variants", "providers")
    @classmethod
    def _unique(cls, values: list[str]) -> list[str]:
        if not values:
            raise ValueError("needs at least one name")
        return list(dict.fromkeys(values))  # a name given twice runs once

    @field_validator("providers")
    @classmethod
    def _public_ids(cls, values: list[str]) -> list[str]:
        # credentials in a base URL stay in memory, never in a row key or the manifest
        from bench.redact import public_provider_id
        return list(dict.fromkeys(public_provider_id(v) for v in values))

    @field_validator("shard")
    @classmethod
    def _shard(cls, value: str | None) -> str | None:
        return None if value is None else format_shard(*parse_shard(value))

    @field_validator("dataset")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        # a .jsonl path is stored absolute so that --resume works from any folder
        return str(Path(value).resolve()) if value.endswith(".jsonl") else value


def migrate_stored_config(stored: Mapping[str, object]) -> dict[str, object]:
    """A stored config (``manifest.json``'s ``config``) of any release in the current shape,
    the one place where old runs' settings are read forward (resume, merge, shard, replan):

    - a run from before ``--limit`` sampled took the first N cases (``limit_sampling``
      ``first``);
    - a run from before splits ran every case (``split`` ``all``);
    - the sender processes of an earlier release are gone (``sender_processes`` dropped: one
      event loop now).
    """
    migrated = {"limit_sampling": "first", "split": "all", **stored}
    migrated.pop("sender_processes", None)
    return migrated


def stored_run_config(stored: object, *, file: Path,
                      overrides: Mapping[str, object] | None = None) -> RunConfig:
    """The :class:`RunConfig` of a stored run (:func:`migrate_stored_config`), with
    ``overrides`` (field -> value) applied on top (None values are left out; naming the
    model by ``model`` or ``model_path`` clears the stored other).

    Args:
        stored: the manifest's ``config`` value (anything: checked here).
        file: the manifest, for messages.
        overrides: settings given again (a resume's :data:`RESUME_OVERRIDES`).

    Raises:
        BenchError: the stored config is not an object or does not validate (one line naming
            the manifest and ``config.<field>``).
    """
    if not isinstance(stored, Mapping):
        raise BenchError("config must be an object", file=file, field="config")
    migrated = migrate_stored_config(stored)
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    if "model" in changes or "model_path" in changes:  # one names the model: not both
        migrated.update(model=None, model_path=None)
    try:
        return RunConfig.model_validate({**migrated, **changes})
    except ValidationError as exc:
        field, msg = pydantic_error_field(exc)
        raise BenchError(f"stored config is invalid: {msg}", file=file,
                         field=f"config.{field}") from None


def changed_settings(stored: RunConfig, given: Mapping[str, object],
                     names: Mapping[str, str] | None = None) -> list[tuple[str, object, object]]:
    """The settings of ``given`` that differ from a resumed run's ``stored`` config.

    Each given value is validated as :class:`RunConfig` would store it (a ``.jsonl`` path
    made absolute, names given twice kept once, a shard in canonical form...) and then
    compared, so that a setting given again with its stored value is no change.

    Args:
        stored: the run's config.
        given: :class:`RunConfig` field -> value; ``factors`` holds only the factors given
            (``{factor: [settings]}``), each compared on its own, a factor the run did not
            set as its default setting (what the run ran). Fields in
            :data:`RESUME_OVERRIDES` may change and are skipped.
        names: how an error names a setting (e.g. the CLI's ``--trials``); default its
            field name, ``factors.<factor>`` for a factor.

    Returns:
        ``(setting, stored value, given value)`` per change, in ``given`` order; a factor's
        setting is named ``factors.<factor>`` and its values are its settings' lists.

    Raises:
        BenchError: an unknown field, or a given value :class:`RunConfig` refuses (names the
            setting).
    """
    from bench.episodes.factors import FACTORS  # imports the executor: only when needed

    base = stored.model_dump()
    settings: list[tuple[str, str, Any]] = []  # (setting, RunConfig field, value to check)
    for field, value in given.items():
        if field in RESUME_OVERRIDES:
            continue
        if field not in RunConfig.model_fields:
            raise BenchError(f"unknown run setting '{field}'")
        if field == "factors" and isinstance(value, Mapping):
            settings += [(f"factors.{name}", field, {**stored.factors, name: chosen})
                         for name, chosen in value.items()]
        else:
            settings.append((field, field, value))
    changes: list[tuple[str, Any, Any]] = []
    for setting, field, value in settings:
        try:
            checked = RunConfig.model_validate({**base, field: value})
        except ValidationError as exc:
            where, message = pydantic_error_field(exc)
            # a check across settings (no field) names its options itself, as a new run
            # says it (bench.cli): "--error-pattern goes with --execute-mcp"
            raise BenchError(f"{(names or {}).get(setting, setting)}: {message}" if where
                             else message) from None
        if field == "factors":  # a factor not set runs its default setting alone
            name = setting.partition(".")[2]
            before, after = (config.factors.get(name) or [FACTORS[name][0]]
                             for config in (stored, checked))
        else:
            before, after = getattr(stored, field), getattr(checked, field)
        if before != after:
            changes.append((setting, before, after))
    return changes


def given_mcp_secrets(stored: RunConfig, given: object, run_id: str) -> RunConfig:
    """``stored`` (a resumed run's config) with the MCP server's command line given again,
    when the stored one had secrets redacted (``***``: the manifest stores it as free text,
    :data:`bench.redact.MANIFEST_FREE_TEXT`).

    ``given`` (the setting given again: None, or an argv list) fits when it is a list of as
    many arguments and each equals its stored one with every ``***`` standing for some text; that text is then registered as a secret
    (:func:`bench.redact.register_secret`), so the resumed run's manifest never holds it. A
    ``given`` that does not fit is left to :func:`changed_settings` to name.

    Raises:
        BenchError: the stored command line had secrets and ``given`` is None (names the
            option and how to give it).
    """
    from bench.redact import MARK, register_secret
    argv = stored.mcp_server
    if not argv or not any(MARK in part for part in argv):
        return stored
    if given is None:
        raise BenchError(f"--execute-mcp: the MCP server's command line of '{run_id}' held "
                         f"secrets, which are never stored ({shlex.join(argv)}); resume with "
                         f"it again: bench run --resume {run_id} --execute-mcp "
                         "'<the command line with its secrets>'")
    if not isinstance(given, (list, tuple)) or len(given) != len(argv) \
            or not all(isinstance(mine, str) for mine in given):
        return stored
    found = [re.fullmatch("(.+?)".join(re.escape(piece) for piece in part.split(MARK)),
                          str(mine)) for part, mine in zip(argv, given)]
    matches = [m for m in found if m is not None]
    if len(matches) != len(found):
        return stored
    for match in matches:
        for secret in match.groups():
            register_secret(secret)
    return stored.model_copy(update={"mcp_server": list(given)})


def shown_setting(field: str, value: object) -> str:
    """``value`` of setting ``field`` as a command line would give it: ``not set`` for None,
    lists comma-joined (the MCP server's argv as a shell line), booleans ``true``/``false``."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if field == "mcp_server" and isinstance(value, list):
        return shlex.join(str(v) for v in value)
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
