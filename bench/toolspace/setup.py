"""What a run plans from its tool-space settings: the grown catalogs and each case's
retrieved tools, computed once when the run is set up (so a resume, a shard and ``bench
merge`` plan the same requests)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from bench.descriptions import Variant
from bench.errors import BenchError
from bench.models import Case, Tool
from bench.providers.cache import tools_digest
from bench.providers.tool_search import ToolSearch, ToolSearchOutcome
from bench.results import ManifestCatalog, ManifestToolspace
from bench.toolspace.distractors import Expansion, expand_variant
from bench.toolspace.retrieval import (
    Bm25Retriever,
    EmbeddingRetriever,
    Retriever,
    expected_names,
    query_text,
)
from bench.toolspace.space import NATIVE_RETRIEVERS, ToolSpace


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
        tool_search: a native retriever's settings (the request's
            :class:`bench.providers.tool_search.ToolSearch`), else None. Planned, such a
            retrieval sends the whole catalog (``offered``, deferred but for the
            always-loaded tools) and counts only the always-loaded tools as in the model's
            context; :meth:`after_search` makes it what the server's search loaded.
        searches: after the search, each search as the row stores it (``tool``, ``input``,
            ``tools``, ``error``).
        catalog_tokens: tool name -> its o200k_base tool tokens, over the catalog (native
            retrieval only: counts the tools a search loads).
    """

    offered: tuple[Tool, ...]
    catalog_size: int
    expected: tuple[str, ...]
    missing: tuple[str, ...]
    tool_tokens: int = 0
    tools_sha256: str = ""
    tool_search: ToolSearch | None = None
    searches: tuple[dict[str, Any], ...] = ()
    catalog_tokens: Mapping[str, int] | None = field(default=None, compare=False, hash=False,
                                                     repr=False)

    def after_search(self, outcome: ToolSearchOutcome | None) -> "Retrieved":
        """A native retrieval as the answer's tool search made it (``self`` for any other).

        ``offered`` becomes what was in the model's context when it answered: the
        always-loaded tools, then those the searches returned (``outcome.loaded``, in
        order; a returned name that is not a catalog tool is left out, and stays in
        ``searches``); ``missing`` the expected tools not among them; ``tool_tokens`` their
        o200k_base tool tokens, as for the other retrievers. Not counted: the deferred tools
        (not in the model's context), the search tool's own definition and whatever the
        server adds to the prompt for it (Anthropic does not publish them; the row's
        ``usage.prompt_tokens`` is the provider's count of everything). ``outcome`` None
        (no answer, or an answer that was not read): nothing was loaded.
        """
        if self.tool_search is None:
            return self
        by_name = {t.name: t for t in self.offered}
        names = list(dict.fromkeys([*self.tool_search.always_loaded,
                                    *(outcome.loaded if outcome else [])]))
        loaded = tuple(by_name[n] for n in names if n in by_name)
        sent = {t.name for t in loaded}
        tokens = self.catalog_tokens or {}
        searches = tuple(s.model_dump(exclude={"answered"}) for s in
                         (outcome.searches if outcome else []))
        return replace(self, offered=loaded,
                       missing=tuple(n for n in self.expected if n not in sent),
                       tool_tokens=sum(tokens.get(t.name, 0) for t in loaded),
                       searches=searches)

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
        always_loaded: with a native retriever, the tools sent without ``defer_loading``
            (``--always-loaded``); each must be a tool of every catalog it is used with.
    """

    spaces: Sequence[ToolSpace]
    seed: int
    sources: Sequence[str] | None = None
    embedder: Callable[[], object] | None = None
    always_loaded: Sequence[str] = ()
    expansions: dict[tuple[str, str, int | None], Expansion] = field(default_factory=dict)
    _retrievers: dict[str, Retriever] = field(default_factory=dict)
    _rankings: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    _tokens: dict[tuple[str, str, str], int] = field(default_factory=dict)
    _catalog_tokens: dict[str, dict[str, int]] = field(default_factory=dict)

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
        """Rank ``catalog`` for every case of its toolset at once (one index per catalog);
        nothing for a native retriever (the provider searches while answering)."""
        if retriever in NATIVE_RETRIEVERS:
            return
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
        if space.native:
            return self._native(case, catalog, space, expected)
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

    def _native(self, case: Case, catalog: Variant, space: ToolSpace,
                expected: tuple[str, ...]) -> Retrieved:
        """A planned native retrieval: the whole catalog sent, deferred but for the
        always-loaded tools (see :class:`Retrieved`).

        Raises:
            BenchError: an episode case (its later requests would not carry the server's
                search blocks back), or an always-loaded name that is not a catalog tool.
        """
        where = f"--retriever {space.retriever}"
        if case.kind == "episode":
            raise BenchError(f"{where}: case '{case.id}' is an episode; native tool search "
                             "runs on single-answer cases only (an episode's later requests "
                             "would not send the server's search blocks back)")
        names = {t.name for t in catalog.tools}
        for name in self.always_loaded:
            if name not in names:
                raise BenchError(f"--always-loaded: '{name}' is not a tool of "
                                 f"{catalog.toolset}/{catalog.name} ({len(names)} tools)")
        tokens = self._catalog_tokens.get(catalog.sha256)
        if tokens is None:  # one mapping per catalog, shared by its cases' retrievals
            tokens = self._catalog_tokens[catalog.sha256] = {
                t.name: self.tool_tokens([t]) for t in catalog.tools}
        search = ToolSearch(NATIVE_RETRIEVERS[space.retriever],
                            tuple(dict.fromkeys(self.always_loaded)))
        loaded = set(search.always_loaded)
        return Retrieved(catalog.tools, len(catalog.tools), expected,
                         tuple(n for n in expected if n not in loaded),
                         sum(tokens[n] for n in loaded), catalog.sha256, search,
                         catalog_tokens=tokens)

    def describe(self) -> list[ManifestCatalog]:
        """Each grown catalog as the manifest's ``toolspace`` stores it."""
        return [e.describe() for e in self.expansions.values()]

    def manifest_entry(self) -> ManifestToolspace | None:
        """The manifest's ``toolspace``: the settings and the grown catalogs; None when the
        run plans its variants as they are (no setting)."""
        if not self.spaces:
            return None
        return ManifestToolspace(settings=[s.setting() for s in self.spaces],
                                 catalogs=self.describe())


def catalog_digests(catalogs: Sequence[ManifestCatalog] | None
                    ) -> dict[tuple[str, str, int | None], str]:
    """(toolset, variant, tools) -> SHA-256 of each grown catalog of ``catalogs`` (a
    manifest's ``toolspace.catalogs``, :meth:`SpaceSetup.describe`); empty without any."""
    return {(str(entry.toolset), str(entry.variant), entry.tools): str(entry.sha256)
            for entry in catalogs or []}


def changed_catalog(before: Mapping[tuple[str, str, int | None], str],
                    after: Mapping[tuple[str, str, int | None], str]) -> str | None:
    """The first grown catalog (``toolset/variant at N tools``) whose SHA-256 differs between
    ``before`` and ``after`` (:func:`catalog_digests`), or that only one of them has; None
    when they agree. A catalog's distractors come from every other toolset under
    ``descriptions/`` (or ``--distractors``), so one imported, edited or removed after the
    run started changes it: rows planned on both would share one condition name."""
    for key in [*before, *(k for k in after if k not in before)]:
        if before.get(key) != after.get(key):
            toolset, variant, tools = key
            return f"{toolset}/{variant} at {tools} tools"
    return None
