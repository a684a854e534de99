"""The report's tables of rates, gathered from loaded runs (no rendering here): the headline
per (provider, variant), the split it covers, the per-bucket, per-tool and per-tag rates,
and costs. Rates and intervals come from ``bench.stats``; the metrics shown are the
registry's ``report`` view, the per-tool and per-tag tables its ``groups`` view
(:mod:`bench.scoring.registry`); a metric shows when at least one row carries it.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from bench.errors import BenchError
from bench.models import condition_variant
from bench.plural import count
from bench.project import current_project
from bench.report.data import (LoadedRun, _optional_float, frame_of, variant_lines,
                               variant_order)
from bench.results import Row
from bench.scoring.registry import get_metric, metric_names
from bench.stats.aggregate import aggregate
from bench.stats.summary import summarize


def _in_variant_order(table: pd.DataFrame, order: Sequence[str],
                      leading: Sequence[str] = ()) -> pd.DataFrame:
    rank = {name: i for i, name in enumerate(order)}
    keys = [*leading, "provider", "variant"]
    return table.sort_values(
        keys, key=lambda s: s.map(rank).fillna(len(rank)) if s.name == "variant" else s,
        kind="stable").reset_index(drop=True)


def headline(runs: Sequence[LoadedRun], frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (provider, variant): rates of the registry's ``report`` view from
    :func:`bench.stats.aggregate.aggregate` (``<metric>_k/_n/_rate/_low/_high``, fractions;
    ``_boot_low/_boot_high`` with trials > 1), tokens, latency and throughput from
    :func:`bench.stats.summary.summarize`, and ``mean_lines`` (description lines per tool,
    from the manifests); with several runs also ``series`` (``"<run-id> · <provider>"``, what
    the charts draw one line for)."""
    frame = frame_of(runs) if frame is None else frame
    rates = aggregate(frame, ("provider", "variant"),
                      metrics=metric_names(kind="rate", view="report"))
    usage = summarize(frame)
    usage = usage[["provider", "variant", "tool_definition_tokens", "mean_prompt_tokens",
                   "mean_cached_tokens", "p50_latency_s", "cases_per_s",
                   *(["mean_reasoning_tokens"] if "mean_reasoning_tokens" in usage else [])]]
    table = rates.merge(usage, on=["provider", "variant"], how="left")
    lines = variant_lines(runs)  # an episode condition uses its variant's descriptions
    table["mean_lines"] = table["variant"].map(
        lambda name: lines.get(condition_variant(name))).astype(float)
    if len(runs) > 1:  # one chart line per run and provider
        run_of = {(p, run.label(v)): run.run_id for run in runs for v, p in run.stats.pairs}
        table["series"] = [f"{run_of.get((p, v), '?')} · {p}" for p, v in
                           zip(table["provider"], table["variant"])]
    costs = _costs_of(frame)
    if costs:
        table["cost_usd"] = [costs.get((p, v)) for p, v in zip(table["provider"],
                                                                table["variant"])]
    return _in_variant_order(table, variant_order(runs))


def split_statement(runs: Sequence[LoadedRun]) -> str:
    """Which cases the figures cover, one sentence for a report's headline: each run's
    dataset, split and cases, e.g. ``"Cases: run r1: ecommerce, test split (154 cases)."``.
    ``test`` is the held-out split (descriptions and examples may draw on ``dev`` only,
    :mod:`bench.datasets.splits`); a run stored before splits ran every case (``all``).
    Runs not on ``test`` get a note on what is held out: for a dataset without splits
    (the manifest's ``dataset.splits`` false), none of its cases; for one with splits, the
    test split only; for a run that did not record it, words true of both."""
    from bench.datasets.splits import run_split

    parts = []
    unsplit: list[str] = []  # datasets without a dev/test split
    split_known, unknown = False, False  # runs off test, on a dataset with / maybe with splits
    for run in runs:
        dataset = run.manifest.dataset
        cases = "" if dataset.cases is None else f" ({count(dataset.cases, 'case')})"
        split = run_split(run.manifest.config)
        parts.append(f"run {run.run_id}: {dataset.name or '?'}, {split} split{cases}")
        if split == "test":
            continue
        if dataset.splits is False:
            if (dataset.name or "?") not in unsplit:
                unsplit.append(dataset.name or "?")
        elif dataset.splits:
            split_known = True
        else:
            unknown = True
    note = ""
    if split_known:
        note += " Only the test split is held out: dev cases may have informed the descriptions."
    elif unknown:
        note += (" Only cases of a test split are held out, and these figures include others:"
                 " they may have informed the descriptions.")
    if unsplit:
        named = ", ".join(unsplit)
        one = len(unsplit) == 1
        note += (f" No case of {named} is held out: {'it has' if one else 'they have'} no "
                 "dev/test split, so any case may have informed the descriptions (bench split "
                 f"{unsplit[0]} assigns one).")
    return "Cases: " + "; ".join(parts) + "." + note


