"""Run a gate, write and read its baseline, and decide pass or fail per (variant, provider, metric).

Decision rule (issue 8), per gated metric of each (variant, provider):

- **fail** when the rate is below its absolute floor (``floors`` in the config);
- **fail** when it is significantly worse than the baseline by more than ``margin``: McNemar's
  exact test paired on the same (case, trial), Holm-corrected across every test of the gate,
  Holm p < ``alpha`` and ``rate - baseline rate < -margin`` (verdict ``regression`` of
  :func:`bench.compare.core.compare_frames`);
- **fail** when a case right in the baseline is wrong now and the provider is deterministic
  (:attr:`bench.providers.registry.ProviderSpec.deterministic`: greedy ``local``, ``oracle``,
  ``function:``, ``replay:``): the *per-case rule* (``fail_on_flips``, on by default; cases in
  ``allow_flips`` may flip). Same request, same answer: a flip there is caused by the change,
  not by sampling, and on a gate of a few cases the paired test cannot see it (4 of 8 cases
  lost give McNemar p = 0.125). Answers that are sampled (hosted APIs) leave the rule off;
- otherwise **pass**; a significant improvement beyond the margin passes and says that the
  baseline can be updated.

Every verdict also carries the gate's power: the smallest drop the paired test detects with
80% power (:data:`POWER`) at its number of pairs,
:func:`bench.compare.core.minimum_detectable_difference` at ``alpha / m`` for ``m`` tests of
the gate (the threshold of Holm's first step, the one a lone regression must pass), and a
warning when that drop is larger than the regression the gate is meant to catch: the distance
from the baseline rate to the floor when a floor lies beyond the margin, else the margin.

The baseline (``bench baseline update``) is a small JSON file: per (variant, provider) and per
case x trial, one bit per metric, plus per-metric summaries and the dataset and variant SHA-256
hashes; it is meant to be committed next to the descriptions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
from pydantic import ValidationError

from bench.compare.core import (Comparison, _short_expected, compare_frames, mcnemar_power,
                                minimum_detectable_difference)
from bench.datasets.splits import refuse_mixed_splits, run_split
from bench.errors import BenchError, json_document, read_text_file
from bench.gate.config import ANSWER_ONLY_METRICS, GateConfig
from bench.plural import count
from bench.project import Project
from bench.results import Manifest, Row, TraceRecord, as_rows
from bench.store.files import atomic_write_json
from bench.stats.frame import results_frame
from bench.stats.intervals import wilson_interval

BASELINE_FORMAT = "bench-gate-baseline/1"
GROUP_BY = ("variant", "provider")
# the conventional target power (Cohen 1988, "Statistical Power Analysis for the Behavioral
# Sciences", 2nd ed.), bench compare's default too: a real drop of the printed size is missed
# 1 time in 5
POWER = 0.8
FLIP_LINES = 100  # per-case rule: flipped cases listed one line each, at most this many
PAIRS_CAP = 100_000  # "pairs needed" is searched up to this many


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


def _group(variant: str, provider: str) -> str:
    return f"{variant}/{provider}"


def build_baseline(config: GateConfig, run: GateRun) -> dict[str, Any]:
    """The baseline document of a gate run (see the module docstring).

    Returns:
        ``{"format", "created_at", "run_id", "dataset": {name, sha256, cases}, "variants":
        [{name, toolset, sha256}], "providers", "trials", "metrics", "summary": {group:
        {metric: {n, successes, rate}}}, "outcomes": {group: {"<case>#<trial>": {metric:
        0|1}}}}`` with groups named ``<variant>/<provider>``; a metric that does not apply to a
        case is left out of its outcome.
    """
    frame = run.frame
    metrics = [m for m in config.gated_metrics if m in frame.columns]
    summary: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, dict[str, dict[str, int]]] = {}
    for (variant, provider), part in frame.groupby(list(GROUP_BY), sort=True):
        group = _group(variant, provider)
        summary[group] = {}
        for metric in metrics:
            values = part[metric].dropna()
            successes = int(values.sum())
            summary[group][metric] = {"n": int(len(values)), "successes": successes,
                                      "rate": round(successes / len(values), 6)
                                      if len(values) else None}
        cases: dict[str, dict[str, int]] = {}
        for record in part.sort_values(["case_id", "trial"]).to_dict("records"):
            bits = {m: int(bool(record[m])) for m in metrics if not pd.isna(record[m])}
            cases[f"{record['case_id']}#{record['trial']}"] = bits
        outcomes[group] = cases
    dataset = run.manifest.dataset
    return {
        "format": BASELINE_FORMAT,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run_id": run.run_id,
        "dataset": {"name": dataset.name, "sha256": dataset.sha256, "cases": dataset.cases,
                    "split": run_split(run.manifest.config)},
        "variants": [{"name": v.name, "toolset": v.toolset, "sha256": v.sha256}
                     for v in run.manifest.variants],
        "providers": list(config.providers),
        "trials": config.trials,
        "metrics": metrics,
        "summary": summary,
        "outcomes": outcomes,
    }


def write_baseline(config: GateConfig, run: GateRun) -> Path:
    """Write the baseline of ``run`` to ``config.baseline_path`` atomically; return the path.

    The description lock of each toolset the run used is refreshed for the gate's variants
    (:func:`bench.descriptions.lock.write_lock`), so that "changed since the baseline"
    (``bench check``, ``require_reevaluation``) starts from the descriptions the baseline was
    recorded on."""
    from bench.descriptions.lock import current_hashes, write_lock

    path = config.baseline_path
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, build_baseline(config, run))
    root = config.root / "descriptions"
    for toolset in sorted({v.toolset for v in run.manifest.variants if v.toolset}):
        if (root / toolset).is_dir():
            write_lock(toolset, current_hashes(toolset, config.variants, root), root)
    return path


FLOOR_CONFIDENCE = 0.99


def baseline_floors(baseline: dict[str, Any]) -> dict[str, float]:
    """Floors for a gate that has none, from its baseline's rates: per gated metric, the
    lower end of the 99% Wilson interval of its rate (:func:`bench.stats.intervals.
    wilson_interval`), the lowest over the baseline's (variant, provider) groups, rounded
    down to a whole percent. The slack is the interval's half-width: about 34 points at 8
    cases, 21 at 30, 10 at 150 for a rate of 50%. With deterministic answers a rerun of
    unchanged descriptions never falls below it; with sampled answers at an unchanged true
    rate, about 3% of reruns do (the difference of two independent estimates has sqrt(2)
    times one's standard error: P(Z < -2.576 / sqrt(2)) = 0.034).

    Returns:
        ``{metric: floor}`` (fractions) in the baseline's metric order; a metric without rows
        is left out.
    """
    floors: dict[str, float] = {}
    for metric in baseline.get("metrics") or []:
        lows = []
        for groups in (baseline.get("summary") or {}).values():
            entry = (groups or {}).get(metric) or {}
            if entry.get("n"):
                lows.append(wilson_interval(int(entry["successes"]), int(entry["n"]),
                                            FLOOR_CONFIDENCE)[0])
        if lows:
            floors[metric] = math.floor(min(lows) * 100 + 1e-9) / 100
    return floors


def load_baseline(path: Path) -> dict[str, Any] | None:
    """The baseline document at ``path``, or None when the file does not exist.

    Raises:
        BenchError: the file is not JSON or not a bench gate baseline.
    """
    path = Path(path)
    if not path.is_file():
        return None
    data = json_document(read_text_file(path), file=path, what="baseline")
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
        raise BenchError(f"not a bench gate baseline (want format '{BASELINE_FORMAT}'); "
                         "rewrite it with: bench baseline update", file=path, field="format")
    if not isinstance(data.get("outcomes"), dict):
        raise BenchError("missing or invalid outcomes", file=path, field="outcomes")
    return data


def baseline_frame(baseline: dict[str, Any]) -> pd.DataFrame:
    """The baseline's outcomes as a results frame (columns ``key, case_id, trial, variant,
    provider`` and one nullable-boolean column per metric), for :func:`compare_frames`."""
    records = []
    for group, cases in baseline["outcomes"].items():
        variant, _, provider = group.partition("/")
        for case_trial, bits in cases.items():
            case_id, _, trial = case_trial.rpartition("#")
            records.append({"key": f"{case_id}|{variant}|{provider}|{trial}",
                            "case_id": case_id, "trial": int(trial), "variant": variant,
                            "provider": provider, **bits})
    frame = pd.DataFrame.from_records(records)
    for metric in baseline.get("metrics") or ():
        if metric in frame:
            frame[metric] = frame[metric].map(lambda v: None if pd.isna(v) else bool(v)) \
                .astype("boolean")
    return frame


def compare_with_baseline(config: GateConfig, frame: pd.DataFrame, baseline: dict[str, Any],
                          *, metrics: Sequence[str] | None = None, margin: float | None = None,
                          alpha: float | None = None) -> Comparison | None:
    """Paired comparison of the baseline (A) with the current frame (B) per (variant,
    provider), Holm across all its tests; None when they share no metric or no pair.

    Args:
        config: the gate (defaults for metrics, margin and alpha).
        frame: the current results frame.
        baseline: a document of :func:`load_baseline`.
        metrics / margin / alpha: override the gate's settings.
    """
    base = baseline_frame(baseline)
    wanted = [m for m in (metrics or config.gated_metrics)
              if m in base.columns and m in frame.columns]
    if base.empty or not wanted:
        return None
    try:
        return compare_frames(base, frame, label_a="baseline", label_b="current",
                              metrics=wanted, group_by=GROUP_BY,
                              alpha=config.alpha if alpha is None else alpha,
                              margin=config.margin if margin is None else margin)
    except ValueError:  # no shared (case, trial) pair
        return None


@dataclass
class FlippedCase:
    """A case the baseline got right and the current run gets wrong, for one metric.

    Attributes:
        case_id, trial: which; query: its last user message; answer: the current answer in
        short form; errors: the current row's execution / argument errors in short form.
        metric: the metric that flipped; expected: the label in short form
        (``name(arg=value|value)``); allowed: the case is in ``allow_flips``.
    """

    case_id: str
    trial: int
    query: str
    answer: str
    errors: str
    metric: str = ""
    expected: str = ""
    allowed: bool = False

    def line(self) -> str:
        """One line: case, trial, metric, what the label expected and what the model did."""
        text = (f"{self.case_id} (trial {self.trial}) {self.metric}: expected "
                f"{self.expected or '?'}; the model: {self.answer}")
        return text + (f" [{self.errors}]" if self.errors else "")


@dataclass
class Verdict:
    """The gate's decision for one (variant, provider, metric).

    Attributes:
        variant, provider, metric: which test.
        n, successes: rows where the metric applies, and how many pass.
        rate, low, high: the rate and its 95% Wilson interval (fractions; NaN without rows).
        floor: the metric's absolute floor (None: none).
        baseline_rate, baseline_n: the baseline on the paired cases (None: no baseline).
        diff, diff_low, diff_high: current minus baseline with its paired bootstrap interval.
        p_value, p_holm: McNemar exact p-value and its Holm adjustment (None: not tested).
        lost, gained: pairs flipped right->wrong and wrong->right.
        reasons: why it fails (empty: it passes); notes: remarks on a passing metric.
        flips: every lost case (allowed ones flagged); flips_shown: how many of them a
            failure of the floor or the paired test quotes in full (the config's).
        per_case: the per-case rule applies (``fail_on_flips``, a deterministic provider, a
            baseline); per_case_why: why it does or does not, in words.
        mdd: the smallest drop (fraction) the paired test detects with :data:`POWER` at
            ``mdd_alpha`` on ``baseline_n`` pairs (NaN: not even 100 points; None: no
            baseline); mdd_alpha: ``alpha / tests``, Holm's first-step threshold.
        tests: the number of (variant, provider, metric) tests of the gate (Holm's family).
        target, target_text: the drop the gate is meant to catch (fraction) and, in words, how
            the detectable drop compares with it (the floor's distance below the baseline, or
            the margin).
        pairs_needed: pairs the paired test would need to detect ``target`` (None: not
            computed; ``PAIRS_CAP + 1``: more than :data:`PAIRS_CAP`).
        warning: the power warning (None: none).
    """

    variant: str
    provider: str
    metric: str
    n: int
    successes: int
    rate: float
    low: float
    high: float
    floor: float | None = None
    baseline_rate: float | None = None
    baseline_n: int | None = None
    diff: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    lost: int = 0
    gained: int = 0
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flips: list[FlippedCase] = field(default_factory=list)
    per_case: bool = False
    per_case_why: str = ""
    flips_shown: int = 5
    mdd: float | None = None
    mdd_alpha: float | None = None
    tests: int = 1
    target: float | None = None
    target_text: str = ""
    pairs_needed: int | None = None
    warning: str | None = None

    @property
    def passed(self) -> bool:
        """True when no failure reason applies."""
        return not self.reasons

    @property
    def test_name(self) -> str:
        """``<metric>[<variant>|<provider>]``: the pytest item and JUnit test-case name."""
        return f"{self.metric}[{self.variant}|{self.provider}]"

    def properties(self) -> list[tuple[str, str]]:
        """Name/value pairs for JUnit ``<properties>`` (fractions with 4 decimals)."""
        def fmt(value: float | None) -> str:
            return "" if value is None else f"{value:.4f}"
        return [("metric", self.metric), ("variant", self.variant),
                ("provider", self.provider), ("rate", fmt(self.rate)),
                ("interval", f"{fmt(self.low)}-{fmt(self.high)}"), ("n", str(self.n)),
                ("floor", fmt(self.floor)), ("baseline_rate", fmt(self.baseline_rate)),
                ("diff", fmt(self.diff)), ("p_value", fmt(self.p_value)),
                ("p_holm", fmt(self.p_holm)), ("lost_cases", str(self.lost)),
                ("gained_cases", str(self.gained)), ("mdd", fmt(self.mdd)),
                ("per_case_rule", "on" if self.per_case else "off"),
                ("verdict", "pass" if self.passed else "fail")]

    def power_text(self) -> str:
        """One line: the smallest drop the paired test detects here, and on how many pairs."""
        if self.mdd is None or self.mdd_alpha is None:
            return ("no baseline to pair with: only the floor decides"
                    if self.floor is not None else
                    "no baseline to pair with and no floor: this metric cannot fail on a drop "
                    "(write both with: bench baseline update)")
        alpha = self.mdd_alpha
        where = (f"{count(self.baseline_n or 0, 'pair')}, {POWER:.0%} power, alpha "
                 f"{alpha:.3g}" + (f" = {alpha * self.tests:.3g} / {self.tests} tests (Holm)"
                                   if self.tests > 1 else ""))
        if math.isnan(self.mdd):
            return f"the paired test detects no drop, not even 100 points ({where})"
        return f"the paired test detects a drop of {100 * self.mdd:.0f} points or more ({where})"

    def summary_lines(self) -> list[str]:
        """The verdict's power in the pytest terminal summary: one line, plus the warning."""
        lines = [f"{self.test_name}: {self.power_text()}; per-case rule "
                 f"{'on' if self.per_case else 'off'} ({self.per_case_why})"]
        if self.warning:
            lines.append(f"  WARNING: {self.warning}")
        return lines

    def message(self) -> str:
        """Multi-line text: metric, interval, floor, baseline, change, p-values, flipped cases."""
        def pct(value: float) -> str:
            return f"{100 * value:.1f}%"

        def points(value: float | None) -> str:  # set with baseline_rate (None: not compared)
            return "?" if value is None else f"{100 * value:+.1f}"
        head = (f"{self.metric} on variant {self.variant}, provider {self.provider}: "
                f"{'FAIL' if self.reasons else 'pass'}")
        lines = [head, f"  now       {pct(self.rate)} [{pct(self.low)}-{pct(self.high)}] "
                       f"({self.successes}/{self.n}, 95% Wilson)"]
        if self.floor is not None:
            lines.append(f"  floor     {pct(self.floor)}")
        if self.baseline_rate is None:
            lines.append("  baseline  none (write one with: bench baseline update)")
        else:
            lines.append(f"  baseline  {pct(self.baseline_rate)} on the same "
                         f"{count(self.baseline_n or 0, 'case')}")
            lines.append(f"  change    {points(self.diff)} points [{points(self.diff_low)}, "
                         f"{points(self.diff_high)}] (paired bootstrap), McNemar exact "
                         f"p={self.p_value:.4g}, Holm p={self.p_holm:.4g}; "
                         f"lost {self.lost}, gained {self.gained}")
        lines.append(f"  power     {self.power_text()}")
        lines.append(f"  per-case  {'on' if self.per_case else 'off'}: {self.per_case_why}")
        if self.warning:
            lines.append(f"  WARNING: {self.warning}")
        lines += [f"  FAIL: {r}" for r in self.reasons] + [f"  note: {n}" for n in self.notes]
        flipped = [f for f in self.flips if not f.allowed]
        if self.per_case and flipped:
            lines.append("  flipped cases (right in the baseline, wrong now):")
            lines += [f"    {f.line()}" for f in flipped[:FLIP_LINES]]
            if len(flipped) > FLIP_LINES:
                lines.append(f"    ... and {len(flipped) - FLIP_LINES} more")
        elif self.reasons and self.flips:
            shown = self.flips[:self.flips_shown]
            lines.append(f"  cases that were right in the baseline and are wrong now "
                         f"({len(shown)} of {self.lost}):")
            for flip in shown:
                lines.append(f"    {flip.case_id} (trial {flip.trial}): {flip.query!r}")
                lines.append(f"      expected: {flip.expected}")
                lines.append(f"      answer: {flip.answer}")
                if flip.errors:
                    lines.append(f"      errors: {flip.errors}")
        return "\n".join(lines)


def _short_answer(row: Row, limit: int = 240) -> str:
    if row.parsed is not None and row.parsed.error:
        return f"(unparseable: {row.parsed.error})"[:limit]
    calls = row.calls()
    if not calls:
        return "(no call)"
    text = "; ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False, default=str)})"
                     for c in calls)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _short_errors(row: Row, call_errors: Sequence[str], limit: int = 240) -> str:
    parts = []
    if call_errors:
        parts.append("executor: " + "; ".join(call_errors))
    codes = row.metrics.error_codes or []
    if codes:
        parts.append("scoring: " + ", ".join(codes))
    text = " | ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _unevaluated_changes(config: GateConfig, frame: pd.DataFrame, rows: Sequence[Row]
                         ) -> dict[str, list[tuple[str, bool]]]:
    """Per gated variant, what the description lock says changed, as ``(text, fails)``:
    the changed tools the run re-evaluated (a note), those no case of the run expects (a
    failure with ``require_reevaluation``, else a note), or a toolset without a lock (a
    failure with ``require_reevaluation``; nothing otherwise)."""
    from bench.descriptions.lock import changed_tools, lock_changes

    found: dict[str, list[tuple[str, bool]]] = {}
    strict = config.require_reevaluation
    toolsets = sorted({r.toolset for r in rows if r.toolset})
    root = config.root / "descriptions"
    for toolset in toolsets:
        wanted = [v for v in config.variants if (root / toolset).is_dir()]
        if not wanted:
            continue
        try:
            changes, path = lock_changes(toolset, wanted, root)
        except BenchError as exc:
            if strict:
                raise
            for variant in wanted:
                found.setdefault(variant, []).append((f"description lock not read: {exc}",
                                                      False))
            continue
        if changes is None:
            if strict:
                for variant in wanted:
                    found.setdefault(variant, []).append(
                        (f"toolset {toolset} has no description lock ({path}); write it "
                         "with: bench check --update (or bench baseline update)", True))
            continue
        for variant, tools in changed_tools(changes).items():
            part = frame[(frame["variant"] == variant) & (frame["toolset"] == toolset)] \
                if not frame.empty else frame
            covered = {name for names in part.get("expected_tools", []) for name in names}
            missed = sorted(tools - covered)
            done = sorted(tools & covered)
            if done:
                found.setdefault(variant, []).append(
                    (f"changed since the description lock and re-evaluated here: "
                     f"{', '.join(done)} (accept with: bench baseline update)", False))
            if missed:
                found.setdefault(variant, []).append(
                    (f"changed since the description lock but expected by no case of this "
                     f"gate: {', '.join(missed)}: add cases for "
                     f"{'it' if len(missed) == 1 else 'them'}"
                     + (" (require_reevaluation)" if strict else ""), strict))
    return found


