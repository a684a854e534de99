"""The ``sections`` method of ``bench variants draft`` (:mod:`bench.drafting`): the empty
sections of a tool's spec are filled one line per question
(:data:`bench.descriptions.draft_wording.SECTIONS`, read by :func:`read_section`), and each
length is rendered from the filled spec by its template (:func:`tier_of`)."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import jinja2

from bench.descriptions.draft_wording import (EXAMPLES_TOOL, SECTION_TOOL, SECTIONS, Section,
                                              word_runs)
from bench.descriptions.specs import ToolSpec
from bench.descriptions.variants import (_environment, count_lines, render_tool, template_dirs,
                                         template_path)
from bench.drafting.asker import Asker
from bench.drafting.filters import check_text, clean_draft, clean_item, item_problem
from bench.drafting.outcomes import Draft, Steps
from bench.drafting.prompts import (examples_tool, section_prompt, section_questions,
                                     section_tool)
from bench.drafting.spec_writes import new_spec_data
from bench.errors import BenchError
from bench.models import Tool
from bench.parse import ParsedAnswer

SECTION_MAX_TOKENS = 256
"""Default completion cap of one section question: one line of at most
:data:`bench.providers.local.GRAMMAR_MAX_STRING` (160) characters, about 40 tokens, or one
example with its arguments, with the JSON around it and room to spare."""

TIERS = (3, 10, 30, 50)
"""Target lines of the built-in templates l3.j2 ... l50.j2 (bench/data/templates)."""

def tier_of(lines: int) -> int:
    """The template (by its target lines, :data:`TIERS`) that renders a sections draft of
    ``lines`` lines: the nearest, the shorter one on a tie (``l5`` is rendered by ``l3.j2``)."""
    return min(TIERS, key=lambda tier: (abs(tier - lines), tier))



def read_section(answer: ParsedAnswer, section: Section, tool: Tool, question: str,
                 taken: Iterable[str] = ()) -> list[Any]:
    """The usable items of ``section`` in a model's answer to ``question``
    (:func:`bench.drafting.prompts.section_prompt`): the lines of its
    :data:`~bench.descriptions.draft_wording.SECTION_TOOL` call (or of its text), each cleaned
    (:func:`bench.drafting.filters.clean_item`); for ``examples``, ``{"query", "arguments"}``
    of each :data:`~bench.descriptions.draft_wording.EXAMPLES_TOOL` item whose arguments
    validate against ``tool``'s input schema.

    An unusable line is dropped, the others kept (:func:`bench.drafting.filters.item_problem`):
    one with control characters, over :data:`~bench.drafting.filters.MAX_LINE_CHARS`, a JSON
    document, fewer than three words or mostly not letters, or one that copies the prompt (its
    words, a section's heading, :data:`~bench.descriptions.draft_wording.COPY_WORDS` words in a
    row of its rules, fewer than :data:`~bench.drafting.filters.NEW_WORDS` words of its own
    beyond the question's); so is a repeat, of this answer or of ``taken`` (the tool's lines
    so far).

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
        item = clean_item(text, section)
        if not item.strip(". ") or item.lower() in seen:
            continue
        problem = item_problem(item, question)
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
        own = word_runs(request, 3) - word_runs(tool.description, 3)
        if request and own and request.lower() not in seen and \
                item_problem(request, question) is None and validator.is_valid(arguments):
            seen.add(request.lower())
            found.append({"query": request, "arguments": arguments})
    if not found:
        raise ValueError("no example whose request is a new sentence and whose arguments fit "
                         "the tool's input schema")
    return found


def _as_list(value: Any) -> list[str]:
    """A spec section's lines: a list's strings, a string as one line, else none."""
    if isinstance(value, str):
        return [value] if value else []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def sections_needed(spec: dict[str, Any] | None, lengths: Sequence[int]) -> list[Section]:
    """The sections a tool's drafts of ``lengths`` may fill: those the longest length's
    template shows (:func:`tier_of`) that its spec leaves empty (a person's text is kept)."""
    top = tier_of(max(lengths))
    return [s for s in SECTIONS if s.tier <= top and not (spec or {}).get(s.key)]


