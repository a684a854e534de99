"""``bench variants draft`` end to end (:mod:`bench.drafting`): which lengths each tool still
needs (a run resumes), the requests by the chosen method, each usable draft written at once
(:func:`draft_variants`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from bench.descriptions.draft_wording import Section
from bench.descriptions.specs import load_spec
from bench.descriptions.variants import CURRENT, Variant, load_variant
from bench.drafting.asker import Asker, resolve_method
from bench.drafting.outcomes import Draft, DraftResult, ProgressHook, Steps
from bench.drafting.prompts import section_questions
from bench.drafting.sections import (SECTION_MAX_TOKENS, Renderer, draft_sections,
                                     sections_needed)
from bench.drafting.spec_writes import spec_path, store_drafts, variants_of
from bench.drafting.whole import default_max_tokens, draft_whole
from bench.errors import BenchError
from bench.paths import descriptions_dir

DEFAULT_LENGTHS = (3, 10, 30, 50)
"""Target lines drafted by default: those of the built-in templates l3.j2 ... l50.j2."""

DEFAULT_TOOL_TIMEOUT_S = 600.0
"""Seconds of requests one tool's drafts may take (``--tool-timeout``): no new request is
sent for a tool once its earlier ones took this long; a request in flight is bounded by
``--request-timeout``. Ten minutes is about five times what the section-by-section drafts of
a two-parameter tool took the embedded model on two shared cores (127 s: docs/descriptions-
and-variants.md)."""


def _names(lengths: Iterable[int]) -> str:
    """``l3, l10`` for ``[3, 10]``."""
    return ", ".join(f"l{n}" for n in lengths)


def resume_lines(kept: dict[str, list[int]], missing: dict[str, list[int]]) -> list[str]:
    """What a run that resumes keeps and drafts, one line per set of tools that share it:
    ``l3, l10 kept; drafting l30, l50`` when every tool is alike, else each line led by its
    tools (``get_time: l3 kept; drafting l10``; ``nothing to draft`` for a tool whose lengths
    are all kept). No line when no tool keeps a length (a first draft, or ``--force``).

    Args:
        kept: tool -> the lengths whose text its spec already has.
        missing: tool -> the lengths to draft (same tools as ``kept``).
    """
    if not any(kept.values()):
        return []
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[str]] = {}
    for name in kept:
        groups.setdefault((tuple(kept[name]), tuple(missing[name])), []).append(name)
    lines = []
    for (old, new), names in groups.items():
        parts = [f"{_names(old)} kept"] if old else []
        parts.append(f"drafting {_names(new)}" if new else "nothing to draft")
        text = "; ".join(parts)
        lines.append(text if len(groups) == 1 else f"{', '.join(names)}: {text}")
    return lines


def draft_variants(toolset: str, provider_id: str, lengths: Iterable[int] = DEFAULT_LENGTHS,
                   *, source: str = CURRENT, tools: Iterable[str] | None = None,
                   force: bool = False, root: Path | None = None, timeout_s: float = 120.0,
                   max_tokens: int | None = None, method: str = "auto",
                   tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
                   progress: ProgressHook | None = None,
                   notice: Callable[[str], None] | None = None) -> DraftResult:
    """Draft ``l<N>`` texts for the tools of ``toolset`` from its ``source`` variant and store
    them in the specs as drafts (``draft: true``, ``drafted_by``, ``drafted_from``).

    A run resumes: without ``force``, each tool is asked only the lengths its spec has no text
    for yet (a draft or an accepted text is kept), so a draft cut short (an unusable answer,
    the tool's time budget, Ctrl-C) is finished by running the command again; ``notice``
    hears which lengths are kept and which drafted (:func:`resume_lines`) before the first
    request. With ``force``, every length is drafted again.

    ``method`` (:data:`bench.drafting.asker.METHODS`) says how: a whole text per tool and
    length, read by :func:`bench.drafting.whole.read_draft`; or the lines of the empty
    sections of each tool's spec, one question each
    (:data:`bench.descriptions.draft_wording.SECTIONS`, as many as bring each length near its
    target: :func:`bench.drafting.sections.draft_sections`; read by
    :func:`bench.drafting.sections.read_section`), each length then rendered by its template
    (:func:`bench.drafting.sections.tier_of`) from the spec with those lines. Every usable
    draft is written as soon as it is known (a tool's lengths together with ``sections``),
    under :func:`bench.drafting.spec_writes.specs_lock`; the lengths that could not be
    drafted are named in :attr:`DraftResult.failed` and leave the spec's text for them as it
    was.

    Args:
        toolset: the toolset's folder name.
        provider_id: any bench provider id (``function:...`` in tests).
        lengths: target lines per description (``l3`` ... ``l50`` by default).
        source: the variant drafted from (default ``current``: the imported text).
        tools: only these tools (default: all).
        force: replace texts already in a spec (a draft, or an accepted one).
        root: the ``descriptions/`` folder (default: the project's).
        timeout_s: seconds per request (the embedded model's worker is stopped as hung
            after it, restarted once and asked again).
        max_tokens: completion cap per request (default
            :func:`bench.drafting.whole.default_max_tokens` for ``whole``,
            :data:`bench.drafting.sections.SECTION_MAX_TOKENS` for ``sections``).
        method: :data:`bench.drafting.asker.METHODS`.
        tool_timeout_s: seconds of requests per tool (:data:`DEFAULT_TOOL_TIMEOUT_S`).
        progress: called once per request (:class:`bench.drafting.outcomes.DraftStep`).
        notice: called with each line of :func:`resume_lines` when a tool keeps a length.

    Returns:
        The drafts written and, per tool, what was not drafted and why, and the lengths kept.

    Raises:
        BenchError: an unknown toolset, source variant, tool or method; lengths outside
            1-200; a spec that does not load (names its file, line and field); every tool
            already has a text for every length (without ``force``: nothing to draft); a
            provider that cannot start.
    """
    root = root or descriptions_dir()
    base = load_variant(toolset, source, root)
    wanted, lengths = _asked(base, toolset, source, tools, lengths)
    method = resolve_method(method, provider_id)
    specs = _read_specs(root / toolset, wanted, lengths, force)
    if notice is not None:
        for line in resume_lines(specs.kept, specs.missing):
            notice(line)
    wanted = [name for name in wanted if specs.missing[name]]
    render = Renderer(root) if method == "sections" else None
    plans = {name: sections_needed(specs.fields[name], specs.missing[name])
             for name in wanted} if render is not None else {}
    total, cap = _requests(base, specs, wanted, plans, lengths, render is None, max_tokens)
    steps = Steps(total, progress)
    run = _Run(toolset, root / toolset, base, provider_id, source, specs, tool_timeout_s)
    drafts, problems = _draft_tools(run, Asker(provider_id, timeout_s, cap), steps, wanted,
                                    render, plans)
    return DraftResult(drafts=drafts, failed={n: "; ".join(w) for n, w in problems.items()},
                       method=method, asked=sum(len(specs.missing[name]) for name in wanted),
                       kept={name: [f"l{n}" for n in found] for name, found in
                             specs.kept.items() if found})


def _draft_tools(run: _Run, asker: Asker, steps: Steps, wanted: Sequence[str],
                 render: Renderer | None, plans: Mapping[str, list[Section]]
                 ) -> tuple[list[Draft], dict[str, list[str]]]:
    """Draft each tool of ``wanted`` in turn with ``asker`` (closed after, whatever happens):
    (the drafts written, tool -> why some of its lengths were not drafted)."""
    drafts: list[Draft] = []
    problems: dict[str, list[str]] = {}
    try:
        for name in wanted:
            found, why = run.draft_tool(asker, steps, name, render, plans.get(name, []))
            drafts += found
            if why:
                problems[name] = why
    finally:
        asker.close()
    return drafts, problems


def _asked(base: Variant, toolset: str, source: str, tools: Iterable[str] | None,
           lengths: Iterable[int]) -> tuple[list[str], list[int]]:
    """The tools asked (default: every tool of ``base``) and the lengths, sorted, once each.

    Raises:
        BenchError: a tool not in ``base``; no length, or one outside 1-200.
    """
    wanted = list(tools) if tools is not None else [t.name for t in base.tools]
    unknown = [name for name in wanted if base.tool(name) is None]
    if unknown:
        raise BenchError(f"no tool {', '.join(unknown)} in variant '{source}' of toolset "
                         f"'{toolset}'")
    asked = sorted(set(lengths))
    if not asked or min(asked) < 1 or max(asked) > 200:
        raise BenchError("--lengths: give line counts from 1 to 200, e.g. 3,10,30,50")
    return wanted, asked


@dataclass
class _Specs:
    """The specs of the tools asked as the command read them, before any request.

    Attributes:
        fields: tool -> its spec's fields without ``variants`` (None: the tool has no spec).
        before: tool -> its spec's ``variants`` block ({} without one).
        missing: tool -> the lengths to draft.
        kept: tool -> the lengths its spec already has a text for (not drafted).
    """

    fields: dict[str, dict[str, Any] | None]
    before: dict[str, dict[str, Any]]
    missing: dict[str, list[int]]
    kept: dict[str, list[int]]


def _read_specs(toolset_dir: Path, wanted: list[str], lengths: list[int],
                force: bool) -> _Specs:
    """The specs of ``wanted`` tools, and which of ``lengths`` each needs (all with
    ``force``).

    Raises:
        BenchError: a spec that does not load (names its file, line and field); every tool
            already has a text for every length (names the first such text).
    """
    specs = _Specs({}, {}, {}, {})
    for name in wanted:
        path = spec_path(toolset_dir, name)
        spec = load_spec(path) if path.is_file() else None  # a broken one: one line
        specs.fields[name] = spec.model_dump(exclude={"variants"}) if spec is not None else None
        specs.before[name] = variants_of(path)
        specs.missing[name] = [n for n in lengths
                               if force or f"l{n}" not in specs.before[name]]
    if not any(specs.missing.values()):  # nothing left: say where the first text is
        name, lines = wanted[0], lengths[0]
        entry = specs.before[name][f"l{lines}"]
        state = "a draft" if isinstance(entry, dict) and entry.get("draft") else \
            "an accepted text"
        raise BenchError(f"every tool already has a text for {_names(lengths)}; tool "
                         f"'{name}' already has {state} for l{lines} (pass --force to draft "
                         "them again)", file=spec_path(toolset_dir, name),
                         field=f"variants.l{lines}")
    specs.kept = {name: [n for n in lengths if n not in specs.missing[name]]
                  for name in wanted}
    return specs


def _requests(base: Variant, specs: _Specs, wanted: list[str],
              plans: dict[str, list[Section]], lengths: list[int], whole: bool,
              max_tokens: int | None) -> tuple[int, int]:
    """The requests planned for ``wanted`` tools (a length each with ``whole``, else every
    question of the sections in ``plans``) and the completion cap of each (``max_tokens``,
    else :func:`bench.drafting.whole.default_max_tokens` or
    :data:`bench.drafting.sections.SECTION_MAX_TOKENS`)."""
    if whole:
        return (sum(len(specs.missing[name]) for name in wanted),
                max_tokens or default_max_tokens(lengths))
    total = 0
    for name in wanted:
        tool = base.tool(name)
        assert tool is not None
        total += sum(len(section_questions(section, tool)) for section in plans[name])
    return total, max_tokens or SECTION_MAX_TOKENS


@dataclass
class _Run:
    """What every tool's drafts share: the toolset, its source variant ``base``, the provider
    and the specs as read (see :func:`draft_variants`)."""

    toolset: str
    toolset_dir: Path
    base: Variant
    provider_id: str
    source: str
    specs: _Specs
    tool_timeout_s: float

    def draft_tool(self, asker: Asker, steps: Steps, name: str, render: Renderer | None,
                   needed: list[Section]) -> tuple[list[Draft], list[str]]:
        """Draft tool ``name``'s missing lengths, whole (``render`` None) or by its
        ``needed`` sections, and write them into its spec.

        Returns:
            The drafts written, and one ``"<part>: why"`` per failure.
        """
        tool = self.base.tool(name)
        assert tool is not None
        missing, before = self.specs.missing[name], self.specs.before[name]
        if render is None:
            store = functools.partial(store_drafts, self.toolset_dir, self.base, name,
                                      before=before, provider_id=self.provider_id,
                                      source=self.source)
            return draft_whole(asker, self.toolset, tool, missing, self.tool_timeout_s, steps,
                               store)
        ready, why = draft_sections(asker, self.toolset, tool, self.specs.fields[name],
                                    needed, missing, render, self.tool_timeout_s, steps)
        found, refused = store_drafts(self.toolset_dir, self.base, name, ready, before,
                                      self.provider_id, self.source) if ready else ([], [])
        return found, why + refused
