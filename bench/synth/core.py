"""``bench synth``: generate labeled candidate cases with any provider, verify each, keep the
good ones in ``dev`` with their provenance, and count every rejection by reason.

Generation and verification both go through :func:`bench.evaluate` (the run pipeline: cache,
retries, budget, stored rows), never a request path of their own:

1. **Generate.** Each request is one rendered prompt (:mod:`bench.synth.prompts`) sent as a
   case to the generator provider in a scratch project (``reports/synth/<dataset>/``) whose
   only toolset, ``synth-generator``, holds the three proposal tools
   (:func:`bench.synth.proposals.generator_tools`). Every proposal call in an answer is one
   candidate.
2. **Verify**, in this order; a candidate's first failed check is its rejection reason
   (:data:`REASONS`) and later checks are not run on it:

   - ``format``: the answer holds no proposal, or the proposal fails its pydantic model;
   - ``language``: the query is not in the asked language (zh and mixed need CJK
     characters, en none, mixed also Latin words);
   - ``kind``: the proposal does not have the asked shape
     (:func:`bench.synth.proposals.shape_problem`);
   - ``schema``: the case does not load with bench's loader, or its label does not fit the
     tools (:func:`bench.datasets.labels.iter_label_problems`, and every required argument
     present);
   - ``duplicate``: the query is a near-duplicate of a kept case (:func:`near_duplicate`);
   - ``leak``: it copies a test case of any dataset of the project (not only the target
     one): a near-duplicate of its query (:func:`near_duplicate`) or a text that contains it
     (:mod:`bench.descriptions.containment`); or a description line of any variant of the
     toolset mirrors it (the leak checker, :func:`bench.descriptions.leaks.find_leaks`);
   - ``execution``: the label's own calls (the ``oracle`` provider) fail on the toolset's
     executor: the one ``bench run`` uses (a shipped toolset's reference backend, or the
     project's own MCP server or Python module declared in ``[tool.bench.toolsets.<name>]``
     of its ``pyproject.toml``, with that table's ``timeout_s`` and ``writes``, only when
     that table declares ``reset``: a label's calls are calls no model made, never run on a
     system bench does not own otherwise, read-only ones included, and the solvers' calls
     are then not run either (:data:`USERS_SYSTEM_SKIP`)); skipped,
     with the reason, where the toolset has no executor or declares ``execute = "none"``,
     execution is off, a called tool has nothing to run (a schema-only tool), or a call
     needs a write or sensitive permission the run does not allow (:func:`refused_calls`,
     or the executor refused it: ``permission_denied`` in the run's traces);
   - ``unsolvable``: fewer than ``min_agree`` independent answers of the solver providers
     agree with the label, scored by bench's scorer (:func:`answer_agrees`).
3. **Keep**: kept cases are appended to ``<dataset>/cases.jsonl`` in split ``dev`` (nobody has
   reviewed them: :class:`bench.models.Case` refuses them in ``test``), each with its
   :class:`bench.models.Provenance`; the synthesis report is written beside them
   (``synth-report.json``, ``synth-report.md``) and the datasheet's blocks are refreshed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from bench.descriptions.variants import default_variant
from bench.errors import BenchError
from bench.models import Case, Tool
from bench.project import Project
from bench.results import ManifestExecution
from bench.synth.proposals import (CATEGORY, KINDS, LANGUAGES, NoCallProposal,
                                   Proposal, generator_tools, label_for, missing_required,
                                   parse_proposal, proposal_json, shape_problem)
from bench.toolset_config import read_only_fix

if TYPE_CHECKING:  # the run's rows, read where the verification runs
    from bench.results import Row

#: Rejection reasons, in the order the checks run.
REASONS = ("format", "language", "kind", "schema", "duplicate", "leak", "execution",
           "unsolvable")
#: Masked n-gram Jaccard similarity at or above which two queries are near-duplicates. Every
#: one of the 687 hand-written single-answer cases of the shipped datasets has its nearest
#: other case below 0.64 under this measure (ecommerce 0.571, analytics 0.545, logistics
#: 0.636), so 0.7 keeps all of them apart while catching a rewording that changes only ids,
#: numbers or a word or two.
DUPLICATE_THRESHOLD = 0.7
#: The ``execution`` verdict of a label on a project's own toolset without a declared
#: ``reset`` (:attr:`bench.executor.backends.base.Backend.runs_labels`): its calls, read-only
#: ones too, are calls no model made, so they never run on the user's system
#: (docs/executor.md, "Where expected results come from").
USERS_SYSTEM_SKIP = ("skipped: bench does not run labels on your system; declare reset = "
                     "[...] or verify with bench labels record after review")
GENERATOR_TOOLSET = "synth-generator"
GENERATOR_VARIANT = "propose"
DEFAULT_MIN_AGREE = 2
_ID_OR_NUMBER = re.compile(r"[A-Za-z]*[0-9][A-Za-z0-9_\-:/.]*")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True)
class SynthSettings:
    """What ``bench synth`` was asked.

    Attributes:
        toolset: the toolset to write cases for.
        generator: the provider id that proposes cases.
        solvers: provider ids whose answers must agree with each label.
        dataset: the dataset folder name under ``datasets/`` that receives kept cases.
        kinds: kinds to ask for (:data:`bench.synth.proposals.KINDS`).
        languages: languages (``en``, ``zh``, ``mixed``).
        count: requests per kind and language.
        variant: the variant shown to the generator and the solvers (None: ``l50`` when the
            toolset has it, else its first variant).
        distractors: every second ``single`` request asks for a distractor phrasing that
            names a similar tool.
        templates: a folder of prompt templates overriding the built-ins.
        seed: the generator's and solvers' base seed.
        solver_trials: answers per solver (the same provider with another seed counts as an
            independent answer, except ``local``, which decodes greedily: its trials count once).
        min_agree: answers that must agree with a label, >= 1 (default 2).
        execute: run the label's calls on the toolset's executor.
        allow_writes: let the executor run write tools; ``allow_sensitive`` sensitive ones.
        duplicate_threshold: :data:`DUPLICATE_THRESHOLD` unless changed.
        model: the ``local`` preset for a ``local`` generator or solver (None: default).
        max_tokens: the generator's completion cap.
    """

    toolset: str
    generator: str
    solvers: tuple[str, ...]
    dataset: str
    kinds: tuple[str, ...] = KINDS
    languages: tuple[str, ...] = ("en",)
    count: int = 2
    variant: str | None = None
    distractors: bool = False
    templates: Path | None = None
    seed: int = 1234
    solver_trials: int = 1
    min_agree: int = DEFAULT_MIN_AGREE
    execute: bool = True
    allow_writes: bool = False
    allow_sensitive: bool = False
    duplicate_threshold: float = DUPLICATE_THRESHOLD
    model: str | None = None
    max_tokens: int = 1024


@dataclass
class Candidate:
    """One proposal and what verification said of it.

    ``case`` is the case object as written (None when the answer held no usable proposal);
    ``verdicts`` maps each check that ran to ``pass``, ``fail: <why>`` or ``skipped: <why>``;
    ``reason`` is the first failed check (None: kept).
    """

    id: str
    kind: str
    lang: str
    request: str
    query: str | None
    case: dict[str, Any] | None
    verdicts: dict[str, str] = field(default_factory=dict)
    reason: str | None = None

    def fail(self, check: str, why: str) -> None:
        """Record the failed ``check`` (the rejection reason) and why."""
        self.verdicts[check] = f"fail: {why}"
        self.reason = check


@dataclass(frozen=True)
class Request:
    """One generation request: its id, kind, language, focus tool and rendered prompt."""

    id: str
    kind: str
    lang: str
    tool: str
    template: str
    template_sha256: str
    text: str
    prompt_sha256: str
    distractor: bool = False


# ---------------------------------------------------------------------------- helpers


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


def query_tokens(text: str) -> frozenset[str]:
    """Tokens for near-duplicate detection: ids and numbers masked (ASCII-only pattern, so a
    Chinese word after an id stays), then the leak checker's tokens (Latin words, CJK
    character bigrams: :func:`bench.descriptions.leaks.tokens`)."""
    from bench.descriptions.leaks import tokens

    return tokens(_ID_OR_NUMBER.sub(" # ", text))


def near_duplicate(query: str, kept: Sequence[tuple[str, frozenset[str]]],
                   threshold: float = DUPLICATE_THRESHOLD) -> tuple[str, float] | None:
    """The first kept case (id, similarity) whose query is a near-duplicate of ``query``:
    Jaccard similarity of :func:`query_tokens` at or above ``threshold``; None if none."""
    from bench.descriptions.leaks import jaccard

    mine = query_tokens(query)
    for case_id, theirs in kept:
        score = jaccard(mine, theirs)
        if score >= threshold:
            return case_id, score
    return None


def language_problem(query: str, lang: str) -> str | None:
    """Why ``query`` is not in ``lang`` (en: no CJK character; zh: some; mixed: CJK and a
    Latin word of 2+ letters beside ids and numbers), or None."""
    cjk = bool(_CJK.search(query))
    latin = bool(_LATIN_WORD.search(_ID_OR_NUMBER.sub(" ", query)))
    if lang == "en" and cjk:
        return "asked for English, the query has CJK characters"
    if lang in ("zh", "mixed") and not cjk:
        return f"asked for {lang}, the query has no CJK character"
    if lang == "mixed" and not latin:
        return "asked for mixed, the query has no Latin word"
    return None


def answer_agrees(case: Case, metrics: dict[str, Any]) -> bool:
    """Whether one scored answer agrees with the case's label (bench's own scores,
    :class:`bench.results.RowMetrics`): calls: ``arguments_correct_lenient`` (the right tools
    with acceptable arguments, after the lenient repairs of encoding slips); no-call:
    ``no_call_correct``; ask: ``ask_correct``."""
    if case.expected.no_call:
        return metrics.get("no_call_correct") is True
    if case.expected.ask:
        return metrics.get("ask_correct") is True
    return metrics.get("arguments_correct_lenient") is True


def _stamp() -> str:
    from bench.store import new_run_id
    return new_run_id()


def _case_id(toolset: str, request: Request, index: int, proposal: str) -> str:
    digest = hashlib.sha256(f"{request.prompt_sha256}/{index}/{proposal}".encode("utf-8"))
    return f"synth-{toolset}-{digest.hexdigest()[:10]}"


# ---------------------------------------------------------------------------- the steps


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
                      run_id=f"synth-gen-{_stamp()}", execute=False, seed=settings.seed,
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


def check_schema(candidates: Sequence[Candidate], tools: Sequence[Tool], toolset: str,
                 work: Path) -> None:
    """The ``schema`` check of every candidate still alive: its line loads with bench's
    dataset loader (:func:`bench.datasets.load_dataset`), its label fits the tools
    (:func:`bench.datasets.labels.iter_label_problems`) and every expected call has its
    tool's required arguments."""
    from bench.datasets import load_dataset
    from bench.datasets.labels import iter_label_problems
    from bench.store.files import atomic_write_text

    path = work / "candidate.jsonl"
    for candidate in candidates:
        if candidate.reason is not None or candidate.case is None:
            continue
        atomic_write_text(path, json.dumps(candidate.case, ensure_ascii=False) + "\n")
        try:
            loaded = load_dataset(str(path))
        except BenchError as exc:
            candidate.fail("schema", str(exc).split(": ", 1)[-1])
            continue
        problem = next(iter_label_problems(loaded, toolset, tools), None)
        why = f"{problem.field}: {problem.message}" if problem is not None else \
            missing_required(loaded.cases[0].expected, tools)
        if why:
            candidate.fail("schema", why)
        else:
            candidate.verdicts["schema"] = "pass"
    path.unlink(missing_ok=True)


