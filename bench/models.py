"""Provider-neutral data shapes shared by every stage (BRIEF §4, §5).

Everything here is plain data: pydantic v2 models that validate the file formats and are
serialised into ``results.jsonl``. No stage-specific logic lives here.
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    field_validator,
    model_serializer,
    model_validator,
)

from bench.errors import FieldValueError

Permission = Literal["read", "write", "sensitive"]
# Names that become folder or file names (toolsets, variants): no separators, no leading dot.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"


class Tool(BaseModel):
    """A canonical tool as the model sees it.

    Attributes:
        name: identifier the model calls (``^[a-zA-Z0-9_-]{1,64}$`` as OpenAI requires).
        description: the prose of one variant (may span many lines).
        input_schema: JSON Schema (draft 2020-12) of the arguments object.
        permission: read / write / sensitive (used by the executor).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str
    input_schema: dict[str, Any]
    permission: Permission = "read"


class Message(BaseModel):
    """One chat message of a case (OpenAI-style roles).

    ``is_error`` marks a tool result that reports a failed call (Anthropic's ``tool_result``
    ``is_error``, Gemini's ``functionResponse.response.error``; APIs without such a flag get
    the text alone).
    """

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    is_error: StrictBool | None = None


class ExpectedCall(BaseModel):
    """One expected tool call.

    ``arguments`` maps each argument name to its list of acceptable values. ``None`` in the list
    means the argument may be omitted. An entry may also be a matcher object: ``{"$regex": "..."}``
    (Python ``re.search``, for SQL and free text) or ``{"$any": true}`` (any value of the right
    schema type). An argument that the label does not list must not be sent.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, list[Any]] = Field(default_factory=dict)


class RecordedResult(BaseModel):
    """What one of a label's calls returned when ``bench labels record`` ran it, with the
    user's consent, on the user's own system (docs/executor.md).

    Attributes:
        name / arguments: the call as run (built from the label: the first literal value of
            each argument), so a later change of the label shows the recording is stale.
        ok: the call returned its own data; False: it failed (``error_code``, ``error``).
        data: the result as the executor passed it to the model (JSON; capped like any
            result).
        schema_sha256: SHA-256 (hex) of the canonical JSON of the tool's input schema when
            the call was recorded (:func:`bench.executor.judge.schema_sha256`), so a changed
            tool shows the recording is stale too; None: recorded before bench stored it,
            which counts as stale (nothing says the tool is still the one recorded).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: StrictBool
    data: Any = None
    error_code: str | None = None
    error: str | None = None
    schema_sha256: str | None = None


class Recording(BaseModel):
    """A label's recorded results (:class:`RecordedResult`, one per expected call, in order)
    and when and where they were recorded (``at``: UTC ISO 8601; ``system``: e.g. ``MCP
    server python notes.py``)."""

    model_config = ConfigDict(extra="forbid")

    at: str
    system: str = ""
    results: list[RecordedResult]


class Expected(BaseModel):
    """What a correct answer does: make ``calls``, make no call (``no_call``: nothing fits), or
    ask the user (``ask``: a fitting tool exists but required information is missing, so the
    model should ask instead of guessing). Exactly one of the three.

    ``ask_for`` (ask cases) names what is missing: one list of alternatives per missing item,
    in zh and en (``[["order id", "order number", "订单号"]]``), matched like an episode's
    ``answer_facts`` (case-folded substrings of the reply); a correct ask makes no call and its
    reply names every item.

    ``ordered`` says the calls must come in the listed order; otherwise they are matched as a
    multiset.
    """

    model_config = ConfigDict(extra="forbid")

    calls: list[ExpectedCall] = Field(default_factory=list)
    no_call: StrictBool = False
    ask: StrictBool = False
    ask_for: list[list[str]] = Field(default_factory=list)
    ordered: StrictBool = False
    #: the results of ``calls`` recorded on the user's system (``bench labels record``);
    #: absent in files written before it, and for labels never recorded
    recorded: Recording | None = None
    #: why the label's calls cannot run on their own (None: they can), e.g. an argument is
    #: a result id that a call in the conversation's history issued, which a single reference
    #: run of the label never has: its rows get no exec match (``execution_match_skipped``
    #: ``label_not_executable``) and ``bench lint`` does not run it (docs/executor.md)
    not_executable: str | None = Field(default=None, min_length=1)

    @field_validator("ask_for")
    @classmethod
    def _ask_for_alternatives(cls, value: list[list[str]]) -> list[list[str]]:
        for i, alternatives in enumerate(value):
            if not alternatives or not all(a.strip() for a in alternatives):
                raise ValueError(f"ask_for[{i}] needs one or more non-empty alternatives")
        return value

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> "Expected":
        kinds = [k for k, on in (("calls", bool(self.calls)), ("no_call", self.no_call),
                                 ("ask", self.ask)) if on]
        if len(kinds) > 1:
            raise ValueError(f"a case expects exactly one of 'calls', 'no_call', 'ask'; "
                             f"got {' and '.join(kinds)}")
        if not kinds:
            raise ValueError("expected needs 'calls' (a non-empty list), 'no_call': true "
                             "or 'ask': true")
        if self.ask_for and not self.ask:
            raise ValueError("ask_for is only for 'ask': true cases")
        if self.recorded is not None and not self.calls:
            raise ValueError("recorded results are only for cases that expect calls")
        if self.not_executable is not None and not self.calls:
            raise ValueError("not_executable is only for cases that expect calls")
        if self.not_executable is not None and not self.not_executable.strip():
            # it turns the label's exec scores off: a blank reason would hide a broken label
            raise ValueError("not_executable needs a reason (why the calls cannot run alone)")
        return self


