"""Data shapes of the executor: error classes, tool errors, per-call context, outcomes.

Error classes follow BRIEF §7: ``transient`` (timeouts of the transport, connection resets,
5xx, malformed responses) and ``timeout`` and ``rate_limited`` (429) may be retried on read
tools; ``permanent`` (400/401/403/404/422, denied permissions, open circuits without fallback)
and ``validation`` (the model's arguments are wrong) never are. ``server_exited`` (bench's
addition): a user's stdio MCP server exited, or closed its connection, while it ran the call
(its code names the exit status, e.g. ``exit_3``); never retried, since the same call would
likely end the restarted server again (:mod:`bench.executor.backends.mcp`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import regex
from pydantic import BaseModel, Field

from bench.scoring.values import REGEX_TIMEOUT_S

ErrorClass = Literal["transient", "rate_limited", "timeout", "permanent", "validation",
                     "server_exited"]
ERROR_CLASSES: tuple[ErrorClass, ...] = ("transient", "rate_limited", "timeout", "permanent",
                                         "validation", "server_exited")
RETRYABLE: frozenset[str] = frozenset({"transient", "rate_limited", "timeout"})


class ToolError(Exception):
    """A failure a backend (or the pipeline) reports for one call.

    Args:
        error_class: one of :data:`ERROR_CLASSES`.
        code: a short machine code, e.g. ``not_found``, ``invalid_argument``, ``http_500``.
        message: what went wrong and what the caller should do next (shown to the model).
        retry_after_s: for ``rate_limited``: the server's Retry-After, in seconds.
        status: an HTTP-like status code when the failure came from one (e.g. 429, 500).
    """

    def __init__(self, error_class: ErrorClass, code: str, message: str, *,
                 retry_after_s: float | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s
        self.status = status


def validation_error(code: str, message: str) -> ToolError:
    """A :class:`ToolError` of class ``validation`` (bad arguments; never retried)."""
    return ToolError("validation", code, message)


def permanent_error(code: str, message: str) -> ToolError:
    """A :class:`ToolError` of class ``permanent`` (e.g. not found; never retried)."""
    return ToolError("permanent", code, message)


#: Characters of a text error kept as its message (the whole text is the tool's answer).
_TEXT_ERROR_CHARS = 2000
#: Seconds an ``error_pattern`` may search one text result: a label's ``$regex`` limit
#: (:data:`bench.scoring.values.REGEX_TIMEOUT_S`). A backtracking pattern (``^(a|a)+$``)
#: would otherwise take minutes on a 30-character result, in C code no Ctrl-C stops.
ERROR_PATTERN_TIMEOUT_S = REGEX_TIMEOUT_S
#: The error code of a call whose result ``error_pattern`` could not search in time.
ERROR_PATTERN_TIMEOUT = "error_pattern_timeout"


def compile_error_pattern(pattern: str) -> regex.Pattern[str]:
    """An ``error_pattern`` (``--error-pattern``, a toolset's) compiled with the ``regex``
    module (Python ``re`` syntax), whose searches take a time limit.

    Raises:
        regex.error: ``pattern`` is not a regular expression.
    """
    return regex.compile(pattern)


def text_error(data: Any, pattern: regex.Pattern[str]) -> ToolError | None:
    """The error a tool answered as text, or None: ``data`` is a string, or a list of
    strings (an MCP result's text blocks), and ``pattern`` is found in one of them
    (``re.search`` semantics). A JSON object, number or list of objects is never text.

    Returns:
        A ``permanent`` ``tool_error`` (the class and code of an MCP result's ``isError``)
        whose message is the text, whitespace made single spaces, at most 2,000 characters;
        or, when the search of one text runs longer than :data:`ERROR_PATTERN_TIMEOUT_S`, a
        ``permanent`` :data:`ERROR_PATTERN_TIMEOUT` saying so: the call's result is not
        known to be a success, and a retry would search the same text again.
    """
    texts = [data] if isinstance(data, str) else data \
        if isinstance(data, list) and all(isinstance(item, str) for item in data) else []
    try:
        if not any(pattern.search(text, timeout=ERROR_PATTERN_TIMEOUT_S) for text in texts):
            return None
    except TimeoutError:
        return permanent_error(ERROR_PATTERN_TIMEOUT, (
            f"error_pattern {pattern.pattern!r} took longer than {ERROR_PATTERN_TIMEOUT_S:g} s "
            "on this result (a pattern that backtracks: simplify it); the call counts as "
            "failed"))
    return permanent_error("tool_error", " ".join(" ".join(texts).split())[:_TEXT_ERROR_CHARS])


def failing_on_text(run: Callable[[dict[str, Any], "CallContext"], Any],
                    pattern: regex.Pattern[str]
                    ) -> Callable[[dict[str, Any], "CallContext"], Any]:
    """``run`` (a handler's ``(arguments, context) -> data``) raising :func:`text_error`'s
    error when its data is an error answered as text: a toolset's ``error_pattern``
    (:mod:`bench.toolset_config`), for servers that answer errors without ``isError``."""
    def checked(arguments: dict[str, Any], ctx: "CallContext") -> Any:
        data = run(arguments, ctx)
        error = text_error(data, pattern)
        if error is not None:
            raise error
        return data
    return checked


@dataclass(frozen=True)
class RunContext:
    """Who runs the calls of one answer, and what they may do.

    Attributes:
        run_id / case_id / trial: where the calls come from (copied into traces).
        user_id: the signed-in customer (e.g. ``"C0001"``); None means the staff view that
            sees every customer's orders. Per-user rate limits key on it (``"anonymous"``).
        allow_writes: write tools run only when True (``bench run --allow-writes``), or when
            named in ``write_tools``.
        write_tools: the write tools allowed to run in this context (a project toolset's
            ``writes`` list, :mod:`bench.toolset_config`).
        allow_sensitive: sensitive tools run only when True.
        inject_faults: False runs the calls without the configured fault injection (the
            judge's expected calls use this).
        trace: False writes no trace lines (the judge's expected calls).
        label_side: True for a label's own calls (the judge's expected calls, recording):
            they neither consult nor feed the circuit breakers the model's calls see, so a
            label's failing call never pauses the model's call in the same row.
        state: a single-answer case's ``state.overrides`` (SQL): bench's reference backends
            serve its calls from a copy of the shop database with them run, writes rolled
            back (:mod:`bench.executor.backends.states`); () for the seeded database.
    """

    run_id: str = "adhoc"
    case_id: str = ""
    trial: int = 0
    user_id: str | None = None
    allow_writes: bool = False
    allow_sensitive: bool = False
    write_tools: frozenset[str] = frozenset()
    inject_faults: bool = True
    trace: bool = True
    label_side: bool = False
    state: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallContext:
    """The context of one call attempt: created per attempt, never shared between calls.

    Handlers read ``run`` (user, permissions), and must stop early when ``cancelled`` is set
    (the attempt timed out). ``deadline`` is a ``time.monotonic()`` value (seconds).
    """

    call_id: str
    tool: str
    attempt: int
    run: RunContext
    deadline: float
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False)


class Attempt(BaseModel):
    """One attempt of a call (also written as one trace line).

    Attributes:
        attempt: 0-based attempt number (the retry count so far).
        status: ``ok``, ``error``, ``fallback`` or ``rejected`` (stopped before execution).
        error_class / error_code: set when status is not ``ok``.
        duration_ms: wall time of the attempt in milliseconds.
        fault: the injected fault, if any.
        waited_s: backoff or rate-limit wait before this attempt, in seconds.
    """

    attempt: int
    status: Literal["ok", "error", "fallback", "rejected"]
    error_class: ErrorClass | None = None
    error_code: str | None = None
    duration_ms: float = 0.0
    fault: str | None = None
    waited_s: float = 0.0


class ExecutionOutcome(BaseModel):
    """What happened to one predicted (or expected) call.

    Attributes:
        call_id: the call's id, as given.
        tool: the tool name, as given.
        success: the call validated and its handler returned data (possibly a fallback's).
        data: the normalised result (JSON-compatible), capped to the token budget.
        error: a human-readable, actionable message (None on success).
        error_class / error_code: the final failure's class and code (None on success).
        arguments: the arguments that were executed (after lenient repairs if those are on).
        repairs: lenient repairs that would make (or made) the arguments valid, e.g.
            ``"limit: string '5' -> 5"``; recorded even when strict mode rejects the call.
        attempts: every attempt, in order; ``retries`` = attempts after the first.
        truncated: the result was cut to the token budget.
        result_tokens: estimated tokens of the full result before capping.
        fallback_used: the data came from a fallback handler.
        duration_ms: total wall time including retries and waits, in milliseconds.
    """

    call_id: str
    tool: str
    success: bool
    data: Any = None
    error: str | None = None
    error_class: ErrorClass | None = None
    error_code: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    repairs: list[str] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    truncated: bool = False
    result_tokens: int = 0
    fallback_used: bool = False
    duration_ms: float = 0.0

    @property
    def retries(self) -> int:
        """Attempts after the first that reached the tool."""
        return max(0, sum(1 for a in self.attempts if a.status != "rejected") - 1)

    def envelope(self) -> dict[str, Any]:
        """The normalised ``{success, data, error}`` a model would be shown."""
        return {"success": self.success, "data": self.data, "error": self.error}
