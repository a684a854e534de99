"""Run a gate: its project, its run through the runner, and what the run's traces say.

:func:`run_gate` runs the gate's plan (cases x variants x providers x trials) in the gate's
project and returns its rows (:class:`GateRun`); :func:`gate_executes` says whether the run
executes the answers' calls, :func:`backend_error` explains a toolset's backend that does not
start, and :func:`read_call_errors` reads the executor's final failed calls for the flipped
cases the verdicts quote (:mod:`bench.gate.core`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import pandas as pd
from pydantic import ValidationError

from bench.errors import BenchError
from bench.gate.config import ANSWER_ONLY_METRICS, GateConfig
from bench.project import Project
from bench.results import Manifest, Row, TraceRecord
from bench.stats.frame import results_frame


def gate_project(config: GateConfig) -> Project:
    """The gate's project: the folder of its ``pyproject.toml`` (``config.root``), where
    ``datasets/``, ``descriptions/``, ``reports/runs/`` and the table's relative paths
    (``replay:<file>`` sources, a ``.jsonl`` dataset, the baseline) are found. Nothing
    process-wide changes (no ``chdir``, no ``$BENCH_HOME``), so gates of two projects can run
    in one process."""
    return Project(config.root)


@dataclass
class GateRun:
    """The rows of one gate run.

    Attributes:
        rows: result rows.
        manifest: the run's manifest (dataset and variant hashes...).
        run_id: the stored run's id (under ``<root>/reports/runs``).
        call_errors: ``{(case_id, trial): ["<tool>: <error_class>/<error_code>", ...]}`` from
            the executor's ``traces.jsonl`` (final failed attempts; all variants of the run).
    """

    rows: list[Row]
    manifest: Manifest
    run_id: str
    call_errors: dict[tuple[str, int], list[str]] = field(default_factory=dict)

    @property
    def frame(self) -> pd.DataFrame:
        """The rows as :func:`bench.stats.frame.results_frame`."""
        return results_frame(self.rows)


def run_gate(config: GateConfig, *, run_id: str | None = None,
             project: Project | None = None) -> GateRun:
    """Run the gate's plan (cases x variants x providers x trials) and score it.

    Args:
        config: the gate settings.
        run_id: name of the stored run (default ``gate-<UTC timestamp>``).
        project: where to run (default :func:`gate_project`: the config's folder).

    Raises:
        BenchError: bad settings, or the run failed; a replay cache miss names the case and
            the command that records it; a toolset's backend that cannot start (the gate
            executes) names the toolset and its command (:func:`backend_error`).
    """
    from bench.runner import RunConfig  # the runner loads providers and the executor
    from bench.runner.errors import ExecutorNotStarted
    from bench.runner.lifecycle import execute_run, open_run

    project = project or gate_project(config)
    run_id = run_id or "gate-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    dataset = config.dataset
    if dataset.endswith(".jsonl"):  # a path in the table: relative to the project
        dataset = str(project.resolve(dataset))
    run_config = RunConfig(dataset=dataset, variants=config.variants,
                           providers=config.providers, trials=config.trials,
                           limit=config.limit, case_ids=config.cases,
                           execute=gate_executes(config, dataset, project), split=config.split)
    runner = open_run(project, config=run_config, run_id=run_id,
                      command=["bench-gate", str(config.source)],
                      taken="run the gate again (its runs are named by the time)")
    runner.session.resume_hint = "run the gate again"
    try:
        execute_run(runner)
    except ExecutorNotStarted as exc:  # e.g. the toolset's MCP server is not installed in CI
        raise backend_error(config, project, [v.toolset for v in runner.variants],
                            exc) from None
    manifest = runner.store.load_manifest()
    rows = list(runner.store.load_rows(manifest))
    call_errors = read_call_errors(runner.store.dir / "traces.jsonl")
    if manifest.status != "complete":
        raise BenchError(f"gate run '{run_id}' ended with status {manifest.status}: "
                         f"{manifest.error or _skipped(manifest) or 'see its manifest'}",
                         file=config.source)
    return GateRun(rows=rows, manifest=manifest, run_id=run_id, call_errors=call_errors)


def _skipped(manifest: Manifest) -> str:
    """The providers a run skipped and why (``manifest.providers_skipped``: no key, SDK
    missing), or ``""``: the rows a ``partial`` gate run lacks."""
    skipped = [f"{entry.provider} ({entry.reason})"
               for entry in manifest.providers_skipped or []]
    if not skipped:
        return ""
    its, it = ("their", "them") if len(skipped) > 1 else ("its", "it")
    return (f"provider{'s' if len(skipped) > 1 else ''} skipped: {'; '.join(skipped)}; {its} "
            f"rows were not run, so the gate cannot judge {it}: make {it} available here, or "
            f"drop {it} from the gate's providers")


def gate_executes(config: GateConfig, dataset: str, project: Project) -> bool:
    """Whether the gate's run executes the answers' calls: :attr:`GateConfig.executes`, and
    always for a dataset of episodes (an episode's next turn needs its calls' results),
    unless ``execute = false`` says otherwise.

    Raises:
        BenchError: ``execute = false`` with a dataset holding episodes (names the gate's
            ``execute`` field); the dataset cannot be read (as :func:`load_dataset`).
    """
    if config.executes:
        return True
    from bench.datasets import load_dataset
    with project.activate():  # a dataset name is looked up in the gate's project
        episodes = any(case.kind == "episode" for case in load_dataset(dataset).cases)
    if episodes and config.execute is False:
        raise BenchError("the dataset holds episodes, which run their calls on the executor: "
                         "remove execute = false", file=config.source,
                         field="tool.bench.gate.execute")
    return episodes


def backend_error(config: GateConfig, project: Project, toolsets: Sequence[str],
                  exc: BenchError) -> BenchError:
    """The one-line error of a gate whose run could not start a toolset's backend (``exc``,
    the executor's): why the gate executes (the gated metric that needs it, or ``execute =
    true``), the toolset and its command as ``[tool.bench.toolsets.<name>]`` declares it
    (:func:`bench.toolset_config.server_label`: program and script, never a token), and the
    fix. ``exc`` unchanged when no toolset of the gate declares an MCP server or a module
    (``--execute-mcp``, the reference backends), or its settings cannot be read."""
    from bench.toolset_config import PYPROJECT, load_toolset_settings, server_label
    try:
        settings = load_toolset_settings(project.root)
    except BenchError:
        return exc
    declared = {t: settings[t] for t in dict.fromkeys(toolsets)
                if t in settings and settings[t].execute != "none"}
    if not declared:
        return exc
    # the failing one: the toolset whose program the executor's message names, else the first
    toolset, chosen = next(((t, s) for t, s in declared.items() if s.server is not None and
                            f"'{server_label(s.server).split(' ')[0]}'" in exc.message),
                           next(iter(declared.items())))
    if chosen.execute == "mcp" and chosen.server is not None:
        field, what = "server", f"its MCP server `{server_label(chosen.server)}`"
    else:
        field, what = "module", f"its module `{chosen.module}`"
    cause = exc.message
    if "FileNotFoundError" in cause and isinstance(chosen.server, list):
        cause = (f"the program '{chosen.server[0]}' is not found (not installed where the "
                 "gate runs, or not on PATH)")
    executing = [m for m in config.gated_metrics if m not in ANSWER_ONLY_METRICS]
    if config.execute:
        why, instead = "execute = true", "or drop execute = true from [tool.bench.gate]" + (
            "" if executing else " (its metrics are scored from the answer alone)")
    else:
        why = "it gates " + ", ".join(executing)
        instead = "or gate only metrics scored from the answer (selection, arguments), which " \
            "execute nothing"
    return BenchError(
        f"the gate executes the answers' calls ({why}) and toolset '{toolset}' cannot start "
        f"{what}: {cause}; install it where the gate runs or fix the setting, {instead}",
        file=project.root / PYPROJECT, field=f"tool.bench.toolsets.{toolset}.{field}")


def read_call_errors(path: Path) -> dict[tuple[str, int], list[str]]:
    """Final failed call attempts of a run's executor traces (see :class:`GateRun`); an absent
    file (execution off) gives ``{}``; unreadable lines are skipped (traces are diagnostics)."""
    errors: dict[tuple[str, int], list[str]] = {}
    if not Path(path).is_file():
        return errors
    with open(path, "rb") as handle:
        for line in handle:
            try:
                trace = TraceRecord.model_validate_json(line)
            except ValidationError:
                continue
            if not trace.final or not trace.error_class:
                continue
            text = f"{trace.tool}: {trace.error_class}/{trace.error_code}"
            found = errors.setdefault((str(trace.case_id), trace.trial or 0), [])
            if text not in found:
                found.append(text)
    return errors
