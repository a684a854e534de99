"""The ``whole`` method of ``bench variants draft`` (:mod:`bench.drafting`): one request per
tool and length for the whole text (:func:`bench.drafting.prompts.draft_prompt`), read by
:func:`read_draft`."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Sequence

from bench.descriptions.draft_wording import DRAFT_TOOL
from bench.descriptions.variants import count_lines
from bench.drafting.asker import Asker
from bench.drafting.filters import check_text, clean_draft
from bench.drafting.outcomes import Draft, Steps
from bench.drafting.prompts import asked_range, draft_prompt, draft_tool
from bench.models import Tool
from bench.parse import ParsedAnswer


def read_draft(answer: ParsedAnswer, lines: int) -> str:
    """The draft in a model's answer for a target of ``lines`` lines: the ``lines`` of its
    first :data:`~bench.descriptions.draft_wording.DRAFT_TOOL` call joined by newlines, else
    its text (:func:`bench.drafting.filters.clean_draft`).

    Raises:
        ValueError: the answer holds no usable draft; the message says why in a few words
            (an invalid or cut answer, no text, lines that are not strings, and the checks of
            :func:`bench.drafting.filters.check_text`: control characters, a line over
            :data:`~bench.drafting.filters.MAX_LINE_CHARS`, the prompt's own words, a JSON
            document, a line count outside :func:`bench.drafting.filters.usable_range`).
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
    check_text(text, lines)
    return text


TOKENS_PER_LINE = 40
"""Tokens budgeted per drafted line: English runs about 4 characters per token (OpenAI,
"What are tokens and how to count them"), so a 100-character line is about 25, plus the JSON
quotes and comma of its item in the ``lines`` array; the rest is headroom."""


def default_max_tokens(lengths: Iterable[int]) -> int:
    """Completion cap per ``whole`` draft: :data:`TOKENS_PER_LINE` for each line the longest
    length may have (:func:`bench.drafting.prompts.asked_range`), at least 256 (3 lines of JSON framing need well
    under it)."""
    return max(256, TOKENS_PER_LINE * max(asked_range(n)[1] for n in lengths))


def draft_whole(asker: Asker, toolset: str, tool: Tool, lengths: Sequence[int],
                budget_s: float, steps: Steps,
                store: Callable[[list[Draft]], tuple[list[Draft], list[str]]]
                ) -> tuple[list[Draft], list[str]]:
    """Ask one whole text per length of ``tool`` and ``store`` each usable one at once
    (``budget_s``: seconds of requests for the tool, ``--tool-timeout``).

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
