"""A toolset grown to N tools with distractors drawn from the other toolsets.

The catalog of a case under ``--tools N`` is its toolset's own tools (every one, unchanged:
the labels name them) plus ``N - own`` distractor tools drawn from the *source* toolsets:
every other toolset under ``descriptions/`` (the shipped ones, and any imported with ``bench
import bfcl`` / ``openai`` / ``mcp``), or the ones ``--distractors`` names.

- **Seeded and stratified.** Each source's tools are shuffled with a seed made of the run's
  seed, the toolset and the source; the sources then give one tool each in turn (sorted by
  name; a source that runs out drops out), so every source is represented as evenly as its
  size allows, and the draw is nested: the 40-tool catalog is part of the 200-tool one.
- **Same level.** A distractor is rendered at the case's variant when its toolset has a
  variant of that name (``l3`` ... ``l50`` for every toolset with specs). A toolset without
  it (an imported toolset has only its hand-written variants, ``bfcl`` or ``original``)
  gives the variant whose mean description lines per tool are nearest the case's variant
  (ties: the first in :func:`bench.descriptions.variants.available_variants` order); for an
  imported toolset that is its one description as imported. The level used per source is in
  the run's manifest.
- **Collisions.** A distractor named like a tool already in the catalog is renamed
  ``<name>__<source>`` (then ``_2``, ``_3``... if that is taken too), cut to 64 characters;
  the own tools are never renamed, so labels stay valid. Every rename is reported.
- **Order.** The catalog is shuffled once (seeded) so the own tools do not always come first:
  a model's position bias would otherwise favour them.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from bench.descriptions import Variant, load_variant
from bench.descriptions.variants import available_variants
from bench.errors import BenchError
from bench.models import NAME_PATTERN, Tool
from bench.paths import descriptions_dir
from bench.results import ManifestCatalog, ManifestCollision

NAME_LIMIT = 64
"""Longest tool name (OpenAI's function-name rule ``^[a-zA-Z0-9_-]{1,64}$``)."""


@dataclass(frozen=True)
class Collision:
    """A distractor renamed because its name was taken.

    Attributes:
        source: the distractor's toolset.
        name: its name there.
        renamed: its name in the catalog.
    """

    source: str
    name: str
    renamed: str


@dataclass
class Expansion:
    """A variant grown with distractors.

    Attributes:
        variant: the catalog: the variant's name and toolset, its own tools and the
            distractors, in a seeded order.
        own: the variant's own tool names.
        sources: distractors drawn per source toolset.
        levels: the variant each source was rendered at.
        collisions: the renamed distractors.
    """

    variant: Variant
    own: tuple[str, ...]
    sources: dict[str, int] = field(default_factory=dict)
    levels: dict[str, str] = field(default_factory=dict)
    collisions: list[Collision] = field(default_factory=list)

    def describe(self) -> ManifestCatalog:
        """As the manifest's ``toolspace`` entry stores it."""
        return ManifestCatalog(
            toolset=self.variant.toolset, variant=self.variant.name,
            tools=len(self.variant.tools), own=len(self.own), sha256=self.variant.sha256,
            sources=dict(self.sources), levels=dict(self.levels),
            collisions=[ManifestCollision(source=c.source, name=c.name, renamed=c.renamed)
                        for c in self.collisions])


def source_toolsets(toolset: str, root: Path | None = None) -> list[str]:
    """Every toolset under ``root`` (default ``descriptions/``) but ``toolset``, sorted: each
    folder with specs or hand-written variants whose name can be a toolset's
    (:data:`bench.models.NAME_PATTERN`: a copy such as ``ecommerce.bak`` or a
    hidden folder is not a toolset, and used to stop every ``--tools`` run)."""
    root = root or descriptions_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and p.name not in ("templates", toolset)
                  and re.fullmatch(NAME_PATTERN, p.name)
                  and (any((p / "specs").glob("*.yaml")) or any((p / "variants").glob("*.yaml"))))


