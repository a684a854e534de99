"""Drafted description lengths for any toolset: ``bench variants draft`` asks a provider to
write each tool's description at about 3, 10, 30 and 50 lines from its ``current``
description (the imported text), and keeps each text in the tool's spec as
``variants.l<N>`` with ``draft: true`` (:class:`bench.descriptions.specs.SpecVariant`) until
``bench variants accept`` marks it reviewed. The length ablation (``--variants
l3,l10,l30,l50``) then runs on toolsets that were imported with one description per tool;
runs, tables and reports mark variants that still hold drafts
(:attr:`bench.descriptions.Variant.draft_tools`).

A toolset without specs (``bench import`` writes ``variants/current.yaml``) gets one spec per
tool on its first draft: its name, permission, input schema and, as the required
``summary``, the first line of its current description.

Two methods (:data:`METHODS`). ``whole`` asks each length's whole text, offering one tool,
``write_description``, whose ``lines`` argument is the draft, one string per line, with
``minItems``/``maxItems`` set to the line range asked for (:func:`draft_tool`); a plain-text
answer is read as the draft too. ``sections`` (the embedded model's default) fills the empty
sections of the tool's spec one line per request, each a short question (:data:`SECTIONS`,
:func:`section_questions`, :func:`section_prompt`; an example is a request with arguments
held to the tool's schema, :func:`examples_tool`), and renders each length from the filled
spec with its template, as the variants of a hand-written spec are rendered. The embedded
model answers only in grammar-constrained JSON whose free strings are capped at
:data:`bench.providers.local.prompt.GRAMMAR_MAX_STRING` characters and whose arrays are
bounded up to :data:`bench.providers.local.prompt.GRAMMAR_MAX_ITEMS` items: a 30- or 50-line
array ran on to the token cap (minutes per draft, or a hang); asked for several lines at
once, it wrote its first line again and again; one line per question does neither.
Requests go through the provider's request pipeline
(:func:`bench.providers.pipeline.build_pipeline`), as a run's do.

The model's answer is untrusted data (:func:`read_draft`, :func:`read_section`): it is used
only when it is text of about the asked length (:data:`USABLE` range), without control
characters, over-long lines or a JSON document in place of prose; it is stored as a YAML
string (never evaluated, never a path) in a spec that must load
(:func:`bench.descriptions.specs.load_spec`), and shown to the model under test as a
description, nothing more. Every usable draft is written as soon as it is known; a length
without one keeps the spec's text for it and is named with the reason (:class:`DraftResult`).

Each spec file is rewritten atomically under a lock of the toolset's folder
(:func:`specs_lock`), and only its top-level ``variants:`` block changes: the rest of the
file, comments included, stays as it was.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import functools
import math
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import jinja2
import yaml

from bench.descriptions.specs import load_spec
from bench.descriptions.variants import (CURRENT, Variant, check_toolset, count_lines,
                                         load_variant, template_path)
from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import ParsedAnswer
from bench.paths import descriptions_dir
from bench.yamlio import load_yaml

DEFAULT_LENGTHS = (3, 10, 30, 50)

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


DRAFT_TOOL = "write_description"

USABLE = (0.5, 1.5)
"""A draft of target ``N`` lines is usable with ``ceil(0.5 N)`` to ``floor(1.5 N) + 1``
non-empty lines (the prompt asks for 0.7 N to 1.3 N + 1, :func:`asked_range`): outside that,
a variant ``l<N>`` would not measure the length its name says."""

MAX_LINE_CHARS = 400
"""Longest line a draft may hold (characters): a description line is a sentence; a longer
one is a model repeating itself, or data that is not a description."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def asked_range(lines: int) -> tuple[int, int]:
    """The range of non-empty lines the prompt asks for around ``lines`` (about +-30 %)."""
    return max(1, round(lines * 0.7)), round(lines * 1.3) + 1


def usable_range(lines: int) -> tuple[int, int]:
    """The range of non-empty lines a draft of ``lines`` must have to be kept (:data:`USABLE`)."""
    return max(1, math.ceil(lines * USABLE[0])), math.floor(lines * USABLE[1]) + 1


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


def _parameter_lines(schema: dict[str, Any]) -> list[str]:
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
        "Parameters:\n" + "\n".join(_parameter_lines(tool.input_schema)) + "\n")


_ECHOES = ("Rewrite the description of the tool", "Current description:",
           "Input schema (JSON Schema)", "reply_to_user", DRAFT_TOOL, "tool_calls")
