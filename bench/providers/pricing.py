"""Token prices and the cost of one request (USD).

The table lives in ``bench/data/pricing.yaml`` (USD per 1M tokens, with its source and date);
a user file (``--pricing FILE`` or ``$BENCH_HOME/pricing.yaml``) replaces entries model by
model. Prompt tokens are taken to *include* cached tokens (OpenAI's ``prompt_tokens``
convention, which every adapter's :class:`~bench.providers.base.Usage` follows).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.results import ManifestPricing, ManifestPricingFile
from bench.project import USER_PRICING_NAME, Project, current_project  # noqa: F401
from bench.yamlio import line_of, load_yaml

DEFAULT_PRICING = Path(__file__).resolve().parent.parent / "data" / "pricing.yaml"


class Price(BaseModel):
    """USD per ``per_tokens`` tokens for one model: finite and >= 0 (an infinite price makes
    a cost of 0 tokens NaN, which no ``--max-usd`` comparison ever stops)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)
    cached_input: float | None = Field(default=None, ge=0, allow_inf_nan=False)


# A batch price factor: 0 to 1 (a negative or NaN factor would make costs negative or NaN and
# disarm --max-usd).
Discount = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class PricingFile(BaseModel):
    """The shape of a pricing YAML file (see ``bench/data/pricing.yaml``). Every cost bench
    prints is in USD, so ``currency`` can only be ``USD``."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = None
    date: str | None = None
    currency: Literal["USD"] = "USD"
    per_tokens: int = Field(default=1_000_000, gt=0)
    aliases: dict[str, str] = Field(default_factory=dict)
    batch_discount: dict[str, Discount] = Field(default_factory=dict)
    models: dict[str, dict[str, Price]] = Field(default_factory=dict)


@dataclass(frozen=True)
class ModelPrice:
    """Resolved USD prices per single token of one provider id."""

    input: float
    cached_input: float
    output: float

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """Cost in USD of one request (``cached_tokens`` are part of ``prompt_tokens``)."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        return ((prompt_tokens - cached) * self.input + cached * self.cached_input
                + completion_tokens * self.output)


def _read(path: Path) -> PricingFile:
    data, node = load_yaml(path)
    try:
        return PricingFile.model_validate(data or {})
    except ValidationError as exc:
        field, msg = pydantic_error_field(exc)
        parts = field.split(".") if field else []
        raise BenchError(f"invalid pricing: {msg}", file=path,
                         line=line_of(node, parts), field=field) from None


def split_provider_id(provider_id: str) -> tuple[str, str]:
    """``"openai:gpt-4o"`` -> ``("openai", "gpt-4o")``; ``openai-compat:m@url`` -> ``m``."""
    kind, _, model = provider_id.partition(":")
    if kind == "openai-compat":
        model = model.split("@", 1)[0]
    return kind, model


class Pricing:
    """The price table: built-in entries, then user entries on top.

    Args:
        user_file: a pricing YAML that overrides the built-in one model by model; default
            the project's ``pricing.yaml`` (:attr:`bench.project.Project.pricing_file`) when
            it exists.
        project: the project (default :func:`bench.project.current_project`).

    Raises:
        BenchError: a file that is missing, not YAML, or not in the expected shape (names file,
            line and field).
    """

    def __init__(self, user_file: str | Path | None = None, *,
                 project: Project | None = None) -> None:
        base = _read(DEFAULT_PRICING)
        self.sources = [ManifestPricingFile(file=str(DEFAULT_PRICING), source=base.source,
                                            date=base.date)]
        self.per_tokens = base.per_tokens
        self.aliases = dict(base.aliases)
        self.batch_discount = dict(base.batch_discount)
        self.models = {kind: dict(models) for kind, models in base.models.items()}
        path = Path(user_file) if user_file else (project or current_project()).pricing_file
        if user_file or path.is_file():
            user = _read(path)
            if user.per_tokens != base.per_tokens:  # rescale to one unit
                scale = base.per_tokens / user.per_tokens
                for models in user.models.values():
                    for name, price in models.items():
                        models[name] = Price(input=price.input * scale,
                                             output=price.output * scale,
                                             cached_input=None if price.cached_input is None
                                             else price.cached_input * scale)
            self.sources.append(ManifestPricingFile(file=str(path.resolve()),
                                                    source=user.source, date=user.date))
            self.aliases.update(user.aliases)
            self.batch_discount.update(user.batch_discount)
            for kind, models in user.models.items():
                self.models.setdefault(kind, {}).update(models)

    def price(self, provider_id: str, *, batch: bool = False) -> ModelPrice | None:
        """Per-token prices (USD) for a provider id, or None when the table has no entry.

        The longest model entry that equals the model id or prefixes it followed by ``-``
        wins (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``); an entry ``""`` matches every
        model of that kind (``local``). A cached price missing from the table falls back to
        the input price.
        """
        kind, model = split_provider_id(provider_id)
        kind = self.aliases.get(kind, kind)
        table = self.models.get(kind, {})
        best = None
        for name in table:
            if name == model or name == "" or model.startswith(name + "-"):
                if best is None or len(name) > len(best):
                    best = name
        if best is None:
            return None
        entry = table[best]
        factor = (self.batch_discount.get(kind, 1.0) if batch else 1.0) / self.per_tokens
        cached = entry.input if entry.cached_input is None else entry.cached_input
        return ModelPrice(entry.input * factor, cached * factor, entry.output * factor)

    def describe(self) -> ManifestPricing:
        """What the manifest records: the files used, their sources and dates."""
        return ManifestPricing(unit=f"USD per {self.per_tokens} tokens",
                               files=list(self.sources))
