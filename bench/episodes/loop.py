"""The episode loop: ask, execute the calls, send the results back, repeat (BRIEF §10).

One episode is one plan item. Each step is an ordinary request of the run
(:mod:`bench.providers.pipeline`: cache, replay, batch, retries, rate limits), asked with the
conversation so far, so the cache and replay key each step on that
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
from typing import TYPE_CHECKING, Any, Awaitable, Mapping, Protocol, Sequence

from bench.episodes.factors import Factors, render_result
from bench.episodes.state import EpisodeDatabase
from bench.episodes.stored import answer_record, capped
from bench.executor.backends.base import Handler
from bench.executor.faults import oversized_payload
from bench.executor.outcome import CallContext, RunContext, ToolError
from bench.executor.pipeline import Executor, ExecutorConfig
from bench.models import Case, Message, Tool, ToolCall
from bench.providers.base import ProviderResponse
from bench.providers.cache import messages_digest
from bench.providers.pipeline import Outcome
from bench.results import EpisodeStep, RowUsage, StepResult
from bench.scoring.episodes import (REPEAT_GUARD, EpisodeMetrics, MadeCall, canonical_call,
                                    episode_metrics)

if TYPE_CHECKING:
    from bench.executor.traces import TraceWriter

UNCAPPED_TOKENS = 10 ** 9
"""The executor's result budget when the condition sends results uncapped."""


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

    steps: list[EpisodeStep]
    final_answer: str
    stop_reason: str
    metrics: EpisodeMetrics
    state_checks: list[dict[str, Any]] | None
    usage: RowUsage
    attempts: int
    cache: str | None
    responses: list[ProviderResponse] = field(default_factory=list)
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
        def run(arguments: dict[str, Any], ctx: CallContext) -> object:
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


def _usage_sum(responses: list[ProviderResponse]) -> RowUsage:
    reasoning = [r.usage.reasoning_tokens for r in responses
                 if r.usage.reasoning_tokens is not None]
    return RowUsage(prompt_tokens=sum(r.usage.prompt_tokens for r in responses),
                    completion_tokens=sum(r.usage.completion_tokens for r in responses),
                    cached_tokens=sum(r.usage.cached_tokens for r in responses),
                    reasoning_tokens=sum(reasoning) if reasoning else None)


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


class StepAnswerer(Protocol):
    """How the episode loop asks the model: ``await answer(conversation)`` answers the
    conversation so far (the run sends it through the provider's request pipeline,
    :mod:`bench.providers.pipeline`: cache, replay, batch, retries, rate limits, keyed on that
    conversation, so a recorded episode replays offline).

    Raises:
        Whatever the pipeline raises (the episode is then not recorded and a resume runs it
        again from the start: never half-counted).
    """

    def __call__(self, conversation: Sequence[Message]) -> Awaitable[Outcome]: ...


class EpisodeExecution(Protocol):
    """What the run's executor hook (:class:`bench.executor.runhook.RunExecution`) lends an
    episode: its trace log and, with ``--execute-mcp``, the MCP server's handlers."""

    @property
    def traces(self) -> TraceWriter | None:
        """Where the executor appends its traces (``traces.jsonl``)."""

    @property
    def mcp_handlers(self) -> Mapping[str, Handler] | None:
        """The MCP server's handlers (every toolset), or None for the reference backends."""


@dataclass(frozen=True)
class EpisodeRun:
    """One episode to run.

    Attributes:
        case: the episode case (``kind`` ``episode``).
        tools: the variant's tools offered at every step.
        factors: the condition's factor settings (:mod:`bench.episodes.factors`).
        trial: 0-based trial index.
        run_id: the run writing it (for the executor's context and traces).
        allow_sensitive: sensitive tools may run (``--allow-sensitive``).
    """

    case: Case
    tools: Sequence[Tool]
    factors: Factors
    trial: int
    run_id: str
    allow_sensitive: bool


