"""Runs for the report tests, produced by the real runner, parser and scorer.

``ScriptedProvider`` answers in the embedded model's JSON format from a script (case id ->
answer text), so rows are exactly what ``bench run`` writes; only the model is replaced.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from bench.models import Case, Message, Tool
from bench.parse import parse_json_tool_calls
from bench.providers.base import Provider, ProviderResponse, Usage
from bench.runner import RunConfig, Runner

# Hostile model output: each must show as text and never run or link.
SCRIPT = "<script>window.__pwned = 'script'</script>"
IMG = "\"><img src=x onerror=\"window.__pwned='img'\">"
LINK = "<a href=\"javascript:window.__pwned='link'\">click me</a>"
END_SCRIPT = "</script><script>window.__pwned='end'</script><!--"
HOSTILE = (SCRIPT, IMG, LINK, END_SCRIPT, "line\u2028sep\u2029para")


def hostile_answer(case: Case) -> str:
    """Calls with hostile arguments and a hostile made-up tool name; for case numbers divisible
    by 3, hostile prose that cannot be parsed."""
    if int("".join(ch for ch in case.id if ch.isdigit()) or 0) % 3 == 0:
        return "Sure! " + SCRIPT + IMG + LINK + END_SCRIPT
    name = case.expected.calls[0].name if case.expected.calls else "reply_without_tool"
    arguments = {"keyword": SCRIPT + IMG, "order_id": LINK, "note": END_SCRIPT + HOSTILE[4]}
    calls = [{"name": name, "arguments": arguments},
             {"name": IMG.replace('"', "'"), "arguments": {}}]  # a hallucinated tool name
    return json.dumps({"tool_calls": calls})


class ScriptedProvider(Provider):
    """Answers from ``script(case) -> text`` through the embedded model's real parser."""

    def __init__(self, provider_id: str, script: Callable[[Case], str], cases: Sequence[Case]):
        self.provider_id = provider_id
        self._script = script
        self._by_query = {c.query: c for c in cases}

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        case = self._by_query[[m for m in messages if m.role == "user"][-1].content]
        text = self._script(case)
        return ProviderResponse(raw=text, parsed=parse_json_tool_calls(text, "stop"),
                                finish_reason="stop", latency_s=0.01 * (1 + trial),
                                usage=Usage(prompt_tokens=100 + len(tools), completion_tokens=20),
                                tool_definition_tokens=sum(len(t.description) for t in tools))

    def describe(self) -> dict[str, Any]:
        return {"provider": self.provider_id, "model": "scripted <b>model</b>"}


def make_run(run_id: str, script: Callable[[Case], str], *, variants: Sequence[str] = ("l3",
             "l10"), providers: Sequence[str] = ("local",), limit: int | None = 12,
             trials: int = 1, case_ids: Sequence[str] | None = None,
             execute: bool = False, first: bool = True) -> None:
    """Run the project's ``ecommerce`` cases through :class:`ScriptedProvider` (BENCH_HOME);
    ``execute`` runs the calls on the reference executor (off: rows carry no execution
    metrics, as the report tests assume). ``limit`` takes the first N cases (named as
    ``case_ids``: the report tests know which cases ran) or, with ``first=False``, the
    run's own ``limit`` (the stratified sample ``bench run --limit`` takes)."""
    if first and limit and not case_ids:
        from bench.datasets import load_dataset
        case_ids = [case.id for case in load_dataset("ecommerce").cases[:limit]]
        limit = None
    config = RunConfig(variants=list(variants), providers=list(providers), limit=limit,
                       trials=trials, case_ids=list(case_ids) if case_ids else None,
                       execute=execute)
    holder: dict[str, Runner] = {}

    def factory(provider_id: str, _config: RunConfig) -> Provider:
        return ScriptedProvider(provider_id, script, holder["runner"].cases)

    runner = Runner(config, run_id=run_id, command=["bench", "run"], provider_factory=factory)
    holder["runner"] = runner
    runner.run()


def expected_answer(case: Case) -> str:
    """The right answer for every case: the first acceptable value of each argument."""
    if not case.expected.calls:
        return '{"tool_calls": []}'
    calls = [{"name": c.name, "arguments": {k: next(v for v in values if v is not None)
                                            for k, values in c.arguments.items()
                                            if any(v is not None for v in values)
                                            and not isinstance(values[0], dict)}}
             for c in case.expected.calls]
    return json.dumps({"tool_calls": calls}, ensure_ascii=False)


def mixed_answer(case: Case) -> str:
    """The right answer for cases with an even number in their id, no call for the others."""
    even = int("".join(ch for ch in case.id if ch.isdigit()) or 0) % 2 == 0
    return expected_answer(case) if even else '{"tool_calls": []}'
