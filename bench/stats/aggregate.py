"""Aggregates of the results frame (:mod:`bench.stats.frame`): rates by any grouping, pass@k
and pass^k, top argument errors and the selection confusion matrix."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from bench.stats.frame import NO_CALL, UNPARSEABLE, binary_metrics, metric_columns
from bench.stats.intervals import pass_at_k, pass_hat_k, wilson_arrays

# Grouping names users pass (``--by tool,tag``) -> frame column; tool and tag explode rows.
GROUPINGS = {"variant": "variant", "provider": "provider", "tool": "tool", "tag": "tag",
             "language": "lang", "lang": "lang", "toolset": "toolset", "run": "run_id"}


def _expand(frame: pd.DataFrame, by: Sequence[str], keep: Sequence[str] | None = None
            ) -> tuple[pd.DataFrame, list[str]]:
    """(the frame with its group columns, their names); rows repeat once per tool or tag.

    ``keep``: the only other columns the caller reads (None: all). Exploding copies every
    column kept, so callers name theirs.
    """
    if not by:  # one group holding every row
        return frame.assign(group="all"), ["group"]
    columns = []
    for name in by:
        if name not in GROUPINGS:
            raise ValueError(f"unknown grouping '{name}' (choose from {', '.join(GROUPINGS)})")
        columns.append(GROUPINGS[name])
    if keep is not None:
        sources = {"tool": "expected_tools", "tag": "tags"}
        wanted = [*keep, *(sources.get(c, c) for c in columns)]
        frame = frame[[c for c in dict.fromkeys(wanted) if c in frame.columns]]
    if "tool" in columns:
        # each distinct expected tool once per row (dict.fromkeys keeps the label's order)
        frame = frame.assign(tool=[tuple(dict.fromkeys(tools)) if tools else (NO_CALL,)
                                   for tools in frame["expected_tools"]])
        frame = frame.explode("tool")
    if "tag" in columns:
        frame = frame.assign(tag=[tags if tags else ("(untagged)",) for tags in frame["tags"]])
        frame = frame.explode("tag")
    return frame, columns


def aggregate(frame: pd.DataFrame, by: Sequence[str] = ("provider", "variant"),
              metrics: Iterable[str] | None = None, confidence: float = 0.95,
              n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Rates per group with Wilson intervals, and a case-clustered bootstrap with trials > 1.

    Args:
        frame: the results frame.
        by: grouping names of :data:`GROUPINGS` (``tool`` = each expected tool of the case, or
            ``(no call)``; ``tag`` = each tag; a row counts once in every group it belongs to).
        metrics: binary metrics to aggregate (those the frame lacks are skipped); None: every
            registered rate (:func:`bench.stats.frame.binary_metrics`).
        confidence: interval coverage.
        n_boot: bootstrap resamples (used only when some case has more than one trial).
        seed: bootstrap seed.

    Returns:
        One row per group: the group columns, ``rows`` (int), ``cases`` (int), then per metric
        ``<m>_k`` successes, ``<m>_n`` applicable rows, ``<m>_rate``, ``<m>_low``,
        ``<m>_high`` (Wilson, fractions) and, with trials > 1, ``<m>_boot_low``,
        ``<m>_boot_high`` (cluster bootstrap by case, fractions).

    Raises:
        ValueError: an unknown grouping name.
    """
    metrics = binary_metrics() if metrics is None else list(metrics)
    expanded, columns = _expand(frame, by, keep=["key", "case_id", *metrics])
    present = metric_columns(expanded, metrics)
    if expanded.empty:
        return pd.DataFrame(columns=[*columns, "rows", "cases"])
    grouped = expanded.groupby(columns, sort=True, dropna=False)
    out = grouped.agg(rows=("key", "size"), cases=("case_id", "nunique")).reset_index()
    # each row's group number (in the order of ``out``): the groups are found once, and
    # every metric's counts are then two bincounts
    group = grouped.ngroup().to_numpy()
    for metric in present:
        values = expanded[metric]
        known = values.notna().to_numpy()
        success = values.fillna(False).to_numpy(dtype=bool)
        k = np.bincount(group, weights=success, minlength=len(out)).astype(int)
        n = np.bincount(group, weights=known, minlength=len(out)).astype(int)
        low, high = wilson_arrays(k, n, confidence)
        out[f"{metric}_k"] = k
        out[f"{metric}_n"] = n
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"{metric}_rate"] = np.where(n > 0, k / np.maximum(n, 1), np.nan)
        out[f"{metric}_low"] = low
        out[f"{metric}_high"] = high
    if present and expanded.groupby([*columns, "case_id"]).size().max() > 1:
        _add_bootstrap(out, expanded, columns, present, confidence, n_boot, seed)
    return out


