"""What of a model's drafting answer is usable (:mod:`bench.drafting`): the checks of a whole
text (:func:`check_text`: its length, control characters, over-long lines, a JSON document,
the prompt's own words) and of one line of a section (:func:`clean_item`,
:func:`item_problem`: a line that copies its prompt or only restates its question)."""

from __future__ import annotations

import math
import re
from typing import Sequence

from bench.descriptions.draft_wording import (DRAFT_TOOL, EXAMPLES_TOOL, FACTS, QUESTION_RULES,
                                              SECTION_TOOL, SECTIONS, WORD, Section,
                                              word_runs)
from bench.descriptions.variants import count_lines

USABLE = (0.5, 1.5)
"""A draft of target ``N`` lines is usable with ``ceil(0.5 N)`` to ``floor(1.5 N) + 1``
non-empty lines (the prompt asks for 0.7 N to 1.3 N + 1,
:func:`bench.drafting.prompts.asked_range`): outside that, a variant ``l<N>`` would not
measure the length its name says."""

MAX_LINE_CHARS = 400
"""Longest line a draft may hold (characters): a description line is a sentence; a longer
one is a model repeating itself, or data that is not a description."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def usable_range(lines: int) -> tuple[int, int]:
    """The range of non-empty lines a draft of ``lines`` must have to be kept (:data:`USABLE`)."""
    return max(1, math.ceil(lines * USABLE[0])), math.floor(lines * USABLE[1]) + 1


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


def check_text(text: str, lines: int, echoes: Sequence[str] = _ECHOES) -> None:
    """Raise ValueError when ``text`` is no usable draft of ``lines`` lines (the checks of
    :func:`bench.drafting.whole.read_draft`; ``echoes``: the prompt's words it must not hold)."""
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


def _check_line(line: str, echoes: Sequence[str]) -> None:
    """Raise ValueError when one line of a draft is unusable (see
    :func:`bench.drafting.whole.read_draft`)."""
    echo = next((words for words in echoes if words in line), None)
    if echo is not None:
        raise ValueError(f"the prompt copied back ('{echo}')")
    if _CONTROL.search(line):
        raise ValueError("control characters in the text")
    if len(line) > MAX_LINE_CHARS:
        raise ValueError(f"a line of {len(line)} characters (at most {MAX_LINE_CHARS})")


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

NEW_WORDS = 3
"""Words of three letters or more that an item must hold beyond its question's: fewer, and
it only restates the question ("The assistant should handle a request that `get_time` can
only partly serve."): dropped. A restatement that adds an answer ("... by asking for the
city") is kept."""


def item_problem(item: str, question: str) -> str | None:
    """Why one cleaned line of a section is unusable, or None (see
    :func:`bench.drafting.sections.read_section`)."""
    try:
        _check_line(item, _SECTION_ECHOES)
    except ValueError as exc:
        return str(exc)
    if item[0] in "{[":
        return "a JSON document, not a description"
    if len(WORD.findall(item)) < 3 or sum(c.isalpha() for c in item) < len(item) / 2:
        return "not a sentence"
    asked = {w.lower() for w in WORD.findall(question + QUESTION_RULES)}
    own = {w.lower() for w in WORD.findall(item) if len(w) > 2} - asked
    words = " ".join(w.lower() for w in WORD.findall(item))
    # kept: a when-to-use line that begins "when the user," and drops the phrase ("when the
    # user, `convert_time` serves to convert time..."): all seven such answers of the 0.5B
    # model for convert_time were of this kind, and without them l3 is its summary alone
    # (no draft); bench lint warns on them (BL017,
    # :func:`bench.descriptions.draft_wording.prompt_wording`)
    if _HEADING.search(item) or FACTS.search(item) or \
            word_runs(item) & word_runs(QUESTION_RULES) or len(own) < NEW_WORDS or \
            " ".join(w.lower() for w in WORD.findall(question)) in words:
        return "the prompt copied back"
    return None


CUT_CHARS = 150
"""A line this long is likely cut by the embedded model's grammar, which caps a string at
:data:`bench.providers.local.GRAMMAR_MAX_STRING` (160) characters: it keeps its whole
sentences only (when it has one before the cut)."""


def clean_item(text: str, section: Section) -> str:
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
