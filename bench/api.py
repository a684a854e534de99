"""The in-process API: :func:`evaluate` runs (or resumes) a run and returns typed results, for
notebooks and for tools built on bench (an optimizer calls it in a loop).

It is ``bench run`` without the command line: the same plan, request pipeline, response cache,
resume, rows, per-variant table and statistics, read from an explicit project folder rather
than the current directory. Nothing is printed unless a ``progress`` hook prints it.

    >>> from bench import evaluate
    >>> result = evaluate(dataset="ecommerce", variants=["l3", "l50"], providers=["oracle"],
    ...                   limit=20, project="/tmp/demo")          # doctest: +SKIP
    >>> result.summary[["variant", "selection_correct_rate"]]       # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from bench.errors import BenchError
from bench.project import Project
from bench.providers.pipeline import LayerFactory
from bench.results import Manifest, Row
from bench.runner.budget import ProgressHook
from bench.runner.config import RunConfig
from bench.runner.startup import ProviderFactory

if TYPE_CHECKING:
    import pandas as pd

    from bench.compare.core import Comparison
    from bench.runner.session import RunSession


@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate` returns: one finished (or budget-stopped) run.

    Attributes:
        run_id: the run's id (its folder is ``<project>/reports/runs/<run_id>``).
        manifest: the run's manifest (status, config, spend, cache statistics...).
        rows: its rows as every reader counts them (one per planned key), in file order.
        summary: the per-variant table ``bench run`` prints
            (:func:`bench.stats.summary.summarize`), one row per (provider, variant): cases,
            and per rate metric ``<metric>_k`` / ``_n`` / ``_rate`` with its 95% Wilson
            interval ``_low`` / ``_high``; tokens, ``p50_latency_s`` (seconds).
        project: the project it was read from.
        warnings: what the reader left out (rows outside the plan, differing copies of a
            key, a cut last line), one line each, as ``bench show`` prints them, and each
            provider skipped for this run (no key, SDK missing) with its reason.
    """

    run_id: str
    manifest: Manifest
    rows: list[Row]
    summary: pd.DataFrame
    project: Project
    warnings: list[str]

    @property
    def status(self) -> str:
        """The manifest's status (``complete``, ``budget_exhausted``, ``partial``...)."""
        return self.manifest.status

    def frame(self) -> pd.DataFrame:
        """The rows as the reports' frame (:func:`bench.stats.frame.results_frame`)."""
        from bench.stats.frame import results_frame
        return results_frame(self.rows)

    def compare(self, variant_a: str, variant_b: str, *, alpha: float = 0.05,
                margin: float = 0.0, metrics: Sequence[str] | None = None,
                mid_p: bool = False) -> Comparison:
        """``bench compare variant_a variant_b --run <run_id>``: paired McNemar tests per
        metric and provider with Holm's correction, bootstrap intervals and flips
        (:func:`bench.compare.core.compare_rows`, whose arguments ``alpha`` (family-wise
        level), ``margin`` (fraction), ``metrics`` and ``mid_p`` these are).

        Raises:
            BenchError: a variant the run does not hold, or A equal to B.
            ValueError: as :func:`compare_rows` (no shared metric or pair).
        """
        import math

        from bench.compare.core import compare_rows
        if not (isinstance(alpha, (int, float)) and 0.0001 <= alpha <= 0.5):
            raise BenchError(f"compare(): alpha must be between 0.0001 and 0.5 (got {alpha!r})")
        if not (isinstance(margin, (int, float)) and math.isfinite(margin)
                and 0 <= margin < 1):
            raise BenchError(f"compare(): margin is a fraction from 0 to 1 (got {margin!r})")
        if isinstance(metrics, str) or (metrics is not None and not all(
                isinstance(m, str) for m in metrics)):
            raise BenchError("compare(): metrics is a list of metric names, e.g. "
                             "['selection_correct']")
        held = {row.variant for row in self.rows}
        for name in (variant_a, variant_b):
            if name not in held:
                raise BenchError(f"run '{self.run_id}' has no variant '{name}' (it has: "
                                 f"{', '.join(sorted(held))})")
        if variant_a == variant_b:
            raise BenchError(f"A and B are the same variant '{variant_a}'")
        try:
            return compare_rows([r for r in self.rows if r.variant == variant_a],
                                [r for r in self.rows if r.variant == variant_b],
                                label_a=variant_a, label_b=variant_b, alpha=alpha,
                                margin=margin, metrics=metrics, mid_p=mid_p)
        except ValueError as exc:  # no shared metric or pair, an unknown metric
            raise BenchError(f"compare(): {exc}") from None


