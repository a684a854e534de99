"""The run's ledger: what each answer cost, what the run has been billed, and whether its
budget (``--max-usd``, ``--max-total-tokens``) lets one more request start."""

from __future__ import annotations

from typing import Iterable, Literal, Sequence

from bench.providers.base import ProviderResponse
from bench.providers.pricing import Pricing
from bench.providers.registry import provider_spec
from bench.results import ManifestSpent, Row
from bench.runner.budget import Spend

BudgetDecision = Literal["send", "wait", "stop"]


def is_recorded(provider_id: str) -> bool:
    """Whether ``provider_id``'s answers come from a recording (its kind's ``recorded``
    capability: ``replay``): priced as recorded, billed nothing, never cached again."""
    spec = provider_spec(provider_id)
    return spec is not None and spec.recorded


class Ledger:
    """Cost, spend and budget of one run.

    Args:
        pricing: the run's price list (USD per million tokens, ``bench/data/pricing.yaml``
            and ``--pricing``).
        max_usd: the run's USD budget, or None.
        max_total_tokens: the run's budget in prompt + completion tokens, or None.
        spend: what the rows already written were billed (:meth:`spent_by`), for a resume.
    """

    def __init__(self, pricing: Pricing, *, max_usd: float | None,
                 max_total_tokens: int | None, spend: Spend | None = None) -> None:
        self.pricing = pricing
        self.max_usd, self.max_total_tokens = max_usd, max_total_tokens
        self.spend = spend or Spend()

    @staticmethod
    def spent_by(rows: Iterable[Row], planned: set[str]) -> Spend:
        """What ``rows`` (the run's stored rows) were billed, counting each planned key once;
        cache hits and rows billed 0 cost nothing."""
        spend, seen = Spend(), set()
        for row in rows:
            if row.key in planned and row.key not in seen:
                seen.add(row.key)
                if row.billed_usd != 0.0 and row.cache != "hit":
                    usage = row.usage
                    tokens = ((usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
                              if usage else 0)
                    spend.add(row.billed_usd or 0.0, tokens)
        return spend

    def cost(self, provider_id: str, response: ProviderResponse,
             cache: str | None) -> tuple[float | None, float | None]:
        """``(list-price cost, billed cost)`` of one answer in USD; (None, None) without a
        price. A recorded answer is priced as the provider it was recorded from and bills 0;
        so does a cache hit."""
        recorded = is_recorded(provider_id)
        priced_as = str(response.request.get("replayed_from", provider_id)) if recorded \
            else provider_id
        price = self.pricing.price(priced_as, batch=bool(response.request.get("batch")))
        if price is None:
            return None, None
        usage = response.usage
        cost = price.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        fresh = cache != "hit" and not recorded
        return cost, cost if fresh else 0.0

    def charge(self, provider_id: str, responses: Sequence[ProviderResponse],
               cache: str | None) -> list[tuple[float | None, float | None]]:
        """Price one plan item's answers (one, or an episode's steps, each priced as its own
        request), add what was billed to the spend as one request, and return each answer's
        :meth:`cost`."""
        priced = [self.cost(provider_id, response, cache) for response in responses]
        if cache != "hit" and not is_recorded(provider_id):
            tokens = sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in responses)
            self.spend.add(sum(billed or 0.0 for _, billed in priced), tokens)
        return priced

    def decision(self, in_flight: int) -> BudgetDecision:
        """``send``, ``wait`` or ``stop``: may one more request start now?

        ``stop`` once a limit is reached. ``wait`` while the requests in flight, at the mean
        cost so far, would pass it with one more, and while the first request is in flight (it
        gives the first estimate). With nothing in flight and the limit not reached, one more
        request is sent: a run passes a limit by at most that request, plus what requests in
        flight cost over the running mean.
        """
        spend, decision = self.spend, "send"
        limits = ((self.max_usd, spend.usd, spend.mean_usd),
                  (self.max_total_tokens, spend.tokens, spend.mean_tokens))
        for limit, used, mean in limits:
            if limit is None:
                continue
            if used >= limit:
                return "stop"
            if in_flight and (not spend.requests or used + (in_flight + 1) * mean > limit):
                decision = "wait"  # the first request alone gives the estimate
        return "wait" if decision == "wait" else "send"

    def describe(self) -> ManifestSpent:
        """The manifest's ``spent`` entry (USD rounded to 1e-6)."""
        return ManifestSpent(billed_usd=round(self.spend.usd, 6),
                             billed_tokens=self.spend.tokens,
                             billed_requests=self.spend.requests)