"""Words of the drafting prompt or of the answer format: a text holding one copies its
instructions back instead of describing the tool."""


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n```\s*$", re.DOTALL)


def clean_draft(text: str) -> str:
    """The model's answer as a description: one surrounding code fence removed, trailing
    blanks and blank lines at both ends dropped."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def read_draft(answer: ParsedAnswer, lines: int) -> str:
    """The draft in a model's answer for a target of ``lines`` lines: the ``lines`` of its
    first :data:`DRAFT_TOOL` call joined by newlines, else its text (:func:`clean_draft`).

    Raises:
        ValueError: the answer holds no usable draft; the message says why in a few words
            (an invalid or cut answer, no text, lines that are not strings, control
            characters, a line over :data:`MAX_LINE_CHARS`, the prompt's own words
            (:data:`_ECHOES`), a JSON document, a line count
            outside :func:`usable_range`).
    """
    if answer.error is not None:
        raise ValueError(f"invalid answer ({answer.error[:120]})")
    call = next((c for c in answer.calls if c.name == DRAFT_TOOL), None)
    if call is not None:
        items = call.arguments.get("lines") if call.valid else None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"{DRAFT_TOOL} without a list of strings as lines")
        text = clean_draft("\n".join(items))
    else:
        text = clean_draft(answer.text or "")
    if not text:
        raise ValueError("no text")
    _check_text(text, lines)
    return text


@dataclass
class Draft:
    """One drafted text: ``tool``, ``variant`` (``l<N>``), the ``target`` and actual
    ``lines`` (non-empty lines), and the ``text``."""

    tool: str
    variant: str
    target: int
    lines: int
    text: str


@dataclass
class DraftResult:
    """What ``bench variants draft`` did.

    Attributes:
        drafts: the drafts written, in tool then length order.
        failed: tool -> one line naming each length that was not written, and each section
            that could not be drafted, with the reason (an unusable answer, a failed request,
            the tool's time budget spent, a text written meanwhile by another process). A
            tool's other lengths are written all the same.
        method: how the drafts were asked (``whole`` or ``sections``: :data:`METHODS`).
        asked: drafts asked for (each tool's lengths without a text yet, or all with
            ``force``).
        kept: tool -> the lengths (``l<N>``) not asked because its spec already had a text
            for them (a run that resumes); tools that kept none are absent.
    """

    drafts: list[Draft]
    failed: dict[str, str]
    method: str = "whole"
    asked: int = 0
    kept: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class DraftStep:
    """One drafting request answered (or skipped), for a progress line.

    Attributes:
        done: requests answered so far, this one included (1-based).
        total: requests planned.
        tool: the tool drafted.
        part: what was asked: a length (``l10``), or a spec section and the question's
            number (``constraints 2/3``).
        outcome: a few words: ``10 lines``, ``unusable: <why>``, ``not asked: <why>``.
        seconds: this request's wall time (s).
        elapsed_s: the command's wall time so far (s).
    """

    done: int
    total: int
    tool: str
    part: str
    outcome: str
    seconds: float
    elapsed_s: float


ProgressHook = Callable[[DraftStep], None]
"""Called once per :class:`DraftStep`, in order (``bench variants draft`` prints a line)."""


METHODS = ("auto", "whole", "sections")
"""How drafts are asked. ``whole``: one request per tool and length for the whole text.
``sections``: one request per line of the tool's spec's empty sections (a short question
each, :func:`section_questions`), then each length is its template rendered from the filled
spec (:func:`tier_of`).
``auto``: ``sections`` for the embedded model (``local``), ``whole`` for any other."""


def resolve_method(method: str, provider_id: str) -> str:
    """``method`` with ``auto`` resolved for ``provider_id`` (see :data:`METHODS`).

    Raises:
        BenchError: ``method`` is not one of :data:`METHODS`.
    """
    from bench.providers.registry import kind_of

    if method not in METHODS:
        raise BenchError(f"--method must be {', '.join(METHODS)}, not '{method}'")
    if method != "auto":
        return method
    return "sections" if kind_of(provider_id) == "local" else "whole"


DEFAULT_TOOL_TIMEOUT_S = 600.0
"""Seconds of requests one tool's drafts may take (``--tool-timeout``): no new request is
sent for a tool once its earlier ones took this long; a request in flight is bounded by
``--request-timeout``. Ten minutes is about five times what the section-by-section drafts of
a two-parameter tool took the embedded model on two shared cores (127 s: docs/descriptions-
and-variants.md)."""


@dataclass(frozen=True)
class Section:
    """A spec section that ``sections`` drafting fills (:data:`SECTIONS`), one line per
    question: the embedded 0.5B model, asked for several lines at once, wrote its first line
    again and again (greedy decoding); a question each gets different lines.

    Attributes:
        key: the :class:`~bench.descriptions.specs.ToolSpec` field it fills.
        title: its name in messages (and its template's heading).
        tier: the shortest built-in template that shows it (bench/data/templates: l3.j2
            shows the first item of when_to_use and when_not_to_use, l10.j2 all of them and
            returns, l30.j2 constraints, business context and errors, l50.j2 examples and
            edge cases).
        per_parameter: questions asked once per parameter of the tool (``{p}``), first.
        questions: questions asked once each, then (``{tool}``: the tool's name).
        block: the template shows it under a heading line of its own (which adds a line).
    """

    key: str
    title: str
    tier: int
    per_parameter: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()
    block: bool = False


_WHEN = ' Answer with a phrase beginning with "when the user".'

SECTIONS = (
    Section("when_to_use", "When to use it", 3, questions=(
        "Which kind of user request does `{tool}` serve?" + _WHEN,
        "For which user question would an assistant call `{tool}`?" + _WHEN),
        per_parameter=("When would an assistant call `{tool}` with the parameter `{p}`?"
                       + _WHEN,)),
    Section("when_not_to_use", "When not to use it", 3, questions=(
        "Which kind of user request can `{tool}` not serve?" + _WHEN,
        "Which user request sounds like one for `{tool}` but needs another tool?" + _WHEN)),
    Section("returns", "What it returns", 10, questions=("What does a call of `{tool}` return?",)),
    Section("constraints", "Constraints", 30, block=True, per_parameter=(
        "Which values does the parameter `{p}` of `{tool}` accept?",
        "When should the assistant give the parameter `{p}` of `{tool}`, and what happens "
        "when it is left out?"), questions=(
        "What must be true before the assistant calls `{tool}`?",
        "Which format must the values given to `{tool}` have?",
        "Which arguments of `{tool}` must always be given?",
        "Which values of the parameters of `{tool}` should the assistant never send?",
        "What should the assistant check in the user's request before calling `{tool}`?")),
    Section("business_context", "Business context", 30, block=True, questions=(
        "Why does a user typically need what `{tool}` does?",
        "What should the assistant tell the user along with the result of `{tool}`?",
        "Who typically asks an assistant for what `{tool}` does?",
        "In which situation is `{tool}` most useful to a user?",
        "What does a user do next with the result of `{tool}`?",
        "What does a user usually ask right before needing `{tool}`?")),
    Section("errors", "Errors", 30, block=True, per_parameter=(
        "What should the assistant do when the parameter `{p}` of `{tool}` is missing or "
        "invalid?",), questions=(
        "What should the assistant do when `{tool}` finds nothing or fails?",
        "What should the assistant do when the user's request lacks a value that `{tool}` "
        "needs?",
        "What should the assistant tell the user when `{tool}` fails?",
        "What should the assistant do when `{tool}` returns something the user did not "
        "expect?",
        "What should the assistant do when a call of `{tool}` gets no answer?",
        "What should the assistant do when the user gives `{tool}` a value it does not "
        "know?")),
    Section("examples", "Examples", 50, block=True, questions=(
        "Write one request a user could type that `{tool}` serves, with its call's arguments.",
        "Write one short, hurried request a user could type for `{tool}`, with its call's "
        "arguments.",
        "Write one polite, detailed request a user could type for `{tool}`, with its call's "
        "arguments.",
        "Write one request a user could type for `{tool}` as a question, with its call's "
        "arguments.",
        "Write one request a user could type for `{tool}` in very plain words, with its "
        "call's arguments.",
        "Write one request a user could type for `{tool}` inside a longer message, with its "
        "call's arguments.",
        'Write one request a user could type for `{tool}` that starts with "Please", with its '
        "call's arguments.",
        'Write one request a user could type for `{tool}` that starts with "Can you", with its '
        "call's arguments.",
        'Write one request a user could type for `{tool}` that starts with "I need", with its '
        "call's arguments."), per_parameter=(
        "Write one request a user could type that gives `{tool}` its parameter `{p}`, with "
        "its call's arguments.",)),
    Section("edge_cases", "Edge cases", 50, block=True, per_parameter=(
        "How should the assistant handle a request that gives the parameter `{p}` of `{tool}` "
        "in an unusual or ambiguous form?",), questions=(
        "How should the assistant handle a request that `{tool}` can only partly serve?",
        "How should the assistant handle a request that needs several calls of `{tool}` at "
        "once?",
        "How should the assistant handle a request that is unclear about what it wants from "
        "`{tool}`?",
        "How should the assistant handle a request for `{tool}` written in another "
        "language?",
        "How should the assistant handle a request for `{tool}` that gives a value it does "
        "not accept?",
        "How should the assistant handle a request that mixes what `{tool}` does with "
        "something else?",
        "How should the assistant handle a request for `{tool}` that leaves out a value it "
        "needs?",
        "How should the assistant handle a request for `{tool}` with a spelling mistake in a "
        "value?",
        "How should the assistant handle a request for `{tool}` that gives two different "
        "values for one parameter?",
        "How should the assistant handle a request for `{tool}` that repeats an earlier "
        "request?",
        "How should the assistant handle a request for `{tool}` that gives a value in another "
        "format than expected?")),
)
"""The sections drafted, each a bank of distinct questions (greedy decoding answers one
question the same way every time, so a question is never asked twice). The sections of
l3/l10 are asked in this order; those of l30 and of l50 in turn, one question of each, until
the length reaches its target (:func:`_draft_sections`)."""


def section_questions(section: Section, tool: Tool) -> list[str]:
    """Every question ``section`` may ask about ``tool``: :attr:`Section.questions`, then
    :attr:`Section.per_parameter` for each top-level parameter (interleaved per question:
    each parameter's first question, then each one's second...)."""
    names = list((tool.input_schema.get("properties") or {}))
    found = [q.replace("{p}", name) for q in section.per_parameter for name in names]
    return [q.replace("{tool}", tool.name) for q in list(section.questions) + found]


SECTION_MAX_TOKENS = 256
"""Default completion cap of one section question: one line of at most
:data:`bench.providers.local.GRAMMAR_MAX_STRING` (160) characters, about 40 tokens, or one
example with its arguments, with the JSON around it and room to spare."""

TIERS = (3, 10, 30, 50)
"""Target lines of the built-in templates l3.j2 ... l50.j2 (bench/data/templates)."""

SECTION_TOOL = "write_section"
EXAMPLES_TOOL = "write_examples"


def tier_of(lines: int) -> int:
    """The template (by its target lines, :data:`TIERS`) that renders a sections draft of
    ``lines`` lines: the nearest, the shorter one on a tie (``l5`` is rendered by ``l3.j2``)."""
    return min(TIERS, key=lambda tier: (abs(tier - lines), tier))


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
    return (_QUESTION_RULES.format(answer=answer) + f"\nQuestion: {question}\n\n"
            f"Facts:\nTool `{tool.name}`: {tool.description.strip() or '(no description)'}\n"
            "Parameters:\n" + "\n".join(_parameter_lines(tool.input_schema)) + "\n")


_QUESTION_RULES = ("Answer this question in one short sentence of your own, using only the "
                   "facts below, and call {answer} with it.")


_SECTION_ECHOES = _ECHOES + ("Parameters:", SECTION_TOOL, EXAMPLES_TOOL)
_BULLET = re.compile(r"^(?:[-*\u2022]\s+|\d+[.)]\s+)")
_USE_PREFIX = re.compile(r"^(?:you (?:should|can) |only )?(?:use|call) (?:it|this tool|this|"
                         r"the tool)\b[\s,:]*", re.IGNORECASE)
_DONT_PREFIX = re.compile(r"^(?:do not|don't|never|avoid) (?:use|call|using|calling) "
                          r"(?:it|this tool|this|the tool)\b[\s,:]*", re.IGNORECASE)
_RETURNS_PREFIX = re.compile(r"^(?:it |the tool |this tool )?returns?\b\s*:?\s*",
                             re.IGNORECASE)
_HEADING = re.compile("|".join(re.escape(s.title) + r"\s*:" for s in SECTIONS) + "|line\\(s\\)",
                      re.IGNORECASE)
_WORD = re.compile(r"\w+")
_FACTS = re.compile(r"\bTool `[^`]+`\s*:|\b(?:string|integer|number|boolean|array|object|"
                    r"any), (?:required|optional)\b")
"""The wording of a section prompt's facts (``Tool `get_time`: ...``, and a parameter's
``(string, required)``, :func:`_parameter_lines`): the embedded 0.5B model copied them into
its lines ("Tool `get_current_time`: Get current time in a specific timezones.", "The
parameter `timezone` of `get_current_time` accepts a string, required, and IANA timezone
name"); a template writes the parameters itself."""

PROMPT_PHRASES = ("line(s)", "non-empty lines", "Answer this question", "sentence of your own",
                  "the facts below", "Answer with a phrase", "Rewrite the description of the "
                  "tool", "Current description:", "Input schema (JSON Schema)", "Question:",
                  "Facts:", DRAFT_TOOL, SECTION_TOOL, EXAMPLES_TOOL, "reply_to_user")
"""Words of bench's drafting prompts and answer tools (:func:`draft_prompt`,
:func:`section_prompt`) that no description of a tool holds unless it copied the prompt."""

COPY_WORDS = 5
"""An item holding a run of this many words of the prompt's rules copied them (the 0.5B
model wrote "What it returns: exactly 1 line(s), each what a call returns..."): dropped."""

NEW_WORDS = 3
"""Words of three letters or more that an item must hold beyond its question's: fewer, and
it only restates the question ("The assistant should handle a request that `get_time` can
only partly serve."): dropped. A restatement that adds an answer ("... by asking for the
city") is kept."""


def _check_line(line: str, echoes: Sequence[str]) -> None:
    """Raise ValueError when one line of a draft is unusable (see :func:`read_draft`)."""
    echo = next((words for words in echoes if words in line), None)
    if echo is not None:
        raise ValueError(f"the prompt copied back ('{echo}')")
    if _CONTROL.search(line):
        raise ValueError("control characters in the text")
    if len(line) > MAX_LINE_CHARS:
        raise ValueError(f"a line of {len(line)} characters (at most {MAX_LINE_CHARS})")


def _runs(text: str, size: int = COPY_WORDS) -> set[tuple[str, ...]]:
    """The runs of ``size`` consecutive words of ``text`` (lower case)."""
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}


