"""How ``bench variants draft`` asks a provider (:mod:`bench.drafting`): the method
(:data:`METHODS`, :func:`resolve_method`) and the requests themselves (:class:`Asker`),
through the provider's request pipeline as a run's requests go."""

from __future__ import annotations

import asyncio

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import ParsedAnswer

METHODS = ("auto", "whole", "sections")
"""How drafts are asked. ``whole``: one request per tool and length for the whole text.
``sections``: one request per line of the tool's spec's empty sections (a short question
each, :func:`bench.drafting.prompts.section_questions`), then each length is its template
rendered from the filled spec (:func:`bench.drafting.sections.tier_of`).
``auto``: ``sections`` for the embedded model (``local``), ``whole`` for any other."""


def resolve_method(method: str, provider_id: str) -> str:
    """``method`` with ``auto`` resolved for ``provider_id`` (see :data:`METHODS`).

    Raises:
        BenchError: ``method`` is not one of :data:`METHODS`.
    """
    from bench.providers.registry import runs_embedded_model

    if method not in METHODS:
        raise BenchError(f"--method must be {', '.join(METHODS)}, not '{method}'")
    if method != "auto":
        return method
    return "sections" if runs_embedded_model(provider_id) else "whole"


class Asker:
    """Drafting requests through ``provider_id``'s request pipeline
    (:func:`bench.providers.pipeline.build_pipeline`), one at a time, on one event loop; the
    embedded model's worker counts as hung after ``timeout_s`` (its ``answer_timeout_s``).

    Raises:
        BenchError: (on creation) the provider cannot start.
    """

    def __init__(self, provider_id: str, timeout_s: float, max_tokens: int) -> None:
        from bench.providers.local.prompt import EPISODE_NO_CALL_LAYOUT
        from bench.providers.pipeline import build_pipeline
        from bench.providers import make_provider
        from bench.providers.registry import runs_embedded_model
        from bench.runner.config import RunConfig
        from bench.runner.startup import default_factory

        # the embedded model answers in a constrained JSON layout: the one whose "no call"
        # carries words (an episode's final answer) lets it answer in text as well
        config = RunConfig(providers=[provider_id], request_timeout_s=timeout_s,
                           max_tokens=max_tokens, no_call_layout=EPISODE_NO_CALL_LAYOUT)
        if runs_embedded_model(provider_id):  # a run's settings, and a hang bounded by ours
            self.provider = make_provider(provider_id, max_tokens=max_tokens,
                                          no_call_layout=EPISODE_NO_CALL_LAYOUT,
                                          answer_timeout_s=timeout_s)
        else:
            self.provider = default_factory(provider_id, config)
        self.pipeline = build_pipeline(provider_id, self.provider, concurrency=1,
                                       attempts=config.attempts or 3)
        self.loop = asyncio.Runner()
        self.prepared: set[str] = set()

    def ask(self, key: str, prompt: str, tool: Tool) -> ParsedAnswer | str:
        """The parsed answer to ``prompt`` offering ``tool``, or the one-line reason the
        request failed (the provider's error, or a tool it cannot offer)."""
        import hashlib
        import json

        from bench.providers.errors import ProviderError
        from bench.providers.pipeline import ModelRequest

        variant_key = "bench-variants-draft-" + hashlib.sha256(json.dumps(
            tool.model_dump(), sort_keys=True).encode("utf-8")).hexdigest()[:16]
        try:
            if variant_key not in self.prepared:
                self.provider.prepare([tool], variant_key=variant_key,
                                      label="the drafting request")
                self.prepared.add(variant_key)
            request = ModelRequest(messages=[Message(role="user", content=prompt)],
                                   tools=[tool], trial=0, variant_key=variant_key, key=key)
            outcome = self.loop.run(self.pipeline.complete(request))
        except ProviderError as exc:
            return f"the request failed: {str(exc).splitlines()[0][:160]}"
        except BenchError as exc:  # e.g. a schema the embedded model's grammar cannot hold
            return f"the request failed: {exc.message.splitlines()[0][:160]}"
        return outcome.response.parsed

    def close(self) -> None:
        """Stop the provider and the event loop."""
        try:
            self.loop.run(self.provider.aclose())
        finally:
            self.loop.close()
            self.provider.close()
