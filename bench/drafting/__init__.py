"""Drafted description lengths for any toolset: ``bench variants draft`` asks a provider to
write each tool's description at about 3, 10, 30 and 50 lines from its ``current``
description (the imported text), and keeps each text in the tool's spec as
``variants.l<N>`` with ``draft: true`` (:class:`bench.descriptions.specs.SpecVariant`) until
``bench variants accept`` marks it reviewed. The length ablation (``--variants
l3,l10,l30,l50``) then runs on toolsets that were imported with one description per tool;
runs, tables and reports mark variants that still hold drafts
(:attr:`bench.descriptions.Variant.draft_tools`).

A toolset without specs (``bench import`` writes ``variants/current.yaml``) gets one spec per
tool on its first draft: its name, permission, input schema and, as the required
``summary``, the first line of its current description.

Two methods (:data:`bench.drafting.asker.METHODS`). ``whole`` asks each length's whole text,
offering one tool, ``write_description``, whose ``lines`` argument is the draft, one string
per line, with ``minItems``/``maxItems`` set to the line range asked for; a plain-text answer
is read as the draft too. ``sections`` (the embedded model's default) fills the empty
sections of the tool's spec one line per request, each a short question
(:data:`bench.descriptions.draft_wording.SECTIONS`; an example is a request with arguments
held to the tool's schema), and renders each length from the filled spec with its template,
as the variants of a hand-written spec are rendered. The embedded model answers only in
grammar-constrained JSON whose free strings are capped at
:data:`bench.providers.local.prompt.GRAMMAR_MAX_STRING` characters and whose arrays are
bounded up to :data:`bench.providers.local.prompt.GRAMMAR_MAX_ITEMS` items: a 30- or 50-line
array ran on to the token cap (minutes per draft, or a hang); asked for several lines at
once, it wrote its first line again and again; one line per question does neither.
Requests go through the provider's request pipeline
(:func:`bench.providers.pipeline.build_pipeline`), as a run's do.

The model's answer is untrusted data: it is used only when it is text of about the asked
length (:data:`bench.drafting.filters.USABLE` range), without control characters, over-long
lines or a JSON document in place of prose; it is stored as a YAML string (never evaluated,
never a path) in a spec that must load (:func:`bench.descriptions.specs.load_spec`), and
shown to the model under test as a description, nothing more. Every usable draft is written
as soon as it is known; a length without one keeps the spec's text for it and is named with
the reason (:class:`bench.drafting.outcomes.DraftResult`).

Each spec file is rewritten atomically under a lock of the toolset's folder, and only its
top-level ``variants:`` block changes: the rest of the file, comments included, stays as it
was.

Modules, in the order a draft uses them:

- :mod:`bench.drafting.run`: :func:`~bench.drafting.run.draft_variants`, the command end to
  end (what each tool still needs, so a run resumes).
- :mod:`bench.drafting.asker`: the method and the provider's requests.
- :mod:`bench.drafting.prompts`: the prompts and answer tools.
- :mod:`bench.drafting.whole`, :mod:`bench.drafting.sections`: the two methods.
- :mod:`bench.drafting.filters`: what of an answer is usable.
- :mod:`bench.drafting.spec_writes`: drafts written into the specs under the lock, and
  ``bench variants accept`` (:func:`~bench.drafting.spec_writes.accept_drafts`).
- :mod:`bench.drafting.outcomes`: the drafts, the result and the progress steps.

The wording of the prompts (:mod:`bench.descriptions.draft_wording`) and the edit of a
spec's ``variants:`` block (:mod:`bench.descriptions.spec_files`) sit in
:mod:`bench.descriptions`, below, for ``bench lint`` and ``bench init`` to use.
"""