def check_duplicates_and_leaks(candidates: Sequence[Candidate], existing: Sequence[Case],
                               toolset: str, threshold: float,
                               tests: Sequence[tuple[str, Case]] = ()) -> None:
    """The ``duplicate`` check (against the dataset's cases and the candidates kept before,
    in order) and the ``leak`` check of each live candidate: a near-duplicate (``threshold``)
    of a test case of ``tests`` (``(dataset, case)``: every test split of the project,
    :func:`bench.descriptions.containment.project_test_cases`), a user text that contains
    one (:class:`bench.descriptions.containment.TestIndex`), or a line of a variant of the
    toolset that mirrors it (:func:`bench.descriptions.leaks.find_leaks`)."""
    from bench.descriptions import available_variants, load_variant
    from bench.descriptions.containment import ModelText, TestIndex
    from bench.descriptions.leaks import case_text, find_leaks

    variants = [load_variant(toolset, name) for name in available_variants(toolset)]
    kept = [(c.id, query_tokens(case_text(c))) for c in existing if c.toolset == toolset]
    index = TestIndex(tests)
    test_tokens = [(f"{c.id} of dataset {name}", query_tokens(case_text(c)))
                   for name, c in tests]
    for candidate in candidates:
        if candidate.reason is not None or candidate.case is None:
            continue
        case = Case.model_validate(candidate.case)
        twin = near_duplicate(case.query, kept, threshold)
        if twin is not None:
            candidate.fail("duplicate", f"{twin[0]} (similarity {twin[1]:.2f} >= "
                                        f"{threshold})")
            continue
        candidate.verdicts["duplicate"] = "pass"
        copied = near_duplicate(case_text(case), test_tokens, threshold)
        if copied is not None:
            candidate.fail("leak", f"a near-duplicate of test case {copied[0]} (similarity "
                                   f"{copied[1]:.2f} >= {threshold})")
            continue
        contained = index.copies(ModelText("", "user text", text)
                                 for text in case_text(case).splitlines())
        if contained:
            copy = contained[0]
            candidate.fail("leak", f"contains test case {copy.case_id} of dataset "
                                   f"{copy.dataset} ({copy.score:.0%} of its n-grams: "
                                   f"'{copy.evidence[:80]}')")
            continue
        leaks = [k for v in variants for k in find_leaks(v, [case]) if not k.is_hint]
        if leaks:  # a whole-line signal first: it names the line that is the copy
            first = min(leaks, key=lambda k: k.signal == "containment")
            candidate.fail("leak", f"{first.signal} of {first.variant} {first.tool} "
                                   f"'{first.text[:80]}'")
            continue
        candidate.verdicts["leak"] = "pass"
        kept.append((candidate.id, query_tokens(case.query)))


