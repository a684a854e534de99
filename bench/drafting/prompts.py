"""The requests of ``bench variants draft`` (:mod:`bench.drafting`): the prompt and answer
tool of a whole text (:func:`draft_prompt`, :func:`draft_tool`) and of one section line
(:func:`section_prompt`, :func:`section_tool`, :func:`examples_tool`), and the questions a
section asks about a tool (:func:`section_questions`, from
:data:`bench.descriptions.draft_wording.SECTIONS`)."""

from __future__ import annotations

from typing import Any

from bench.descriptions.draft_wording import (DRAFT_TOOL, EXAMPLES_TOOL, QUESTION_RULES,
                                              SECTION_TOOL, Section)
from bench.models import Tool

# What each length should hold; the same order of content as the shipped templates
# (descriptions/templates/l3.j2 ... l50.j2): the purpose first, then parameters, usage
# boundaries, then examples and edge cases.
_CONTENT = {
    3: "what the tool does and when to use it, and its one or two key parameters",
    10: "what it does, when to use it and when not to, and one line per parameter (type, "
        "allowed values, default)",
    30: "purpose, when to use and when not to, every parameter with its type, allowed values, "
        "defaults and bounds, what it returns, and its errors",
    50: "purpose, when to use and when not to, every parameter in detail, constraints, "
        "business context, what it returns, its errors, two or three example requests with "
        "the arguments they need, and edge cases",
}


def asked_range(lines: int) -> tuple[int, int]:
    """The range of non-empty lines the prompt asks for around ``lines`` (about +-30 %)."""
    return max(1, round(lines * 0.7)), round(lines * 1.3) + 1


def draft_tool(lines: int) -> Tool:
    """The one tool a drafting request offers: ``write_description(lines: [str, ...])`` with
    :func:`asked_range` as ``minItems``/``maxItems``."""
    low, high = asked_range(lines)
    return Tool(name=DRAFT_TOOL, description=(
        "Write the tool description you were asked for: each item of `lines` is one line of "
        "its plain text."), input_schema={
        "type": "object", "properties": {"lines": {
            "type": "array", "items": {"type": "string"}, "minItems": low, "maxItems": high,
            "description": f"The description, one line per item, {low} to {high} lines."}},
        "required": ["lines"], "additionalProperties": False})


def parameter_lines(schema: dict[str, Any]) -> list[str]:
    """One plain line per top-level property of ``schema``: name, type, required or not, the
    enum, default and bounds, and its description (a small model copies JSON it is shown)."""
    required = set(schema.get("required") or [])
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        facts = [str(prop.get("type", "any")), "required" if name in required else "optional"]
        for key in ("enum", "default", "minimum", "maximum", "pattern", "format"):
            if key in prop:
                facts.append(f"{key} {prop[key]}")
        text = f"- {name} ({', '.join(facts)})"
        if prop.get("description"):
            text += f": {prop['description']}"
        lines.append(text)
    return lines or ["(no parameters)"]


def draft_prompt(tool: Tool, lines: int) -> str:
    """The request that drafts ``tool``'s description at about ``lines`` lines.

    It gives the current description and the parameters, one plain line each (with the
    property descriptions: a drafted variant is sent without them, so the text must carry
    what the length allows), and asks for plain text only, and for nothing the source does
    not support.
    """
    closest = min(_CONTENT, key=lambda n: abs(n - lines))
    low, high = asked_range(lines)
    return (
        f"Rewrite the description of the tool `{tool.name}` for an AI model that chooses tools "
        f"and fills in their arguments. Write about {lines} non-empty lines (between "
        f"{low} and {high}), covering {_CONTENT[closest]}.\n"
        "Use only facts stated in the current description or the parameters below; never "
        "invent behaviour, limits, defaults or values. Plain text, one fact per line, no "
        f"Markdown headings, no code fences. Answer by calling {DRAFT_TOOL} with the "
        "description's lines, or with the description only.\n\n"
        f"Current description:\n{tool.description.strip() or '(none)'}\n\n"
        "Parameters:\n" + "\n".join(parameter_lines(tool.input_schema)) + "\n")


def section_questions(section: Section, tool: Tool) -> list[str]:
    """Every question ``section`` may ask about ``tool``: :attr:`Section.questions`, then
    :attr:`Section.per_parameter` for each top-level parameter (interleaved per question:
    each parameter's first question, then each one's second...)."""
    names = list((tool.input_schema.get("properties") or {}))
    found = [q.replace("{p}", name) for q in section.per_parameter for name in names]
    return [q.replace("{tool}", tool.name) for q in list(section.questions) + found]


def section_tool() -> Tool:
    """The tool a section question offers: ``write_section(lines: [str])``, one line."""
    return Tool(name=SECTION_TOOL, description=(
        "Write the answer you were asked for: one line, the one item of `lines`."),
        input_schema={"type": "object", "properties": {"lines": {
            "type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1,
            "description": "The answer: one line."}},
            "required": ["lines"], "additionalProperties": False})


def examples_tool(tool: Tool, count: int) -> Tool:
    """The tool an examples request offers: ``write_examples(examples: [{request,
    arguments}] x count)``, ``arguments`` being ``tool``'s own input schema (its ``$defs``
    moved to the root, where its ``$ref`` point), so that the embedded model's grammar holds
    the arguments to the schema."""
    schema = {k: v for k, v in tool.input_schema.items() if k not in ("$schema", "$id")}
    defs: dict[str, Any] = {k: schema.pop(k) for k in ("$defs", "definitions") if k in schema}
    item = {"type": "object", "properties": {"request": {"type": "string"},
                                             "arguments": schema},
            "required": ["request", "arguments"], "additionalProperties": False}
    return Tool(name=EXAMPLES_TOOL, description=(
        "Write the examples you were asked for: a user's request and the arguments of the "
        f"call of `{tool.name}` it needs."), input_schema={
        "type": "object", "properties": {"examples": {
            "type": "array", "items": item, "minItems": count, "maxItems": count}},
        "required": ["examples"], "additionalProperties": False, **defs})


def section_prompt(tool: Tool, section: Section, question: str) -> str:
    """The request for one line of ``section``: the rules, the ``question``
    (:func:`section_questions`), then ``tool``'s current description and parameters (one
    plain line each) as the facts to use. Nothing else: the embedded 0.5B model copied any
    other text it was shown (headings, other sections, an example answer, the answers it was
    told not to repeat) into its line; with the question last, it copied the question."""
    answer = EXAMPLES_TOOL if section.key == "examples" else SECTION_TOOL
    return (QUESTION_RULES.format(answer=answer) + f"\nQuestion: {question}\n\n"
            f"Facts:\nTool `{tool.name}`: {tool.description.strip() or '(no description)'}\n"
            "Parameters:\n" + "\n".join(parameter_lines(tool.input_schema)) + "\n")