def bucket_rates(runs: Sequence[LoadedRun], frame: pd.DataFrame | None = None
                 ) -> pd.DataFrame:
    """:func:`bench.stats.buckets.bucket_table` of the runs' rows, variants in run order:
    per provider, variant and information bucket, selection and argument rates with 95%
    Wilson intervals. Empty when no row carries a bucket (runs before buckets)."""
    from bench.stats.buckets import bucket_table

    frame = frame_of(runs) if frame is None else frame
    return bucket_table(frame, variant_order(runs))


def bucket_section(runs: Sequence[LoadedRun], frame: pd.DataFrame | None = None
                   ) -> tuple[pd.DataFrame, list[str]]:
    """The report's per-bucket table with the agreement it rests on.

    Returns:
        ``(table, lines)``: :func:`bucket_rates` of the runs whose dataset's information
        buckets two labelling passes agree on well enough (Cohen's kappa above
        :data:`bench.datasets.agreement.KAPPA_MIN`, read from its datasheet:
        :func:`bench.datasets.agreement.dataset_agreement`), and one line per dataset whose
        rows carry a bucket: its kappa, or why its buckets are not shown (kappa too low,
        none recorded, or a malformed agreement block). Both empty when no row carries a
        bucket.
    """
    from bench.datasets.agreement import dataset_agreement

    frame = frame_of(runs) if frame is None else frame
    table = bucket_rates(runs, frame)
    if table.empty:
        return table, []
    tagged = {(str(p), str(v)) for p, v in table[["provider", "variant"]].itertuples(
        index=False)}
    root = current_project().root
    verdicts: dict[tuple[str | None, str | None], bool] = {}
    lines: list[str] = []
    kept: set[tuple[str, str]] = set()
    for run in runs:
        pairs = {(p, run.label(v)) for v, p in run.stats.pairs} & tagged
        if not pairs:
            continue
        dataset = run.manifest.dataset
        key = (dataset.name, dataset.path)
        if key not in verdicts:
            try:
                agreement = dataset_agreement(dataset.name, dataset.path, root)
                verdicts[key], line = agreement.shown, agreement.line()
            except BenchError as exc:
                verdicts[key] = False
                line = (f"information buckets of '{dataset.name or dataset.path}' not shown: "
                        f"{exc}")
            lines.append(line)
        if verdicts[key]:
            kept |= pairs
    keep = [(str(p), str(v)) in kept for p, v in
            table[["provider", "variant"]].itertuples(index=False)]
    return table[keep].reset_index(drop=True), lines


def _costs_of(frame: pd.DataFrame) -> dict[tuple[str, str], float]:
    """:func:`cost_by_group` from a results frame (one row per key already)."""
    if "cost_usd" not in frame or not frame["cost_usd"].notna().any():
        return {}
    sums = frame.groupby(["provider", "variant"], sort=False)["cost_usd"].sum(min_count=1)
    return {(str(p), str(v)): float(c) for (p, v), c in sums.items() if c == c}


def cost_by_group(rows: Iterable[Row]) -> dict[tuple[str, str], float]:
    """Total ``cost_usd`` (USD) of the rows per (provider, variant); {} when no row has a
    cost (providers without a price, or runs from before costs were recorded)."""
    totals: dict[tuple[str, str], float] = {}
    seen: set[str] = set()
    for row in rows:
        cost = _optional_float(row.cost_usd)
        if cost is None or row.key in seen:
            continue
        seen.add(row.key)
        pair = (row.provider, row.variant)
        totals[pair] = totals.get(pair, 0.0) + cost
    return totals


def shown_metrics(table: pd.DataFrame, metrics: Sequence[str] | None = None
                  ) -> list[tuple[str, str]]:
    """(metric, title) of each of ``metrics`` (default: the registry's ``report`` view) that
    applies to at least one row of ``table``."""
    if metrics is None:
        metrics = metric_names(kind="rate", view="report")
    return [(m, get_metric(m).title) for m in metrics
            if f"{m}_n" in table and table[f"{m}_n"].fillna(0).sum() > 0]


def group_metrics() -> list[str]:
    """The rates of the per-tool and per-tag tables: the registry's ``groups`` view."""
    return metric_names(kind="rate", view="groups")


def group_rates(runs: Sequence[LoadedRun], by: str,
                frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rates per ``by`` group (``"tool"``: each tool the case expects, ``(no call)`` for
    no-call and ask cases; ``"tag"``: each tag), provider and variant, from
    :func:`bench.stats.aggregate.aggregate`."""
    frame = frame_of(runs) if frame is None else frame
    table = aggregate(frame, (by, "provider", "variant"), metrics=group_metrics())
    return _in_variant_order(table.rename(columns={by: "group"}), variant_order(runs),
                             leading=["group"])
