"""The executor: run one tool call the way a careful production runtime would (BRIEF §7).

Pipeline per call: resolve the tool -> decode (strict; lenient repairs recorded) -> JSON
Schema validation -> business rules -> permission check -> rate limits -> circuit breaker ->
execute with a timeout (retrying transient failures of read tools with backoff) -> normalise
to ``{success, data, error}`` -> cap the result to a token budget. Every attempt writes one
trace line.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Callable, Sequence

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from bench.executor.backends.base import Backend, Handler, backend_of
from bench.executor.backends.states import STATE_COPIES_KEPT, StateError
from bench.executor.capping import cap_result
from bench.executor.clock import Clock
from bench.executor.decode import lenient_repairs
from bench.executor.faults import FaultConfig, wrap
from bench.executor.outcome import (Attempt, CallContext, ExecutionOutcome, RunContext,
                                    ToolError, permanent_error, validation_error)
from bench.executor.safeguards import (CircuitBreaker, RateLimit, RateLimiter, RetryPolicy,
                                       call_rng)
from bench.executor.traces import TraceWriter, arguments_hash
from bench.models import Tool, ToolCall
from bench.results import TraceRecord

_PERMISSION_RANK = {"read": 0, "write": 1, "sensitive": 2}
HandlerSource = Mapping[str, Mapping[str, Handler]] | Callable[[str], Mapping[str, Handler]]


class ExecutorConfig(BaseModel):
    """Safeguard settings (defaults suit the local reference backends).

    Attributes:
        timeout_s: per-attempt timeout, seconds.
        max_retries / backoff_base_s / backoff_cap_s / retry_budget_s: see
            :class:`~bench.executor.safeguards.RetryPolicy`.
        breaker_failures / breaker_window_s / breaker_cooldown_s: see
            :class:`~bench.executor.safeguards.CircuitBreaker`.
        global_rate / tool_rate / user_rate: token buckets ``(calls per second, burst)``; None
            disables a level. ``rate_wait_max_s``: longest wait for a token, seconds.
        result_token_budget: results above this many estimated tokens are capped.
        lenient: execute the lenient repairs instead of rejecting the call (default strict).
        faults: fault injection (None: off).
        seed: seeds backoff jitter.
        workers: threads that run handlers (a timed-out handler holds one until it stops).
    """

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(default=5.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    backoff_base_s: float = Field(default=0.1, ge=0)
    backoff_cap_s: float = Field(default=5.0, ge=0)
    retry_budget_s: float = Field(default=10.0, ge=0)
    breaker_failures: int = Field(default=5, ge=1)
    breaker_window_s: float = Field(default=30.0, gt=0)
    breaker_cooldown_s: float = Field(default=10.0, ge=0)
    global_rate: tuple[float, float] | None = None
    tool_rate: tuple[float, float] | None = None
    user_rate: tuple[float, float] | None = None
    rate_wait_max_s: float = Field(default=2.0, ge=0)
    result_token_budget: int = Field(default=2000, ge=64)
    lenient: bool = False
    faults: FaultConfig | None = None
    seed: int = 0
    workers: int = Field(default=16, ge=1, le=256)


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        json.loads(schema_json), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


_BY_IDENTITY: dict[int, tuple[dict[str, Any], jsonschema.Draft202012Validator]] = {}


def _validator_for(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """The compiled validator of a schema object (by identity; the entry keeps the schema
    alive, so an id is never reused while cached)."""
    found = _BY_IDENTITY.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_BY_IDENTITY) > 4096:
            _BY_IDENTITY.clear()
        found = (schema, _validator(json.dumps(schema, sort_keys=True)))
        _BY_IDENTITY[id(schema)] = found
    return found[1]


_PROBLEMS_MEMO: dict[tuple[int, str], tuple[dict[str, Any], tuple[str, ...]]] = {}
_PROBLEMS_MEMO_SIZE = 65_536


def schema_problems(arguments: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Readable JSON Schema errors, each naming the argument, e.g.
    ``"limit: 5000 is greater than the maximum of 1000"``.

    Memoised on the schema object and ``repr(arguments)`` (distinct JSON values have distinct
    reprs), like scoring's validation memo: models repeat the same call across trials and
    variants, and jsonschema's iter_errors is the costliest step of admitting a call. The
    memo is cleared at 65,536 entries.
    """
    key = (id(schema), repr(arguments))
    memo = _PROBLEMS_MEMO.get(key)
    if memo is not None and memo[0] is schema:  # the entry keeps its schema alive
        return list(memo[1])
    validator = _validator_for(schema)
    try:
        found = tuple(f"{'.'.join(str(p) for p in error.absolute_path) or 'arguments'}: "
                      f"{error.message}" for error in sorted(validator.iter_errors(arguments),
                                                             key=lambda e: list(e.path)))
    except (OverflowError, ValueError, TypeError, RecursionError) as exc:
        # e.g. 1e308 against multipleOf 0.01: the model's value breaks the check itself
        found = (f"arguments: a value cannot be checked against the schema "
                 f"({type(exc).__name__}); send ordinary numbers",)
    if len(_PROBLEMS_MEMO) >= _PROBLEMS_MEMO_SIZE:
        _PROBLEMS_MEMO.clear()
    _PROBLEMS_MEMO[key] = (schema, found)
    return list(found)


