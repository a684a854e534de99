"""From the proposer's answers to candidate variants: parse each tool's proposal, apply it to
the current variant, and run the guards that need no model (:mod:`bench.optimize.guards`:
token budget, leaks into ``test``, assertive wording). A round also tries one combined
candidate with every edit that passed, when there are two or more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, cast

from bench.api import Evaluation
from bench.descriptions.containment import TestIndex
from bench.descriptions.variants import Variant
from bench.models import Case, Tool
from bench.optimize.config import OptimizeConfig
from bench.optimize.guards import assertive_phrases, new_leaks, tool_tokens
from bench.optimize.proposals import Proposal, Rejected, apply_proposal, proposal_from_row
from bench.optimize.records import Candidate, Rejection, RejectionKind

COMBINED = "all"


@dataclass(frozen=True)
class Guards:
    """What the model-free guards compare against.

    Attributes:
        start: the starting variant; start_tokens: its tool-definition tokens.
        test_cases: the ``test`` split (never shown to the proposer; only the leak checker
            reads it); reviewed: the datasheet's reviewed cross-language mirrors.
        config: the optimization.
        everywhere: every test split of the project, for the leak checker's
            ``containment`` signal (None: ``test_cases``).
    """

    start: Variant
    start_tokens: int
    test_cases: Sequence[Case]
    reviewed: dict[str, list[tuple[str, str]]]
    config: OptimizeConfig
    everywhere: TestIndex | None = None

    def test_index(self) -> TestIndex:
        """The test queries no text a model sees may contain: :attr:`everywhere`, else the
        ``test_cases``."""
        if self.everywhere is not None:
            return self.everywhere
        return TestIndex(("", case) for case in self.test_cases)

    def check(self, candidate: Variant, parent: Variant) -> tuple[Rejection | None, list[str]]:
        """Every guard ``candidate`` fails, as one :class:`Rejection` (its kind the first of
        leak, assertive, tokens; round and tool left for the caller) or None, and its flags
        (assertive wording found, whether or not it rejects)."""
        flags = [f"assertive wording: {p}" for p in
                 assertive_phrases(candidate.tools, parent.tools)]
        failed: list[tuple[RejectionKind, str]] = []
        leaks = new_leaks(candidate, parent, self.test_cases, self.reviewed, self.everywhere)
        if leaks:  # a whole-line signal first: it names the line that is the copy
            first = min(leaks, key=lambda k: k.signal == "containment")
            cases = sorted({k.case_id for k in leaks})
            where = "" if first.section in ("summary", "description") or \
                not first.section.startswith("input_schema") else f" {first.section}"
            failed.append(("leak", f"mirrors test case(s) {', '.join(cases)}: {first.signal} "
                                   f"in {first.tool}{where} ({first.text!r})"))
        if flags and not self.config.allow_assertive:
            failed.append(("assertive", "; ".join(flags)))
        ratio = tool_tokens(candidate.tools) / max(self.start_tokens, 1)
        if ratio > self.config.max_tokens_ratio:
            failed.append(("tokens", f"{ratio:.3f}x the start's tool-definition tokens "
                                     f"(at most {self.config.max_tokens_ratio}x)"))
        if not failed:
            return None, flags
        return Rejection(round=0, tool="", kind=failed[0][0],
                         reason="; ".join(reason for _, reason in failed)), flags


def _variant(name: str, current: Variant, tools: Sequence[Tool]) -> Variant:
    return Variant(name=name, toolset=current.toolset, tools=tuple(tools),
                   source=f"candidate {name}")


def _proposals(round_no: int, asked: Sequence[str], answers: Evaluation, current: Variant
               ) -> tuple[list[tuple[Proposal, list[Tool]]], list[Rejection]]:
    """The usable proposals of a round (with the tools they give) and the rejected ones."""
    rows = {r.case_id: r for r in answers.rows}
    usable: list[tuple[Proposal, list[Tool]]] = []
    rejected: list[Rejection] = []
    for tool in asked:
        row = rows.get(f"r{round_no}-{tool}")
        try:
            if row is None:
                raise Rejected("the proposer gave no answer")
            proposal = proposal_from_row(row, tool)
            usable.append((proposal, apply_proposal(current.tools, proposal)))
        except Rejected as exc:
            rejected.append(Rejection(round=round_no, tool=tool,
                                      kind=cast(RejectionKind, exc.kind), reason=str(exc)))
    return usable, rejected


def build_candidates(round_no: int, asked: Sequence[str], answers: Evaluation,
                     current: Variant, guards: Guards
                     ) -> tuple[list[tuple[Candidate, Variant]], list[Rejection]]:
    """A round's candidates (records and variants, not yet written) and its rejections."""
    usable, rejected = _proposals(round_no, asked, answers, current)
    kept: list[tuple[Candidate, Variant, Proposal]] = []
    for index, (proposal, tools) in enumerate(usable, start=1):
        name = f"r{round_no}c{index}"
        variant = _variant(name, current, tools)
        rejection, flags = guards.check(variant, current)
        if rejection is not None:
            rejected.append(rejection.model_copy(update={"round": round_no,
                                                         "tool": proposal.tool,
                                                         "candidate": name}))
            continue
        kept.append((_record(name, round_no, current, [proposal], tools, flags, guards),
                     variant, proposal))
    out = [(record, variant) for record, variant, _ in kept]
    if len(kept) > 1:
        tools = list(current.tools)
        for _, _, proposal in kept:
            tools = apply_proposal(tools, proposal)
        name = f"r{round_no}{COMBINED}"
        variant = _variant(name, current, tools)
        rejection, flags = guards.check(variant, current)
        proposals = [p for _, _, p in kept]
        if rejection is None:
            out.append((_record(name, round_no, current, proposals, tools, flags, guards),
                        variant))
        else:
            rejected.append(rejection.model_copy(update={
                "round": round_no, "tool": ",".join(p.tool for p in proposals),
                "candidate": name}))
    return out, rejected


def _record(name: str, round_no: int, parent: Variant, proposals: Sequence[Proposal],
            tools: Sequence[Tool], flags: list[str], guards: Guards) -> Candidate:
    tokens = tool_tokens(tools)
    return Candidate(name=name, round=round_no, parent=parent.name,
                     tools=[p.tool for p in proposals],
                     reasons={p.tool: p.reason for p in proposals}, tokens=tokens,
                     token_ratio=round(tokens / max(guards.start_tokens, 1), 4), flags=flags)