def _item_problem(item: str, question: str) -> str | None:
    """Why one cleaned line of a section is unusable, or None (see :func:`read_section`)."""
    try:
        _check_line(item, _SECTION_ECHOES)
    except ValueError as exc:
        return str(exc)
    if item[0] in "{[":
        return "a JSON document, not a description"
    if len(_WORD.findall(item)) < 3 or sum(c.isalpha() for c in item) < len(item) / 2:
        return "not a sentence"
    asked = {w.lower() for w in _WORD.findall(question + _QUESTION_RULES)}
    own = {w.lower() for w in _WORD.findall(item) if len(w) > 2} - asked
    words = " ".join(w.lower() for w in _WORD.findall(item))
    # kept: a when-to-use line that begins "when the user," and drops the phrase ("when the
    # user, `convert_time` serves to convert time..."): all seven such answers of the 0.5B
    # model for convert_time were of this kind, and without them l3 is its summary alone
    # (no draft); bench lint warns on them (BL017, :func:`prompt_wording`)
    if _HEADING.search(item) or _FACTS.search(item) or \
            _runs(item) & _runs(_QUESTION_RULES) or len(own) < NEW_WORDS or \
            " ".join(w.lower() for w in _WORD.findall(question)) in words:
        return "the prompt copied back"
    return None


