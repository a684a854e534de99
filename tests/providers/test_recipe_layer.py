"""docs/extending.md's "Add a request layer" recipe stays true: a layer is one module of your
own (no file of bench), given as a factory to ``bench.evaluate(layers=...)`` (or
``Runner(layers=...)``); every request of a real run goes through it, under
``InvalidAsAnswer`` and above the response cache, and a request it changes is the one the
provider gets."""

from __future__ import annotations

import importlib
import sys

import pytest

from bench import evaluate, load_variant, make_provider
from bench.providers.cache import ResponseCache
from bench.providers.pipeline import build_pipeline

# the recipe as a user writes it: a module of their own
MY_LAYERS = '''
import dataclasses

seen = []  # (provider id, tools offered, the cache's answer below: "hit", "miss" or None)


class Logged:
    """Notes each request and whether the response cache under it answered."""

    def __init__(self, provider_id, inner):
        self.provider_id, self.inner = provider_id, inner

    async def __call__(self, exchange):
        outcome = await self.inner(exchange)
        seen.append((self.provider_id, len(exchange.request.tools), outcome.cache))
        return outcome


class ToolRequired:
    """Sends every request with tool_choice "required", whatever the run's setting."""

    def __init__(self, provider_id, inner):
        self.inner = inner

    async def __call__(self, exchange):
        request = dataclasses.replace(exchange.request, tool_choice="required")
        return await self.inner(type(exchange)(request, exchange.provider))
'''


@pytest.fixture
def my_layers(tmp_path, monkeypatch):
    """The user's module, written in a temporary folder and imported from there."""
    (tmp_path / "my_layers.py").write_text(MY_LAYERS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module("my_layers")
    finally:
        sys.modules.pop("my_layers", None)


def test_a_layer_of_yours_sits_under_invalid_as_answer_and_above_the_cache(my_layers,
                                                                            tmp_path):
    """The stack build_pipeline makes with the user's factory (for do-nothing, a provider
    that needs no dataset)."""
    pipeline = build_pipeline("do-nothing", make_provider("do-nothing"), concurrency=1,
                              attempts=2,
                              cache=ResponseCache(tmp_path / "cache.sqlite"),
                              extra=[my_layers.Logged])
    assert pipeline.layers == ["InvalidAsAnswer", "Logged", "Cached", "Retrying", "Send"]


@pytest.mark.slow
def test_every_request_of_a_run_goes_through_your_layer(project, my_layers):
    """A real oracle run with the response cache: the layer sees each of its 8 requests
    with the tools the variant offers; a second run answered from the cache still goes
    through it (it sits above the cache), and its rows are the first run's."""
    first = evaluate("ecommerce", ["l3"], ["oracle"], project=project, run_id="first",
                     limit=8, execute=False, cache="readwrite", layers=[my_layers.Logged])
    assert len(first.rows) == 8
    offered = len(load_variant("ecommerce", "l3").tools)
    assert my_layers.seen == [("oracle", offered, "miss")] * 8
    my_layers.seen.clear()
    again = evaluate("ecommerce", ["l3"], ["oracle"], project=project, run_id="again",
                     limit=8, execute=False, cache="readwrite", layers=[my_layers.Logged])
    assert my_layers.seen == [("oracle", offered, "hit")] * 8
    assert [r.parsed for r in again.rows] == [r.parsed for r in first.rows]


def test_a_request_your_layer_changes_is_the_one_the_provider_gets(project, my_layers):
    """tool_choice "required" set by the layer: the oracle does not take a tool choice, so
    each row is that provider's invalid answer (a validation error), as the page says; the
    same run without the layer answers every case."""
    plain = evaluate("ecommerce", ["l3"], ["oracle"], project=project, run_id="plain",
                     limit=4, execute=False)
    assert all(r.metrics.selection_correct for r in plain.rows)
    changed = evaluate("ecommerce", ["l3"], ["oracle"], project=project, run_id="changed",
                       limit=4, execute=False, layers=[my_layers.ToolRequired])
    assert len(changed.rows) == 4
    assert all(r.parsed.error and not r.metrics.selection_correct for r in changed.rows), \
        [r.parsed for r in changed.rows]