async def run_episode(episode: EpisodeRun, answer: StepAnswerer,
                      execution: EpisodeExecution | None) -> EpisodeOutcome:
    """Run one episode to its end.

    Args:
        episode: the case, tools, factors and trial.
        answer: asks the model for one step (:class:`StepAnswerer`).
        execution: the run's executor hook (traces, MCP), or None with ``--no-execute``.

    Returns:
        The :class:`EpisodeOutcome`.

    Raises:
        Whatever ``answer`` raises for a step (the episode is then not recorded and a resume
        runs it again from the start: never half-counted).
    """
    started = time.perf_counter()
    state = _Episode(episode, answer)
    case = episode.case
    database = EpisodeDatabase(case.state.overrides if case.state else [])
    if not database.take_kept():  # loading an image and running overrides: off the loop
        await asyncio.to_thread(database.__enter__)
    try:
        mcp = execution.mcp_handlers if execution is not None else None
        handlers = mcp if mcp is not None else database.backends()(case.toolset)
        if episode.factors.fault != "none":
            handlers = _first_call_faults(handlers, episode.factors.fault)
        executor = Executor({case.toolset: handlers}, ExecutorConfig(
            max_retries=0,
            result_token_budget=episode.factors.budget_tokens or UNCAPPED_TOKENS),
            traces=execution.traces if execution is not None else None)
        try:
            await state.steps_until_done(executor)
        finally:
            executor.close()
        checks = case.success.state_checks if case.success else []
        checked = None if mcp is not None else (database.check(checks) if checks else [])
        database.finished = True
    finally:
        if database.finished:  # no call still runs on it: keeping or closing it is quick
            database.__exit__(None, None, None)
        else:  # a stopped episode's call may hold the database's lock on a worker thread
            await asyncio.to_thread(database.__exit__, None, None, None)
    return state.outcome(checked, time.perf_counter() - started)


