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
   (:data:`bench.synth.candidates.REASONS`) and later checks are not run on it:

   - ``format``: the answer holds no proposal, or the proposal fails its pydantic model;
   - ``language``: the query is not in the asked language (zh and mixed need CJK
     characters, en none, mixed also Latin words);
   - ``kind``: the proposal does not have the asked shape
     (:func:`bench.synth.proposals.shape_problem`);
   - ``schema``: the case does not load with bench's loader, or its label does not fit the
     tools (:func:`bench.datasets.labels.iter_label_problems`, and every required argument
     present);
   - ``duplicate``: the query is a near-duplicate of a kept case
     (:func:`bench.synth.checks.near_duplicate`);
   - ``leak``: it copies a test case of any dataset of the project (not only the target
     one): a near-duplicate of its query (:func:`bench.synth.checks.near_duplicate`) or a
     text that contains it (:mod:`bench.descriptions.containment`); or a description line of any variant of the
     toolset mirrors it (the leak checker, :func:`bench.descriptions.leaks.find_leaks`);
   - ``execution``: the label's own calls (the ``oracle`` provider) fail on the toolset's
     executor: the one ``bench run`` uses (a shipped toolset's reference backend, or the
     project's own MCP server or Python module declared in ``[tool.bench.toolsets.<name>]``
     of its ``pyproject.toml``, with that table's ``timeout_s`` and ``writes``, only when
     that table declares ``reset``: a label's calls are calls no model made, never run on a
     system bench does not own otherwise, read-only ones included, and the solvers' calls
     are then not run either (:data:`bench.synth.verify.USERS_SYSTEM_SKIP`)); skipped,
     with the reason, where the toolset has no executor or declares ``execute = "none"``,
     execution is off, a called tool has nothing to run (a schema-only tool), or a call
     needs a write or sensitive permission the run does not allow
     (:func:`bench.synth.verify.refused_calls`, or the executor refused it:
     ``permission_denied`` in the run's traces);
   - ``unsolvable``: fewer than ``min_agree`` independent answers of the solver providers
     agree with the label, scored by bench's scorer
     (:func:`bench.synth.verify.answer_agrees`).
3. **Keep**: kept cases are appended to ``<dataset>/cases.jsonl`` in split ``dev`` (nobody has
   reviewed them: :class:`bench.models.Case` refuses them in ``test``), each with its
   :class:`bench.models.Provenance`; the synthesis report is written beside them
   (``synth-report.json``, ``synth-report.md``) and the datasheet's blocks are refreshed.

This module checks the settings and runs the steps in order (:func:`synthesize`); the
steps live in :mod:`bench.synth.generate` (1), :mod:`bench.synth.checks` (``language``,
``schema``, ``duplicate``, ``leak``) and :mod:`bench.synth.verify` (``execution``,
``unsolvable``), the settings and candidates in :mod:`bench.synth.candidates` and the report
in :mod:`bench.synth.report`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from bench.descriptions.variants import default_variant
from bench.errors import BenchError
from bench.project import Project
from bench.store.files import atomic_write_json, atomic_write_text, remove_if_no_rows
from bench.synth.candidates import Candidate, SynthSettings
from bench.synth.checks import check_duplicates_and_leaks, check_prompts, check_schema
from bench.synth.generate import generate, plan_requests
from bench.synth.proposals import KINDS, LANGUAGES
from bench.synth.report import SynthReport
from bench.synth.verify import verify_by_answers


def synthesize(settings: SynthSettings, project: Project) -> SynthReport:
    """Generate, verify and keep cases (the module docstring); write the dataset's
    ``cases.jsonl`` (kept cases appended), ``synth-report.json`` / ``.md`` and datasheet.

    Raises:
        BenchError: bad settings (an unknown kind or language, fewer answers than
            ``min_agree`` could ever give), an unknown toolset or variant, a template that
            fails, an existing dataset that does not load, or a run that fails.
    """
    from bench.datasets import load_dataset
    from bench.descriptions import load_variant
    from bench.descriptions.containment import project_test_cases

    _check_settings(settings)
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
        _append_kept(cases_path, candidates)
        report = SynthReport(_described(settings, variant_name), generator_run, verify_run,
                             len(requests), candidates, str(cases_path))
        _write_report(report, folder, cases_path, settings.toolset)
    return report


def _check_settings(settings: SynthSettings) -> None:
    """Refuse bad settings before any folder is made.

    Raises:
        BenchError: a bad dataset name, an unknown kind or language, a count under 1, an
            unknown generator or solver, the oracle as a solver, or fewer independent
            answers than ``min_agree`` (names the option).
    """
    from bench.datasets.loader import check_dataset_name
    from bench.providers.registry import (answers_from_labels, known_provider,
                                          runs_embedded_model)

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


def _append_kept(cases_path: Path, candidates: Sequence[Candidate]) -> None:
    """Append the kept candidates' cases to ``cases_path`` (written whole, atomically);
    nothing when none was kept."""
    kept = [c for c in candidates if c.reason is None and c.case is not None]
    if kept:
        old = cases_path.read_text(encoding="utf-8") if cases_path.is_file() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        atomic_write_text(cases_path, old + "".join(
            json.dumps(c.case, ensure_ascii=False) + "\n" for c in kept))


def _described(settings: SynthSettings, variant_name: str) -> dict[str, Any]:
    """The settings as the report states them (JSON data: paths and tuples made plain)."""
    return {**{k: v for k, v in settings.__dict__.items() if k != "templates"},
            "templates": str(settings.templates) if settings.templates else None,
            "variant": variant_name, "kinds": list(settings.kinds),
            "languages": list(settings.languages), "solvers": list(settings.solvers)}


def _write_report(report: SynthReport, folder: Path, cases_path: Path, toolset: str) -> None:
    """Write ``synth-report.json`` and ``synth-report.md`` into the dataset's ``folder`` and,
    when it has cases, refresh its datasheet."""
    from bench.synth.review import refresh_datasheet

    atomic_write_json(folder / "synth-report.json", report.to_json())
    atomic_write_text(folder / "synth-report.md", report.markdown())
    if cases_path.is_file():
        refresh_datasheet(folder, toolset)
