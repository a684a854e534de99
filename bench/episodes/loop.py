"""The episode loop: ask, execute the calls, send the results back, repeat (BRIEF §10).

One episode is one plan item. Each step is an ordinary request of the run
(:meth:`bench.runner.Runner.execute`: cache, replay, batch, retries, rate limits), its plan
item carrying the conversation so far, so the cache and replay key each step on that
conversation and a recorded episode replays offline. Calls run on the reference executor
against the episode's own database copy (:mod:`bench.episodes.state`), concurrently when one
answer makes several, each with its own context; their results go back as ``tool`` messages
that each adapter sends in its provider's native form (OpenAI ``tool`` messages with
``tool_call_id``, Responses ``function_call_output``, Anthropic ``tool_result`` with
``is_error``, Gemini ``functionResponse``, the embedded model's ``Tool result`` turns).

The executor does not retry inside an episode (``max_retries`` 0): what a failure does to the
agent is what is measured, so the model sees it. Writes are allowed (they land in the private
copy and persist for the rest of the episode); sensitive tools follow ``--allow-sensitive``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from bench.episodes.factors import Factors, render_result
from bench.episodes.state import EpisodeDatabase
from bench.episodes.stored import stored, stored_json
from bench.executor.backends.base import Handler
from bench.executor.faults import oversized_payload
from bench.executor.outcome import CallContext, RunContext, ToolError
from bench.executor.pipeline import Executor, ExecutorConfig
from bench.models import Message, ToolCall
from bench.parse import ParsedAnswer
from bench.providers.cache import messages_digest
from bench.scoring.episodes import REPEAT_GUARD, MadeCall, canonical_call, episode_metrics

UNCAPPED_TOKENS = 10 ** 9
"""The executor's result budget when the condition sends results uncapped."""


def _answer_record(parsed: ParsedAnswer, calls: list[ToolCall]) -> dict[str, Any]:
    """A step's record of the model's answer: ``text``, ``calls`` (those the loop went on
    with, under the ids it gave them; ``{id, name, arguments, valid}`` and ``raw_arguments``
    when not valid) and ``parsed`` (the answer as replay rebuilds it).

    A value over :data:`bench.episodes.stored.STORED_CHARS` characters (an object: its JSON
    text) is stored once, as its head and tail with ``<field>_chars``: in ``text`` or
    ``calls`` when the step shows it there, and then left out of ``parsed`` (so is a valid
    call's ``raw_arguments`` when its arguments were cut: that text decodes to them); else
    in ``parsed``. The step then gets ``stored_cut: true``, and replay does not answer it:
    its whole answer is no longer in the row.
    """
    shown = []
    for call in calls:
        entry = {"id": call.id, "name": call.name, **stored_json(call.arguments, "arguments"),
                 "valid": call.valid}
        if not call.valid:
            entry.update(stored_json(call.raw_arguments, "raw_arguments"))
        shown.append(entry)
    record: dict[str, Any] = {**stored(parsed.text or "", "text"), "calls": shown}
    dump = parsed.model_dump()
    cut = "text_chars" in record
    if cut:
        del dump["text"]
    for i, kept in enumerate(dump["calls"]):
        entry = shown[i] if i < len(shown) else {}
        for key in ("arguments", "raw_arguments"):
            if f"{key}_chars" in entry or (key not in entry and "arguments_chars" in entry):
                del kept[key]  # stored cut in calls (a valid call's raw text: its arguments)
                cut = True
            elif key not in entry:  # only parsed holds it
                capped = stored_json(kept[key], key)
                kept.update(capped)
                cut = cut or len(capped) > 1
    record["parsed"] = dump
    return {**record, "stored_cut": True} if cut else record


@dataclass
class EpisodeOutcome:
    """A finished episode.

    Attributes:
        steps: the trajectory (see :class:`bench.results.RowEpisode`).
        final_answer: the last answer's text ("" when the episode did not end on one).
        stop_reason: ``final_answer``, ``step_limit``, ``loop_guard`` or ``unparseable``.
        metrics: :func:`bench.scoring.episodes.episode_metrics`.
        state_checks: the state checks' results (None when they did not run).
        usage: tokens summed over the steps (``prompt_tokens``, ``completion_tokens``,
            ``cached_tokens``, ``reasoning_tokens``: None when no step reported them).
        attempts: requests sent (0 when every step came from the cache).
        cache: ``hit`` when every step was a cache hit, ``miss`` when some was asked, None
            with the cache off.
        responses: each step's provider response (for cost).
        wall_s: the episode's wall time, seconds.
    """

    steps: list[dict[str, Any]]
    final_answer: str
    stop_reason: str
    metrics: dict[str, Any]
    state_checks: list[dict[str, Any]] | None
    usage: dict[str, Any]
    attempts: int
    cache: str | None
    responses: list[Any] = field(default_factory=list)
    wall_s: float = 0.0