_PARAMETER_LINE = re.compile(r"^\s*[-*]?\s*`?[\w.$-]+`? \(")


@functools.lru_cache(maxsize=1)
def _question_patterns() -> re.Pattern[str]:
    """Every question of :data:`SECTIONS`, its tool and parameter names as wildcards."""
    texts = {q for section in SECTIONS for q in section.questions + section.per_parameter}
    return re.compile("|".join(
        re.escape(q).replace(re.escape("{tool}"), r"\S+").replace(re.escape("{p}"), r"\S+")
        for q in sorted(texts)), re.IGNORECASE)


def prompt_wording(line: str) -> str | None:
    """The wording of bench's drafting prompts that one line of a description holds, or None:
    a phrase of :data:`PROMPT_PHRASES`, a run of :data:`COPY_WORDS` words of the section
    rules, a whole question of :data:`SECTIONS`, the facts' ``Tool `x`:`` or ``string,
    required`` outside a template's parameter line (``- city (string, required): ...``), or
    a when-to-use line that begins "when the user," and drops the phrase. ``bench lint``
    warns on such lines (BL017): a drafted text that copied its prompt.

    Returns:
        The words found (at most 60 characters), for a message.
    """
    lowered = line.lower()
    found = next((p for p in PROMPT_PHRASES if p.lower() in lowered), None)
    if found is not None:
        return found
    copied = _runs(line) & _runs(_QUESTION_RULES)
    if copied:
        return " ".join(min(copied))
    for pattern in (_question_patterns(), _FACTS):
        match = pattern.search(line)
        if match and (pattern is not _FACTS or not _PARAMETER_LINE.match(line)):
            return match.group(0)[:60]
    match = re.search(r"\b(?:use it|do not use it) when the user,", line, re.IGNORECASE)
    return match.group(0) if match else None


CUT_CHARS = 150
"""A line this long is likely cut by the embedded model's grammar, which caps a string at
:data:`bench.providers.local.GRAMMAR_MAX_STRING` (160) characters: it keeps its whole
sentences only (when it has one before the cut)."""


def _clean_item(text: str, section: Section) -> str:
    """One line of a section as the template shows it: one line (inner breaks and runs of
    blanks are one space), no bullet or number, no sentence cut at :data:`CUT_CHARS`, no
    "Use it" the template adds itself, a lower-case "when" after that, and a full stop."""
    item = _BULLET.sub("", " ".join(text.split()))
    if len(item) >= CUT_CHARS and ". " in item:
        item = item[:item.rindex(". ") + 1]
    prefix = {"when_to_use": _USE_PREFIX, "when_not_to_use": _DONT_PREFIX,
              "returns": _RETURNS_PREFIX}.get(section.key)
    if prefix is not None:
        item = prefix.sub("", item, count=1)
    if section.tier == 3 and len(item) > 1 and item[0].isupper() and item[1].islower():
        item = item[0].lower() + item[1:]
    if item and item[-1] not in ".!?":
        item += "."
    return item


def read_section(answer: ParsedAnswer, section: Section, tool: Tool, question: str,
                 taken: Iterable[str] = ()) -> list[Any]:
    """The usable items of ``section`` in a model's answer to ``question``
    (:func:`section_prompt`): the lines of its :data:`SECTION_TOOL` call (or of its text),
    each cleaned (:func:`_clean_item`); for ``examples``, ``{"query", "arguments"}`` of each
    :data:`EXAMPLES_TOOL` item whose arguments validate against ``tool``'s input schema.

    An unusable line is dropped, the others kept: one with control characters, over
    :data:`MAX_LINE_CHARS`, a JSON document, fewer than three words or mostly not letters,
    or one that copies the prompt (its words, a section's heading, :data:`COPY_WORDS` words
    in a row of its rules, fewer than :data:`NEW_WORDS` words of its own beyond the
    question's); so is a repeat, of this answer or of ``taken`` (the tool's lines so far).

    Raises:
        ValueError: no usable item; the message says why in a few words (an invalid or cut
            answer, lines that are not strings, no text, or the reasons its lines were
            dropped).
    """
    if answer.error is not None:
        raise ValueError(f"invalid answer ({answer.error[:120]})")
    if section.key == "examples":
        return _read_examples(answer, tool, question, taken)
    call = next((c for c in answer.calls if c.name == SECTION_TOOL), None)
    if call is not None:
        raw = call.arguments.get("lines") if call.valid else None
        if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
            raise ValueError(f"{SECTION_TOOL} without a list of strings as lines")
    else:
        raw = clean_draft(answer.text or "").splitlines()
    seen = {line.lower() for line in taken}
    items: list[Any] = []
    dropped: list[str] = []
    for text in raw:
        item = _clean_item(text, section)
        if not item.strip(". ") or item.lower() in seen:
            continue
        problem = _item_problem(item, question)
        if problem is not None:
            dropped.append(problem)
            continue
        seen.add(item.lower())
        items.append(item)
    if not items:
        raise ValueError("no text" if not dropped else
                         "no usable line: " + ", ".join(dict.fromkeys(dropped)))
    return items


def _read_examples(answer: ParsedAnswer, tool: Tool, question: str,
                   taken: Iterable[str]) -> list[Any]:
    """The usable examples of an :data:`EXAMPLES_TOOL` answer (see :func:`read_section`;
    ``taken``: requests of earlier examples, not repeated). A request must hold words of its
    own: one made of the tool's description only ("Current time in a time zone.") is no
    user's request."""
    import jsonschema

    call = next((c for c in answer.calls if c.name == EXAMPLES_TOOL), None)
    raw = call.arguments.get("examples") if call is not None and call.valid else None
    if not isinstance(raw, list):
        raise ValueError(f"no {EXAMPLES_TOOL} call with a list of examples")
    validator = jsonschema.Draft202012Validator(tool.input_schema)
    seen = {line.lower() for line in taken}
    found: list[Any] = []
    for item in raw:
        request = item.get("request") if isinstance(item, dict) else None
        arguments = item.get("arguments") if isinstance(item, dict) else None
        if not isinstance(request, str) or not isinstance(arguments, dict):
            continue
        request = " ".join(request.split())
        own = _runs(request, 3) - _runs(tool.description, 3)
        if request and own and request.lower() not in seen and \
                _item_problem(request, question) is None and validator.is_valid(arguments):
            seen.add(request.lower())
            found.append({"query": request, "arguments": arguments})
    if not found:
        raise ValueError("no example whose request is a new sentence and whose arguments fit "
                         "the tool's input schema")
    return found


