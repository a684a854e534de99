"""Provider-neutral data shapes shared by every stage (BRIEF §4, §5).

Everything here is plain data: pydantic v2 models that validate the file formats and are
serialised into ``results.jsonl``. No stage-specific logic lives here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

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
    """One chat message of a case (OpenAI-style roles)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


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


class Expected(BaseModel):
    """What a correct answer does: make ``calls``, make no call (``no_call``: nothing fits), or
    ask the user (``ask``: a fitting tool exists but required information is missing, so the
    model should ask instead of guessing; scored as "made no call"). Exactly one of the three.

    ``ordered`` says the calls must come in the listed order; otherwise they are matched as a
    multiset.
    """

    model_config = ConfigDict(extra="forbid")

    calls: list[ExpectedCall] = Field(default_factory=list)
    no_call: StrictBool = False
    ask: StrictBool = False
    ordered: StrictBool = False

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
        return self


class Case(BaseModel):
    """One labeled query (a line of ``datasets/<name>/cases.jsonl``)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    toolset: str = Field(pattern=NAME_PATTERN)
    lang: Literal["zh", "en", "mixed"]
    messages: list[Message] = Field(min_length=1)
    expected: Expected
    tags: list[str] = Field(default_factory=list)
    notes: str | None = None

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
    """

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: Any = None
    notes: list[str] = Field(default_factory=list)
    valid: bool = True