def _add_bootstrap(out: pd.DataFrame, expanded: pd.DataFrame, columns: list[str],
                   metrics: list[str], confidence: float, n_boot: int, seed: int) -> None:
    """Add ``<m>_boot_low/high`` columns: one case-clustered bootstrap per group, the same
    resampled cases for every metric (see :func:`bench.stats.intervals.cluster_bootstrap_interval`
    for the method).
    """
    values = expanded[metrics]
    successes = values.fillna(False).astype(int)
    applicable = values.notna().astype(int)
    keys = [expanded[c] for c in columns] + [expanded["case_id"]]
    k_case = successes.groupby(keys, sort=True, dropna=False).sum()
    n_case = applicable.groupby(keys, sort=True, dropna=False).sum()
    level = list(range(len(columns)))
    bounds: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in metrics}
    rng = np.random.default_rng(seed)
    tail = (1 - confidence) / 2 * 100
    for (_, k_group), (_, n_group) in zip(k_case.groupby(level=level, sort=True, dropna=False),
                                          n_case.groupby(level=level, sort=True, dropna=False)):
        k_arr, n_arr = k_group.to_numpy(float), n_group.to_numpy(float)
        cases = len(k_arr)
        draws = rng.integers(0, cases, size=(n_boot, cases))
        # how often each case was drawn, per resample: the sums become one matrix product
        # instead of an (n_boot x cases x metrics) gather
        weights = np.bincount((draws + np.arange(n_boot)[:, None] * cases).ravel(),
                              minlength=n_boot * cases).reshape(n_boot, cases).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            rates = (weights @ k_arr) / (weights @ n_arr)
        for index, metric in enumerate(metrics):
            column = rates[:, index]
            column = column[~np.isnan(column)]
            low, high = np.percentile(column, [tail, 100 - tail]) if len(column) else (
                np.nan, np.nan)
            bounds[metric][0].append(float(low))
            bounds[metric][1].append(float(high))
    for metric, (lows, highs) in bounds.items():
        out[f"{metric}_boot_low"] = lows
        out[f"{metric}_boot_high"] = highs


