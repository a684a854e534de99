"""What the generator is asked for and how its answer becomes a labeled case.

The generator is any bench provider, shown three tools of its own (:func:`generator_tools`):
``propose_call_case`` (a request that needs one or more calls, with those calls),
``propose_no_call_case`` (a request no tool serves) and ``propose_ask_case`` (a request that
needs a tool but lacks a required argument). Its answer is parsed by bench's own parser like
any model answer; each call's arguments are then validated with the pydantic models below
(:func:`parse_proposal`), so a malformed proposal is counted, never guessed at.

Labels (:func:`label_for`) follow docs/datasets-and-labels.md: each argument the proposal sends
lists that value as its one acceptable value; an argument equal to its schema ``default``, or an
optional argument left out that has a ``default``, also accepts ``null`` (omitting it means the
default). Every other argument left out must not be sent, as in the shipped datasets.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.errors import pydantic_error_field
from bench.models import Expected, ExpectedCall, Tool

Kind = Literal["single", "multiple", "parallel", "no_call", "ask"]
#: The kinds ``bench synth`` can ask for, in report order.
KINDS: tuple[Kind, ...] = ("single", "multiple", "parallel", "no_call", "ask")
#: The dataset category tag (:data:`bench.datasets.stats.CATEGORIES`) of each kind: one call
#: is ``simple`` (``multiple``, BFCL's name, when the request is a distractor phrasing among
#: look-alike tools), several calls of one tool ``parallel``, of several tools
#: ``parallel-multiple``.
CATEGORY = {"single": "simple", "multiple": "parallel-multiple", "parallel": "parallel",
            "no_call": "no_call", "ask": "ask"}
#: Languages a case can have (:class:`bench.models.Case` ``lang``) and how prompts name them.
LANGUAGES = {"en": "English", "zh": "Chinese (简体中文)",
             "mixed": "Chinese with some English words mixed in"}

CALL_TOOL = "propose_call_case"
NO_CALL_TOOL = "propose_no_call_case"
ASK_TOOL = "propose_ask_case"
#: The generator tool each kind must call.
TOOL_OF_KIND: dict[str, str] = {"single": CALL_TOOL, "multiple": CALL_TOOL,
                                "parallel": CALL_TOOL, "no_call": NO_CALL_TOOL,
                                "ask": ASK_TOOL}
MAX_QUERY_CHARS = 2000


class ProposedCall(BaseModel):
    """One call the proposed request needs: a tool of the toolset and its arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class CallProposal(BaseModel):
    """``propose_call_case``: the user's request and the calls a correct assistant makes."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    calls: list[ProposedCall] = Field(min_length=1, max_length=8)


class NoCallProposal(BaseModel):
    """``propose_no_call_case``: a request no tool serves; ``near_miss_tool`` names the tool
    it resembles when ``reason`` is ``near_miss``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    reason: Literal["out_of_scope", "near_miss"] = "out_of_scope"
    near_miss_tool: str | None = None


