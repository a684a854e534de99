"""Seeded fault injection: make chosen tools time out, answer 429 or 500, return an 8 MB
payload or malformed data, at chosen rates.

Whether a fault fires is a pure function of (seed, rule, tool, call id, attempt), so a
configuration gives the same faults whatever the thread scheduling.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from bench.executor.outcome import CallContext, ToolError

FaultKind = Literal["timeout", "rate_limit", "server_error", "oversized", "malformed"]
OVERSIZED_BYTES = 8 * 1024 * 1024


class FaultRule(BaseModel):
    """One kind of fault for some tools.

    Attributes:
        kind: timeout | rate_limit (429 with Retry-After) | server_error (500) |
            oversized (the real result plus about 8 MB of rows) | malformed (truncated JSON).
        tools: tool names the rule applies to; ``["*"]`` means every tool.
        rate: probability per attempt, 0..1.
        retry_after_s: Retry-After of injected 429s, seconds.
    """

    model_config = ConfigDict(extra="forbid")

    kind: FaultKind
    tools: list[str] = Field(default_factory=lambda: ["*"])
    rate: float = Field(ge=0.0, le=1.0)
    retry_after_s: float = Field(default=1.0, ge=0.0)


class FaultConfig(BaseModel):
    """A seeded set of fault rules; the first rule that fires for an attempt wins."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    rules: list[FaultRule] = Field(default_factory=list)

    def pick(self, tool: str, call_id: str, attempt: int) -> FaultRule | None:
        """The rule that fires for this attempt, if any (deterministic)."""
        for index, rule in enumerate(self.rules):
            if "*" not in rule.tools and tool not in rule.tools:
                continue
            digest = hashlib.sha256(
                f"{self.seed}|{index}|{tool}|{call_id}|{attempt}".encode()).digest()
            if int.from_bytes(digest[:8], "big") / 2 ** 64 < rule.rate:
                return rule
        return None


def oversized_payload(data: Any) -> dict[str, Any]:
    """``data`` plus about 8 MB of filler rows (what a runaway tool returns)."""
    row = {"id": 0, "sku": "X" * 32, "description": "lorem ipsum " * 8}
    size = len(str(row)) + 16
    rows = [{**row, "id": i} for i in range(OVERSIZED_BYTES // size)]
    return {"result": data, "rows": rows}


def wrap(handler: Callable[[dict[str, Any], CallContext], Any], rule: FaultRule,
         hang_s: float) -> Callable[[dict[str, Any], CallContext], Any]:
    """A handler that behaves as ``rule`` says instead of (or around) ``handler``.

    ``timeout`` blocks until the attempt is cancelled, its deadline passes or ``hang_s``
    passes (real seconds), whichever comes first.
    """

    def faulty(arguments: dict[str, Any], ctx: CallContext) -> Any:
        if rule.kind == "timeout":
            ctx.cancelled.wait(max(0.0, min(hang_s, ctx.deadline - time.monotonic() + 0.01)))
            raise ToolError("timeout", "injected_hang", "the tool did not answer in time")
        if rule.kind == "rate_limit":
            raise ToolError("rate_limited", "http_429", "HTTP 429 Too Many Requests",
                            retry_after_s=rule.retry_after_s, status=429)
        if rule.kind == "server_error":
            raise ToolError("transient", "http_500", "HTTP 500 Internal Server Error",
                            status=500)
        if rule.kind == "oversized":
            return oversized_payload(handler(arguments, ctx))
        return b'{"orders": [{"order_id": "ORD2026'  # malformed: truncated JSON bytes
    return faulty