MAX_EPISODE_STEPS = 50
DEFAULT_EPISODE_STEPS = 8
CONDITION_SEPARATOR = "~"
"""Joins a variant's name and an episode factor setting into a condition's name
(``l3~error_style=bare``, :mod:`bench.episodes.factors`)."""


def condition_variant(name: str) -> str:
    """The variant of a condition's name (``"l3~fault=503"`` -> ``"l3"``)."""
    return name.split(CONDITION_SEPARATOR, 1)[0]


class RequiredCall(ExpectedCall):
    """A call an episode must make: a made call matches it when the names agree and every
    listed argument has an acceptable value (as in :class:`ExpectedCall`); arguments the
    label does not list are free, unlike a single answer's label. ``after`` lists the indices
    of required calls that must have happened before it (order constraints only where the
    label says so, BRIEF §10).

    ``example`` (optional) is one whole arguments object that satisfies the label and the
    tool's JSON Schema (the required arguments the label leaves free included): what the
    ``oracle`` provider sends, so that the label is shown to be satisfiable. An argument it
    lacks that the schema requires is taken by the oracle from the latest tool result's field
    of the same name (a ``result_id`` from an earlier call)."""

    after: list[StrictInt] = Field(default_factory=list)
    example: dict[str, Any] | None = None


class ForbiddenCall(BaseModel):
    """A call an episode must not attempt: ``name``, and optionally the argument values that
    make it forbidden (acceptable-values lists as in :class:`ExpectedCall`; none: any call of
    the tool). ``until_confirmed``: forbidden only before the episode's first scripted user
    reply (a write that needs the user's confirmation: asking first, then writing, is right).
    ``reason`` says why (shown in reports), e.g. "the user did not confirm"."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, list[Any]] = Field(default_factory=dict)
    until_confirmed: StrictBool = False
    reason: str | None = None


class StateCheck(BaseModel):
    """One query on the episode's own database copy after the episode, and its expected
    rows (``[[value, ...], ...]``, compared in order as JSON values)."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1)
    expect: list[list[Any]]


class EpisodeState(BaseModel):
    """The reference backends' starting state of one case: the seeded shop database
    (:mod:`bench.executor.backends.shopdb`) plus ``overrides``, SQL statements run on the
    case's private copy (an episode's before its first step; a single-answer case's before
    the label's and the model's calls, each of which sees that state: their writes are rolled
    back, :mod:`bench.executor.backends.states`); ``user_id`` is the signed-in customer (None:
    the staff view). Only bench's reference backends apply it (a user's system is never
    changed by a label, docs/executor.md)."""

    model_config = ConfigDict(extra="forbid")

    overrides: list[str] = Field(default_factory=list)
    user_id: str | None = None


CaseState = EpisodeState
"""The name of :class:`EpisodeState` for a case of either kind."""


