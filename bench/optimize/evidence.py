"""The evidence the proposer reads: the target's failures on ``dev``, grouped per tool, and the
prompt (a jinja2 template the user can replace) that shows them.

A row fails when the target metric, no-call restraint, ask restraint or episode task success
is False for it. It is filed under each tool it expected and, on a no-call or ask case (or a
wrong call), under each tool it called instead: the tool whose description should have kept
the model away. Only ``dev`` rows ever reach here (:mod:`bench.optimize.loop` runs the
target on ``dev``; ``test`` is read once, at acceptance).

A ``dev`` case is not shown when a text of its failure (the query, the label, the answer)
contains a test query of any dataset of the project (:func:`withhold_test_copies`, the
containment signal of :mod:`bench.descriptions.containment`): a dev case of one dataset may
be, word for word, a test case of another, and a prompt that quoted it would hand the
proposer that test query. The round records which cases were left out and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import jinja2

from bench.descriptions.containment import Copy, ModelText, TestIndex
from bench.models import Tool
from bench.results import Row
from bench.templating import load_template_file, render_template

DEFAULT_TEMPLATE = Path(__file__).with_name("prompt.j2")
_FAILING = ("no_call_correct", "ask_correct", "task_success")
_TEXT_LIMIT = 400


@dataclass(frozen=True)
class Failure:
    """One failed ``dev`` row, in the short form a prompt shows.

    Attributes:
        case_id: the case.
        query: the user's last message.
        expected: the label (``search_orders(keyword=...)``, ``no call``, ``ask``).
        answer: what the target answered (calls with arguments, or its text / parse error;
            for an episode, its stop reason and final answer).
        reasons: the metrics it failed and the scorer's error codes.
        trajectory: an episode's calls in order (``a -> b -> c``), else ``""``.
        expected_tools / called_tools: tool names on each side.
    """

    case_id: str
    query: str
    expected: str
    answer: str
    reasons: str
    trajectory: str
    expected_tools: tuple[str, ...]
    called_tools: tuple[str, ...]


def _cut(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def failed_metrics(row: Row, metric: str) -> list[str]:
    """The metrics among ``metric`` and the restraint/task ones that are False for ``row``."""
    values = row.metrics.model_dump()
    return [m for m in dict.fromkeys((metric, *_FAILING)) if values.get(m) is False]


def failure_of(row: Row, metric: str) -> Failure | None:
    """``row`` as a :class:`Failure`, or None when it did not fail."""
    failed = failed_metrics(row, metric)
    if not failed:
        return None
    expected = row.expected
    names: tuple[str, ...]
    if expected is None or expected.no_call:
        label, names = "no call (nothing fits)", ()
    elif expected.ask:
        label, names = "ask for the missing information (no call)", ()
    else:
        names = tuple(str(c.get("name")) for c in expected.calls)
        label = ", ".join(f"{c.get('name')}({json.dumps(c.get('arguments', {}), ensure_ascii=False)})"
                          for c in expected.calls)
    calls = row.calls()
    answer = "; ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})"
                       for c in calls) if calls else \
        (row.parsed.error or row.parsed.text or "no call") if row.parsed else "no answer"
    if row.episode is not None:  # an episode's answer is how it ended
        answer = f"{row.episode.stop_reason}: {row.episode.final_answer or '(no text)'}"
    steps = row.episode.steps if row.episode else []
    trajectory = " -> ".join(c.name or "?" for s in steps for c in s.calls)
    reasons = ", ".join(failed + [f"code {c}" for c in (row.metrics.error_codes or [])])
    return Failure(row.case_id, _cut(row.query or ""), _cut(label), _cut(str(answer)), reasons,
                   _cut(trajectory), names, tuple(c.name or "" for c in calls))


def group_failures(rows: Sequence[Row], metric: str, tools: Sequence[str]
                   ) -> dict[str, list[Failure]]:
    """Failures filed per tool (see the module docstring), tools in ``tools`` order; a tool
    without failures is left out. A call of an unknown tool is filed nowhere."""
    groups: dict[str, list[Failure]] = {name: [] for name in tools}
    for row in sorted(rows, key=lambda r: (r.case_id, r.trial)):
        failure = failure_of(row, metric)
        if failure is None:
            continue
        wrong = [n for n in failure.called_tools if n not in failure.expected_tools]
        for name in dict.fromkeys((*failure.expected_tools, *wrong)):
            if name in groups:
                groups[name].append(failure)
    return {name: found for name, found in groups.items() if found}


def failure_copies(failure: Failure, index: TestIndex) -> list[Copy]:
    """The test queries of ``index`` that a text of ``failure`` a prompt shows (its query,
    label and answer) contains (:meth:`bench.descriptions.containment.TestIndex.copies`;
    ``Copy.location`` is ``query``, ``expected`` or ``answer``)."""
    return index.copies(ModelText("", field, text) for field, text in (
        ("query", failure.query), ("expected", failure.expected), ("answer", failure.answer)))


def withhold_test_copies(groups: dict[str, list[Failure]], index: TestIndex
                         ) -> tuple[dict[str, list[Failure]], dict[str, str]]:
    """``groups`` (:func:`group_failures`) without the failures whose shown text contains a
    test query of ``index`` (:func:`failure_copies`; a tool left with none is dropped), and
    why each such ``dev`` case was left out: ``case id -> "its query copies test case e3 of
    dataset ex ('...')"``."""
    withheld: dict[str, str] = {}
    kept: dict[str, list[Failure]] = {}
    for tool, found in groups.items():
        shown = []
        for failure in found:
            if failure.case_id not in withheld:
                copies = failure_copies(failure, index)
                if copies:
                    first = copies[0]
                    of = f" of dataset {first.dataset}" if first.dataset else ""
                    withheld[failure.case_id] = (f"its {first.location} copies test case "
                                                 f"{first.case_id}{of} "
                                                 f"('{first.evidence[:80]}')")
            if failure.case_id not in withheld:
                shown.append(failure)
        if shown:
            kept[tool] = shown
    return kept, withheld