def pass_k_table(frame: pd.DataFrame, metric: str = "selection_correct",
                 ks: Sequence[int] = (1,), by: Sequence[str] = ("provider", "variant")
                 ) -> pd.DataFrame:
    """pass@k and pass^k of one binary metric per group, averaged over cases.

    Each case contributes its unbiased per-case estimate from its n applicable trials
    (:func:`~bench.stats.intervals.pass_at_k`, :func:`~bench.stats.intervals.pass_hat_k`);
    cases with fewer than k trials are left out of that k's mean.

    Returns:
        One row per group: the group columns, ``cases`` (int), ``min_trials`` (int), and per k
        ``pass@<k>`` and ``pass^<k>`` (fractions; NaN when no case has k trials).
    """
    expanded, columns = _expand(frame, by, keep=["case_id", metric])
    if metric not in expanded.columns:  # no row carries it (e.g. execution metrics, --no-execute)
        return pd.DataFrame(columns=[*columns, "cases", "min_trials",
                                     *(f"pass{s}{k}" for k in ks for s in ("@", "^"))])
    known = expanded[expanded[metric].notna()]
    per_case = known.assign(_success=known[metric].astype(bool).astype(int)).groupby(
        [*columns, "case_id"], sort=True)["_success"].agg(c="sum", n="count").reset_index()
    records = []
    for key, group in per_case.groupby(columns, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        record = dict(zip(columns, key), cases=len(group), min_trials=int(group["n"].min()))
        for k in ks:
            enough = group[group["n"] >= k]
            has = len(enough) > 0
            record[f"pass@{k}"] = float(pass_at_k(enough["n"], enough["c"], k).mean()) \
                if has else float("nan")
            record[f"pass^{k}"] = float(pass_hat_k(enough["n"], enough["c"], k).mean()) \
                if has else float("nan")
        records.append(record)
    return pd.DataFrame.from_records(records)


def top_argument_errors(frame: pd.DataFrame, limit: int = 20,
                        by: Sequence[str] = ()) -> pd.DataFrame:
    """The most frequent argument errors, ``"tool.argument: expected -> got"`` with counts.

    Returns:
        Columns: the group columns, ``argument_error`` (str), ``count`` (int); at most
        ``limit`` rows per group, most frequent first (ties by text).
    """
    expanded, columns = _expand(frame, by, keep=["argument_errors"]) if by else (frame, [])
    errors = expanded[[*columns, "argument_errors"]].explode("argument_errors").dropna(
        subset=["argument_errors"]).rename(columns={"argument_errors": "argument_error"})
    if errors.empty:
        return pd.DataFrame(columns=[*columns, "argument_error", "count"])
    counts = errors.groupby([*columns, "argument_error"]).size().rename("count").reset_index()
    counts = counts.sort_values([*columns, "count", "argument_error"],
                                ascending=[True] * len(columns) + [False, True])
    if columns:
        counts = counts.groupby(columns, sort=False).head(limit)
    return counts.head(limit if not columns else len(counts)).reset_index(drop=True)


def _pairs(expected: tuple[str, ...], predicted: tuple[str, ...] | None
           ) -> list[tuple[str, str]]:
    """(expected tool, chosen tool) pairs of one row; see :func:`selection_confusion`."""
    if predicted is None:
        return [(name, UNPARSEABLE) for name in expected or (NO_CALL,)]
    if not expected and not predicted:
        return [(NO_CALL, NO_CALL)]
    left_e = Counter(expected)
    left_p = Counter(predicted)
    pairs = []
    for name in sorted(left_e & left_p):
        matched = min(left_e[name], left_p[name])
        pairs += [(name, name)] * matched
        left_e[name] -= matched
        left_p[name] -= matched
    rest_e = sorted(left_e.elements())
    rest_p = sorted(left_p.elements())
    for index in range(max(len(rest_e), len(rest_p))):
        pairs.append((rest_e[index] if index < len(rest_e) else NO_CALL,
                      rest_p[index] if index < len(rest_p) else NO_CALL))
    return pairs


def selection_confusion(frame: pd.DataFrame) -> pd.DataFrame:
    """Selection confusion matrix: expected tool (rows) x chosen tool (columns), counts.

    Per result row, expected and called tool names are paired as multisets: equal names pair
    first (the diagonal); the remaining expected and called names pair in sorted order; an
    expected call left without a called one pairs with ``(no call)``, a call without an
    expected one sits in row ``(no call)``; a no-call case answered without a call counts once
    at ``(no call)``/``(no call)``. An undecodable answer is column ``(unparseable)``.

    Returns:
        An int DataFrame indexed by expected tool, columns = chosen tool (sorted, with
        ``(no call)`` and ``(unparseable)`` last when present).
    """
    counts: Counter[tuple[str, str]] = Counter()
    # rows repeat the same (expected, predicted) names: pair each distinct combination once
    for (expected, predicted), times in Counter(zip(frame["expected_tools"],
                                                    frame["predicted_tools"])).items():
        for pair in _pairs(expected, predicted):
            counts[pair] += times
    if not counts:
        return pd.DataFrame(dtype=int)
    series = pd.Series(counts)
    matrix = series.unstack(fill_value=0).astype(int)
    special = (NO_CALL, UNPARSEABLE)
    rows = sorted(i for i in matrix.index if i not in special) + \
        [s for s in special if s in matrix.index]
    cols = sorted(c for c in matrix.columns if c not in special) + \
        [s for s in special if s in matrix.columns]
    return matrix.loc[rows, cols]