def evaluate(config: GateConfig, rows: Sequence[Row | Mapping[str, Any]],
             baseline: dict[str, Any] | None,
             call_errors: dict[tuple[str, int], list[str]] | None = None,
             split: str | None = None, fail_without_reference: bool = False) -> list[Verdict]:
    """Decide every (variant, provider, metric) of the gate (rule in the module docstring).

    Args:
        config: the gate settings.
        rows: the current result rows.
        baseline: a document of :func:`load_baseline`, or None (floors only).
        call_errors: executor errors per (case, trial) quoted with flipped cases
            (:attr:`GateRun.call_errors`).
        split: the split the rows ran (:func:`bench.datasets.splits.run_split`); None: not
            checked.
        fail_without_reference: a metric with neither a floor nor baseline cases to pair
            with fails (it could not fail on any drop): no baseline file, a baseline that
            does not hold the metric, or none of the variant and provider; the pytest gate
            sets it, so that a CI gate whose baseline was never written (or not committed,
            or not updated after a metric was added) does not pass in silence.

    Returns:
        One :class:`Verdict` per (variant, provider, metric) in config order.

    Raises:
        BenchError: the baseline was recorded on another split than ``split``.
    """
    if baseline and split is not None:
        stored = (baseline.get("dataset") or {}).get("split") or "all"
        refuse_mixed_splits({"the baseline": str(stored), "this gate run": split},
                            "gate against each other")
    rows = as_rows(rows)
    frame = results_frame(rows)
    by_key = {r.key: r for r in rows}
    comparison = compare_with_baseline(config, frame, baseline) if baseline else None
    tests = {(t.group, t.metric): t for t in comparison.tests} if comparison else {}
    baseline_sha = {v.get("name"): v.get("sha256") for v in (baseline or {}).get("variants") or []}
    current_sha = {r.variant: r.request.variant_sha256 if r.request is not None else None
                   for r in rows}
    stale = _unevaluated_changes(config, frame, rows)
    tests_count = len(comparison.tests) if comparison else \
        len(config.variants) * len(config.providers) * len(config.gated_metrics)
    ran = {r.case_id for r in rows}
    unknown_allowed = sorted(set(config.allow_flips) - ran)
    verdicts = []
    for variant in config.variants:
        for provider in config.providers:
            part = frame[(frame["variant"] == variant) & (frame["provider"] == provider)] \
                if not frame.empty else frame
            per_case, per_case_why = per_case_rule(config, provider, baseline is not None)
            for metric in config.gated_metrics:
                values = part[metric].dropna() if metric in part else pd.Series(dtype=bool)
                n, successes = int(len(values)), int(values.sum())
                low, high = wilson_interval(successes, n)
                verdict = Verdict(variant=variant, provider=provider, metric=metric, n=n,
                                  successes=successes, rate=successes / n if n else float("nan"),
                                  low=low, high=high, floor=config.floors.get(metric),
                                  per_case=per_case, per_case_why=per_case_why,
                                  flips_shown=config.flips_shown, tests=max(tests_count, 1))
                if n == 0:
                    episodes = not part.empty and (part["expected_kind"] == "episode").all()
                    verdict.reasons.append(
                        f"no row carries {metric} (" + (
                            "the cases are episodes: gate their task_success)" if episodes
                            else "execute = false: execution metrics are not computed)"
                            if config.execute is False and metric not in ANSWER_ONLY_METRICS
                            else "is the metric produced for these cases?)"))
                elif verdict.floor is not None and verdict.rate < verdict.floor:
                    verdict.reasons.append(f"{100 * verdict.rate:.1f}% is below the floor "
                                           f"{100 * verdict.floor:.1f}%")
                test = tests.get((_group(variant, provider), metric))
                if fail_without_reference and verdict.floor is None and test is None and \
                        (n or baseline is None):
                    verdict.reasons.append(_no_reference(config, baseline, metric, variant,
                                                         provider))
                if test is not None:
                    verdict.baseline_rate, verdict.baseline_n = test.rate_a, test.n
                    verdict.diff, verdict.diff_low, verdict.diff_high = \
                        test.diff, test.diff_low, test.diff_high
                    verdict.p_value, verdict.p_holm = test.p_value, test.p_holm
                    verdict.lost, verdict.gained = test.a_only, test.b_only
                    if test.verdict == "regression":
                        verdict.reasons.append(
                            f"significantly worse than the baseline ({100 * test.diff:+.1f} "
                            f"points, Holm p={test.p_holm:.4g} < alpha {config.alpha}) by more "
                            f"than the margin of {100 * config.margin:.1f} points")
                    elif test.verdict == "improvement":
                        verdict.notes.append("significantly better than the baseline: update "
                                             "it with `bench baseline update`")
                elif baseline is not None and n:
                    verdict.notes.append("the baseline has no paired cases for this variant "
                                         "and provider (update it with `bench baseline update`)")
                was_sha, now_sha = baseline_sha.get(variant), current_sha.get(variant)
                if was_sha and now_sha and was_sha != now_sha:
                    verdict.notes.append(f"the description of {variant} changed since the "
                                         f"baseline (sha256 {was_sha[:12]} -> "
                                         f"{now_sha[:12]})")
                for text, fails in stale.get(variant, []):
                    (verdict.reasons if fails else verdict.notes).append(text)
                if comparison is not None:
                    lost = [f for f in comparison.flips if f.direction == "lost"
                            and f.metric == metric and f.group == _group(variant, provider)]
                    for flip in lost:
                        row = by_key.get(f"{flip.case_id}|{variant}|{provider}|{flip.trial}")
                        if row is None:
                            continue
                        verdict.flips.append(FlippedCase(
                            case_id=flip.case_id, trial=flip.trial,
                            query=str(row.query or ""), answer=_short_answer(row),
                            errors=_short_errors(row, (call_errors or {}).get(
                                (flip.case_id, flip.trial), [])),
                            metric=metric, expected=_short_expected(row.expected),
                            allowed=flip.case_id in config.allow_flips))
                _apply_per_case_rule(verdict, unknown_allowed)
                if test is not None:
                    _set_power(verdict, config, test.a_only + test.b_only)
                verdicts.append(verdict)
    return verdicts


