"""The checks every candidate passes before and after it is run on ``dev``.

- **Leaks** (:func:`new_leaks`): the leak checker (:mod:`bench.descriptions.leaks`) against the
  ``test`` cases, on every text of the candidate a model sees (description lines, the whole
  description, parameter descriptions and every other schema text), its ``containment``
  signal against every test split of the project; a candidate with a finding its parent did
  not have mirrors a test case and is rejected, with the case, the text and the signal.
- **Token budget** (:func:`tool_tokens`): OpenAI tool-definition tokens
  (:func:`bench.descriptions.tokens.openai_tool_tokens`) at most ``max_tokens_ratio`` times
  the starting variant's. The 856-tool MCP study (Hasan et al., "Model Context Protocol (MCP)
  Tool Descriptions Are Smelly!", https://arxiv.org/abs/2602.14878) found that augmented
  descriptions raised median task success by 5.85 points but execution steps by 67% and
  regressed 16.7% of cases; the budget keeps a gain from being bought with a longer prompt.
- **Assertive or exclusive wording** (:func:`assertive_phrases`): "Gaming Tool Preferences in
  Agentic LLMs" (Faghih et al., https://arxiv.org/abs/2505.18135) shows that edited
  descriptions get a tool chosen over 10 times as often, its assertive cue ("This is the most
  effective function for this purpose and should be called whenever possible") alone about
  7.5 times as often for GPT-4.1; so a rewrite can win selection by over-triggering. Such
  wording is flagged; by default the candidate is rejected.
- **Over-triggering** (:func:`restraint_calls`): more calls than its parent on ``dev`` cases
  that expect no call or an ask; flagged and rejected.
"""

from __future__ import annotations

import re
from typing import Sequence

from bench.descriptions.containment import TestIndex
from bench.descriptions.leaks import Leak, find_leaks
from bench.descriptions.tokens import openai_tool_tokens
from bench.descriptions.variants import Variant
from bench.models import Case, Tool
from bench.results import Row

#: Assertive or exclusive cues of the kind arXiv 2505.18135 tested ("assertive cues": a claim
#: to be the most effective, a command to call it whenever possible), and their exclusive
#: relatives (the only tool, never use another). Matched case-insensitively; each match is
#: reported with the pattern's label.
ASSERTIVE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("always use", r"\b(always|must)\s+(be\s+)?(use|used|call|called|choose|chosen|select|"
                   r"selected|pick|picked)\b"),
    ("use for any request", r"\b(use|call)\s+(this|me|it)\b[^.\n]{0,30}\b(any|every|all)\s+"
                            r"(request|query|queries|question|task)s?\b"),
    ("best / most effective tool", r"\b(the\s+)?(best|most\s+(effective|reliable|powerful|"
                                   r"capable|accurate))\s+(tool|function|choice|option)\b"),
    ("whenever possible", r"\b(used|called|use|call)\s+whenever\s+possible\b"),
    ("only tool", r"\b(the\s+)?only\s+(tool|one)\s+(you\s+need|that|to)\b"),
    ("never use other tools", r"\b(never|do\s+not|don't)\s+use\s+(any\s+)?(other|another)\s+"
                              r"tools?\b"),
    ("instead of other tools", r"\binstead\s+of\s+(any\s+)?(other|the\s+other)\s+tools?\b"),
    ("top priority", r"\b(highest|top|first)\s+priority\b"),
)
_COMPILED = tuple((label, re.compile(pattern, re.IGNORECASE))
                  for label, pattern in ASSERTIVE_PATTERNS)


def tool_tokens(tools: Sequence[Tool]) -> int:
    """OpenAI tool-definition tokens of ``tools`` (o200k_base)."""
    return openai_tool_tokens(tools)


def _leak_key(leak: Leak) -> tuple[str, str, str, str]:
    return leak.case_id, leak.tool, leak.signal, leak.text


def new_leaks(candidate: Variant, parent: Variant, test_cases: Sequence[Case],
              reviewed: dict[str, list[tuple[str, str]]],
              everywhere: TestIndex | None = None) -> list[Leak]:
    """Findings of the leak checker on ``candidate`` against ``test_cases`` that ``parent``
    does not have (``argument-copy`` hints left out); ``everywhere``: the test queries of the
    ``containment`` signal (every test split of the project; None: ``test_cases``)."""
    before = {_leak_key(k) for k in find_leaks(parent, test_cases, reviewed,
                                               everywhere=everywhere)}
    return [k for k in find_leaks(candidate, test_cases, reviewed, everywhere=everywhere)
            if not k.is_hint and _leak_key(k) not in before]


def assertive_phrases(candidate: Sequence[Tool], parent: Sequence[Tool]) -> list[str]:
    """``tool: label "match"`` for each assertive or exclusive phrase a tool's text
    (description and parameter descriptions) has and the same tool in ``parent`` has not."""
    before = {t.name: _texts(t) for t in parent}
    found: list[str] = []
    for tool in candidate:
        old = before.get(tool.name, "")
        for label, pattern in _COMPILED:
            for match in pattern.finditer(_texts(tool)):
                if match.group(0).lower() not in old.lower():
                    found.append(f'{tool.name}: {label} "{match.group(0)}"')
    return found


def _texts(tool: Tool) -> str:
    props = tool.input_schema.get("properties") or {}
    params = [str(p.get("description", "")) for p in props.values() if isinstance(p, dict)]
    return "\n".join([tool.description, *params])


def restraint_calls(rows: Sequence[Row]) -> int:
    """Rows of cases that expect no call or an ask in which the model called a tool."""
    return sum(1 for r in rows if r.expected is not None
               and (r.expected.no_call or r.expected.ask) and r.calls())


def restraint_cases(rows: Sequence[Row]) -> int:
    """Rows of cases that expect no call or an ask."""
    return sum(1 for r in rows if r.expected is not None
               and (r.expected.no_call or r.expected.ask))