def check_prompts(requests: Sequence[Request], tests: Sequence[tuple[str, Case]]) -> None:
    """Refuse to send a generation prompt that contains a test query (``tests``: ``(dataset,
    case)`` pairs; the containment signal of :mod:`bench.descriptions.containment`): the
    template (``--templates``) or a tool's description quotes a test case, and only ``dev``
    cases may inform prompts.

    Raises:
        BenchError: the first such prompt, naming its template, the case and the words.
    """
    from bench.descriptions.containment import ModelText, TestIndex

    index = TestIndex(tests)
    for request in requests:
        found = index.copies([ModelText(request.tool, request.template, request.text)])
        if found:
            first = found[0]
            raise BenchError(f"the generation prompt {request.id} ({request.template}, tool "
                             f"{request.tool}) contains test case {first.case_id} of dataset "
                             f"{first.dataset}: '{first.evidence[:80]}'; prompts may quote "
                             "dev cases only (rewrite the template or the description)")


def refused_calls(case: Case, permission: Mapping[str, str], *, allow_writes: bool,
                  allow_sensitive: bool, write_tools: frozenset[str] | set[str] = frozenset()
                  ) -> list[str]:
    """Why the executor would refuse the label's calls, one line per refused tool (sorted by
    tool; [] when none is refused), by the executor's own rule
    (:meth:`bench.executor.pipeline.Executor` admission): a ``write`` tool runs only with
    ``allow_writes`` or when it is in ``write_tools`` (the toolset's ``writes = [...]``), a
    ``sensitive`` one only with ``allow_sensitive``.

    Args:
        case: the candidate case.
        permission: tool name -> ``read`` / ``write`` / ``sensitive`` (the variant's tools).
        allow_writes / allow_sensitive: the run's allowances (``--allow-writes`` ...).
        write_tools: the write tools the project's toolset table allows.
    """
    out: list[str] = []
    for name in sorted({c.name for c in case.expected.calls}):
        level = permission.get(name)
        if level == "write" and not (allow_writes or name in write_tools):
            out.append(f"write refused: {name} is not in writes = [...] of its toolset's "
                       f"table (or pass --allow-writes; {read_only_fix([name])})")
        elif level == "sensitive" and not allow_sensitive:
            out.append(f"sensitive call refused: {name} needs --allow-sensitive")
    return out