class _Asker:
    """Drafting requests through ``provider_id``'s request pipeline
    (:func:`bench.providers.pipeline.build_pipeline`), one at a time, on one event loop; the
    embedded model's worker counts as hung after ``timeout_s`` (its ``answer_timeout_s``).

    Raises:
        BenchError: (on creation) the provider cannot start.
    """

    def __init__(self, provider_id: str, timeout_s: float, max_tokens: int) -> None:
        from bench.providers.local.prompt import EPISODE_NO_CALL_LAYOUT
        from bench.providers.pipeline import build_pipeline
        from bench.providers import make_provider
        from bench.providers.registry import kind_of
        from bench.runner.config import RunConfig
        from bench.runner.startup import default_factory

        # the embedded model answers in a constrained JSON layout: the one whose "no call"
        # carries words (an episode's final answer) lets it answer in text as well
        config = RunConfig(providers=[provider_id], request_timeout_s=timeout_s,
                           max_tokens=max_tokens, no_call_layout=EPISODE_NO_CALL_LAYOUT)
        if kind_of(provider_id) == "local":  # a run's settings, and a hang bounded by ours
            self.provider = make_provider(provider_id, max_tokens=max_tokens,
                                          no_call_layout=EPISODE_NO_CALL_LAYOUT,
                                          answer_timeout_s=timeout_s)
        else:
            self.provider = default_factory(provider_id, config)
        self.pipeline = build_pipeline(provider_id, self.provider, concurrency=1,
                                       attempts=config.attempts or 3)
        self.loop = asyncio.Runner()
        self.prepared: set[str] = set()

    def ask(self, key: str, prompt: str, tool: Tool) -> ParsedAnswer | str:
        """The parsed answer to ``prompt`` offering ``tool``, or the one-line reason the
        request failed (the provider's error, or a tool it cannot offer)."""
        import hashlib
        import json

        from bench.providers.errors import ProviderError
        from bench.providers.pipeline import ModelRequest

        variant_key = "bench-variants-draft-" + hashlib.sha256(json.dumps(
            tool.model_dump(), sort_keys=True).encode("utf-8")).hexdigest()[:16]
        try:
            if variant_key not in self.prepared:
                self.provider.prepare([tool], variant_key=variant_key,
                                      label="the drafting request")
                self.prepared.add(variant_key)
            request = ModelRequest(messages=[Message(role="user", content=prompt)],
                                   tools=[tool], trial=0, variant_key=variant_key, key=key)
            outcome = self.loop.run(self.pipeline.complete(request))
        except ProviderError as exc:
            return f"the request failed: {str(exc).splitlines()[0][:160]}"
        except BenchError as exc:  # e.g. a schema the embedded model's grammar cannot hold
            return f"the request failed: {exc.message.splitlines()[0][:160]}"
        return outcome.response.parsed

    def close(self) -> None:
        """Stop the provider and the event loop."""
        try:
            self.loop.run(self.provider.aclose())
        finally:
            self.loop.close()
            self.provider.close()


def _spec_path(toolset_dir: Path, tool: str) -> Path:
    return toolset_dir / "specs" / f"{tool}.yaml"


def _new_spec_data(tool: Tool) -> dict[str, Any]:
    """A minimal spec of an imported tool: name, permission, summary (the first line of its
    description) and input schema."""
    summary = next((line.strip() for line in tool.description.splitlines() if line.strip()),
                   tool.name)
    data: dict[str, Any] = {"name": tool.name}
    if tool.permission != "read":
        data["permission"] = tool.permission
    data["summary"] = summary
    data["input_schema"] = tool.input_schema
    return data


def _new_spec_text(tool: Tool) -> str:
    """The text of a minimal spec for an imported tool (:func:`_new_spec_data`)."""
    return ("# Written by `bench variants draft` from the imported description; "
            "the variants below are\n# the tool's own texts (draft: true until "
            "`bench variants accept`).\n"
            + yaml.safe_dump(_new_spec_data(tool), allow_unicode=True, sort_keys=False,
                             width=100))


def replace_variants_block(text: str, variants: dict[str, Any]) -> str:
    """``text`` (a spec's YAML) with its top-level ``variants:`` block replaced by
    ``variants`` (appended at the end when absent; removed when empty). Every other line,
    comments included, is kept as it was, line ending included; the new block's lines end
    as ``text``'s first line does (``\r\n`` in a file written on Windows: YAML 1.2, 5.4,
    reads either as a line break, and the file keeps one kind of line ending)."""
    newline = "\r\n" if text.split("\n", 1)[0].endswith("\r") else "\n"
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if re.match(r"^variants\s*:", line):
            skipping = True
            continue
        if skipping and line.strip() and not line[0].isspace() and not line.startswith("#"):
            skipping = False
        if not skipping:
            out.append(line)
    body = "".join(out).rstrip("\r\n") + newline
    if variants:
        body += yaml.safe_dump({"variants": variants}, allow_unicode=True, sort_keys=False,
                               width=100).replace("\n", newline)
    return body


def _read_spec_text(path: Path) -> str:
    """The text of the spec at ``path`` with its line endings as they are (``read_text``
    turns ``\r\n`` into ``\n``, so a rewrite changed every line of a Windows file).

    Raises:
        BenchError: the file is not UTF-8 (names it).
    """
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text ({exc.reason})", file=path) from None


