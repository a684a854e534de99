"""The proposer's structured output: one :class:`Proposal` per tool, asked for as a call of
the ``propose_edit`` tool and validated with pydantic.

Asking for the edit as a tool call is the usual way to get JSON that follows a schema from any
tool-calling model (Anthropic's "tool use for JSON output", OpenAI's function calling), and it
lets the embedded model's grammar-constrained decoder produce it. A proposer that answers in
prose may put the same JSON object in its text instead. Anything else is a counted rejection
(:class:`Rejected`), never a crash: model output is untrusted.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.models import Tool
from bench.results import Row

#: The tool the proposer calls; also the toolset folder its requests are run under.
PROPOSE_TOOL = "propose_edit"
PROPOSER_TOOLSET = "optimizer"
#: Longest description accepted from a proposer (characters): a guard against runaway output;
#: the token budget is the real limit.
MAX_DESCRIPTION_CHARS = 6000
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class Proposal(BaseModel):
    """One proposed edit of one tool.

    Attributes:
        tool: the tool edited.
        description: its new description (None: unchanged).
        parameters: top-level parameter name -> its new description.
        reason: why, in the proposer's words (shown in the report, HTML-escaped).
    """

    model_config = ConfigDict(extra="ignore")

    tool: str
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    parameters: dict[str, str] = Field(default_factory=dict)
    reason: str = ""


class Rejected(Exception):
    """A proposal that cannot be used; the message says why (one line), ``kind`` is
    ``unparseable`` (not a usable proposal) or ``no-op`` (it changes nothing)."""

    def __init__(self, message: str, kind: str = "unparseable") -> None:
        super().__init__(message)
        self.kind = kind


def propose_tool(tool_names: Sequence[str]) -> Tool:
    """The ``propose_edit`` tool offered to the proposer, its schema the :class:`Proposal`'s
    (``tool`` limited to ``tool_names``)."""
    return Tool(name=PROPOSE_TOOL, description=(
        "Submit an improved description for one tool. 'description' replaces the tool's "
        "whole description; 'parameters' maps a parameter name to its new description; "
        "'reason' says which failures the edit fixes and why."),
        input_schema={
            "type": "object",
            "properties": {
                "tool": {"type": "string", "enum": list(tool_names),
                         "description": "the tool whose description you rewrite"},
                "description": {"type": "string",
                                "description": "the complete new description"},
                "parameters": {"type": "object", "additionalProperties": {"type": "string"},
                               "description": "parameter name -> new description"},
                "reason": {"type": "string", "description": "why this edit fixes the failures"},
            },
            "required": ["tool", "description", "reason"],
        })


def proposal_from_row(row: Row, tool: str) -> Proposal:
    """The proposal a proposer's answer row holds for ``tool``.

    Reads the first ``propose_edit`` call's arguments, else a JSON object in the answer's
    text.

    Raises:
        Rejected: no call and no JSON object, JSON that does not fit :class:`Proposal`, or an
            edit of another tool.
    """
    data: Any = None
    for call in row.calls():
        if call.name == PROPOSE_TOOL and isinstance(call.arguments, dict) and call.valid:
            data = dict(call.arguments)
            break
    if data is None:
        text = (row.parsed.text if row.parsed else None) or ""
        if not text and row.response is not None and isinstance(row.response.raw, str):
            text = row.response.raw
        match = _JSON_OBJECT.search(text)
        try:
            data = json.loads(match.group(0)) if match else None
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, dict):
        reason = row.parsed.error if row.parsed and row.parsed.error else "no propose_edit call"
        raise Rejected(f"unparseable proposal: {reason}")
    data.setdefault("tool", tool)
    try:
        proposal = Proposal.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first.get("loc", ()))) or "proposal"
        raise Rejected(f"unparseable proposal: {where}: {first.get('msg')}") from None
    if proposal.tool != tool:
        raise Rejected(f"the proposal edits '{proposal.tool}', not '{tool}'")
    return proposal


def apply_proposal(tools: Sequence[Tool], proposal: Proposal) -> list[Tool]:
    """``tools`` with ``proposal`` applied (copies; the input is not changed).

    Raises:
        Rejected: an unknown tool or parameter, or an edit that changes nothing.
    """
    out: list[Tool] = []
    found = False
    for tool in tools:
        if tool.name != proposal.tool:
            out.append(tool)
            continue
        found = True
        schema = json.loads(json.dumps(tool.input_schema))
        properties = schema.get("properties") or {}
        for name, text in sorted(proposal.parameters.items()):
            if not isinstance(properties.get(name), dict):
                raise Rejected(f"'{tool.name}' has no parameter '{name}'")
            properties[name]["description"] = text
        description = proposal.description.strip() if proposal.description else tool.description
        if not description:
            raise Rejected(f"the proposal leaves '{tool.name}' without a description")
        out.append(tool.model_copy(update={"description": description,
                                           "input_schema": schema}))
    if not found:
        raise Rejected(f"unknown tool '{proposal.tool}'")
    if [t.model_dump() for t in out] == [t.model_dump() for t in tools]:
        raise Rejected(f"the proposal does not change '{proposal.tool}'", "no-op")
    return out