def _limit(pair: tuple[float, float] | None) -> RateLimit | None:
    return RateLimit(rate=pair[0], burst=pair[1]) if pair else None


def _normalise(data: Any) -> Any:
    """JSON-compatible data, or a ``malformed_result`` transient error."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ToolError("transient", "malformed_result",
                            f"the tool returned malformed data ({type(exc).__name__}); "
                            "retry once, then report the tool as broken") from None
    return data


def _capped(data: Any, budget: int) -> tuple[Any, bool, int]:
    """:func:`cap_result`, with data that is not JSON as a ``malformed_result`` error."""
    try:
        return cap_result(data, budget)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ToolError("transient", "malformed_result",
                        f"the tool returned data that is not JSON ({exc}); retry once, then "
                        "report the tool as broken") from None


class Executor:
    """Runs tool calls against backends with validation and safeguards; thread-safe.

    Args:
        handlers: ``{toolset: {tool name: Handler}}``, or a function ``toolset -> handlers``.
        config: safeguard settings.
        clock: time source for backoff, breakers and rate limits (tests pass a FakeClock).
        traces: where attempt lines go (None: nowhere).
    """

    def __init__(self, handlers: HandlerSource, config: ExecutorConfig | None = None, *,
                 clock: Clock | None = None, traces: TraceWriter | None = None) -> None:
        self.config = config or ExecutorConfig()
        self.clock = clock or Clock()
        self.traces = traces
        self._handlers = handlers
        self._handler_cache: dict[str, Backend] = {}
        # (toolset, a case's state overrides) -> the backend on that state's copy, LRU
        self._state_cache: OrderedDict[tuple[str, tuple[str, ...]], Backend] = OrderedDict()
        self.policy = RetryPolicy(self.config.max_retries, self.config.backoff_base_s,
                                  self.config.backoff_cap_s, self.config.retry_budget_s)
        self.limiter = RateLimiter(self.clock, global_limit=_limit(self.config.global_rate),
                                   tool_limit=_limit(self.config.tool_rate),
                                   user_limit=_limit(self.config.user_rate),
                                   max_wait_s=self.config.rate_wait_max_s)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(self.config.workers,
                                                           thread_name_prefix="tool")

    def close(self) -> None:
        """Stop the handler threads (running handlers are not waited for)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def handlers_for(self, toolset: str) -> Backend:
        """The handlers of ``toolset`` (empty when the source has none) and who owns the
        system behind them (:class:`~bench.executor.backends.base.Backend`; a plain mapping
        from the source counts as the user's system)."""
        with self._lock:
            found = self._handler_cache.get(toolset)
        if found is None:
            source = self._handlers
            made = backend_of(source(toolset) if callable(source) else source.get(toolset, {}))
            with self._lock:
                found = self._handler_cache.setdefault(toolset, made)  # one lock per toolset
        return found

    def state_handlers(self, toolset: str, state: tuple[str, ...]) -> Backend:
        """The handlers that serve a call of a case with ``state`` (its ``state.overrides``):
        for ``()``, or a system that cannot take a state (a user's, which a case's SQL never
        changes), :meth:`handlers_for`'s; else the same tools on a private copy with the
        state (:attr:`Backend.with_state`), the last
        :data:`~bench.executor.backends.states.STATE_COPIES_KEPT` kept.

        Raises:
            StateError: an override does not run.
        """
        base = self.handlers_for(toolset)
        if not state or base.with_state is None:
            return base
        key = (toolset, state)
        with self._lock:
            found = self._state_cache.get(key)
            if found is not None:
                self._state_cache.move_to_end(key)
                return found
        made = base.with_state(state)
        with self._lock:
            found = self._state_cache.setdefault(key, made)
            self._state_cache.move_to_end(key)
            while len(self._state_cache) > STATE_COPIES_KEPT:
                self._state_cache.popitem(last=False)  # closed when no call holds it any more
        return found

    def _label_breaker(self) -> CircuitBreaker:
        """A closed breaker of its own for one label-side call (never shared)."""
        return CircuitBreaker(self.config.breaker_failures, self.config.breaker_window_s,
                              self.config.breaker_cooldown_s, self.clock)

    def breaker(self, toolset: str, tool: str) -> CircuitBreaker:
        """The circuit breaker of one tool (created closed on first use)."""
        key = f"{toolset}.{tool}"
        with self._lock:
            breaker = self._breakers.get(key)
            if breaker is None:
                breaker = CircuitBreaker(self.config.breaker_failures,
                                         self.config.breaker_window_s,
                                         self.config.breaker_cooldown_s, self.clock)
                self._breakers[key] = breaker
            return breaker

    # -- one call --------------------------------------------------------------------------

    def execute(self, call: ToolCall, tools: Sequence[Tool] | Mapping[str, Tool], toolset: str,
                run: RunContext | None = None) -> ExecutionOutcome:
        """Run one call through the whole pipeline; never raises for bad calls or tool faults.

        Args:
            call: the parsed call (``call.valid`` False means its arguments did not decode).
            tools: the tools the model was shown (their schemas validate the arguments).
            toolset: which backend handlers to use.
            run: who runs it and what is allowed (default: an ad-hoc read-only run).

        Returns:
            An :class:`ExecutionOutcome` (success, data or an actionable error, attempts).

        Raises:
            BenchError: the tool's :attr:`Handler.ready` says its system cannot take calls any
                more (a stdio MCP server that exited more often than bench restarts it).
        """
        run = run or RunContext()
        started = time.perf_counter()
        by_name = tools if isinstance(tools, Mapping) else {t.name: t for t in tools}
        outcome = ExecutionOutcome(call_id=call.id, tool=call.name, success=False,
                                   arguments=call.arguments)
        try:
            handler, arguments, permission = self._admit(call, by_name, toolset, run, outcome)
        except ToolError as error:
            self._reject(call, run, error, outcome)
            outcome.duration_ms = (time.perf_counter() - started) * 1000
            return outcome
        outcome.arguments = arguments
        self._attempts(call, handler, arguments, permission, toolset, run, outcome)
        outcome.duration_ms = (time.perf_counter() - started) * 1000
        return outcome

    def refuse(self, call: ToolCall, error: ToolError,
               run: RunContext | None = None) -> ExecutionOutcome:
        """The outcome of ``call`` refused before the pipeline starts: nothing of it runs
        (no backend, no rule, no rate limit is touched); one ``rejected`` trace line, as for
        a call the pipeline rejects. E.g. a call holding a placeholder instead of a value
        (``no_literal_value``: :mod:`bench.executor.judge`)."""
        outcome = ExecutionOutcome(call_id=call.id, tool=call.name, success=False,
                                   arguments=call.arguments)
        self._reject(call, run or RunContext(), error, outcome)
        return outcome

    def _reject(self, call: ToolCall, run: RunContext, error: ToolError,
                outcome: ExecutionOutcome) -> None:
        """Fail ``outcome`` with ``error`` as a call rejected before any attempt ran."""
        self._fail(outcome, error)
        outcome.attempts.append(Attempt(attempt=0, status="rejected",
                                        error_class=error.error_class, error_code=error.code))
        self._trace(run, call, outcome.attempts[-1], final=True)

    def _admit(self, call: ToolCall, by_name: Mapping[str, Tool], toolset: str,
               run: RunContext, outcome: ExecutionOutcome) -> tuple[Handler, dict[str, Any], str]:
        """Resolve, decode, validate, check rules and permission; raise ToolError to reject."""
        tool = by_name.get(call.name)
        if tool is None:
            raise validation_error("unknown_tool", f"unknown tool '{call.name}'; valid tools: "
                                   + ", ".join(sorted(by_name)))
        try:
            handler = self.state_handlers(toolset, run.state).get(call.name)
        except StateError as exc:  # the load-time check runs every override first
            raise permanent_error("state_failed", f"the case's {exc.field} does not run: "
                                  f"{exc.message}") from None
        if handler is None:
            raise permanent_error("no_backend", f"tool '{call.name}' has no backend in toolset "
                                  f"'{toolset}'; it cannot be executed here")
        if "double_encoded" in call.notes:
            outcome.repairs.append("arguments: double-encoded JSON string decoded")
        if not call.valid:
            raise validation_error("undecodable_arguments", "the arguments are not a JSON "
                                   f"object ({', '.join(call.notes) or 'undecodable'}); send "
                                   "one JSON object")
        arguments = call.arguments
        problems = schema_problems(arguments, tool.input_schema)
        repairs: list[str] = []
        if problems:  # valid arguments need no repair
            repaired, repairs = lenient_repairs(call.arguments, tool.input_schema)
            outcome.repairs.extend(repairs)
            if self.config.lenient and repairs:
                arguments = repaired
                problems = schema_problems(arguments, tool.input_schema)
        if problems:
            hint = f" (a lenient runtime would fix: {'; '.join(repairs)})" if repairs else ""
            raise validation_error("invalid_arguments", "invalid arguments for "
                                   f"'{call.name}': {'; '.join(problems)}{hint}")
        if handler.check is not None:
            handler.check(arguments)
        permission = max(tool.permission, handler.permission, key=_PERMISSION_RANK.__getitem__)
        if permission == "write" and not (run.allow_writes or call.name in run.write_tools):
            raise permanent_error("permission_denied", f"'{call.name}' changes data and this "
                                  "run does not allow writes for it (bench run --allow-writes, "
                                  "or its toolset's writes list in pyproject.toml); tell the "
                                  "user it was not done")
        if permission == "sensitive" and not run.allow_sensitive:
            raise permanent_error("permission_denied", f"'{call.name}' touches personal data "
                                  "and needs explicit allowance (bench run --allow-sensitive); "
                                  "tell the user it was not done")
        return handler, arguments, permission

    def _attempts(self, call: ToolCall, handler: Handler, arguments: dict[str, Any],
                  permission: str, toolset: str, run: RunContext,
                  outcome: ExecutionOutcome) -> None:
        # a label's own calls keep out of the breakers the model's calls see
        breaker = self._label_breaker() if run.label_side else self.breaker(toolset, call.name)
        rng = None  # made on the first retry only
        suffix = ""
        faults = self.config.faults if run.inject_faults else None
        waited_total = 0.0
        wait_before = 0.0
        attempt = 0
        while True:
            if handler.ready is not None:  # e.g. restart an exited server: not the call's time
                handler.ready()  # raises BenchError when it cannot: the caller stops
            t0 = time.perf_counter()
            record = Attempt(attempt=attempt, status="error", waited_s=round(wait_before, 6))
            result = self._attempt(call, handler, arguments, toolset, run, breaker, faults,
                                   attempt, record)
            record.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
            if not isinstance(result, ToolError):
                breaker.record_success()
                record.status = "ok"
                outcome.attempts.append(record)
                self._trace(run, call, record, final=True)
                outcome.success = True
                outcome.data, outcome.truncated, outcome.result_tokens = result
                return
            error = result
            record.error_class, record.error_code = error.error_class, error.code
            if error.code != "circuit_open":
                if error.error_class in ("transient", "timeout"):
                    breaker.record_failure()
                else:
                    breaker.release_probe()
            outcome.attempts.append(record)
            retry = attempt < self.policy.max_retries and self.policy.retryable(error, permission)
            wait = 0.0
            if retry:
                if rng is None:
                    rng = call_rng(self.config.seed, call.id, call.name)
                wait = self.policy.wait_s(error, attempt, rng)
            if retry and waited_total + wait > self.policy.budget_s:
                retry = False
                suffix = f" (retry budget of {self.policy.budget_s:g} s used up)"
            self._trace(run, call, record, final=not retry)
            if not retry:
                break
            self.clock.sleep(wait)
            waited_total += wait
            wait_before = wait
            attempt += 1
        if attempt:
            suffix += f" (after {attempt + 1} attempts)"
        if not self._fell_back(call, handler, arguments, attempt, run, error, outcome):
            self._fail(outcome, error, suffix)

    def _attempt(self, call: ToolCall, handler: Handler, arguments: dict[str, Any],
                 toolset: str, run: RunContext, breaker: CircuitBreaker,
                 faults: FaultConfig | None, attempt: int, record: Attempt
                 ) -> tuple[Any, bool, int] | ToolError:
        """One attempt of ``call``: through its breaker and the rate limiter (the wait added
        to ``record``), with the fault the run injects at this attempt (if any), within the
        timeout. Returns the result capped (:func:`_capped`), or the error: a handler that
        raises anything else than a :class:`ToolError` is an ``internal_error``."""
        try:
            if not breaker.allow():
                raise ToolError("transient", "circuit_open",
                                f"'{call.name}' is failing and calls to it are paused "
                                f"for up to {self.config.breaker_cooldown_s:g} s; try again "
                                "later or use another way")
            if self.limiter.enabled:
                record.waited_s += self.limiter.acquire(f"{toolset}.{call.name}",
                                                        run.user_id or "anonymous")
            rule = faults.pick(call.name, call.id, attempt) if faults else None
            record.fault = rule.kind if rule else None
            run_fn = wrap(handler.run, rule, hang_s=self.config.timeout_s * 4 + 1) \
                if rule else handler.run
            data = _normalise(self._run_with_timeout(run_fn, arguments, call, attempt, run,
                                                     handler.cooperative,
                                                     handler.timeout_s))
            return _capped(data, self.config.result_token_budget)
        except ToolError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - a handler bug is reported, never raised
            return permanent_error("internal_error", f"the tool failed unexpectedly "
                                   f"({type(exc).__name__}: {exc}); do not retry")

    def _fell_back(self, call: ToolCall, handler: Handler, arguments: dict[str, Any],
                   attempt: int, run: RunContext, error: ToolError,
                   outcome: ExecutionOutcome) -> bool:
        """Answer a call that failed with a transient, timeout or rate-limited ``error`` from
        its handler's fallback, when it has one that succeeds: the outcome succeeds with the
        fallback's result (an attempt ``fallback`` recorded and traced). False otherwise (a
        failing fallback leaves the original error)."""
        if handler.fallback is None or error.error_class not in ("transient", "timeout",
                                                                 "rate_limited"):
            return False
        try:
            data = _normalise(handler.fallback(arguments, self._context(call, attempt, run),
                                               error))
            capped = _capped(data, self.config.result_token_budget)
        except Exception:  # noqa: BLE001 - a failing fallback leaves the original error
            return False
        outcome.success = True
        outcome.fallback_used = True
        outcome.data, outcome.truncated, outcome.result_tokens = capped
        record = Attempt(attempt=attempt, status="fallback",
                         error_class=error.error_class, error_code=error.code)
        outcome.attempts.append(record)
        self._trace(run, call, record, final=True)
        return True

    def _context(self, call: ToolCall, attempt: int, run: RunContext,
                 timeout_s: float | None = None) -> CallContext:
        return CallContext(call_id=call.id, tool=call.name, attempt=attempt, run=run,
                           deadline=time.monotonic() + (timeout_s or self.config.timeout_s))

    def _run_with_timeout(self, run_fn: Callable[[dict[str, Any], CallContext], Any],
                          arguments: dict[str, Any], call: ToolCall, attempt: int,
                          run: RunContext, cooperative: bool,
                          timeout_s: float | None = None) -> Any:
        timeout_s = timeout_s or self.config.timeout_s
        ctx = self._context(call, attempt, run, timeout_s)
        if cooperative:  # stops itself at the deadline: no thread hand-off needed
            data = run_fn(arguments, ctx)
            if time.monotonic() > ctx.deadline:
                raise ToolError("timeout", "timeout", f"'{call.name}' did not answer within "
                                f"{timeout_s:g} s")
            return data
        future = self._pool.submit(run_fn, arguments, ctx)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            ctx.cancelled.set()
            future.cancel()
            raise ToolError("timeout", "timeout", f"'{call.name}' did not answer within "
                            f"{timeout_s:g} s") from None

    @staticmethod
    def _fail(outcome: ExecutionOutcome, error: ToolError, suffix: str = "") -> None:
        outcome.success = False
        outcome.data = None
        outcome.error = error.message + suffix  # the exception itself is left unchanged
        outcome.error_class = error.error_class
        outcome.error_code = error.code

    def _trace(self, run: RunContext, call: ToolCall, record: Attempt, final: bool) -> None:
        if self.traces is None or not run.trace:
            return
        self.traces.write(TraceRecord.model_construct(  # fields of known types: no checks
            run_id=run.run_id, case_id=run.case_id, trial=run.trial, call_id=call.id,
            tool=call.name, args_sha256=arguments_hash(call.arguments),
            attempt=record.attempt, status=record.status, final=final,
            error_class=record.error_class, error_code=record.error_code, fault=record.fault,
            waited_s=record.waited_s, duration_ms=record.duration_ms))