def _write_spec(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, after checking that it loads as a spec (a copy
    of the same name in a temporary folder beside it is loaded first).

    Raises:
        BenchError: the new text is not a valid spec (the file is left unchanged).
    """
    import tempfile

    from bench.store.files import atomic_write_text

    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".check-") as folder:
        check = Path(folder) / path.name
        check.write_text(text, encoding="utf-8")
        try:
            load_spec(check)
        except BenchError as exc:
            raise BenchError(f"the updated spec would not load: {exc.message}", file=path,
                             field=exc.field) from None
    atomic_write_text(path, text)


def _variants_of(path: Path) -> dict[str, Any]:
    """The ``variants:`` block of the spec at ``path`` ({} without the file or the block).

    Raises:
        BenchError: the file is not UTF-8 YAML (names the file and line).
    """
    data = load_yaml(path)[0] if path.is_file() else None
    found = data.get("variants") if isinstance(data, dict) else None
    return dict(found) if isinstance(found, dict) else {}


@contextlib.contextmanager
def specs_lock(toolset_dir: Path) -> Iterator[None]:
    """Hold an exclusive advisory ``flock`` on the toolset's folder for a read-modify-write
    of its spec files, waiting for another holder (two ``bench variants draft`` on one
    toolset, or an accept): without it, each rewrote a spec from what it had read, and the
    later write dropped the other's drafts. The folder itself is locked, not a file in it,
    as :meth:`bench.store.RunStore.writing` does: nothing is left behind."""
    fd = os.open(toolset_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _store(toolset_dir: Path, base: Variant, name: str, drafts: Sequence[Draft],
           before: dict[str, Any], provider_id: str, source: str
           ) -> tuple[list[Draft], list[str]]:
    """Write ``drafts`` of tool ``name`` into its spec under :func:`specs_lock`, re-reading
    the spec there, and give every tool of ``base`` without a spec a minimal one (so that a
    length renders every tool, its drafts or its template's text).

    A length whose text changed since the command read it (``before``: the spec's
    ``variants`` then), i.e. another process drafted or accepted it meanwhile, is kept as it
    is and named.

    Returns:
        The drafts written, and one ``"l<N>: why"`` per draft not written.
    """
    from bench.descriptions.lock import tool_hashes

    tool = base.tool(name)
    assert tool is not None
    origin = f"{source} sha256:{tool_hashes(tool)['sha256'][:12]}"
    written: list[Draft] = []
    problems: list[str] = []
    with specs_lock(toolset_dir):
        (toolset_dir / "specs").mkdir(exist_ok=True)
        for other in base.tools:
            if not _spec_path(toolset_dir, other.name).exists():
                _write_spec(_spec_path(toolset_dir, other.name), _new_spec_text(other))
        path = _spec_path(toolset_dir, name)
        variants = _variants_of(path)
        for draft in drafts:
            if variants.get(draft.variant) != before.get(draft.variant):
                problems.append(f"{draft.variant}: written meanwhile by another process, "
                                "kept as it is")
                continue
            variants[draft.variant] = {"description": draft.text, "draft": True,
                                       "drafted_by": provider_id, "drafted_from": origin}
            written.append(draft)
        if written:
            try:
                _write_spec(path, replace_variants_block(_read_spec_text(path),
                                                           variants))
            except BenchError as exc:  # the drafts would make the spec invalid: unchanged
                return [], [f"{d.variant}: {exc.message}" for d in written] + problems
    return written, problems


TOKENS_PER_LINE = 40
"""Tokens budgeted per drafted line: English runs about 4 characters per token (OpenAI,
"What are tokens and how to count them"), so a 100-character line is about 25, plus the JSON
quotes and comma of its item in the ``lines`` array; the rest is headroom."""


def default_max_tokens(lengths: Iterable[int]) -> int:
    """Completion cap per ``whole`` draft: :data:`TOKENS_PER_LINE` for each line the longest
    length may have (:func:`asked_range`), at least 256 (3 lines of JSON framing need well
    under it)."""
    return max(256, TOKENS_PER_LINE * max(asked_range(n)[1] for n in lengths))


def _check_text(text: str, lines: int, echoes: Sequence[str] = _ECHOES) -> None:
    """Raise ValueError when ``text`` is no usable draft of ``lines`` lines (the checks of
    :func:`read_draft`; ``echoes``: the prompt's words it must not hold)."""
    import json

    echo = next((words for words in echoes if words in text), None)
    if echo is not None:
        raise ValueError(f"the prompt copied back ('{echo}')")
    if _CONTROL.search(text):
        raise ValueError("control characters in the text")
    longest = max(len(line) for line in text.splitlines())
    if longest > MAX_LINE_CHARS:
        raise ValueError(f"a line of {longest} characters (at most {MAX_LINE_CHARS})")
    if text[0] in "{[":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            raise ValueError("a JSON document, not a description")
    low, high = usable_range(lines)
    found = count_lines(text)
    if not low <= found <= high:
        raise ValueError(f"{found} lines, not {low} to {high}")


class _Steps:
    """Counts requests and reports each to a :data:`ProgressHook`."""

    def __init__(self, total: int, progress: ProgressHook | None) -> None:
        self.total, self.done, self.progress = total, 0, progress
        self.started = time.monotonic()

    def __call__(self, tool: str, part: str, outcome: str, seconds: float = 0.0) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(DraftStep(self.done, self.total, tool, part, outcome, seconds,
                                    time.monotonic() - self.started))

    def skip(self, count: int) -> None:
        """Count ``count`` planned requests that are not needed, without a line."""
        self.done += count


def _names(lengths: Iterable[int]) -> str:
    """``l3, l10`` for ``[3, 10]``."""
    return ", ".join(f"l{n}" for n in lengths)


def resume_lines(kept: dict[str, list[int]], missing: dict[str, list[int]]) -> list[str]:
    """What a run that resumes keeps and drafts, one line per set of tools that share it:
    ``l3, l10 kept; drafting l30, l50`` when every tool is alike, else each line led by its
    tools (``get_time: l3 kept; drafting l10``; ``nothing to draft`` for a tool whose lengths
    are all kept). No line when no tool keeps a length (a first draft, or ``--force``).

    Args:
        kept: tool -> the lengths whose text its spec already has.
        missing: tool -> the lengths to draft (same tools as ``kept``).
    """
    if not any(kept.values()):
        return []
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[str]] = {}
    for name in kept:
        groups.setdefault((tuple(kept[name]), tuple(missing[name])), []).append(name)
    lines = []
    for (old, new), names in groups.items():
        parts = [f"{_names(old)} kept"] if old else []
        parts.append(f"drafting {_names(new)}" if new else "nothing to draft")
        text = "; ".join(parts)
        lines.append(text if len(groups) == 1 else f"{', '.join(names)}: {text}")
    return lines


def draft_variants(toolset: str, provider_id: str, lengths: Iterable[int] = DEFAULT_LENGTHS,
                   *, source: str = CURRENT, tools: Iterable[str] | None = None,
                   force: bool = False, root: Path | None = None, timeout_s: float = 120.0,
                   max_tokens: int | None = None, method: str = "auto",
                   tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
                   progress: ProgressHook | None = None,
                   notice: Callable[[str], None] | None = None) -> DraftResult:
    """Draft ``l<N>`` texts for the tools of ``toolset`` from its ``source`` variant and store
    them in the specs as drafts (``draft: true``, ``drafted_by``, ``drafted_from``).

    A run resumes: without ``force``, each tool is asked only the lengths its spec has no text
    for yet (a draft or an accepted text is kept), so a draft cut short (an unusable answer,
    the tool's time budget, Ctrl-C) is finished by running the command again; ``notice``
    hears which lengths are kept and which drafted (:func:`resume_lines`) before the first
    request. With ``force``, every length is drafted again.

    ``method`` (:data:`METHODS`) says how: a whole text per tool and length, read by
    :func:`read_draft`; or the lines of the empty sections of each tool's spec, one
    question each (:data:`SECTIONS`, as many as bring each length near its target:
    :func:`_draft_sections`; read by :func:`read_section`), each length then rendered by its
    template (:func:`tier_of`) from the spec with those lines. Every usable draft is written as
    soon as it is known (a tool's lengths together with ``sections``), under
    :func:`specs_lock`; the lengths that could not be drafted are named in
    :attr:`DraftResult.failed` and leave the spec's text for them as it was.

    Args:
        toolset: the toolset's folder name.
        provider_id: any bench provider id (``function:...`` in tests).
        lengths: target lines per description (``l3`` ... ``l50`` by default).
        source: the variant drafted from (default ``current``: the imported text).
        tools: only these tools (default: all).
        force: replace texts already in a spec (a draft, or an accepted one).
        root: the ``descriptions/`` folder (default: the project's).
        timeout_s: seconds per request (the embedded model's worker is stopped as hung
            after it, restarted once and asked again).
        max_tokens: completion cap per request (default :func:`default_max_tokens` for
            ``whole``, :data:`SECTION_MAX_TOKENS` for ``sections``).
        method: :data:`METHODS`.
        tool_timeout_s: seconds of requests per tool (:data:`DEFAULT_TOOL_TIMEOUT_S`).
        progress: called once per request (:class:`DraftStep`).
        notice: called with each line of :func:`resume_lines` when a tool keeps a length.

    Returns:
        The drafts written and, per tool, what was not drafted and why, and the lengths kept.

    Raises:
        BenchError: an unknown toolset, source variant, tool or method; lengths outside
            1-200; a spec that does not load (names its file, line and field); every tool
            already has a text for every length (without ``force``: nothing to draft); a
            provider that cannot start.
    """
    root = root or descriptions_dir()
    base = load_variant(toolset, source, root)
    toolset_dir = root / toolset
    wanted = list(tools) if tools is not None else [t.name for t in base.tools]
    unknown = [name for name in wanted if base.tool(name) is None]
    if unknown:
        raise BenchError(f"no tool {', '.join(unknown)} in variant '{source}' of toolset "
                         f"'{toolset}'")
    lengths = sorted(set(lengths))
    if not lengths or min(lengths) < 1 or max(lengths) > 200:
        raise BenchError("--lengths: give line counts from 1 to 200, e.g. 3,10,30,50")
    method = resolve_method(method, provider_id)
    before: dict[str, dict[str, Any]] = {}
    specs: dict[str, dict[str, Any] | None] = {}
    missing: dict[str, list[int]] = {}  # tool -> the lengths to draft
    for name in wanted:
        path = _spec_path(toolset_dir, name)
        spec = load_spec(path) if path.is_file() else None  # a broken one: one line
        specs[name] = spec.model_dump(exclude={"variants"}) if spec is not None else None
        before[name] = _variants_of(path)
        missing[name] = [n for n in lengths if force or f"l{n}" not in before[name]]
    if not any(missing.values()):  # nothing left: say where the first text is
        name, lines = wanted[0], lengths[0]
        entry = before[name][f"l{lines}"]
        state = "a draft" if isinstance(entry, dict) and entry.get("draft") else \
            "an accepted text"
        raise BenchError(f"every tool already has a text for {_names(lengths)}; tool "
                         f"'{name}' already has {state} for l{lines} (pass --force to draft "
                         "them again)", file=_spec_path(toolset_dir, name),
                         field=f"variants.l{lines}")
    kept = {name: [n for n in lengths if n not in missing[name]] for name in wanted}
    if notice is not None:
        for line in resume_lines(kept, missing):
            notice(line)
    wanted = [name for name in wanted if missing[name]]
    drafts: list[Draft] = []
    problems: dict[str, list[str]] = {}
    if method == "whole":
        total = sum(len(missing[name]) for name in wanted)
        cap = max_tokens or default_max_tokens(lengths)
    else:
        render = _Renderer(root)
        plans = {name: _sections_needed(specs[name], missing[name]) for name in wanted}
        total = 0
        for name in wanted:
            tool = base.tool(name)
            assert tool is not None
            total += sum(len(section_questions(section, tool)) for section in plans[name])
        cap = max_tokens or SECTION_MAX_TOKENS
    steps = _Steps(total, progress)
    asker = _Asker(provider_id, timeout_s, cap)
    try:
        for name in wanted:
            tool = base.tool(name)
            assert tool is not None
            if method == "whole":
                store = functools.partial(_store, toolset_dir, base, name, before=before[name],
                                          provider_id=provider_id, source=source)
                found, why = _draft_whole(asker, toolset, tool, missing[name],
                                          tool_timeout_s, steps, store)
            else:
                ready, why = _draft_sections(asker, toolset, tool, specs[name], plans[name],
                                             missing[name], render, tool_timeout_s, steps)
                found, refused = _store(toolset_dir, base, name, ready, before[name],
                                        provider_id, source) if ready else ([], [])
                why += refused
            drafts += found
            if why:
                problems[name] = why
    finally:
        asker.close()
    return DraftResult(drafts=drafts, failed={n: "; ".join(w) for n, w in problems.items()},
                       method=method, asked=sum(len(missing[name]) for name in wanted),
                       kept={name: [f"l{n}" for n in found] for name, found in kept.items()
                             if found})


def _draft_whole(asker: _Asker, toolset: str, tool: Tool, lengths: Sequence[int],
                 budget_s: float, steps: _Steps,
                 store: Callable[[list[Draft]], tuple[list[Draft], list[str]]]
                 ) -> tuple[list[Draft], list[str]]:
    """Ask one whole text per length of ``tool`` and ``store`` each usable one at once.

    Returns:
        The drafts written, and one ``"l<N>: why"`` per length not written.
    """
    written: list[Draft] = []
    problems: list[str] = []
    started = time.monotonic()
    for lines in lengths:
        part = f"l{lines}"
        if time.monotonic() - started >= budget_s:
            why = f"not asked: the tool's --tool-timeout of {budget_s:g} s was spent"
            problems.append(f"{part}: {why}")
            steps(tool.name, part, why)
            continue
        asked = time.monotonic()
        answer = asker.ask(f"draft|{toolset}|{tool.name}|{part}", draft_prompt(tool, lines),
                           draft_tool(lines))
        seconds = time.monotonic() - asked
        try:
            if isinstance(answer, str):
                raise ValueError(answer)
            text = read_draft(answer, lines)
        except ValueError as exc:
            problems.append(f"{part}: {exc}")
            steps(tool.name, part, f"unusable: {exc}", seconds)
            continue
        found, refused = store([Draft(tool.name, part, lines, count_lines(text), text)])
        written += found
        problems += refused
        steps(tool.name, part, f"{count_lines(text)} lines" if found else refused[0], seconds)
    return written, problems


def _as_list(value: Any) -> list[str]:
    """A spec section's lines: a list's strings, a string as one line, else none."""
    if isinstance(value, str):
        return [value] if value else []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _sections_needed(spec: dict[str, Any] | None, lengths: Sequence[int]) -> list[Section]:
    """The sections a tool's drafts of ``lengths`` may fill: those the longest length's
    template shows (:func:`tier_of`) that its spec leaves empty (a person's text is kept)."""
    top = tier_of(max(lengths))
    return [s for s in SECTIONS if s.tier <= top and not (spec or {}).get(s.key)]


class _Renderer:
    """A tool's spec rendered by the templates of ``root`` (the project's, else bench's)."""

    def __init__(self, root: Path) -> None:
        from bench.descriptions.variants import _environment, template_dirs

        self.root = root
        self.env = _environment(template_dirs(root))

    def __call__(self, data: dict[str, Any], tier: int) -> str:
        """``data`` (a spec's fields) rendered by ``l<tier>.j2``.

        Raises:
            BenchError: the template fails (names its file).
        """
        from bench.descriptions.specs import ToolSpec
        from bench.descriptions.variants import render_tool

        try:
            return render_tool(ToolSpec.model_validate(data),
                               self.env.get_template(f"l{tier}.j2")).description
        except jinja2.TemplateError as exc:
            raise BenchError(f"template error: {exc.message or type(exc).__name__}",
                             file=template_path(self.root, f"l{tier}")) from None


def _draft_sections(asker: _Asker, toolset: str, tool: Tool, spec: dict[str, Any] | None,
                    needed: Sequence[Section], lengths: Sequence[int], render: _Renderer,
                    budget_s: float, steps: _Steps) -> tuple[list[Draft], list[str]]:
    """Fill ``needed`` sections of ``tool``'s spec one line per request
    (:func:`section_prompt`), then render each length with its template from the spec with
    the lines received.

    The sections of l3 and l10 are asked in order, each question of a section until it has
    two lines (one when l3 is the longest length asked; ``returns`` one). Those of l30, and
    then those of l50, are asked in turn, one question of each, until the template's
    rendering reaches its target (the longest length asked that it renders, else its own:
    30 or 50 lines) or no question is left. A question whose answer is unusable leaves
    its line out (its progress line says why; the count is named when a length falls short);
    each length whose rendering is usable (:func:`_check_text`) is a draft.

    Returns:
        The drafts to write, and one ``"<section or l<N>>: why"`` per failure.
    """
    top = tier_of(max(lengths))
    targets = {tier: tier for tier in TIERS if tier <= top}  # a tier not asked: its own
    targets.update({tier_of(lines): lines for lines in lengths})  # ascending: longest wins
    original = spec or _new_spec_data(tool)
    filled = dict(original)
    got: dict[str, list[Any]] = {section.key: [] for section in needed}
    problems: list[str] = []
    unusable: list[str] = []  # why each unusable answer was (its progress line says more)
    started = time.monotonic()
    queues = {section.key: section_questions(section, tool) for section in needed}
    asked: dict[str, int] = {section.key: 0 for section in needed}

    def ask(section: Section) -> None:
        question = queues[section.key].pop(0)
        asked[section.key] += 1
        part = f"{section.key} {asked[section.key]}"
        examples = section.key == "examples"
        previous = [g["query"] for g in got[section.key]] if examples else got[section.key]
        began = time.monotonic()
        answer = asker.ask(f"draft|{toolset}|{tool.name}|{section.key}|{asked[section.key]}",
                           section_prompt(tool, section, question),
                           examples_tool(tool, 1) if examples else section_tool())
        seconds = time.monotonic() - began
        taken = previous if examples else [
            line for other in SECTIONS if other.key != "examples"
            for line in _as_list(filled.get(other.key))]
        try:
            if isinstance(answer, str):
                raise ValueError(answer)
            item = read_section(answer, section, tool, question, taken)[0]
        except ValueError as exc:
            unusable.append(str(exc).split(" (")[0].split(": ")[0])
            steps(tool.name, part, f"unusable: {exc}", seconds)
            return
        got[section.key].append(item)
        filled[section.key] = item if section.key == "returns" else list(got[section.key])
        steps(tool.name, part, "1 line", seconds)

    def in_time() -> bool:
        return time.monotonic() - started < budget_s

    def wanted(section: Section) -> int:
        return 1 if top == 3 or section.key == "returns" else 2

    for tier in sorted(targets):
        sections = [section for section in needed if section.tier == tier]
        if tier <= 10:
            for section in sections:
                while queues[section.key] and len(got[section.key]) < wanted(section) and \
                        in_time():
                    ask(section)
            short = [s.key for s in sections
                     if queues[s.key] and len(got[s.key]) < wanted(s)]
        else:
            turn = 0
            while in_time() and count_lines(render(filled, tier)) < targets[tier]:
                open_ = [s for s in sections if queues[s.key]]
                if not open_:
                    break
                ask(open_[turn % len(open_)])
                turn += 1
            short = [s.key for s in sections if queues[s.key]] \
                if count_lines(render(filled, tier)) < targets[tier] else []
        left = sum(len(queues[s.key]) for s in sections)
        if short and not in_time():  # one line for what the budget left out
            why = f"not asked: the tool's --tool-timeout of {budget_s:g} s was spent"
            problems.append(f"{', '.join(short)}: {why}")
            steps.skip(left - 1)
            steps(tool.name, ", ".join(short), why)
        else:
            steps.skip(left)  # not needed: the length is reached
    drafts = []
    for lines in lengths:
        tier = tier_of(lines)
        text = render(filled, tier)
        if spec is not None and text == render(original, tier):
            problems.append(f"l{lines}: nothing drafted (its spec renders it as it is)")
            continue
        try:
            _check_text(text, lines, echoes=())
        except ValueError as exc:
            problems.append(f"l{lines}: {exc}")
            continue
        drafts.append(Draft(tool.name, f"l{lines}", lines, count_lines(text), text))
    if unusable and len(drafts) < len(lengths):  # why a length fell short
        reasons = ", ".join(f"{why} {n}" for why, n in
                            collections.Counter(unusable).most_common(3))
        problems.insert(0, f"{len(unusable)} of {sum(asked.values())} answers unusable "
                           f"({reasons})")
    return drafts, problems


def accept_drafts(toolset: str, variants: Iterable[str] | None = None,
                  tools: Iterable[str] | None = None, root: Path | None = None
                  ) -> list[tuple[str, str]]:
    """Mark drafts reviewed: ``draft: true`` becomes false with ``reviewed_at`` set.

    Args:
        toolset: the toolset's folder name.
        variants: only these variants (default: every drafted one).
        tools: only these tools (default: all).
        root: the ``descriptions/`` folder (default: the project's).

    Returns:
        ``(tool, variant)`` of each draft accepted.

    Raises:
        BenchError: an unknown toolset (:func:`check_toolset`), the toolset has no specs,
            or nothing matched (names what was asked).
    """
    root = root or descriptions_dir()
    paths = sorted((check_toolset(toolset, root) / "specs").glob("*.yaml"))
    if not paths:
        raise BenchError(f"toolset '{toolset}' has no specs: nothing was drafted (bench "
                         f"variants draft --toolset {toolset} --provider <id>)",
                         file=root / toolset)
    only_variants = set(variants) if variants else None
    only_tools = set(tools) if tools else None
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    accepted = []
    for path in paths:
        if only_tools is not None and path.stem not in only_tools:
            continue
        with specs_lock(path.parent.parent):  # read-modify-write, as a draft's
            found = _variants_of(path)
            changed = False
            for name, entry in found.items():
                if not isinstance(entry, dict) or not entry.get("draft"):
                    continue
                if only_variants is not None and name not in only_variants:
                    continue
                entry["draft"] = False
                entry["reviewed_at"] = now
                accepted.append((path.stem, name))
                changed = True
            if changed:
                _write_spec(path, replace_variants_block(_read_spec_text(path),
                                                           found))
    if not accepted:
        asked = ", ".join(sorted(only_variants or [])) or "any variant"
        raise BenchError(f"no draft to accept in toolset '{toolset}' for {asked}")
    return accepted
