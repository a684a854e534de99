"""What an optimization is asked to do: :class:`OptimizeConfig`, checked once by pydantic.

The defaults follow the issue's acceptance rule: tune the target metric (tool selection) on
``dev``, accept on ``test`` only when it gains at least ``min_gain`` with a significant paired
test and no other gated metric regresses beyond ``margin``, within a tool-definition token
budget of ``max_tokens_ratio`` times the starting variant's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bench.models import NAME_PATTERN

#: The metrics gated at acceptance besides the target: restraint on no-call and ask cases,
#: and, for episodes, task success (steps are checked as a mean; see
#: :mod:`bench.optimize.acceptance`).
DEFAULT_GATED = ("selection_correct", "arguments_correct", "no_call_correct", "ask_correct",
                 "task_success")


class OptimizeConfig(BaseModel):
    """One optimization (stored as ``config.json`` in its folder; a resume must match it).

    Attributes:
        dataset: a dataset name under the project's ``datasets/`` or a ``.jsonl`` path; its
            cases must carry a ``dev``/``test`` split and use one toolset.
        variant: the starting variant (``l3``, a hand-written file's name...).
        target: provider id of the model tuned for (any bench provider).
        proposer: provider id of the model that rewrites descriptions.
        rounds: at most this many propose-and-evaluate rounds (>= 1).
        max_usd: stop the search once the billed USD of its requests reaches this; None: no
            limit. The final test run is counted and reported, never cut.
        max_total_tokens: the same for billed prompt + completion tokens.
        metric: the target metric (a binary metric of :mod:`bench.scoring.registry`).
        gated: the other metrics that must not regress at acceptance (those a dataset does not
            carry are skipped).
        min_gain: the least gain (fraction, 0.05 = 5 points) of ``metric`` on ``test``.
        margin: the largest tolerated loss (fraction) on a gated metric (and the relative rise
            of mean episode steps).
        alpha: family-wise level of the Holm-corrected McNemar tests.
        max_tokens_ratio: a candidate's OpenAI tool-definition tokens may be at most this many
            times the starting variant's (1.1: +10%).
        also_provider: a second target that must also show no regression on ``test``.
        name: the output variant's name (default ``<variant>-opt``).
        template: a jinja2 file replacing the proposer's prompt (None: the shipped one).
        limit: at most this many cases per split (a stratified sample; None: all).
        max_failures: at most this many failures shown per tool in a prompt.
        allow_assertive: let candidates with assertive or exclusive wording through (they are
            flagged either way).
        seed: the runs' sampling seed.
        settings: other :class:`bench.runner.RunConfig` fields for the target's runs
            (``execute``, ``trials``, ``max_tokens``...).
    """

    model_config = ConfigDict(extra="forbid")

    dataset: str
    variant: str = Field(pattern=NAME_PATTERN)
    target: str
    proposer: str
    rounds: int = Field(default=3, ge=1, le=50)
    max_usd: float | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, gt=0)
    metric: str = "selection_correct"
    gated: list[str] = Field(default_factory=lambda: list(DEFAULT_GATED))
    min_gain: float = Field(default=0.0, ge=0, lt=1)
    margin: float = Field(default=0.0, ge=0, lt=1)
    alpha: float = Field(default=0.05, ge=0.0001, le=0.5)
    max_tokens_ratio: float = Field(default=1.1, gt=0)
    also_provider: str | None = None
    name: str | None = Field(default=None, pattern=NAME_PATTERN)
    template: str | None = None
    limit: int | None = Field(default=None, ge=1)
    max_failures: int = Field(default=8, ge=1, le=100)
    allow_assertive: bool = False
    seed: int = 1234
    settings: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metric")
    @classmethod
    def _binary_metric(cls, value: str) -> str:
        from bench.scoring.registry import comparable_metrics
        known = comparable_metrics()
        if value not in known:
            raise ValueError(f"unknown metric '{value}' (choose from {', '.join(known)})")
        return value

    @field_validator("gated")
    @classmethod
    def _gated_metrics(cls, value: list[str]) -> list[str]:
        from bench.scoring.registry import comparable_metrics
        known = comparable_metrics()
        unknown = [m for m in value if m not in known]
        if unknown:
            raise ValueError(f"unknown metric '{unknown[0]}' (choose from {', '.join(known)})")
        return list(dict.fromkeys(value))

    @field_validator("settings")
    @classmethod
    def _run_settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        from bench.runner.config import RunConfig
        owned = {"dataset", "variants", "providers", "split", "case_ids", "limit", "cache",
                 "seed", "max_usd", "max_total_tokens"}
        for key in value:
            if key not in RunConfig.model_fields:
                raise ValueError(f"unknown run setting '{key}'")
            if key in owned:
                raise ValueError(f"'{key}' is set by the optimizer, not a run setting")
        return value

    @property
    def output_name(self) -> str:
        """The output variant's name: ``name`` or ``<variant>-opt``."""
        return self.name or f"{self.variant}-opt"
