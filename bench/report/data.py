"""The runs a report shows, gathered from stored runs (no rendering here).

Rows are read through :class:`bench.store.RunStore`. The report's own rules about runs and
rows live here: a row's outcome (pass / fail / unparseable), how several runs are labelled,
what the metadata section lists of each run, and why a run is incomplete. The tables of
rates are :mod:`bench.report.rates`, the drill-down data :mod:`bench.report.drilldown`, the
caps on model-controlled text :mod:`bench.report.caps`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Sequence

import pandas as pd

from bench.errors import BenchError
from bench.plural import noun
from bench.project import Project, current_project
from bench.results import Manifest, Row
from bench.store import RowsRead, StoredRows
from bench.stats.frame import compact_frame

#: A row's outcome in the report (:func:`row_outcome`).
OUTCOMES = ("pass", "fail", "unparseable")


@dataclass
class RunStats:
    """What :func:`load_runs` gathers in its one pass over a run's rows, so that the report
    does not read them again for it: ``variants`` (as stored, in first-seen order),
    ``pairs`` ({(variant, provider)}), ``tokens`` (sums per usage field, tokens),
    ``cost_usd`` (sum of the rows' costs, USD; None when no row has one) and
    ``episode_keys`` (keys of episode rows, as stored)."""

    variants: list[str] = field(default_factory=list)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    episode_keys: set[str] = field(default_factory=set)

    def add(self, row: Row) -> None:
        """Count ``row`` in."""
        if row.variant not in self.pairs_variants:
            self.pairs_variants.add(row.variant)
            self.variants.append(row.variant)
        self.pairs.add((row.variant, row.provider))
        if row.usage is not None:
            for name in ("prompt_tokens", "completion_tokens", "cached_tokens",
                         "reasoning_tokens"):
                value = getattr(row.usage, name, None)
                self.tokens[name] = self.tokens.get(name, 0) + (int(value) if value else 0)
        cost = _optional_float(row.cost_usd)
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        if row.episode is not None:
            self.episode_keys.add(row.key)

    def __post_init__(self) -> None:
        self.pairs_variants: set[str] = set(self.variants)


@dataclass
class LoadedRun:
    """One stored run: its manifest (its ``status`` the one to show), its rows with unique
    variant labels (``rows``) and as stored (``source_rows``; the same unless
    :func:`load_runs` relabelled), both :class:`StoredRows` read on each pass, and ``stats``
    from the first pass."""

    run_id: str
    manifest: Manifest
    rows: StoredRows
    source_rows: StoredRows
    stats: RunStats
    prefix: str | None = None

    def label(self, variant: str) -> str:
        """A stored variant's label in this report (``<run-id>/<variant>`` when relabelled)."""
        return variant if self.prefix is None else f"{self.prefix}/{variant}"


def load_runs(run_ids: Sequence[str], project: Project | None = None) -> list[LoadedRun]:
    """Read the named runs from the project's ``reports/runs`` (``project`` default
    :func:`bench.project.current_project`): one pass over each run's rows
    (:class:`RunStats`, warnings about rows left out printed to stderr); the report's later
    passes read the file again (:class:`StoredRows`).

    When several runs share a (variant, provider) pair, each row's variant is relabelled
    ``<run-id>/<variant>`` so the runs stay apart in every table and chart. A manifest's
    ``status`` is the one to show (:meth:`bench.store.RunStore.shown_status`: ``crashed``
    for a run that says ``running`` while no process writes it); the file is not changed.

    Raises:
        BenchError: no run id, a run that does not exist, a corrupt manifest or row, or a run
            without finished rows.
    """
    if not run_ids:
        raise BenchError("name at least one run id (see reports/runs/)")
    project = project or current_project()
    runs = []
    for run_id in dict.fromkeys(run_ids):
        store = project.store(run_id)
        manifest = store.load_manifest()
        read = RowsRead(store.results_path)
        stats = RunStats()
        for row in store.iter_read(manifest, into=read):
            stats.add(row)
        for line in read.report(writing=store.is_being_written()):
            print(line, file=sys.stderr, flush=True)
        manifest.status = store.shown_status(manifest)  # "crashed" is shown, not stored
        if not read.counted:
            raise BenchError(f"run '{run_id}' has no finished rows", file=store.results_path)
        rows = StoredRows(store, manifest, read.end, read.counted, variants=stats.variants)
        runs.append(LoadedRun(run_id, manifest, rows, rows, stats))
    pairs = [run.stats.pairs for run in runs]
    clash = len(runs) > 1 and sum(len(p) for p in pairs) > len(set().union(*pairs))
    if clash:
        for run in runs:
            run.prefix = run.run_id
            run.rows = run.source_rows.relabelled(run.run_id)
            for variant in run.manifest.variants:
                variant.label = f"{run.run_id}/{variant.name}"
    return runs


def row_outcome(row: Row) -> str:
    """``unparseable`` (the answer could not be decoded), ``pass`` (tool selection right and
    no wrong argument: ``arguments_correct`` True or not applicable) or ``fail``. An episode
    row (``row.episode`` set) passes when its task succeeded (``task_success``) and is
    ``unparseable`` when the episode stopped on an answer that could not be decoded."""
    if row.episode is not None:
        if row.metrics.task_success:
            return "pass"
        return "unparseable" if row.episode.stop_reason == "unparseable" else "fail"
    if row.unparseable:
        return "unparseable"
    metrics = row.metrics
    if metrics.selection_correct and metrics.arguments_correct is not False:
        return "pass"
    return "fail"


def execution_codes(row: Row, outcome: str | None = None) -> list[str]:
    """The codes a row shows for calls that failed to execute although its answer passes
    (``outcome`` ``pass``: right tool, right arguments): ``execution_failed:<class>`` per
    error class of the executor (``validation``, ``permanent``, ``timeout``...: the row's
    ``metrics.execution_errors``), or ``execution_failed`` when the row names none. Empty
    for any other row, and where execution did not fail or did not run: a "pass" never
    hides a failed execution."""
    outcome = row_outcome(row) if outcome is None else outcome
    if outcome != "pass" or row.metrics.execution_success is not False:
        return []
    classes = row.metrics.execution_errors or {}
    return [f"execution_failed:{name}" for name in sorted(classes)] or ["execution_failed"]


def variant_order(runs: Sequence[LoadedRun]) -> list[str]:
    """Variant labels in the order the runs' configs list them."""
    order: list[str] = []
    for run in runs:
        for variant in run.manifest.variants:
            if variant.shown is not None and variant.shown not in order:  # None: no name
                order.append(variant.shown)
    for run in runs:  # rows of variants the manifest does not list
        for stored in run.stats.variants:
            if run.label(stored) not in order:
                order.append(run.label(stored))
    return order


def draft_variants(runs: Sequence[LoadedRun]) -> set[str]:
    """Variant labels whose descriptions hold unreviewed drafts (the manifest's
    ``draft_tools``, :mod:`bench.drafting`), for the marks of tables and report."""
    return {variant.shown for run in runs for variant in run.manifest.variants
            if variant.draft_tools and variant.shown is not None}


def renamed_tools(runs: Sequence[LoadedRun]) -> dict[str, str]:
    """Old tool name -> new name over the runs' toolsets (the manifest's ``aliases``)."""
    found: dict[str, str] = {}
    for run in runs:
        for variant in run.manifest.variants:
            found.update(variant.aliases or {})
    return found


def variant_lines(runs: Sequence[LoadedRun]) -> dict[str, float]:
    """Mean description lines per tool of each variant label (mean over its toolsets)."""
    found: dict[str, list[float]] = {}
    for run in runs:
        for variant in run.manifest.variants:
            if variant.mean_lines_per_tool is not None and variant.shown is not None:
                found.setdefault(variant.shown, []).append(variant.mean_lines_per_tool)
    return {label: sum(v) / len(v) for label, v in found.items()}


def all_rows(runs: Sequence[LoadedRun]) -> Iterator[Row]:
    """Every row of every run, in run order (variants relabelled as :func:`load_runs` says),
    read as they are iterated (:class:`StoredRows`)."""
    for run in runs:
        yield from run.rows


def frame_of(runs: Sequence[LoadedRun]) -> pd.DataFrame:
    """The results frame of all rows (:func:`bench.stats.frame.results_frame`, built in
    chunks with repeated values stored once: :func:`bench.stats.frame.compact_frame`)."""
    return compact_frame(all_rows(runs))


def _optional_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def run_metadata(run: LoadedRun) -> dict[str, Any]:
    """What the report's metadata section lists for one run: identity, models, versions, git
    commit, dates, row counts, token totals (tokens), cost (USD, when rows carry
    ``cost_usd``), cache counts (the manifest's ``cache`` object), what the run was billed
    (its ``spent`` object) and providers it skipped, where the manifest records them."""
    manifest = run.manifest
    tokens = dict(run.stats.tokens)
    if not tokens.get("reasoning_tokens"):  # shown only when some row has them
        tokens.pop("reasoning_tokens", None)
    dataset = manifest.dataset
    cases = "?" if dataset.cases is None else dataset.cases
    return {
        "run_id": run.run_id,
        "status": manifest.status,
        "dataset": f"{dataset.name or '?'} ({cases} "
                   f"{noun(dataset.cases or 0, 'case')}, sha256 "
                   f"{(dataset.sha256 or '')[:12]})",
        "command": " ".join(str(p) for p in manifest.command or []),
        "providers": list(manifest.providers or []),
        # every field, None where the manifest lacks it (a hand-edited manifest may)
        "variants": [v.model_dump() for v in manifest.variants],
        "versions": manifest.versions or {},
        "git_commit": manifest.git_commit,
        "started_at": manifest.started_at,
        "ended_at": manifest.ended_at,
        "rows": f"{len(run.rows)} of {manifest.rows_planned} planned",
        "tokens": tokens,
        "cost_usd": run.stats.cost_usd,
        "cache": (manifest.cache.model_dump(exclude_unset=True)
                  if manifest.cache is not None else None),
        "spent": manifest.spent.model_dump(exclude_unset=True) if manifest.spent else None,
        "skipped": [p.model_dump(exclude_unset=True) for p in manifest.providers_skipped or []],
    }


# Why a run's rows fall short of its plan, per manifest status (bench.runner, and "crashed"
# from bench.store.RunStore.shown_status); any other status but "complete" is shown as is.
INCOMPLETE_REASONS = {
    "interrupted": "stopped by Ctrl-C or SIGTERM",
    "failed": "stopped by an error",
    "crashed": "its process died before it finished",
    "budget_exhausted": "stopped at its --max-usd / --max-total-tokens budget",
    "partial": "a provider was skipped",
    "running": "still running: this report shows the rows written so far",
    "incomplete": "its manifest says complete, but rows are missing from its results.jsonl",
}


def merge_gaps(manifest: Manifest) -> str:
    """What a merged run (``bench merge --allow-partial``) lacks, in a few words: its missing
    shards and its unfinished ones with their status; ``""`` when it lacks neither."""
    missing = [str(s) for s in manifest.shards_missing or []]
    parts = [f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing from the "
             "merge"] if missing else []
    parts += [f"shard {m.shard} (run {m.run_id}) {m.status}"
              for m in manifest.merged_from or [] if m.status != "complete"]
    return "; ".join(parts)


def incomplete_runs(runs: Sequence[LoadedRun]) -> list[dict[str, Any]]:
    """The runs whose status is not ``complete``, or whose ``results.jsonl`` holds fewer
    rows than planned (status ``incomplete``), for the warning a report puts at its top.

    Returns:
        One ``{"run_id", "status", "reason", "done", "planned", "text"}`` per such run, in run
        order: ``done`` the distinct rows written (int), ``planned`` the manifest's
        ``rows_planned`` (int, or ``"?"``), ``reason`` a few words from
        :data:`INCOMPLETE_REASONS` (with the skipped providers or the error where the manifest
        has them) and ``text`` what the status means for the figures and how to finish the
        run (shown after "Incomplete run: <done> of <planned> planned rows.").
    """
    found = []
    for run in runs:
        status = run.manifest.status
        done = len(run.source_rows)  # counted once per key
        planned = run.manifest.rows_planned
        if status == "complete":
            if done >= planned:
                continue
            status = "incomplete"  # rows lost from results.jsonl since the run ended
        reason = INCOMPLETE_REASONS.get(status, f"status {status}")
        skipped = [str(p.provider) for p in run.manifest.providers_skipped or []]
        if status == "partial" and skipped:
            reason = f"skipped provider{'s' if len(skipped) > 1 else ''} {', '.join(skipped)}"
        if status == "partial" and run.manifest.merged_from:  # merge --allow-partial
            reason = merge_gaps(run.manifest) or reason
        error = run.manifest.error
        if status == "failed" and error:
            reason += f" ({' '.join(str(error).split())[:300]})"
        text = (f"Run {run.run_id} is {status} ({reason}); every figure covers only the "
                f"rows written."
                + ("" if status == "running" else
                   f" Finish it with: bench run --resume {run.run_id}"))
        found.append({"run_id": run.run_id, "status": status, "reason": reason, "done": done,
                      "planned": planned, "text": text})
    return found


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def iter_failures(runs: Sequence[LoadedRun]) -> Iterable[Row]:
    """Rows whose outcome is not ``pass``."""
    return (row for row in all_rows(runs) if row_outcome(row) != "pass")