_FAULTS = {
    "timeout": lambda: ToolError("timeout", "timeout", "the tool did not answer within 5 s; "
                                 "retry once, then tell the user it is unavailable"),
    "503": lambda: ToolError("transient", "http_503", "HTTP 503 Service Unavailable: the "
                             "service is briefly overloaded; retry the same call once",
                             status=503),
    "429": lambda: ToolError("rate_limited", "http_429", "HTTP 429 Too Many Requests: wait "
                             "1 s, then retry the same call", retry_after_s=1.0, status=429),
}


def _first_call_faults(handlers: Mapping[str, Handler], fault: str) -> dict[str, Handler]:
    """``handlers`` whose first call per tool in this episode fails as ``fault`` says
    (``huge``: returns its real result plus about 8 MB of rows); deterministic."""
    lock = threading.Lock()
    called: set[str] = set()

    def wrapped(name: str, handler: Handler) -> Handler:
        def run(arguments: dict[str, Any], ctx: CallContext) -> Any:
            with lock:
                first = name not in called
                called.add(name)
            if not first:
                return handler.run(arguments, ctx)
            if fault == "huge":
                return oversized_payload(handler.run(arguments, ctx))
            raise _FAULTS[fault]()
        return dataclasses.replace(handler, run=run)

    return {name: wrapped(name, h) for name, h in handlers.items()}


def _writes(tools: Mapping[str, Any], name: str) -> bool:
    """The tool writes (its permission is ``write`` or ``sensitive``)."""
    tool = tools.get(name)
    return tool is not None and tool.permission in ("write", "sensitive")


def _usage_sum(responses: list[Any]) -> dict[str, Any]:
    reasoning = [r.usage.reasoning_tokens for r in responses
                 if r.usage.reasoning_tokens is not None]
    return {"prompt_tokens": sum(r.usage.prompt_tokens for r in responses),
            "completion_tokens": sum(r.usage.completion_tokens for r in responses),
            "cached_tokens": sum(r.usage.cached_tokens for r in responses),
            "reasoning_tokens": sum(reasoning) if reasoning else None}


def _call_ids(calls: list[ToolCall], used: set[str], step: int) -> list[ToolCall]:
    """The calls with ids unique in the episode (a provider without ids gives ``call_0``
    at every step; a repeated id would pair a result with an older call). A given id is
    ``call_<step>_<index>``, suffixed until unused (the model may have sent that name)."""
    out = []
    for index, call in enumerate(calls):
        if call.id in used or not call.id:
            given, n = f"call_{step}_{index}", 1
            while given in used:
                given, n = f"call_{step}_{index}_{n}", n + 1
            call = call.model_copy(update={"id": given})
        used.add(call.id)
        out.append(call)
    return out