def _no_reference(config: GateConfig, baseline: dict[str, Any] | None, metric: str,
                  variant: str, provider: str) -> str:
    """Why a gated ``metric`` of (``variant``, ``provider``) without a floor has nothing to
    compare with, and how to write it: no baseline file, a baseline that does not hold the
    metric (written before the metric was gated), or one without paired cases of that
    variant and provider (docs/gate.md: such a metric fails, since no drop could fail it)."""
    if baseline is None:
        why = f"no baseline ({config.baseline_path} does not exist)"
    elif metric not in (baseline.get("metrics") or ()):
        why = (f"the baseline {config.baseline_path} does not hold {metric} (written before "
               "it was gated)")
    else:
        why = (f"the baseline {config.baseline_path} has no case of {variant} with "
               f"{provider} paired with this run's")
    return (f"{why} and no floor: nothing to compare with, so no drop could fail this "
            "metric; write both with: bench baseline update (then commit the baseline)")


def per_case_rule(config: GateConfig, provider: str, has_baseline: bool) -> tuple[bool, str]:
    """Whether the per-case rule applies to ``provider``'s answers, and why in words.

    On when ``fail_on_flips`` is set, a baseline exists and the provider's kind is registered
    ``deterministic`` (:class:`bench.providers.registry.ProviderSpec`)."""
    from bench.providers.registry import kind_of, provider_spec

    spec = provider_spec(provider)
    deterministic = spec is not None and spec.deterministic
    kind = kind_of(provider)
    if not deterministic:
        return False, (f"{kind} answers are sampled: the same request can get another answer, "
                       "so one flipped case may be noise; the paired test decides")
    if not config.fail_on_flips:
        return False, "fail_on_flips = false"
    if not has_baseline:
        return False, "no baseline to compare cases with"
    return True, (f"{kind} answers are deterministic: any case right in the baseline and "
                  "wrong now fails")


