"""The tool-space settings of a condition: how many tools the catalog holds, which retriever
picks the tools the model sees, and how many it picks.

A condition's name is the variant's name followed by each setting that is not the default,
``l3~tools=40~retriever=bm25~top_k=5``, then any episode factor
(:meth:`bench.episodes.factors.Factors.condition`), so the table, ``bench compare``, the
report and the gate treat it like any variant, as they do episode factors.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from bench.models import CONDITION_SEPARATOR
from bench.results import ManifestSpaceSetting

RETRIEVERS: tuple[str, ...] = ("none", "bm25", "embedding", "native", "native-bm25")
"""``none``: the model sees the whole catalog; ``bm25``: lexical retrieval
(:class:`bench.toolspace.retrieval.Bm25Retriever`); ``embedding``: dense retrieval with the
embedded model (:class:`bench.toolspace.retrieval.EmbeddingRetriever`); ``native`` and
``native-bm25``: the provider's own tool search (Anthropic's tool search tool, regex or BM25
variant, :mod:`bench.providers.tool_search`), which the model calls itself while answering."""

NATIVE_RETRIEVERS: dict[str, Literal["regex", "bm25"]] = {"native": "regex",
                                                          "native-bm25": "bm25"}
"""Provider-native retriever -> its search variant (:data:`bench.providers.tool_search.
SEARCH_TOOLS`). The server picks how many tools a search returns (3-5 per Anthropic's tool
search page), so these take no ``top_k``."""

NATIVE_KINDS = ("anthropic",)
"""Provider kinds that have native tool search (:meth:`bench.providers.base.HTTPProvider.
search_request`)."""

DEFAULT_TOP_K = 5
"""Tools retrieved per query when ``--top-k`` is not given (RAG-MCP and Anthropic's tool
search both return a handful of tools per search; 3-5 is their common setting)."""

MAX_TOOLS = 5000
"""The largest ``--tools`` value (a catalog past this is not a tool list a request carries)."""


@dataclass(frozen=True)
class ToolSpace:
    """One tool-space setting.

    Attributes:
        tools: tools in the catalog (the toolset's own plus distractors); None: the toolset
            as it is.
        retriever: one of :data:`RETRIEVERS`.
        top_k: tools the retriever passes to the model (None with ``retriever`` ``none``
            and with a native retriever: the server decides).
    """

    tools: int | None = None
    retriever: str = "none"
    top_k: int | None = None

    def __post_init__(self) -> None:
        if self.retriever not in RETRIEVERS:
            raise ValueError(f"retriever must be one of {', '.join(RETRIEVERS)}; got "
                             f"{self.retriever!r}")
        if self.tools is not None and not 1 <= self.tools <= MAX_TOOLS:
            raise ValueError(f"tools must be between 1 and {MAX_TOOLS}; got {self.tools}")
        if (self.retriever == "none" or self.native) != (self.top_k is None):
            raise ValueError("top_k goes with a bm25 or embedding retriever (and only with "
                             "one)")
        if self.top_k is not None and not 1 <= self.top_k <= MAX_TOOLS:
            raise ValueError(f"top_k must be between 1 and {MAX_TOOLS}; got "
                             f"{self.top_k}")

    @property
    def native(self) -> bool:
        """The retriever is the provider's own tool search (:data:`NATIVE_RETRIEVERS`)."""
        return self.retriever in NATIVE_RETRIEVERS

    def settings(self) -> dict[str, str]:
        """The settings that name the condition (defaults left out), in naming order."""
        found: dict[str, str] = {}
        if self.tools is not None:
            found["tools"] = str(self.tools)
        if self.retriever != "none":
            found["retriever"] = self.retriever
            if self.top_k is not None:
                found["top_k"] = str(self.top_k)
        return found

    def condition(self, variant: str) -> str:
        """``variant`` followed by ``~name=value`` per setting, e.g.
        ``l3~tools=40~retriever=bm25~top_k=5``; the variant's name alone for the defaults."""
        return CONDITION_SEPARATOR.join([variant, *(f"{k}={v}" for k, v in
                                                    self.settings().items())])

    def describe(self) -> dict[str, Any]:
        """As stored in a row's ``retrieval`` (``tools`` None: the toolset as it is)."""
        return {"tools": self.tools, "retriever": self.retriever, "top_k": self.top_k}

    def setting(self) -> ManifestSpaceSetting:
        """As stored in the manifest's ``toolspace.settings`` (the fields of
        :meth:`describe`)."""
        return ManifestSpaceSetting(tools=self.tools, retriever=self.retriever,
                                    top_k=self.top_k)


def space_grid(tools: Sequence[int] = (), retrievers: Sequence[str] = (),
               top_k: Sequence[int] = ()) -> list[ToolSpace]:
    """Every combination of the chosen settings, tool counts outermost; ``retriever`` ``none``
    and each native retriever once per tool count (they have no top-k). Empty when nothing is
    chosen (no tool count, no retriever but ``none``): the run plans its variants as they are.

    Raises:
        ValueError: an unknown retriever, a tool count or top-k out of range (1 to
            :data:`MAX_TOOLS`), or ``top_k`` given without a retriever.
    """
    counts: list[int | None] = list(dict.fromkeys(tools)) or [None]
    chosen = list(dict.fromkeys(retrievers)) or ["none"]
    ks = list(dict.fromkeys(top_k))
    if ks and all(r == "none" or r in NATIVE_RETRIEVERS for r in chosen):
        raise ValueError("--top-k needs a retriever (--retriever bm25 or embedding; a native "
                         "tool search returns as many tools as its server decides)")
    ks = ks or [DEFAULT_TOP_K]
    grid = []
    for count, retriever in itertools.product(counts, chosen):
        if retriever == "none":
            grid.append(ToolSpace(count))
        elif retriever in NATIVE_RETRIEVERS:
            grid.append(ToolSpace(count, retriever))
        else:
            grid.extend(ToolSpace(count, retriever, k) for k in ks)
    if grid == [ToolSpace()]:
        return []
    return grid


def native_check(retrievers: Sequence[str], providers: Sequence[str],
                 always_loaded: Sequence[str] = ()) -> None:
    """Refuse a native retriever (:data:`NATIVE_RETRIEVERS`) with a provider that has no
    native tool search (kinds other than :data:`NATIVE_KINDS`), and ``always_loaded`` tools
    without a native retriever.

    Raises:
        ValueError: one line naming the first such provider, or the option.
    """
    from bench.providers.registry import kind_of

    native = [r for r in retrievers if r in NATIVE_RETRIEVERS]
    if always_loaded and not native:
        raise ValueError("--always-loaded goes with --retriever native or native-bm25 (the "
                         "other retrievers send only the tools they pick)")
    for provider_id in providers if native else ():
        if kind_of(provider_id) not in NATIVE_KINDS:
            raise ValueError(f"--retriever {native[0]} is Anthropic's tool search tool; "
                             f"provider '{provider_id}' has no native tool search (use "
                             "an anthropic:<model> provider, or --retriever bm25 or "
                             "embedding)")