class Renderer:
    """A tool's spec rendered by the templates of ``root`` (the project's, else bench's)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = _environment(template_dirs(root))

    def __call__(self, data: dict[str, Any], tier: int) -> str:
        """``data`` (a spec's fields) rendered by ``l<tier>.j2``.

        Raises:
            BenchError: the template fails (names its file).
        """
        try:
            return render_tool(ToolSpec.model_validate(data),
                               self.env.get_template(f"l{tier}.j2")).description
        except jinja2.TemplateError as exc:
            raise BenchError(f"template error: {exc.message or type(exc).__name__}",
                             file=template_path(self.root, f"l{tier}")) from None


class _Filler:
    """The lines of one tool's empty sections, asked one question at a time (see
    :func:`draft_sections`): ``filled`` is its spec with the lines received so far."""

    def __init__(self, asker: Asker, toolset: str, tool: Tool, original: dict[str, Any],
                 needed: Sequence[Section], budget_s: float, steps: Steps) -> None:
        self.asker, self.toolset, self.tool = asker, toolset, tool
        self.budget_s, self.steps = budget_s, steps
        self.filled = dict(original)
        self.got: dict[str, list[Any]] = {section.key: [] for section in needed}
        self.unusable: list[str] = []  # why each unusable answer was (its progress line: more)
        self.started = time.monotonic()
        self.queues = {section.key: section_questions(section, tool) for section in needed}
        self.asked: dict[str, int] = {section.key: 0 for section in needed}

    def in_time(self) -> bool:
        """The tool's time budget (``--tool-timeout``) is not spent yet."""
        return time.monotonic() - self.started < self.budget_s

    def ask(self, section: Section) -> None:
        """Ask ``section``'s next question and keep the line of a usable answer."""
        tool, key = self.tool, section.key
        question = self.queues[key].pop(0)
        self.asked[key] += 1
        part = f"{key} {self.asked[key]}"
        examples = key == "examples"
        previous = [g["query"] for g in self.got[key]] if examples else self.got[key]
        began = time.monotonic()
        answer = self.asker.ask(f"draft|{self.toolset}|{tool.name}|{key}|{self.asked[key]}",
                                section_prompt(tool, section, question),
                                examples_tool(tool, 1) if examples else section_tool())
        seconds = time.monotonic() - began
        taken = previous if examples else [
            line for other in SECTIONS if other.key != "examples"
            for line in _as_list(self.filled.get(other.key))]
        try:
            if isinstance(answer, str):
                raise ValueError(answer)
            item = read_section(answer, section, tool, question, taken)[0]
        except ValueError as exc:
            self.unusable.append(str(exc).split(" (")[0].split(": ")[0])
            self.steps(tool.name, part, f"unusable: {exc}", seconds)
            return
        self.got[key].append(item)
        self.filled[key] = item if key == "returns" else list(self.got[key])
        self.steps(tool.name, part, "1 line", seconds)

    def fill_short(self, sections: Sequence[Section], wanted: int) -> list[str]:
        """Ask each of ``sections`` (of l3 or l10) in order until it has ``wanted`` lines
        (``returns`` one); the keys of those left short with questions left."""
        def want(section: Section) -> int:
            return 1 if section.key == "returns" else wanted

        for section in sections:
            while self.queues[section.key] and len(self.got[section.key]) < want(section) \
                    and self.in_time():
                self.ask(section)
        return [s.key for s in sections
                if self.queues[s.key] and len(self.got[s.key]) < want(s)]

    def fill_long(self, sections: Sequence[Section], render: Renderer, tier: int,
                  target: int) -> list[str]:
        """Ask ``sections`` (of l30 or l50) in turn, one question of each, until ``tier``'s
        template renders ``target`` lines; the keys of those with questions left when it
        does not."""
        turn = 0
        while self.in_time() and count_lines(render(self.filled, tier)) < target:
            open_ = [s for s in sections if self.queues[s.key]]
            if not open_:
                break
            self.ask(open_[turn % len(open_)])
            turn += 1
        return [s.key for s in sections if self.queues[s.key]] \
            if count_lines(render(self.filled, tier)) < target else []