def source_level(source: str, variant: Variant, root: Path | None = None) -> Variant:
    """The variant of ``source`` a distractor is rendered at for the case's ``variant``:
    the same name when ``source`` has it, else the one with the nearest mean description
    lines per tool (see the module docstring).

    Raises:
        BenchError: ``source`` has no variant at all, or one of its variants is invalid.
    """
    names = available_variants(source, root)
    if not names:
        raise BenchError(f"distractor toolset '{source}' has no variant (no specs, no "
                         "variants/*.yaml)", file=(root or descriptions_dir()) / source)
    if variant.name in names:
        return load_variant(source, variant.name, root)
    loaded = [load_variant(source, name, root) for name in names]
    return min(loaded, key=lambda v: abs(v.mean_lines - variant.mean_lines))


def _free_name(name: str, source: str, taken: set[str]) -> str:
    base = f"{name}__{source}"[:NAME_LIMIT]
    candidate, number = base, 2
    while candidate in taken:
        suffix = f"_{number}"
        candidate = base[:NAME_LIMIT - len(suffix)] + suffix
        number += 1
    return candidate


def expand_variant(variant: Variant, total: int, *, seed: int,
                   sources: Sequence[str] | None = None,
                   root: Path | None = None) -> Expansion:
    """``variant`` grown to ``total`` tools with distractors (see the module docstring).

    Args:
        variant: the case's variant (its tools are all kept, unchanged).
        total: tools in the catalog.
        seed: the run's seed.
        sources: the source toolsets (default :func:`source_toolsets`).
        root: the descriptions folder (default ``descriptions/``).

    Raises:
        BenchError: ``total`` is below the toolset's own tool count, the sources hold too
            few tools, or a source is unknown or invalid (one line each).
    """
    own = tuple(t.name for t in variant.tools)
    if total < len(own):
        raise BenchError(f"--tools {total} is below the {len(own)} tools of toolset "
                         f"'{variant.toolset}' (its own tools are always offered)")
    chosen = list(dict.fromkeys(sources)) if sources is not None else \
        source_toolsets(variant.toolset, root)
    chosen = [s for s in chosen if s != variant.toolset]
    pools: dict[str, list[Tool]] = {}
    levels: dict[str, str] = {}
    for source in sorted(chosen):
        level = source_level(source, variant, root)
        tools = list(level.tools)
        random.Random(f"{seed}:{variant.toolset}:{source}").shuffle(tools)
        pools[source], levels[source] = tools, level.name
    wanted = total - len(own)
    available = sum(len(p) for p in pools.values())
    if wanted > available:
        raise BenchError(f"--tools {total}: toolset '{variant.toolset}' has {len(own)} tools "
                         f"and the distractor toolsets ({', '.join(sorted(pools)) or 'none'}) "
                         f"{available}: import more (bench import bfcl ...) or ask for fewer"
                         + (f" (--distractors {variant.toolset}: a toolset is never its own "
                            "distractor)" if sources is not None and variant.toolset in sources
                            else ""))
    drawn: list[tuple[str, Tool]] = []
    positions = {source: 0 for source in pools}
    while len(drawn) < wanted:
        for source in sorted(pools):
            if len(drawn) == wanted:
                break
            if positions[source] < len(pools[source]):
                drawn.append((source, pools[source][positions[source]]))
                positions[source] += 1
    taken = set(own)
    catalog = list(variant.tools)
    collisions: list[Collision] = []
    counts: dict[str, int] = {}
    for source, tool in drawn:
        name = tool.name
        if name in taken:
            name = _free_name(tool.name, source, taken)
            collisions.append(Collision(source, tool.name, name))
            tool = tool.model_copy(update={"name": name})
        taken.add(name)
        catalog.append(tool)
        counts[source] = counts.get(source, 0) + 1
    random.Random(f"{seed}:{variant.toolset}:{variant.name}:order").shuffle(catalog)
    grown = Variant(name=variant.name, toolset=variant.toolset, tools=tuple(catalog),
                    source=f"{variant.source} + {wanted} distractors")
    return Expansion(grown, own, counts, {s: levels[s] for s in counts}, collisions)