def _apply_per_case_rule(verdict: Verdict, unknown_allowed: Sequence[str]) -> None:
    """Add the per-case rule's failure (flips outside ``allow_flips``) and notes."""
    allowed = sorted({f.case_id for f in verdict.flips if f.allowed})
    flipped = [f for f in verdict.flips if not f.allowed]
    if verdict.per_case and flipped:
        verdict.reasons.append(
            f"{count(len(flipped), 'case')} right in the baseline "
            f"{'is' if len(flipped) == 1 else 'are'} wrong now with deterministic answers "
            "(per-case rule; let a case flip with allow_flips = [\"<case id>\"], or turn the "
            "rule off with fail_on_flips = false)")
    if verdict.per_case and allowed:
        verdict.notes.append(f"flipped but in allow_flips: {', '.join(allowed)}")
    if verdict.per_case and unknown_allowed:
        verdict.notes.append(f"allow_flips names cases this gate did not run: "
                             f"{', '.join(unknown_allowed)}")


def _set_power(verdict: Verdict, config: GateConfig, discordant: int) -> None:
    """Fill the verdict's power fields and warning (see the module docstring).

    ``discordant``: pairs that differ between the baseline and now (the share ψ of
    :func:`bench.compare.core.minimum_detectable_difference`)."""
    n = verdict.baseline_n or 0
    if n <= 0:
        return
    alpha = config.alpha / verdict.tests
    share = discordant / n
    verdict.mdd_alpha = alpha
    verdict.mdd = minimum_detectable_difference(n, share, alpha, POWER)
    floor, base = verdict.floor, verdict.baseline_rate
    distance = None if floor is None or base is None else base - floor
    if floor is not None and distance is not None and distance > config.margin:
        verdict.target = distance
        verdict.target_text = (f"more than the {100 * distance:.1f} points from the baseline "
                               f"down to the floor {100 * floor:.1f}%")
        missed = "a smaller drop, one the floor does not catch, can pass unnoticed"
    else:
        verdict.target = config.margin
        verdict.target_text = (f"more than the margin of {100 * config.margin:.1f} points"
                               if config.margin else
                               "while this gate is meant to catch any drop (margin 0)")
        missed = "a smaller real regression can pass unnoticed"
    if verdict.per_case or not (math.isnan(verdict.mdd) or verdict.mdd > verdict.target):
        return
    if verdict.target > 0:
        verdict.pairs_needed = pairs_needed(verdict.target, share, alpha)
    smallest = ("no drop at all, not even 100 points," if math.isnan(verdict.mdd)
                else f"only drops of {100 * verdict.mdd:.0f} points or more")
    need = "" if verdict.pairs_needed is None else (
        f"; detecting {100 * verdict.target:.1f} points takes about "
        + (f"{verdict.pairs_needed:,} pairs" if verdict.pairs_needed <= PAIRS_CAP
           else f"more than {PAIRS_CAP:,} pairs"))
    verdict.warning = (f"at {count(n, 'pair')} the paired test detects {smallest} with "
                       f"{POWER:.0%} power, {verdict.target_text}: {missed}{need}")


def pairs_needed(drop: float, discordant_share: float, alpha: float,
                 power: float = POWER) -> int:
    """The number of pairs at which McNemar's exact test detects a drop of ``drop``
    (fraction > 0) with ``power`` at two-sided ``alpha``, the discordant share being
    ``max(discordant_share, drop)`` (:func:`bench.compare.core.mcnemar_power`); searched by
    doubling then bisection, so "about" (an exact test's power is not monotone in n);
    ``PAIRS_CAP + 1`` when even :data:`PAIRS_CAP` pairs fall short."""
    share = max(discordant_share, drop)

    def enough(n: int) -> bool:
        return mcnemar_power(n, share, -drop, alpha) >= power

    high = 8
    while not enough(high):
        if high >= PAIRS_CAP:
            return PAIRS_CAP + 1
        high = min(high * 2, PAIRS_CAP)
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high