def refuse_test_copies(prompt: str, index: TestIndex, what: str,
                       file: str | Path | None = None) -> None:
    """Refuse to send ``prompt`` (``what`` names it: ``the proposer's prompt for tool x``)
    when it contains a test query of ``index``: every text a model sees is checked against
    every test split, whatever put the query there (the template, a description).

    Raises:
        BenchError: names the test case, its dataset and the words found (and ``file``).
    """
    from bench.errors import BenchError

    for copy in index.copies([ModelText("", what, prompt)]):
        of = f" of dataset {copy.dataset}" if copy.dataset else ""
        raise BenchError(f"{what} contains test case {copy.case_id}{of} "
                         f"('{copy.evidence[:80]}'); prompts may quote dev cases only",
                         file=file)


def load_template(path: str | None) -> jinja2.Template:
    """The proposer's prompt template: ``path`` or the shipped ``prompt.j2``, compiled in
    jinja2's sandbox like every user template (:func:`bench.templating.load_template_file`).

    Raises:
        BenchError: the file is missing or not a valid template (names file and line).
    """
    return load_template_file(Path(path) if path else DEFAULT_TEMPLATE,
                              keep_trailing_newline=True)


def check_template(template: jinja2.Template, tools: Sequence[Tool], *,
                   max_tokens_ratio: float) -> str:
    """Render ``template`` once for the first of ``tools`` with one made-up failure, before
    any request is sent, so that a template that breaks a sandbox rule, names a variable it
    is not given or fails in any other way fails at the start (names the file), not after
    the first ``dev`` run; returns the prompt it rendered.

    Raises:
        BenchError: as :func:`render_prompt`.
    """
    example = Failure("example", "an example request", "an example label", "no call",
                      "selection_correct", "", (tools[0].name,), ())
    return render_prompt(template, tools[0], tools, [example], max_failures=1,
                         max_tokens_ratio=max_tokens_ratio)


def render_prompt(template: jinja2.Template, tool: Tool, tools: Sequence[Tool],
                  failures: Sequence[Failure], *, max_failures: int,
                  max_tokens_ratio: float) -> str:
    """The prompt for ``tool``: at most ``max_failures`` of its failures, all ``tools`` as
    JSON, the token ratio allowed.

    Raises:
        BenchError: the template uses a name it is not given, breaks a sandbox rule, or fails
            while rendering (names the template file: :func:`bench.templating.template_error`).
    """
    tools_json = json.dumps([t.model_dump() for t in tools], ensure_ascii=False, indent=1)
    return render_template(template, tool=tool, tools=list(tools), tools_json=tools_json,
                           failures=list(failures[:max_failures]), total=len(failures),
                           max_tokens_ratio=max_tokens_ratio)
