"""The gate's baseline: write it from a gate run, read it back, derive floors from it, and pair
it with a current run.

The baseline (``bench baseline update``) is a small JSON file: per (variant, provider) and per
case x trial, one bit per metric, plus per-metric summaries and the dataset and variant SHA-256
hashes; it is meant to be committed next to the descriptions.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from bench.compare.core import Comparison, compare_frames
from bench.datasets.splits import run_split
from bench.errors import BenchError, json_document, read_text_file
from bench.gate.config import GateConfig
from bench.gate.run import GateRun
from bench.store.files import atomic_write_json
from bench.stats.intervals import wilson_interval

BASELINE_FORMAT = "bench-gate-baseline/1"
GROUP_BY = ("variant", "provider")


def group_name(variant: str, provider: str) -> str:
    """A (variant, provider) group's name in the baseline and its comparison:
    ``<variant>/<provider>``."""
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
        group = group_name(variant, provider)
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