class SuccessCheck(BaseModel):
    """What a finished task looks like: every ``state_checks`` query returns its rows, and
    the final answer states every fact of ``answer_facts`` (each fact a list of alternative
    strings, matched case-insensitively as substrings, any one suffices)."""

    model_config = ConfigDict(extra="forbid")

    state_checks: list[StateCheck] = Field(default_factory=list)
    answer_facts: list[list[str]] = Field(default_factory=list)

    @field_validator("answer_facts")
    @classmethod
    def _facts_have_alternatives(cls, value: list[list[str]]) -> list[list[str]]:
        for i, fact in enumerate(value):
            if not fact:
                raise FieldValueError(str(i), "a fact needs at least one alternative")
            for k, alt in enumerate(fact):
                if not alt.strip():
                    raise FieldValueError(f"{i}.{k}", "an alternative cannot be empty")
        return value


class Review(BaseModel):
    """A person's verdict on a generated case (``bench review``): ``accepted`` as generated,
    or ``fixed`` (the reviewer corrected its label or query). Rejected cases leave the
    dataset, so they never carry one. ``date`` is ISO 8601 (``2026-12-03``)."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["accepted", "fixed"]
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}")
    reviewer: str | None = None
    note: str | None = None


class Provenance(BaseModel):
    """Where a generated case (``bench synth``, :mod:`bench.synth`) comes from.

    Attributes:
        generator: the provider id that proposed it.
        template: the prompt template's name (``single.j2``...) and ``template_sha256`` the
            SHA-256 of its source; ``prompt_sha256``: of the rendered prompt messages.
        seed: the generation request's seed (its trial index is ``seed``'s offset).
        run_id: the generator's run (its answers are kept there).
        verdicts: each verification check -> ``pass``, ``fail: <why>`` or ``skipped: <why>``.
        review: the person's verdict; None until reviewed (an unreviewed case stays ``dev``).
    """

    model_config = ConfigDict(extra="forbid")

    generator: str
    template: str
    template_sha256: str
    prompt_sha256: str
    seed: int
    run_id: str | None = None
    verdicts: dict[str, str] = Field(default_factory=dict)
    review: Review | None = None


class Case(BaseModel):
    """One labeled query (a line of ``datasets/<name>/cases.jsonl``).

    ``kind`` ``"single"`` (the default) scores the first answer against ``expected``. An
    ``"episode"`` runs the whole tool loop (BRIEF §10): ``state``, ``success``,
    ``required_calls``, ``forbidden_calls``, ``max_steps`` (1-50) and ``user_replies``
    (scripted user turns sent, in order, when the model answers without a call before the
    task is done); its ``expected`` is derived from the validated ``required_calls`` (the
    first answer's label is not what an episode is scored on, but the label checks read it,
    by the same indices) and must not be given. ``state`` (:class:`CaseState`) is for either
    kind: a single-answer case's label and the model's calls run on a copy of the shop
    database with its overrides (the state the query assumes, e.g. an unshipped order).

    Errors name the field as written in the file (``required_calls.0.after.1``, never the
    derived ``expected``), through :class:`bench.errors.FieldValueError`.

    ``split`` is ``dev`` (may inform descriptions, prompts and optimizers) or ``test`` (what
    figures are reported on); None in datasets without splits (:mod:`bench.datasets.splits`).
    ``info`` is the information bucket: the lowest description level whose text carries what
    the case needs (``schema``: names and JSON Schema alone, as l3 shows them; ``l10``,
    ``l30``, ``l50``); None when not tagged.

    ``provenance`` marks a generated case (:class:`Provenance`); until a person reviewed it
    (``provenance.review``) it may only be in ``dev``: figures on ``test`` rest on labels a
    person checked.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    toolset: str = Field(pattern=NAME_PATTERN)
    lang: Literal["zh", "en", "mixed"]
    split: Literal["dev", "test"] | None = None
    info: Literal["schema", "l10", "l30", "l50"] | None = None
    messages: list[Message] = Field(min_length=1)
    expected: Expected
    tags: list[str] = Field(default_factory=list)
    notes: str | None = None
    kind: Literal["single", "episode"] = "single"
    state: EpisodeState | None = None
    success: SuccessCheck | None = None
    required_calls: list[RequiredCall] = Field(default_factory=list)
    forbidden_calls: list[ForbiddenCall] = Field(default_factory=list)
    max_steps: int = Field(default=DEFAULT_EPISODE_STEPS, ge=1, le=MAX_EPISODE_STEPS, strict=True)
    user_replies: list[str] = Field(default_factory=list)
    provenance: Provenance | None = None

    @model_validator(mode="before")
    @classmethod
    def _episode_expected(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind", "single") not in ("single", "episode"):
            # said before pydantic's own errors, whose first would be "expected: Field
            # required" for a mistyped "Episode"
            raise FieldValueError("kind", f"kind must be \"single\" or \"episode\", got "
                                          f"{data['kind']!r}")
        if not isinstance(data, dict) or data.get("kind") != "episode":
            return data
        if "expected" in data:
            raise FieldValueError("expected", "an episode case has no 'expected' (it is "
                                  "scored on 'success', 'required_calls' and "
                                  "'forbidden_calls')")
        # a placeholder, replaced from the validated required calls (_episode_fields): built
        # from the raw ones, their errors would be named expected.calls.<i>
        return {**data, "expected": {"no_call": True}}

    @model_validator(mode="after")
    def _unreviewed_only_dev(self) -> "Case":
        if self.provenance is not None and self.provenance.review is None \
                and self.split == "test":
            raise FieldValueError("split", "a generated case nobody reviewed (provenance "
                                  "without review) may only be in dev: review it with "
                                  "'bench review' first")
        return self

    @model_validator(mode="after")
    def _episode_fields(self) -> "Case":
        episode_only = ("success", "required_calls", "forbidden_calls", "user_replies")
        if self.kind == "single":
            given = [f for f in episode_only if getattr(self, f)]
            # max_steps at its default is what a dump of any case holds: only a set one is
            given += ["max_steps"] if self.max_steps != DEFAULT_EPISODE_STEPS else []
            if given:
                raise FieldValueError(given[0], f"{', '.join(given)}: only for "
                                      "\"kind\": \"episode\" cases")
            return self
        if self.success is None or not (self.success.state_checks
                                        or self.success.answer_facts):
            raise FieldValueError("success", "an episode needs 'success' with state_checks "
                                  "and/or answer_facts")
        for i, call in enumerate(self.required_calls):
            for k, j in enumerate(call.after):
                if not 0 <= j < len(self.required_calls) or j == i:
                    raise FieldValueError(f"required_calls.{i}.after.{k}", f"{j} is not the "
                                          "index of another required call")
        try:  # a cycle (0 after 1, 1 after 0) is an order no trajectory can keep
            TopologicalSorter({i: c.after for i, c in
                               enumerate(self.required_calls)}).prepare()
        except CycleError as exc:
            cycle = exc.args[1]
            raise FieldValueError(f"required_calls.{cycle[0]}.after",
                                  f"the 'after' constraints form a cycle "
                                  f"({' -> '.join(map(str, cycle))})") from None
        self.expected = Expected(
            calls=[ExpectedCall(name=c.name, arguments=c.arguments) for c in self.required_calls]
        ) if self.required_calls else Expected(no_call=True)
        return self

    @field_validator("id")
    @classmethod
    def _id_fits_row_keys(cls, value: str) -> str:
        # result rows are keyed case|variant|provider|trial (bench.runner.PlanItem.key)
        if "|" in value or "\n" in value or "\r" in value:
            raise ValueError("must not contain '|' or a line break (result rows are keyed "
                             "'case|variant|provider|trial')")
        return value

    @property
    def query(self) -> str:
        """The last user message's text (what the table and reports show)."""
        for message in reversed(self.messages):
            if message.role == "user" and message.content:
                return message.content
        return ""


class ToolCall(BaseModel):
    """One tool call parsed from a provider's answer (BRIEF §4).

    Attributes:
        id: the provider's call id, or ``call_<index>`` when it gives none.
        name: the tool name as received.
        arguments: decoded arguments (dict); ``{}`` only when the model truly sent no arguments.
        raw_arguments: the exact string or object received.
        notes: decode notes (e.g. ``"truncated"``, ``"double_encoded"``).
        valid: False when the arguments could not be decoded into an object.
        signature: an opaque token the provider wants sent back with this call in the later
            turns of the conversation, unchanged (Gemini's ``thoughtSignature``, base64 text;
            Gemini 3 answers HTTP 400 to a history without it). None for most calls, and
            then left out of dumps.
    """

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: Any = None
    notes: list[str] = Field(default_factory=list)
    valid: bool = True
    signature: str | None = None

    @model_serializer(mode="wrap")
    def _without_empty_signature(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("signature") is None:
            data.pop("signature", None)  # rows and cache entries stay as they were
        return data