def draft_sections(asker: Asker, toolset: str, tool: Tool, spec: dict[str, Any] | None,
                   needed: Sequence[Section], lengths: Sequence[int], render: Renderer,
                   budget_s: float, steps: Steps) -> tuple[list[Draft], list[str]]:
    """Fill ``needed`` sections of ``tool``'s spec one line per request
    (:func:`bench.drafting.prompts.section_prompt`), then render each length with its
    template from the spec with the lines received.

    The sections of l3 and l10 are asked in order, each question of a section until it has
    two lines (one when l3 is the longest length asked; ``returns`` one). Those of l30, and
    then those of l50, are asked in turn, one question of each, until the template's
    rendering reaches its target (the longest length asked that it renders, else its own:
    30 or 50 lines) or no question is left. A question whose answer is unusable leaves
    its line out (its progress line says why; the count is named when a length falls short);
    each length whose rendering is usable (:func:`bench.drafting.filters.check_text`) is a
    draft.

    Returns:
        The drafts to write, and one ``"<section or l<N>>: why"`` per failure.
    """
    top = tier_of(max(lengths))
    targets = {tier: tier for tier in TIERS if tier <= top}  # a tier not asked: its own
    targets.update({tier_of(lines): lines for lines in lengths})  # ascending: longest wins
    original = spec or new_spec_data(tool)
    filler = _Filler(asker, toolset, tool, original, needed, budget_s, steps)
    problems: list[str] = []
    for tier in sorted(targets):
        sections = [section for section in needed if section.tier == tier]
        if tier <= 10:
            short = filler.fill_short(sections, 1 if top == 3 else 2)
        else:
            short = filler.fill_long(sections, render, tier, targets[tier])
        left = sum(len(filler.queues[s.key]) for s in sections)
        if short and not filler.in_time():  # one line for what the budget left out
            why = f"not asked: the tool's --tool-timeout of {budget_s:g} s was spent"
            problems.append(f"{', '.join(short)}: {why}")
            steps.skip(left - 1)
            steps(tool.name, ", ".join(short), why)
        else:
            steps.skip(left)  # not needed: the length is reached
    drafts = _rendered_drafts(tool, spec, original, filler.filled, lengths, render, problems)
    if filler.unusable and len(drafts) < len(lengths):  # why a length fell short
        reasons = ", ".join(f"{why} {n}" for why, n in
                            collections.Counter(filler.unusable).most_common(3))
        problems.insert(0, f"{len(filler.unusable)} of {sum(filler.asked.values())} answers "
                           f"unusable ({reasons})")
    return drafts, problems


def _rendered_drafts(tool: Tool, spec: dict[str, Any] | None, original: dict[str, Any],
                     filled: dict[str, Any], lengths: Sequence[int], render: Renderer,
                     problems: list[str]) -> list[Draft]:
    """Each length of ``lengths`` rendered from the ``filled`` spec that is usable and differs
    from what ``spec`` (None: the tool had none) renders; one ``"l<N>: why"`` per other length
    is appended to ``problems``."""
    drafts = []
    for lines in lengths:
        tier = tier_of(lines)
        text = render(filled, tier)
        if spec is not None and text == render(original, tier):
            problems.append(f"l{lines}: nothing drafted (its spec renders it as it is)")
            continue
        try:
            check_text(text, lines, echoes=())
        except ValueError as exc:
            problems.append(f"l{lines}: {exc}")
            continue
        drafts.append(Draft(tool.name, f"l{lines}", lines, count_lines(text), text))
    return drafts