class AskProposal(BaseModel):
    """``propose_ask_case``: a request for ``tool`` that lacks the required arguments named
    in ``missing``, so a correct assistant asks for them."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    tool: str = Field(min_length=1)
    missing: list[str] = Field(min_length=1, max_length=4)


Proposal = CallProposal | NoCallProposal | AskProposal
_MODELS: dict[str, type[BaseModel]] = {CALL_TOOL: CallProposal, NO_CALL_TOOL: NoCallProposal,
                                       ASK_TOOL: AskProposal}


def generator_tools(tools: Sequence[Tool]) -> list[Tool]:
    """The generator's three tools for a toolset whose tools are ``tools``.

    Tool names are enums of the toolset's names, so a tool-calling model cannot invent one;
    arguments are free objects (the prompt shows each tool's parameters), so the label check
    (:mod:`bench.datasets.labels`) still has something to catch.
    """
    names = sorted(t.name for t in tools)
    required = sorted({r for t in tools for r in t.input_schema.get("required", [])})
    call = {"type": "object", "properties": {
        "name": {"type": "string", "enum": names},
        "arguments": {"type": "object", "description": "the call's arguments"}},
        "required": ["name", "arguments"], "additionalProperties": False}
    query = {"type": "string", "description": "the user's message, in the asked language"}
    return [
        Tool(name=CALL_TOOL, description=(
            "Propose one test request for an assistant that has the listed tools, with the "
            "tool calls a correct assistant makes for it (every required argument given, "
            "values exactly as the request implies)."),
            input_schema={"type": "object", "properties": {
                "query": query, "calls": {"type": "array", "items": call, "minItems": 1}},
                "required": ["query", "calls"], "additionalProperties": False}),
        Tool(name=NO_CALL_TOOL, description=(
            "Propose one test request that none of the listed tools can serve: a correct "
            "assistant answers without calling a tool."),
            input_schema={"type": "object", "properties": {
                "query": query,
                "reason": {"type": "string", "enum": ["out_of_scope", "near_miss"]},
                "near_miss_tool": {"type": "string", "enum": names}},
                "required": ["query", "reason"], "additionalProperties": False}),
        Tool(name=ASK_TOOL, description=(
            "Propose one test request that needs one of the listed tools but leaves out a "
            "required argument, so a correct assistant asks the user for it."),
            input_schema={"type": "object", "properties": {
                "query": query, "tool": {"type": "string", "enum": names},
                "missing": {"type": "array", "items": {"type": "string", "enum": required}
                            if required else {"type": "string"}, "minItems": 1}},
                "required": ["query", "tool", "missing"], "additionalProperties": False}),
    ]


def parse_proposal(kind: str, name: str | None, arguments: object) -> Proposal | str:
    """The proposal in one generator call, or why it is not one (a one-line reason).

    Args:
        kind: the kind asked for (:data:`KINDS`).
        name: the generator tool called.
        arguments: the call's decoded arguments.
    """
    want = TOOL_OF_KIND[kind]
    if name != want:
        return f"called {name!r}, not {want!r}"
    try:
        parsed = _MODELS[want].model_validate(arguments)
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        return f"{field}: {message}" if field else message
    return parsed  # type: ignore[return-value]


def _acceptable(value: Any, schema: dict[str, Any]) -> list[Any]:
    if "default" in schema and value == schema["default"]:
        return [value, None]
    return [value]


def label_for(kind: str, proposal: Proposal, tools: Sequence[Tool]) -> Expected:
    """The case label of a valid proposal (see the module docstring for the rules).

    ``ask`` labels name each missing argument as the reply must: the argument's name, with
    spaces for underscores (``order_id`` -> ``order id``), matched as the scorer matches
    ``ask_for`` (case-folded substrings).
    """
    by_name = {t.name: t for t in tools}
    if isinstance(proposal, NoCallProposal):
        return Expected(no_call=True)
    if isinstance(proposal, AskProposal):
        return Expected(ask=True, ask_for=[sorted({m, m.replace("_", " ")})
                                           for m in proposal.missing])
    calls = []
    for call in proposal.calls:
        properties = by_name[call.name].input_schema.get("properties", {}) \
            if call.name in by_name else {}
        arguments = {k: _acceptable(v, properties.get(k, {})) for k, v in call.arguments.items()}
        for arg, schema in properties.items():
            if arg not in arguments and isinstance(schema, dict) and "default" in schema:
                arguments[arg] = [schema["default"], None]
        calls.append(ExpectedCall(name=call.name, arguments=arguments))
    return Expected(calls=calls)


def shape_problem(kind: str, proposal: Proposal, tools: Sequence[Tool]) -> str | None:
    """Why a valid proposal does not have the asked kind's shape, or None.

    ``single``: one call; ``parallel``: two or more calls of one tool; ``multiple``: calls
    of two or more different tools; ``ask``: the missing arguments are required by the tool
    (else nothing needs asking); ``no_call``: a ``near_miss`` names a tool of the toolset.
    """
    by_name = {t.name: t for t in tools}
    if isinstance(proposal, CallProposal):
        names = [c.name for c in proposal.calls]
        if kind == "single" and len(names) != 1:
            return f"single: {len(names)} calls, not 1"
        if kind == "parallel" and (len(names) < 2 or len(set(names)) != 1):
            return f"parallel: needs 2 or more calls of one tool, got {names}"
        if kind == "multiple" and len(set(names)) < 2:
            return f"multiple: needs calls of 2 or more tools, got {names}"
        return None
    if isinstance(proposal, AskProposal):
        tool = by_name.get(proposal.tool)
        if tool is None:
            return f"ask: unknown tool {proposal.tool!r}"
        required = set(tool.input_schema.get("required", []))
        extra = [m for m in proposal.missing if m not in required]
        if extra:
            return (f"ask: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not a "
                    f"required argument of {tool.name} (required: "
                    f"{', '.join(sorted(required)) or 'none'})")
        return None
    if proposal.reason == "near_miss" and proposal.near_miss_tool not in by_name:
        return f"no_call: near_miss without a tool of the toolset ({proposal.near_miss_tool!r})"
    return None


def missing_required(expected: Expected, tools: Sequence[Tool]) -> str | None:
    """The first expected call that leaves out an argument its tool requires (the label's
    call would not validate), as one line; None when every call has them all."""
    by_name = {t.name: t for t in tools}
    for i, call in enumerate(expected.calls):
        tool = by_name.get(call.name)
        if tool is None:
            continue
        absent = [r for r in tool.input_schema.get("required", [])
                  if r not in call.arguments or call.arguments[r] == [None]]
        if absent:
            return (f"expected.calls.{i}: {call.name} requires {', '.join(absent)}, which the "
                    "proposal leaves out")
    return None


def proposal_json(proposal: Proposal) -> str:
    """The proposal as canonical JSON text (for ids and provenance)."""
    return json.dumps(proposal.model_dump(), sort_keys=True, ensure_ascii=False)