async def run_episode(runner: Any, item: Any, execution: Any) -> EpisodeOutcome:
    """Run one episode plan item to its end.

    Args:
        runner: the :class:`bench.runner.Runner` (its ``execute`` answers each step).
        item: the :class:`bench.runner.plan.PlanItem` (an episode case, its factors).
        execution: the run's :class:`bench.executor.runhook.RunExecution` (traces, MCP).

    Returns:
        The :class:`EpisodeOutcome`.

    Raises:
        Whatever :meth:`Runner.execute` raises for a step (the episode is then not recorded
        and a resume runs it again from the start: never half-counted).
    """
    case, factors = item.case, item.factors or Factors()
    started = time.perf_counter()
    conversation = list(case.messages)
    replies = list(case.user_replies)
    steps: list[dict[str, Any]] = []
    made: list[MadeCall] = []
    responses: list[Any] = []
    attempts, caches = 0, set()
    # ids of the label's own history count as used: a result pairs with its call by id
    used_ids = {str(c.get("id")) for m in case.messages for c in m.tool_calls or []
                if isinstance(c, dict) and c.get("id")}
    used_ids |= {m.tool_call_id for m in case.messages if m.tool_call_id}
    repeats: dict[str, int] = {}  # identical calls since the last successful write
    confirmed_at: int | None = None  # the step after which the first user reply was sent
    stop_reason, final_answer = "step_limit", ""
    tools = {t.name: t for t in item.variant.tools}
    run_context = RunContext(run_id=runner.store.run_id, case_id=case.id, trial=item.trial,
                             user_id=case.state.user_id if case.state else None,
                             allow_writes=True, allow_sensitive=runner.config.allow_sensitive)
    overrides = case.state.overrides if case.state else []
    database = EpisodeDatabase(overrides)
    await asyncio.to_thread(database.__enter__)
    try:
        mcp = getattr(execution, "mcp_handlers", None)
        source = (lambda _toolset: mcp) if mcp is not None else database.backends()
        handlers = source(case.toolset)
        if factors.fault != "none":
            handlers = _first_call_faults(handlers, factors.fault)
        executor = Executor({case.toolset: handlers}, ExecutorConfig(
            max_retries=0, result_token_budget=factors.budget_tokens or UNCAPPED_TOKENS),
            traces=getattr(execution, "traces", None))
        try:
            for number in range(case.max_steps):
                step_item = dataclasses.replace(
                    item, case=case.model_copy(update={"messages": list(conversation)}))
                outcome = await runner.execute(step_item)
                response = outcome.response
                responses.append(response)
                attempts += outcome.attempts
                caches.add(outcome.cache)
                parsed = response.parsed
                # the calls the loop goes on with (none: an error or a final answer)
                calls = ([] if parsed.error or not parsed.calls
                         else _call_ids(parsed.calls, used_ids, number))
                answer = _answer_record(parsed, calls)
                stored_parsed = answer.pop("parsed")
                # the step's conversation digest and parsed answer: what replay:<run> needs
                # to answer this step again (bench.providers.replay)
                step: dict[str, Any] = {
                    "step": number, **answer, "results": [],
                    "error": parsed.error, "usage": response.usage.model_dump(),
                    "latency_s": round(response.latency_s, 6), "cache": outcome.cache,
                    "finish_reason": response.finish_reason,
                    "messages_sha256": messages_digest(step_item.case.messages),
                    "parsed": stored_parsed}
                steps.append(step)
                if parsed.error:
                    stop_reason = "unparseable"
                    break
                if not parsed.calls:
                    final_answer = parsed.text or ""
                    if replies:  # the scripted user answers the model's question
                        reply = replies.pop(0)
                        step["user_reply"] = reply
                        confirmed_at = number if confirmed_at is None else confirmed_at
                        conversation += [Message(role="assistant", content=final_answer),
                                         Message(role="user", content=reply)]
                        continue
                    stop_reason = "final_answer"
                    break
                guard = False
                for call in calls:
                    identity = canonical_call(call.name, call.arguments, call.valid,
                                              call.raw_arguments)
                    repeats[identity] = repeats.get(identity, 0) + 1
                    guard = guard or repeats[identity] >= REPEAT_GUARD
                if guard:  # the N-th identical call is not executed
                    made += [MadeCall(number, c.name, c.arguments, c.valid,
                                      write=_writes(tools, c.name),
                                      raw_arguments=c.raw_arguments) for c in calls]
                    stop_reason = "loop_guard"
                    break
                executed = await asyncio.gather(*(asyncio.to_thread(
                    executor.execute, call, tools, case.toolset, run_context)
                    for call in calls))
                conversation.append(Message(
                    role="assistant", content=parsed.text or None,
                    tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments,
                                 **({"signature": c.signature} if c.signature else {})}
                                for c in calls]))
                for call, result in zip(calls, executed):
                    content, is_error = render_result(result, factors)
                    conversation.append(Message(role="tool", tool_call_id=call.id,
                                                content=content, is_error=is_error or None))
                    step["results"].append({
                        "call_id": call.id, "tool": call.name, **stored(content, "content"),
                        "is_error": is_error, "success": result.success,
                        "error_code": result.error_code, "truncated": result.truncated})
                    made.append(MadeCall(number, call.name, call.arguments, call.valid,
                                         result.success, result.error_code,
                                         _writes(tools, call.name), call.raw_arguments))
                    if result.success and _writes(tools, call.name):
                        repeats.clear()  # reading again after a write is no retry storm
        finally:
            executor.close()
        checks = case.success.state_checks if case.success else []
        state = None if mcp is not None else (database.check(checks) if checks else [])
    finally:
        await asyncio.to_thread(database.__exit__, None, None, None)
    metrics = episode_metrics(case, made, steps=len(steps), final_answer=final_answer,
                              state_checks=state, stop_reason=stop_reason,
                              confirmed_at=confirmed_at)
    cache = None if caches == {None} else "hit" if caches == {"hit"} else "miss"
    return EpisodeOutcome(steps, final_answer, stop_reason, metrics, state,
                          _usage_sum(responses), attempts, cache, responses,
                          time.perf_counter() - started)
