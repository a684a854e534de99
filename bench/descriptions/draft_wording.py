"""The wording of bench's drafting prompts (``bench variants draft``, :mod:`bench.drafting`):
the names of its answer tools, the questions its ``sections`` method asks per spec section
(:data:`SECTIONS`), the rules it states, and :func:`prompt_wording`, which finds that wording
in a line of a description. It sits with the descriptions so that ``bench lint`` (BL017,
:mod:`bench.descriptions.lint`) flags a drafted text that copied its prompt without
importing the drafting application above it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

DRAFT_TOOL = "write_description"
SECTION_TOOL = "write_section"
EXAMPLES_TOOL = "write_examples"


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
the length reaches its target (:func:`bench.drafting.sections.draft_sections`)."""


QUESTION_RULES = ("Answer this question in one short sentence of your own, using only the "
                  "facts below, and call {answer} with it.")
"""The rules that lead every section question (``{answer}``: the tool to call)."""

WORD = re.compile(r"\w+")
FACTS = re.compile(r"\bTool `[^`]+`\s*:|\b(?:string|integer|number|boolean|array|object|"
                   r"any), (?:required|optional)\b")
"""The wording of a section prompt's facts (``Tool `get_time`: ...``, and a parameter's
``(string, required)``, :func:`bench.drafting.prompts.parameter_lines`): the embedded 0.5B
model copied them into its lines ("Tool `get_current_time`: Get current time in a specific
timezones.", "The parameter `timezone` of `get_current_time` accepts a string, required, and
IANA timezone name"); a template writes the parameters itself."""

PROMPT_PHRASES = ("line(s)", "non-empty lines", "Answer this question", "sentence of your own",
                  "the facts below", "Answer with a phrase", "Rewrite the description of the "
                  "tool", "Current description:", "Input schema (JSON Schema)", "Question:",
                  "Facts:", DRAFT_TOOL, SECTION_TOOL, EXAMPLES_TOOL, "reply_to_user")
"""Words of bench's drafting prompts and answer tools
(:func:`bench.drafting.prompts.draft_prompt`, :func:`bench.drafting.prompts.section_prompt`)
that no description of a tool holds unless it copied the prompt."""

COPY_WORDS = 5
"""An item holding a run of this many words of the prompt's rules copied them (the 0.5B
model wrote "What it returns: exactly 1 line(s), each what a call returns..."): dropped."""

def word_runs(text: str, size: int = COPY_WORDS) -> set[tuple[str, ...]]:
    """The runs of ``size`` consecutive words of ``text`` (lower case)."""
    words = [w.lower() for w in WORD.findall(text)]
    return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}


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
    copied = word_runs(line) & word_runs(QUESTION_RULES)
    if copied:
        return " ".join(min(copied))
    for pattern in (_question_patterns(), FACTS):
        match = pattern.search(line)
        if match and (pattern is not FACTS or not _PARAMETER_LINE.match(line)):
            return match.group(0)[:60]
    match = re.search(r"\b(?:use it|do not use it) when the user,", line, re.IGNORECASE)
    return match.group(0) if match else None