class _Episode:
    """The state of one running episode: the conversation, the steps recorded, the calls
    made, the retry-storm guard's counts and how it ended."""

    def __init__(self, episode: EpisodeRun, answer: StepAnswerer) -> None:
        case = episode.case
        self.episode, self.answer = episode, answer
        self.conversation = list(case.messages)
        self.replies = list(case.user_replies)
        self.steps: list[EpisodeStep] = []
        self.made: list[MadeCall] = []
        self.responses: list[ProviderResponse] = []
        self.attempts = 0
        self.caches: set[str | None] = set()
        # ids of the label's own history count as used: a result pairs with its call by id
        self.used_ids = {str(c.get("id")) for m in case.messages for c in m.tool_calls or []
                         if isinstance(c, dict) and c.get("id")}
        self.used_ids |= {m.tool_call_id for m in case.messages if m.tool_call_id}
        self.repeats: dict[str, int] = {}  # identical calls since the last successful write
        self.confirmed_at: int | None = None  # the step after which the first reply was sent
        self.stop_reason, self.final_answer = "step_limit", ""
        self.tools = {t.name: t for t in episode.tools}
        self.context = RunContext(
            run_id=episode.run_id, case_id=case.id, trial=episode.trial,
            user_id=case.state.user_id if case.state else None, allow_writes=True,
            allow_sensitive=episode.allow_sensitive)

    async def steps_until_done(self, executor: Executor) -> None:
        """Ask, execute, send results back, until a final answer, a guard or the step
        limit."""
        for number in range(self.episode.case.max_steps):
            if await self.step(number, executor):
                return

    async def step(self, number: int, executor: Executor) -> bool:
        """One step; True when the episode ended on it."""
        sent = list(self.conversation)
        outcome = await self.answer(sent)
        response, parsed = outcome.response, outcome.response.parsed
        self.responses.append(response)
        self.attempts += outcome.attempts
        self.caches.add(outcome.cache)
        # the calls the loop goes on with (none: an error or a final answer)
        calls = ([] if parsed.error or not parsed.calls
                 else _call_ids(parsed.calls, self.used_ids, number))
        record = answer_record(parsed, calls)
        # the step's conversation digest and parsed answer: what replay:<run> needs to
        # answer this step again (bench.providers.replay)
        step = EpisodeStep(
            step=number, text=record.text, calls=record.calls, results=[],
            error=parsed.error, usage=response.usage.as_row_usage(),
            latency_s=round(response.latency_s, 6), cache=outcome.cache,
            finish_reason=response.finish_reason, messages_sha256=messages_digest(sent),
            parsed=record.parsed)
        if record.text_chars is not None:
            step.text_chars = record.text_chars
        if record.stored_cut:
            step.stored_cut = True
        self.steps.append(step)
        if parsed.error:
            self.stop_reason = "unparseable"
            return True
        if not parsed.calls:
            return self.final(number, step, parsed.text or "")
        if self.storm(calls):  # the N-th identical call is not executed
            self.made += [MadeCall(number, c.name, c.arguments, c.valid,
                                   write=_writes(self.tools, c.name),
                                   raw_arguments=c.raw_arguments) for c in calls]
            self.stop_reason = "loop_guard"
            return True
        await self.execute(number, step, parsed.text, calls, executor)
        return False

    def final(self, number: int, step: EpisodeStep, text: str) -> bool:
        """A final answer: the scripted user answers it when a reply is left (False: the
        episode goes on), else the episode ends (True)."""
        self.final_answer = text
        if not self.replies:
            self.stop_reason = "final_answer"
            return True
        reply = self.replies.pop(0)
        step.user_reply = reply
        self.confirmed_at = number if self.confirmed_at is None else self.confirmed_at
        self.conversation += [Message(role="assistant", content=text),
                              Message(role="user", content=reply)]
        return False

    def storm(self, calls: list[ToolCall]) -> bool:
        """Count the calls; True when one reached :data:`REPEAT_GUARD` identical calls since
        the last successful write (a retry storm)."""
        guard = False
        for call in calls:
            identity = canonical_call(call.name, call.arguments, call.valid,
                                      call.raw_arguments)
            self.repeats[identity] = self.repeats.get(identity, 0) + 1
            guard = guard or self.repeats[identity] >= REPEAT_GUARD
        return guard

    async def execute(self, number: int, step: EpisodeStep, text: str | None,
                      calls: list[ToolCall], executor: Executor) -> None:
        """Run the step's calls concurrently on the executor and append the assistant turn
        and one ``tool`` message per result to the conversation."""
        toolset = self.episode.case.toolset
        executed = await asyncio.gather(*(asyncio.to_thread(
            executor.execute, call, self.tools, toolset, self.context) for call in calls))
        self.conversation.append(Message(
            role="assistant", content=text or None,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments,
                         **({"signature": c.signature} if c.signature else {})}
                        for c in calls]))
        for call, result in zip(calls, executed):
            content, is_error = render_result(result, self.episode.factors)
            self.conversation.append(Message(role="tool", tool_call_id=call.id,
                                             content=content, is_error=is_error or None))
            sent_back, chars = capped(content)
            stored_result = StepResult(call_id=call.id, tool=call.name, content=sent_back,
                                       is_error=is_error, success=result.success,
                                       error_code=result.error_code,
                                       truncated=result.truncated)
            if chars is not None:
                stored_result.content_chars = chars
            step.results.append(stored_result)
            writes = _writes(self.tools, call.name)
            self.made.append(MadeCall(number, call.name, call.arguments, call.valid,
                                      result.success, result.error_code, writes,
                                      call.raw_arguments))
            if result.success and writes:
                self.repeats.clear()  # reading again after a write is no retry storm

    def outcome(self, state_checks: list[dict[str, Any]] | None,
                wall_s: float) -> EpisodeOutcome:
        """The finished episode, scored (:func:`episode_metrics`)."""
        metrics = episode_metrics(self.episode.case, self.made, steps=len(self.steps),
                                  final_answer=self.final_answer, state_checks=state_checks,
                                  stop_reason=self.stop_reason,
                                  confirmed_at=self.confirmed_at,
                                  tools=list(self.tools.values()))
        caches = self.caches
        cache = None if caches == {None} else "hit" if caches == {"hit"} else "miss"
        return EpisodeOutcome(self.steps, self.final_answer, self.stop_reason, metrics,
                              state_checks, _usage_sum(self.responses), self.attempts, cache,
                              self.responses, wall_s)