def _execution_skip(plan: ManifestExecution | None, toolset: str) -> str:
    """The ``skipped: ...`` verdict of a label whose calls were not executed, from the
    verification run's execution plan for ``toolset`` (its manifest's ``execution``)."""
    plan = plan or ManifestExecution()
    mode = plan.mode
    if mode == "none":
        return f"skipped: toolset '{toolset}' is not executed ({plan.detail})"
    if mode == "off":
        return "skipped: execution off (--no-execute)"
    if mode in ("mcp", "python", "reference"):
        return "skipped: a called tool has nothing to run (a schema-only tool)"
    return f"skipped: toolset '{toolset}' has no executor"


def _trace_denials(project: Project, run_id: str) -> set[tuple[str, str]]:
    """``(case id, tool)`` of every call the verification run's executor refused for want
    of a permission (``permission_denied`` in its ``traces.jsonl``; none without the file)."""
    from bench.executor.traces import TRACES, read_traces

    path = project.store(run_id).dir / TRACES
    if not path.is_file():
        return set()
    return {(r.case_id or "", r.tool) for r in read_traces(path)
            if r.error_code == "permission_denied"}


def _denied(traces: set[tuple[str, str]], case_id: str, case: Case) -> list[str]:
    """The label's tools the executor refused on ``case_id`` (:func:`_trace_denials`)."""
    return sorted({c.name for c in case.expected.calls if (case_id, c.name) in traces})