def evaluate(dataset: str | Path, variants: Sequence[str],
             providers: Sequence[str] = ("local",), *, project: Project | str | Path,
             run_id: str | None = None, resume: bool = True,
             layers: Sequence[LayerFactory] = (),
             provider_factory: ProviderFactory | None = None,
             progress: ProgressHook | None = None, **settings: object) -> Evaluation:
    """Run ``dataset`` x ``variants`` x ``providers`` in process and return the results.

    Args:
        dataset: a dataset name under the project's ``datasets/``, or a ``.jsonl`` path.
        variants: description variants (``l3``, ``l50``, a file...), as ``--variants``.
        providers: provider ids (``local``, ``oracle``, ``openai:gpt-4o-mini``...).
        project: the project folder (or :class:`~bench.project.Project`) holding datasets,
            descriptions, ``reports/runs`` and the response cache; never the cwd.
        run_id: the run's id; default a new one. An existing run with this id is resumed
            (``resume``) with the given settings, which must equal its stored ones except
            the resumable ones (:data:`bench.runner.RESUME_OVERRIDES`).
        resume: resume an existing ``run_id`` (False: refuse it).
        layers: request-pipeline layers added for every provider
            (:data:`bench.providers.pipeline.LayerFactory`).
        provider_factory: builds providers (default: the registry).
        progress: called per row written (:data:`bench.runner.ProgressHook`).
        **settings: any other :class:`bench.runner.RunConfig` field (``trials``, ``limit``,
            ``split``, ``case_ids``, ``cache``, ``max_usd``, ``seed``, ``concurrency``...).

    Returns:
        The :class:`Evaluation` (a budget-stopped run too: see its ``status``).

    Raises:
        BenchError: bad settings, dataset or variants (one line naming the field), a run that
            exists with ``resume=False``, a provider that cannot start, or a run that failed
            or left requests for a resume (the message says how to resume it).
        KeyboardInterrupt: the run was interrupted (finished rows are kept).
    """
    from pydantic import ValidationError

    from bench.errors import pydantic_error_field
    from bench.providers.function_process import exit_if_main_reimported
    from bench.runner.lifecycle import RunHooks, execute_run, open_run

    # a worker process re-running an unguarded script: it ends here, its parent says why
    exit_if_main_reimported()
    unknown = sorted(set(settings) - set(RunConfig.model_fields))
    if unknown:
        raise BenchError(f"evaluate(): unknown setting '{unknown[0]}' (settings are "
                         f"bench.RunConfig's fields: {', '.join(RunConfig.model_fields)})")
    project = _project(project)
    _check_arguments(run_id, layers, progress)
    fields = {"dataset": str(dataset), "variants": _names("variants", variants),
              "providers": _names("providers", providers), **settings}
    try:  # the caller's settings are checked as theirs, before any stored run is read
        config = RunConfig.model_validate(fields)
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(f"evaluate(): {field}: {message}") from None
    existing = run_id is not None and project.store(run_id).exists()
    if existing and not resume:
        raise BenchError(f"run '{run_id}' exists; pass resume=True to finish it")
    runner = open_run(project, resume=run_id if existing else None, overrides=fields,
                      config=None if existing else config, run_id=run_id, command=[],
                      provider_factory=provider_factory, layers=layers)
    runner.session.resume_hint = f"evaluate(..., run_id={runner.store.run_id!r}) again"
    execute_run(runner, RunHooks(progress=progress))
    return _results(runner.session, project)


def _project(project: object) -> Project:
    """``project`` as a :class:`Project` whose folder exists.

    Raises:
        BenchError: not a path, or not a folder (names it).
    """
    if isinstance(project, Project):
        return project
    if not isinstance(project, (str, Path)) or not str(project):
        raise BenchError(f"evaluate(): project must be a folder path (got {project!r})")
    folder = Path(project)
    if not folder.is_dir():
        raise BenchError(f"evaluate(): the project folder {folder} "
                         f"{'is not a folder' if folder.exists() else 'does not exist'}")
    return Project(folder)


def _names(what: str, given: object) -> list[str]:
    """``variants`` / ``providers`` as a list of names (one name alone is a list of one).

    Raises:
        BenchError: neither a name nor a list of names.
    """
    if isinstance(given, str):
        return [given]
    if isinstance(given, (list, tuple)) and all(isinstance(n, str) for n in given):
        return list(given)
    raise BenchError(f"evaluate(): {what} is a list of names, e.g. ['l3', 'l50'] "
                     f"(got {given!r})")


def _check_arguments(run_id: object, layers: object, progress: object) -> None:
    """Refuse arguments of the wrong type in one line.

    Raises:
        BenchError: ``run_id`` not a str, ``layers`` not a list of callables, ``progress``
            not callable.
    """
    if run_id is not None and not isinstance(run_id, str):
        raise BenchError(f"evaluate(): run_id must be a str (got {run_id!r})")
    if not isinstance(layers, (list, tuple)) or not all(callable(f) for f in layers):
        raise BenchError("evaluate(): layers is a list of layer factories "
                         "(provider_id, inner) -> layer")
    if progress is not None and not callable(progress):
        raise BenchError(f"evaluate(): progress must be callable (got {progress!r})")


def _results(session: RunSession, project: Project) -> Evaluation:
    """The :class:`Evaluation` of a finished session's run."""
    import pandas as pd

    from bench.stats.summary import summarize, summary_frame
    store = session.store
    manifest = store.load_manifest()
    warnings: list[str] = []
    rows = list(store.load_rows(manifest, warn=warnings.append))
    # a provider skipped here (no key, SDK missing): its rows are missing, the run is partial
    warnings += [f"provider {skipped.provider} skipped: {skipped.reason}; its rows are "
                 "missing (status partial): fix that, then evaluate again with this run_id"
                 for skipped in manifest.providers_skipped or []]
    summary = summarize(summary_frame(rows), list(session.config.variants)) if rows \
        else pd.DataFrame()
    return Evaluation(store.run_id, manifest, rows, summary, project, warnings)
