"""``bench synth``'s generation: plan the requests (one rendered prompt each), ask the
generator through :func:`bench.evaluate` in a scratch project, and turn every proposal call
of its answers into a :class:`~bench.synth.candidates.Candidate` (step 1 of
:mod:`bench.synth.core`; the ``format``, ``language`` and ``kind`` checks run here).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from bench.models import Tool
from bench.project import Project
from bench.synth.candidates import Candidate, Request, SynthSettings, stamp
from bench.synth.checks import language_problem
from bench.synth.proposals import (CATEGORY, NoCallProposal, Proposal, generator_tools,
                                   label_for, parse_proposal, proposal_json, shape_problem)

GENERATOR_TOOLSET = "synth-generator"
GENERATOR_VARIANT = "propose"


def similar_tools(tools: Sequence[Tool]) -> dict[str, str | None]:
    """For each tool, the tool it is most easily confused with: the other tool its
    description names most often (specs name their look-alikes in ``when_not_to_use``), else
    the one whose description shares the most masked tokens (Jaccard), else None for a
    toolset of one tool."""
    from bench.descriptions.leaks import jaccard, tokens

    toks = {t.name: tokens(t.description) for t in tools}
    out: dict[str, str | None] = {}
    for tool in tools:
        others = [t for t in tools if t.name != tool.name]
        if not others:
            out[tool.name] = None
            continue
        named = Counter({o.name: len(re.findall(rf"\b{re.escape(o.name)}\b", tool.description))
                         for o in others})
        best, hits = named.most_common(1)[0]
        if hits == 0:
            best = max(others, key=lambda o: (jaccard(toks[tool.name], toks[o.name]),
                                              o.name)).name
        out[tool.name] = best
    return out


def _case_id(toolset: str, request: Request, index: int, proposal: str) -> str:
    digest = hashlib.sha256(f"{request.prompt_sha256}/{index}/{proposal}".encode("utf-8"))
    return f"synth-{toolset}-{digest.hexdigest()[:10]}"



def plan_requests(settings: SynthSettings, tools: Sequence[Tool]) -> list[Request]:
    """The generation requests: ``count`` per kind and language, each about one focus tool
    (taken in turn; ``ask`` only from tools with a required argument, none: no ask
    request), every second ``single`` one a distractor phrasing when ``distractors``, every
    second ``no_call`` one a near miss of its focus tool.

    Raises:
        BenchError: a template that is missing or fails (names the file).
    """
    from bench.synth.prompts import environment, render

    env = environment(settings.templates)
    similar = similar_tools(tools)
    by_name = {t.name: t for t in tools}
    requests: list[Request] = []
    for kind in settings.kinds:
        pool = [t for t in tools if t.input_schema.get("required")] if kind == "ask" \
            else list(tools)
        if not pool:
            continue
        for lang in settings.languages:
            for i in range(settings.count):
                tool = pool[i % len(pool)]
                other = similar.get(tool.name)
                distractor = kind == "single" and settings.distractors and i % 2 == 1 \
                    and other is not None
                near_miss = kind == "no_call" and i % 2 == 1
                prompt = render(env, kind, toolset=settings.toolset, tools=tools, tool=tool,
                                similar=by_name[other] if other else None, lang=lang,
                                index=i + 1, distractor=distractor, near_miss=near_miss)
                requests.append(Request(f"{kind}-{lang}-{i + 1:03d}", kind, lang, tool.name,
                                        prompt.template, prompt.template_sha256, prompt.text,
                                        prompt.sha256, distractor))
    return requests


def _scratch(project: Project, settings: SynthSettings, tools: Sequence[Tool],
             requests: Sequence[Request]) -> tuple[Project, Path]:
    """The generator's scratch project (its toolset and the requests as a dataset), sharing
    the project's cache folder (the embedded model's file is assembled once)."""
    from bench.store.files import atomic_write_text

    root = project.reports_dir / "synth" / settings.dataset
    variant = root / "descriptions" / GENERATOR_TOOLSET / "variants" / f"{GENERATOR_VARIANT}.yaml"
    # JSON is YAML: the variant file is written as JSON text
    atomic_write_text(variant, json.dumps({"tools": [t.model_dump() for t in
                                                     generator_tools(tools)]},
                                          ensure_ascii=False, indent=1) + "\n")
    (root / "datasets").mkdir(parents=True, exist_ok=True)
    path = root / "requests.jsonl"
    atomic_write_text(path, "".join(json.dumps({
        "id": r.id, "toolset": GENERATOR_TOOLSET, "lang": r.lang,
        "messages": [{"role": "user", "content": r.text}],
        "expected": {"no_call": True}, "tags": [r.kind]}, ensure_ascii=False) + "\n"
        for r in requests))
    return Project(root, project.cache_dir), path


def generate(project: Project, settings: SynthSettings, tools: Sequence[Tool],
             requests: Sequence[Request]) -> tuple[list[Candidate], str, dict[str, int]]:
    """Ask the generator, through :func:`bench.evaluate`; one :class:`Candidate` per
    proposal call, and one ``format`` reject per answer without any call.

    Returns:
        The candidates, the generator's run id, and its trial seeds (request id -> seed).
    """
    from bench.api import evaluate
    from bench.providers.registry import runs_embedded_model

    scratch, path = _scratch(project, settings, tools, requests)
    extra: dict[str, Any] = {}
    if runs_embedded_model(settings.generator):
        # offered a way to decline, a small model sometimes takes it instead of proposing
        extra["no_call_layout"] = "empty-list"
    if settings.model and runs_embedded_model(settings.generator):
        extra["model"] = settings.model
    result = evaluate(path, [GENERATOR_VARIANT], [settings.generator], project=scratch,
                      run_id=f"synth-gen-{stamp()}", execute=False, seed=settings.seed,
                      max_tokens=settings.max_tokens, **extra)
    by_id = {r.id: r for r in requests}
    candidates: list[Candidate] = []
    seeds: dict[str, int] = {}
    for row in result.rows:
        request = by_id[row.case_id]
        seeds[request.id] = settings.seed + row.trial
        calls = (row.parsed.calls if row.parsed is not None else None) or []
        if not calls:
            why = (row.parsed.error if row.parsed is not None and row.parsed.error
                   else "the answer holds no proposal call")
            candidate = Candidate(f"{request.id}/none", request.kind, request.lang,
                                  request.id, None, None)
            candidate.fail("format", why)
            candidates.append(candidate)
            continue
        for j, call in enumerate(calls):
            parsed = parse_proposal(request.kind, call.name, call.arguments) \
                if call.valid else f"undecodable arguments ({', '.join(call.notes)})"
            if isinstance(parsed, str):
                candidate = Candidate(f"{request.id}/{j}", request.kind, request.lang,
                                      request.id, None, None)
                candidate.fail("format", parsed)
            else:
                candidate = _candidate(settings, request, j, parsed, tools, result.run_id,
                                       seeds[request.id])
            candidates.append(candidate)
    return candidates, result.run_id, seeds


def _candidate(settings: SynthSettings, request: Request, index: int, proposal: Proposal,
               tools: Sequence[Tool], run_id: str, seed: int) -> Candidate:
    """A candidate for a valid proposal, its case built (label per
    :func:`bench.synth.proposals.label_for`); ``format`` passed."""
    text = proposal_json(proposal)
    case_id = _case_id(settings.toolset, request, index, text)
    tags = ["synth", CATEGORY[request.kind]]
    if request.distractor:
        tags = ["synth", "multiple", "lookalike", "distractor"]
    if isinstance(proposal, NoCallProposal) and proposal.reason == "near_miss":
        tags.append("near-miss")
    candidate = Candidate(case_id, request.kind, request.lang, request.id, proposal.query, None)
    candidate.verdicts["format"] = "pass"
    problem = shape_problem(request.kind, proposal, tools)
    try:
        expected = label_for(request.kind, proposal, tools).model_dump(exclude_defaults=True)
    except ValueError as exc:  # e.g. an ask label without alternatives
        expected, problem = {}, problem or str(exc).splitlines()[0]
    candidate.case = {
        "id": case_id, "toolset": settings.toolset, "lang": request.lang, "split": "dev",
        "messages": [{"role": "user", "content": proposal.query}], "expected": expected,
        "tags": tags,
        "provenance": {"generator": settings.generator, "template": request.template,
                       "template_sha256": request.template_sha256,
                       "prompt_sha256": request.prompt_sha256, "seed": seed,
                       "run_id": run_id, "verdicts": candidate.verdicts}}
    lang = language_problem(proposal.query, request.lang)
    if lang:
        candidate.fail("language", lang)
        return candidate
    candidate.verdicts["language"] = "pass"
    if problem:
        candidate.fail("kind", problem)
        return candidate
    candidate.verdicts["kind"] = "pass"
    return candidate