def verify_by_answers(project: Project, settings: SynthSettings, variant: str,
                      tools: Sequence[Tool], candidates: Sequence[Candidate], work: Path
                      ) -> str | None:
    """The ``execution`` and ``unsolvable`` checks of every live candidate, from one
    :func:`bench.evaluate` run over them with the ``oracle`` (the label's own calls, run
    on the executor) and the solvers (``solver_trials`` answers each). On a project's own
    toolset without a declared ``reset`` the run executes nothing (every label's
    ``execution`` is :data:`USERS_SYSTEM_SKIP`). Returns the run id (None when no candidate
    was left to verify)."""
    from bench.api import evaluate
    from bench.providers.registry import runs_embedded_model
    from bench.store.files import atomic_write_text
    from bench.toolset_config import load_toolset_settings

    live = [c for c in candidates if c.reason is None and c.case is not None]
    if not live:
        return None
    path = work / "verify.jsonl"
    atomic_write_text(path, "".join(json.dumps(c.case, ensure_ascii=False) + "\n"
                                    for c in live))
    extra: dict[str, Any] = {}
    if settings.model and "local" in settings.solvers:
        extra["model"] = settings.model
    own = load_toolset_settings(project.root).get(settings.toolset)
    # a generated label is a call no model made: never run on a system bench does not own
    # unless a declared reset undoes it (Backend.runs_labels); the solvers' calls are not
    # run there either (agreement is scored on the calls, not their results)
    users_system = own is not None and own.execute != "none" and not own.reset
    result = evaluate(path, [variant], ["oracle", *settings.solvers], project=project,
                      run_id=f"synth-verify-{_stamp()}", trials=settings.solver_trials,
                      split="all",
                      execute=settings.execute and not users_system,
                      allow_writes=settings.allow_writes,
                      allow_sensitive=settings.allow_sensitive, seed=settings.seed, **extra)
    rows: dict[str, list[Row]] = {}
    for row in result.rows:
        rows.setdefault(row.case_id, []).append(row)
    permission = {t.name: t.permission for t in tools}
    plan = result.manifest.execution.get(settings.toolset) if result.manifest.execution \
        else None
    write_tools = frozenset(own.writes) if own is not None else frozenset()
    traces = _trace_denials(project, result.run_id)
    for candidate in live:
        case = Case.model_validate(candidate.case)
        mine = rows.get(candidate.id, [])
        oracle = [r for r in mine if r.provider == "oracle" and r.trial == 0]
        refused = refused_calls(case, permission, allow_writes=settings.allow_writes,
                                allow_sensitive=settings.allow_sensitive,
                                write_tools=write_tools)
        success = oracle[0].metrics.execution_success if oracle else None
        if not case.expected.calls:
            candidate.verdicts["execution"] = "skipped: no call to run"
        elif not settings.execute:
            candidate.verdicts["execution"] = "skipped: execution off (--no-execute)"
        elif users_system:
            candidate.verdicts["execution"] = USERS_SYSTEM_SKIP
        elif refused:
            candidate.verdicts["execution"] = "skipped: " + "; ".join(refused)
        elif (success is False or (oracle and oracle[0].metrics.write_refused)) \
                and (denied := _denied(traces, candidate.id, case)):
            # the backend marks the tool a write although the variant does not: the
            # executor refused it (permission_denied), which is not the label's fault; a
            # refused call is left out of execution_success (None when all were refused)
            candidate.verdicts["execution"] = (f"skipped: write refused: {', '.join(denied)} "
                                               "(the executor's permission check)")
        elif success is None:
            candidate.verdicts["execution"] = _execution_skip(plan, settings.toolset)
        elif not success:
            errors = oracle[0].metrics.execution_errors or {}
            candidate.fail("execution", "the label's calls failed on the executor ("
                           + (", ".join(f"{k} {v}" for k, v in errors.items()) or "error")
                           + ")")
            continue
        else:
            candidate.verdicts["execution"] = "pass"
        agree: set[tuple[str, int]] = set()
        answers: set[tuple[str, int]] = set()
        for row in mine:
            if row.provider == "oracle":
                continue
            # the embedded model decodes greedily: its trials are one answer
            trial = 0 if runs_embedded_model(row.provider) else row.trial
            answers.add((row.provider, trial))
            if answer_agrees(case, row.metrics.model_dump()):
                agree.add((row.provider, trial))
        shown = f"{len(agree)} of {len(answers)} answers agree (need {settings.min_agree})"
        if len(agree) < settings.min_agree:
            candidate.fail("unsolvable", shown)
        else:
            candidate.verdicts["unsolvable"] = f"pass: {shown}"
    path.unlink(missing_ok=True)
    return result.run_id


