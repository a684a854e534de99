"""The ``do-nothing`` provider: an agent that never calls a tool and never asks.

Every answer is the same sentence, "I cannot help with that.": no call, no question mark,
none of a case's facts. Run against a dataset, it must fail every case that expects a call or
a state change (and every ask case, since it asks for nothing); a case it passes that expects
work has a check that passes by default (tau2-bench's users found one in 72 of 114 tasks,
sierra-research/tau2-bench issue 384). It passes no-call cases, which is right.
"""

from __future__ import annotations

from typing import Any

from bench.errors import BenchError
from bench.providers.function import FunctionProvider
from bench.providers.registry import Builder, provider

ANSWER = "I cannot help with that."


def _build(provider_id: str, rest: str, options: dict[str, Any]) -> FunctionProvider:
    if rest:
        raise BenchError(f"unknown provider '{provider_id}' (the do-nothing agent's id is "
                         "'do-nothing')")
    return FunctionProvider(lambda messages, tools, trial: {"tool_calls": [], "text": ANSWER},
                            provider_id=provider_id,
                            model="do-nothing (never calls, never asks)")


@provider("do-nothing", id_form="do-nothing", deterministic=True)
def _do_nothing() -> Builder:
    return _build
