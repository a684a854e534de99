"""Factors: what the model is shown of tool results and errors in an episode (BRIEF §10).

A factor is a run option crossed with the variants in the plan. Each result goes back to the
model through one named renderer per factor, never through ad-hoc strings:

- ``result_format``: ``envelope`` sends ``{"success", "data", "error"}`` (BRIEF §7's
  normalised result); ``raw`` sends the data alone, or the error text alone.
- ``error_style``: ``actionable`` sends the executor's readable error, which names what was
  wrong and what to do ("order_id must be ORD + 8 digits, got 'ORD123'"); ``bare`` sends only
  an HTTP-like status line ("Error 400"), as many real APIs do.
- ``result_budget``: ``capped`` cuts results to :data:`RESULT_BUDGET_TOKENS` estimated tokens
  keeping head and tail with a paging hint (:func:`bench.executor.capping.cap_result`), and
  an error message to the same budget (:func:`cap_text`); ``uncapped`` sends them whole.
- ``fault``: deterministic fault injection: the first call of the episode to each tool
  ``timeout`` s, answers ``503`` or ``429``, or returns a ``huge`` payload (about 8 MB before
  capping); ``none`` injects nothing.

A condition's name is the variant's name followed by each non-default setting,
``l3~error_style=bare~fault=503``, so the table, ``bench compare`` and the gate treat a
condition like any variant.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

from bench.executor.capping import BYTES_PER_TOKEN, cap_result, to_json
from bench.executor.outcome import ExecutionOutcome
from bench.models import CONDITION_SEPARATOR

RESULT_BUDGET_TOKENS = 2000
"""The ``capped`` budget, estimated tokens (the executor's default budget)."""

FACTORS: dict[str, tuple[str, ...]] = {
    "result_format": ("envelope", "raw"),
    "error_style": ("actionable", "bare"),
    "result_budget": ("capped", "uncapped"),
    "fault": ("none", "timeout", "503", "429", "huge"),
}
"""Each factor's settings; the first is the default."""

FACTOR_HELP: dict[str, str] = {
    "result_format": "Episodes: how results go back: envelope ({success, data, error}) and/or "
                     "raw; comma-separated, each one a condition crossed with the variants.",
    "error_style": "Episodes: actionable (readable errors naming the fix) and/or bare ('Error "
                   "400').",
    "result_budget": "Episodes: capped (results cut to 2,000 tokens with a paging hint) and/or "
                     "uncapped.",
    "fault": "Episodes: none, timeout, 503, 429, huge: the first call to each tool fails so "
             "(or returns ~8 MB).",
}
"""Each factor's ``bench run --<factor>`` help (the option is made from :data:`FACTORS`)."""

SEPARATOR = CONDITION_SEPARATOR

# HTTP-like status of an executor error class or code, for the bare style (RFC 9110 §15).
_STATUS_BY_CODE = {"not_found": 404, "permission_denied": 403, "write_not_allowed": 403,
                   "sensitive_not_allowed": 403, "http_429": 429, "http_500": 500,
                   "http_503": 503}
_STATUS_BY_CLASS = {"validation": 400, "permanent": 400, "rate_limited": 429,
                    "transient": 503, "timeout": 504}


@dataclass(frozen=True)
class Factors:
    """One setting of every factor (defaults: the first of each :data:`FACTORS` list)."""

    result_format: str = "envelope"
    error_style: str = "actionable"
    result_budget: str = "capped"
    fault: str = "none"

    def __post_init__(self) -> None:
        for name, allowed in FACTORS.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}; got "
                                 f"{getattr(self, name)!r}")

    def changed(self) -> dict[str, str]:
        """The settings that differ from the defaults, in :data:`FACTORS` order."""
        return {name: getattr(self, name) for name, allowed in FACTORS.items()
                if getattr(self, name) != allowed[0]}

    def condition(self, variant: str) -> str:
        """The condition's name: ``variant`` then ``~name=value`` per non-default setting."""
        return SEPARATOR.join([variant, *(f"{k}={v}" for k, v in self.changed().items())])

    @property
    def budget_tokens(self) -> int | None:
        """The result budget in estimated tokens, None when uncapped."""
        return RESULT_BUDGET_TOKENS if self.result_budget == "capped" else None


def split_condition(name: str) -> tuple[str, dict[str, str]]:
    """``"l3~error_style=bare"`` -> ``("l3", {"error_style": "bare"})``."""
    variant, *settings = name.split(SEPARATOR)
    return variant, dict(s.split("=", 1) for s in settings if "=" in s)


def factor_grid(choices: Mapping[str, Sequence[str]]) -> list[Factors]:
    """Every combination of the chosen settings (factors not named keep their default), in
    :data:`FACTORS` order, the all-default one first when chosen.

    Raises:
        ValueError: an unknown factor or setting (names the allowed ones).
    """
    for name, values in choices.items():
        if name not in FACTORS:
            raise ValueError(f"unknown factor '{name}' (known: {', '.join(FACTORS)})")
        for value in values:
            if value not in FACTORS[name]:
                raise ValueError(f"{name} must be one of {', '.join(FACTORS[name])}; got "
                                 f"{value!r}")
    axes = [list(dict.fromkeys(choices.get(name) or [allowed[0]]))
            for name, allowed in FACTORS.items()]
    return [Factors(*combo) for combo in itertools.product(*axes)]


def bare_status(outcome: ExecutionOutcome) -> int:
    """The HTTP-like status the bare error style shows for a failed call."""
    return _STATUS_BY_CODE.get(outcome.error_code or "", _STATUS_BY_CLASS.get(
        outcome.error_class or "", 500))


def render_result(outcome: ExecutionOutcome, factors: Factors) -> tuple[str, bool]:
    """The text the model receives for one executed call, and whether it is an error.

    Args:
        outcome: the executor's outcome (its ``data`` uncapped when ``result_budget`` is
            ``uncapped``: the loop runs the executor with a budget it cannot reach then).
        factors: the condition's settings.

    Returns:
        ``(content, is_error)``: compact JSON text (UTF-8 kept) or, for a raw error, plain
        text.
    """
    if outcome.success:
        data = outcome.data
        if factors.budget_tokens is not None and not outcome.truncated:
            data, _, _ = cap_result(data, factors.budget_tokens)
        if factors.result_format == "envelope":
            return to_json({"success": True, "data": data, "error": None}), False
        return to_json(data), False
    error = outcome.error or "the call failed"
    if factors.error_style == "bare":
        error = f"Error {bare_status(outcome)}"
    elif factors.budget_tokens is not None:
        error = cap_text(error, factors.budget_tokens)
    if factors.result_format == "envelope":
        return to_json({"success": False, "data": None, "error": error}), True
    return error, True


def cap_text(text: str, budget_tokens: int) -> str:
    """``text`` cut to about ``budget_tokens`` estimated tokens (UTF-8 bytes / 4), keeping its
    head and tail around a note of what was cut; unchanged when it fits. For error messages,
    which may quote a whole argument (a schema error on a 5 MB value)."""
    raw = text.encode("utf-8")
    limit = budget_tokens * BYTES_PER_TOKEN
    if len(raw) <= limit:
        return text
    head = raw[:limit // 2].decode("utf-8", "ignore")
    tail = raw[-(limit // 2):].decode("utf-8", "ignore")
    cut = len(text) - len(head) - len(tail)
    return f"{head} [... {cut:,} characters cut: over the result budget ...] {tail}"


def describe(factors: Factors) -> dict[str, str]:
    """Every setting, as stored in a row's ``factors``."""
    return {name: str(getattr(factors, name)) for name in FACTORS}