# ---------------------------------------------------------------------------- the command


@dataclass
class SynthReport:
    """The synthesis report: settings, run ids, counts by verdict, every candidate."""

    settings: dict[str, Any]
    generator_run: str | None
    verify_run: str | None
    requests: int
    candidates: list[Candidate]
    dataset_path: str

    def counts(self) -> dict[str, int]:
        """``kept`` and each rejection reason -> candidates (every reason listed, 0 too)."""
        found = Counter(c.reason or "kept" for c in self.candidates)
        return {"kept": found["kept"], **{r: found[r] for r in REASONS}}

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Kind -> :meth:`counts` of its candidates."""
        out: dict[str, dict[str, int]] = {}
        for kind in dict.fromkeys(c.kind for c in self.candidates):
            found = Counter(c.reason or "kept" for c in self.candidates if c.kind == kind)
            out[kind] = {"candidates": sum(found.values()), "kept": found["kept"],
                         **{r: found[r] for r in REASONS}}
        return out

    def skipped(self) -> dict[str, int]:
        """``check: why`` -> candidates for every check that was skipped."""
        return dict(Counter(f"{check}: {value.split(': ', 1)[1]}"
                            for c in self.candidates for check, value in c.verdicts.items()
                            if value.startswith("skipped: ")))

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data (``synth-report.json``)."""
        return {"settings": self.settings, "generator_run": self.generator_run,
                "verify_run": self.verify_run, "dataset": self.dataset_path,
                "requests": self.requests, "candidates": len(self.candidates),
                "counts": self.counts(), "by_kind": self.by_kind(),
                "skipped_checks": self.skipped(),
                "detail": [{"id": c.id, "kind": c.kind, "lang": c.lang, "request": c.request,
                            "query": c.query, "verdict": c.reason or "kept",
                            "verdicts": c.verdicts} for c in self.candidates]}

    def markdown(self) -> str:
        """The report as Markdown (``synth-report.md``): counts by verdict and kind, skipped
        checks, and every rejected candidate's reason."""
        counts = self.counts()
        kinds = self.by_kind()
        s = self.settings
        lines = [f"# Synthesis report: {s['toolset']}", "",
                 f"Generator `{s['generator']}`, solvers "
                 f"{', '.join(f'`{x}`' for x in s['solvers'])} "
                 f"({s['solver_trials']} answer(s) each, {s['min_agree']} must agree), "
                 f"variant `{s['variant']}`; generator run `{self.generator_run}`, verification "
                 f"run `{self.verify_run}`. {self.requests} requests, "
                 f"{len(self.candidates)} candidates, {counts['kept']} kept (split dev, "
                 f"unreviewed) in `{self.dataset_path}`.", "",
                 "| verdict | " + " | ".join(kinds) + " | total |",
                 "|---|" + "---:|" * (len(kinds) + 1)]
        for verdict in ("kept", *REASONS):
            lines.append(f"| {verdict} | " + " | ".join(str(k[verdict]) for k in kinds.values())
                         + f" | {counts[verdict]} |")
        lines.append("| **candidates** | " + " | ".join(str(k["candidates"])
                                                       for k in kinds.values())
                     + f" | {len(self.candidates)} |")
        skipped = self.skipped()
        if skipped:
            lines += ["", "Checks skipped (not failed):", ""]
            lines += [f"- {k}: {v}" for k, v in sorted(skipped.items())]
        rejected = [c for c in self.candidates if c.reason]
        if rejected:
            lines += ["", "## Rejected", "", "| id | kind | lang | reason | why | query |",
                      "|---|---|---|---|---|---|"]
            for c in rejected:
                why = c.verdicts.get(c.reason or "", "").removeprefix("fail: ")
                lines.append(f"| {c.id} | {c.kind} | {c.lang} | {c.reason} | "
                             f"{_cell(why)} | {_cell(c.query or '')} |")
        return "\n".join(lines) + "\n"


