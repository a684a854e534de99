"""What a run plans from its tool-space settings: the grown catalogs and each case's
retrieved tools, computed once when the run is set up (so a resume, a shard and ``bench
merge`` plan the same requests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from bench.descriptions import Variant
from bench.models import Case, Tool
from bench.providers.cache import tools_digest
from bench.toolspace.distractors import Expansion, expand_variant
from bench.toolspace.retrieval import (
    Bm25Retriever,
    EmbeddingRetriever,
    Retriever,
    expected_names,
    query_text,
)
from bench.toolspace.space import ToolSpace


@dataclass(frozen=True)
class Retrieved:
    """One case's retrieval in one catalog.

    Attributes:
        offered: the tools the model is sent (the catalog when there is no retriever).
        catalog_size: tools in the catalog.
        expected: tool names the label expects.
        missing: expected names not among ``offered``.
        tool_tokens: tool-definition tokens of ``offered`` (o200k_base, each tool as in an
            OpenAI ``tools`` field, summed: :func:`bench.descriptions.tokens.
            openai_tool_tokens`), the same count for every provider so that conditions
            compare; a provider's own count is the row's ``tool_definition_tokens``.
        tools_sha256: digest of ``offered`` (:func:`bench.providers.cache.tools_digest`),
            the request's ``variant_key``: providers key per-tool-list caches on it (the
            embedded model's saved prefix states, the function worker's tool lists).
    """

    offered: tuple[Tool, ...]
    catalog_size: int
    expected: tuple[str, ...]
    missing: tuple[str, ...]
    tool_tokens: int = 0
    tools_sha256: str = ""

    @property
    def recall(self) -> float | None:
        """Fraction of the expected tools offered; None when none is expected."""
        if not self.expected:
            return None
        return 1 - len(self.missing) / len(self.expected)


@dataclass
class SpaceSetup:
    """The catalogs and retrievals of a run.

    Args:
        spaces: the tool-space settings (:func:`bench.toolspace.space.space_grid`).
        seed: the run's seed (distractor draw and order).
        sources: distractor toolsets (None: every other toolset).
        embedder: builds the embedding retriever's model when a space needs it.
    """

    spaces: Sequence[ToolSpace]
    seed: int
    sources: Sequence[str] | None = None
    embedder: Callable[[], object] | None = None
    expansions: dict[tuple[str, str, int | None], Expansion] = field(default_factory=dict)
    _retrievers: dict[str, Retriever] = field(default_factory=dict)
    _rankings: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    _tokens: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def tool_tokens(self, tools: Sequence[Tool]) -> int:
        """Summed per-tool o200k_base tokens of ``tools`` (each tool counted once per run)."""
        from bench.descriptions.tokens import openai_tool_tokens
        total = 0
        for tool in tools:
            key = (tool.name, tool.description, repr(tool.input_schema))
            if key not in self._tokens:
                self._tokens[key] = openai_tool_tokens([tool])
            total += self._tokens[key]
        return total

    def catalog(self, variant: Variant, space: ToolSpace) -> Variant:
        """``variant`` grown to ``space.tools`` (itself when no count is set).

        Raises:
            BenchError: as :func:`bench.toolspace.distractors.expand_variant`.
        """
        if space.tools is None:
            return variant
        key = (variant.toolset, variant.name, space.tools)
        if key not in self.expansions:
            self.expansions[key] = expand_variant(variant, space.tools, seed=self.seed,
                                                  sources=self.sources)
        return self.expansions[key].variant

    def _retriever(self, name: str) -> Retriever:
        if name not in self._retrievers:
            if name == "bm25":
                self._retrievers[name] = Bm25Retriever()
            else:
                if self.embedder is None:
                    from bench.toolspace.embedding import LlamaEmbedder
                    self.embedder = LlamaEmbedder
                self._retrievers[name] = EmbeddingRetriever(self.embedder())  # type: ignore[arg-type]
        return self._retrievers[name]

    def rank_all(self, cases: Sequence[Case], catalog: Variant, retriever: str) -> None:
        """Rank ``catalog`` for every case of its toolset at once (one index per catalog)."""
        todo = [c for c in cases if c.toolset == catalog.toolset
                and (c.id, catalog.sha256, retriever) not in self._rankings]
        if not todo:
            return
        rankings = self._retriever(retriever).rank(catalog.tools,
                                                   [query_text(c) for c in todo])
        for case, ranking in zip(todo, rankings):
            self._rankings[case.id, catalog.sha256, retriever] = ranking

    def retrieve(self, case: Case, catalog: Variant, space: ToolSpace) -> Retrieved:
        """The tools ``case`` is offered from ``catalog`` under ``space``."""
        expected = tuple(expected_names(case))
        if space.retriever == "none":
            offered = catalog.tools
        else:
            self.rank_all([case], catalog, space.retriever)
            ranking = self._rankings[case.id, catalog.sha256, space.retriever]
            offered = tuple(catalog.tools[i] for i in ranking[:space.top_k])
        names = {t.name for t in offered}
        digest = catalog.sha256 if space.retriever == "none" else tools_digest(offered)
        return Retrieved(offered, len(catalog.tools), expected,
                         tuple(n for n in expected if n not in names),
                         self.tool_tokens(offered), digest)

    def describe(self) -> list[dict[str, object]]:
        """Each grown catalog as the manifest's ``toolspace`` stores it."""
        return [e.describe() for e in self.expansions.values()]