def _cell(text: str, limit: int = 120) -> str:
    """``text`` fit for one Markdown table cell: one line, pipes escaped, cut."""
    one = " ".join(text.split()).replace("|", "\\|")
    return one if len(one) <= limit else one[:limit - 1] + "…"




def synthesize(settings: SynthSettings, project: Project) -> SynthReport:
    """Generate, verify and keep cases (the module docstring); write the dataset's
    ``cases.jsonl`` (kept cases appended), ``synth-report.json`` / ``.md`` and datasheet.

    Raises:
        BenchError: bad settings (an unknown kind or language, fewer answers than
            ``min_agree`` could ever give), an unknown toolset or variant, a template that
            fails, an existing dataset that does not load, or a run that fails.
    """
    from bench.datasets import load_dataset
    from bench.datasets.loader import check_dataset_name
    from bench.descriptions import load_variant
    from bench.descriptions.containment import project_test_cases
    from bench.providers.registry import (answers_from_labels, known_provider,
                                          runs_embedded_model)
    from bench.store.files import atomic_write_json, atomic_write_text, remove_if_no_rows
    from bench.synth.review import refresh_datasheet

    check_dataset_name(settings.dataset)
    for kind in settings.kinds:
        if kind not in KINDS:
            raise BenchError(f"--kinds: unknown kind '{kind}' (kinds: {', '.join(KINDS)})")
    for lang in settings.languages:
        if lang not in LANGUAGES:
            raise BenchError(f"--languages: '{lang}' is not a case language (cases are "
                             f"{', '.join(LANGUAGES)})")
    if settings.count < 1:
        raise BenchError("--count must be 1 or more")
    for option, provider_id in (("--generator", settings.generator),
                               *(("--solver", s) for s in settings.solvers)):
        try:  # before any folder is made
            known_provider(provider_id)
        except BenchError as exc:
            raise BenchError(f"{option}: {exc.message}") from None
    for solver in settings.solvers:
        if answers_from_labels(solver):
            raise BenchError("--solver oracle answers from the label itself, so it cannot "
                             "confirm a label (it already checks execution); name a model")
    independent = sum(1 if runs_embedded_model(s) else settings.solver_trials
                      for s in dict.fromkeys(settings.solvers))
    if settings.min_agree < 1 or independent < settings.min_agree:
        raise BenchError(f"--min-agree {settings.min_agree}: the solvers give "
                         f"{independent} independent answer(s) per case ({len(settings.solvers)}"
                         f" solver(s) x {settings.solver_trials} trial(s); 'local' decodes "
                         "greedily, so its trials count once): add a --solver or raise "
                         "--solver-trials")
    with project.activate():
        variant_name = settings.variant or default_variant(settings.toolset)
        variant = load_variant(settings.toolset, variant_name)
        tools = list(variant.tools)
        folder = project.datasets_dir / settings.dataset
        cases_path = folder / "cases.jsonl"
        existing = list(load_dataset(str(cases_path)).cases) if cases_path.is_file() else []
        requests = plan_requests(settings, tools)
        if not requests:
            raise BenchError("nothing to ask: no kind applies to this toolset")
        tests = project_test_cases(project.datasets_dir)
        check_prompts(requests, tests)
        work = project.reports_dir / "synth" / settings.dataset
        new_work = not work.exists()
        try:
            candidates, generator_run, _ = generate(project, settings, tools, requests)
            check_schema(candidates, tools, settings.toolset, work)
            check_duplicates_and_leaks(candidates, existing, settings.toolset,
                                       settings.duplicate_threshold, tests)
            verify_run = verify_by_answers(project, settings, variant_name, tools,
                                           candidates, work)
        except BenchError:
            if new_work:  # e.g. a generator that does not start: no empty folder is left
                remove_if_no_rows(work)
            raise
        kept = [c for c in candidates if c.reason is None and c.case is not None]
        if kept:
            old = cases_path.read_text(encoding="utf-8") if cases_path.is_file() else ""
            if old and not old.endswith("\n"):
                old += "\n"
            atomic_write_text(cases_path, old + "".join(
                json.dumps(c.case, ensure_ascii=False) + "\n" for c in kept))
        described = {**{k: v for k, v in settings.__dict__.items() if k != "templates"},
                     "templates": str(settings.templates) if settings.templates else None,
                     "variant": variant_name, "kinds": list(settings.kinds),
                     "languages": list(settings.languages), "solvers": list(settings.solvers)}
        report = SynthReport(described, generator_run, verify_run, len(requests), candidates,
                             str(cases_path))
        atomic_write_json(folder / "synth-report.json", report.to_json())
        atomic_write_text(folder / "synth-report.md", report.markdown())
        if cases_path.is_file():
            refresh_datasheet(folder, settings.toolset)
    return report
