"""Per-tool selection figures: precision, recall and F1 of each tool with intervals, the
confusion pairs (expected tool vs chosen tool) and the required / forbidden calls per tool.

All read the results frame (:mod:`bench.stats.frame`): ``expected_tools`` (the label's tool
names), ``predicted_tools`` (the answer's, None when undecodable), ``expected_kind``,
``case_id``, ``provider``, ``variant``. Single-answer rows and episode rows both count.

An episode row (``expected_kind`` ``episode``) is counted as one answer whose calls are all
the calls of its trajectory: ``expected_tools`` are the names of the case's
``required_calls`` (one per required call), ``predicted_tools`` the name of every call the
model made in the episode, in every step, in the order made (an undecodable call's name too;
a call made twice counts twice). The two are matched as multisets of names exactly as for a
single answer (below), so a required tool called at least once is a ``tp``, each further
call of it beyond the required count (a retry, a repeated lookup) an ``fp``, a call of a tool
no required call names an ``fp``, and a required call never made an ``fn``. Arguments and
the ``after`` order of required calls are not looked at here (the episode's own
``trajectory_recall`` / ``trajectory_precision`` match them, :mod:`bench.scoring.episodes`).
An episode that stopped on an undecodable answer counts the calls made before it.

Counting (one-vs-rest, per tool ``t``, the usual per-class definitions of multi-class
evaluation: Sokolova & Lapalme 2009, "A systematic analysis of performance measures for
classification tasks", Information Processing & Management 45(4), Table 3; the same as
scikit-learn's ``precision_recall_fscore_support`` with ``average=None``): in each row the
expected and called names are matched as multisets (``matched = min(expected count, called
count)`` per name: the optimal assignment for names alone, never greedy), so

- ``tp`` = matched calls of ``t``; ``fp`` = calls of ``t`` beyond the label's (the tool was
  chosen where the label does not ask for it: on a no-call or ask case, or instead of another
  tool); ``fn`` = expected calls of ``t`` not made (another tool, no call, or an undecodable
  answer);
- precision = tp / (tp + fp) (of the times ``t`` was called, the share that was right),
  recall = tp / (tp + fn) (of the times ``t`` was needed, the share it was called),
  F1 = 2 tp / (2 tp + fp + fn) (the harmonic mean of the two).

Intervals (95% unless asked otherwise):

- precision and recall: Wilson score intervals (Wilson 1927, "Probable inference, the law of
  succession, and statistical inference", JASA 22(158); :func:`bench.stats.intervals.wilson_arrays`)
  over the calls counted. They treat each call as an independent trial, which calls of one
  case are not quite: the bootstrap below does not assume it.
- F1: a percentile bootstrap over cases (Efron & Tibshirani 1993, "An Introduction to the
  Bootstrap", ch. 13): whole cases are resampled with replacement (a case's trials and calls
  stay together: the cluster bootstrap of Davison & Hinkley 1997, §3.8), F1 is recomputed
  from the summed tp/fp/fn of each resample, and the 2.5th and 97.5th percentiles are the
  interval. Seeded (``seed``), so a report is reproducible; resamples in which the tool
  never appears (F1 undefined) are dropped.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from bench.stats.frame import NO_CALL, UNPARSEABLE
from bench.stats.intervals import wilson_arrays

# the figures of one tool, in the order the tables show them
PER_TOOL_COLUMNS = ("expected", "called", "tp", "fp", "fn", "precision", "precision_low",
                    "precision_high", "recall", "recall_low", "recall_high", "f1", "f1_low",
                    "f1_high")


def row_counts(expected: Sequence[str], predicted: Sequence[str] | None
               ) -> dict[str, tuple[int, int, int]]:
    """``{tool: (tp, fp, fn)}`` of one answer (see the module docstring).

    Args:
        expected: the label's tool names (empty on a no-call or ask case).
        predicted: the called tool names, or None for an undecodable answer (no call made).

    Returns:
        One entry per tool named on either side.
    """
    want = Counter(str(n) for n in expected)
    got = Counter(str(n) for n in predicted or ())
    counts = {}
    for name in want.keys() | got.keys():
        matched = min(want[name], got[name])
        counts[name] = (matched, got[name] - matched, want[name] - matched)
    return counts


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = 2 * tp + fp + fn
        return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), np.nan)


def per_tool_table(frame: pd.DataFrame, by: Sequence[str] = ("provider", "variant"),
                   tools: Iterable[str] | None = None, confidence: float = 0.95,
                   n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Selection precision, recall and F1 of each tool per group, with intervals.

    Args:
        frame: the results frame (single-answer and episode rows).
        by: group columns of the frame (e.g. ``("provider", "variant")``; ``()``: one group).
        tools: the tools to report (default: every tool expected or called in the frame);
            a tool named here that no row names gets a row of zeros and NaN rates.
        confidence: interval coverage.
        n_boot: bootstrap resamples for the F1 interval.
        seed: bootstrap seed (numpy's default generator).

    Returns:
        One row per group and tool: the group columns, ``tool`` (str), ``expected`` (calls of
        the tool the labels ask for), ``called`` (calls the answers made), ``tp``, ``fp``,
        ``fn`` (ints), ``precision``, ``recall``, ``f1`` (fractions, NaN when undefined) with
        ``_low`` / ``_high`` bounds; tools sorted by name within each group, groups in the
        order they first appear. Empty (with those columns) for an empty frame.
    """
    by = list(by)
    columns = [*by, "tool", *PER_TOOL_COLUMNS]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    groups = frame.groupby(by, sort=False) if by else [((), frame)]
    rng = np.random.default_rng(seed)
    tail = (1 - confidence) / 2 * 100
    records = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        cases = list(dict.fromkeys(part["case_id"]))
        index = {case: i for i, case in enumerate(cases)}
        # per tool: (cases x 3) summed tp, fp, fn of each case's rows (its trials)
        sums: dict[str, np.ndarray] = {}
        for case, expected, predicted in zip(part["case_id"], part["expected_tools"],
                                             part["predicted_tools"]):
            for name, (tp, fp, fn) in row_counts(expected or (), predicted).items():
                if name not in sums:
                    sums[name] = np.zeros((len(cases), 3))
                sums[name][index[case]] += (tp, fp, fn)
        names = sorted(set(sums) | set(tools or ()))
        weights = None
        if n_boot and cases:
            draws = rng.integers(0, len(cases), size=(n_boot, len(cases)))
            weights = np.bincount((draws + np.arange(n_boot)[:, None] * len(cases)).ravel(),
                                  minlength=n_boot * len(cases)).reshape(
                n_boot, len(cases)).astype(float)
        for name in names:
            table = sums.get(name, np.zeros((len(cases), 3)))
            tp, fp, fn = (int(v) for v in table.sum(axis=0))
            (p_low,), (p_high,) = wilson_arrays([tp], [tp + fp], confidence)
            (r_low,), (r_high,) = wilson_arrays([tp], [tp + fn], confidence)
            f1 = float(_f1(np.array([tp]), np.array([fp]), np.array([fn]))[0])
            f1_low = f1_high = float("nan")
            if weights is not None and tp + fp + fn:
                resampled = weights @ table  # (n_boot, 3): summed tp, fp, fn per resample
                values = _f1(resampled[:, 0], resampled[:, 1], resampled[:, 2])
                values = values[~np.isnan(values)]
                if len(values):
                    f1_low, f1_high = (float(v) for v in
                                       np.percentile(values, [tail, 100 - tail]))
            records.append({**dict(zip(by, key)), "tool": name, "expected": tp + fn,
                            "called": tp + fp, "tp": tp, "fp": fp, "fn": fn,
                            "precision": tp / (tp + fp) if tp + fp else float("nan"),
                            "precision_low": float(p_low), "precision_high": float(p_high),
                            "recall": tp / (tp + fn) if tp + fn else float("nan"),
                            "recall_low": float(r_low), "recall_high": float(r_high),
                            "f1": f1, "f1_low": f1_low, "f1_high": f1_high})
    return pd.DataFrame.from_records(records, columns=columns)


def confusion_pairs(frame: pd.DataFrame, by: Sequence[str] = ("provider", "variant"),
                    limit: int = 20) -> pd.DataFrame:
    """The most frequent wrong (expected tool, chosen tool) pairs.

    The pairs are those of :func:`bench.stats.aggregate.selection_confusion` (equal names
    matched first, the rest paired in sorted order; ``(no call)`` stands for a missing call
    on either side, ``(unparseable)`` for an undecodable answer); the diagonal (expected ==
    chosen) is left out.

    Args:
        frame: the results frame (single-answer and episode rows; an episode's leftover
            calls pair as for one answer).
        by: group columns; each group's count gets its own column.
        limit: pairs kept (the most frequent over all groups; ties by names).

    Returns:
        Columns ``expected``, ``chosen``, ``count`` (over all rows) and one count column per
        group named ``"<provider> · <variant>"`` (the group values joined with `` · ``), most
        frequent first.
    """
    from bench.stats.aggregate import _pairs

    by = list(by)
    totals: Counter[tuple[str, str]] = Counter()
    per_group: dict[str, Counter[tuple[str, str]]] = {}
    groups = frame.groupby(by, sort=False) if by and not frame.empty else [((), frame)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = " · ".join(str(k) for k in key) or "all"
        found = per_group.setdefault(label, Counter())
        for (expected, predicted), times in Counter(zip(part["expected_tools"],
                                                        part["predicted_tools"])).items():
            for pair in _pairs(tuple(expected or ()), None if predicted is None
                               else tuple(predicted)):
                if pair[0] != pair[1]:
                    found[pair] += times
                    totals[pair] += times
    top = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:limit]
    records = [{"expected": e, "chosen": c, "count": n,
                **{label: per_group[label].get((e, c), 0) for label in per_group}}
               for (e, c), n in top]
    return pd.DataFrame.from_records(records, columns=["expected", "chosen", "count",
                                                       *per_group])


def call_checks(frame: pd.DataFrame, by: Sequence[str] = ("provider", "variant"),
                tools: Iterable[str] | None = None) -> pd.DataFrame:
    """Required and forbidden calls per tool.

    A call of ``t`` is *required* where the label lists it; every other call of ``t`` is
    *forbidden* (a single-answer label forbids any call it does not list: on a no-call or ask
    case every call, elsewhere a tool the label does not name, or one call too many). An
    episode row counts its required calls (made or missed, as in :func:`per_tool_table`)
    but no forbidden call: an episode may make calls its required list does not name, and
    forbids only its ``forbidden_calls``, which its own metrics count
    (``forbidden_calls``, :mod:`bench.scoring.episodes`).

    Returns:
        One row per group and tool: ``required`` (calls the labels ask for), ``required_made``
        (of those, made), ``required_missed``; ``forbidden_on_no_call`` (calls of the tool on
        no-call and ask cases), ``forbidden_wrong_tool`` (calls beyond the label on cases that
        expect calls: another tool was needed, or fewer calls); ``forbidden`` (their sum).
    """
    by = list(by)
    columns = [*by, "tool", "required", "required_made", "required_missed",
               "forbidden_on_no_call", "forbidden_wrong_tool", "forbidden"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    groups = frame.groupby(by, sort=False) if by else [((), frame)]
    records = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        counts: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in tools or ()}
        kinds = part["expected_kind"] if "expected_kind" in part else \
            pd.Series(["calls"] * len(part), index=part.index)
        for kind, expected, predicted in zip(kinds, part["expected_tools"],
                                             part["predicted_tools"]):
            for name, (tp, fp, fn) in row_counts(expected or (), predicted).items():
                found = counts.setdefault(name, [0, 0, 0, 0])
                found[0] += tp + fn
                found[1] += tp
                if kind != "episode":
                    found[2 if kind in ("no_call", "ask") else 3] += fp
        for name in sorted(counts):
            required, made, no_call, wrong = counts[name]
            records.append({**dict(zip(by, key)), "tool": name, "required": required,
                            "required_made": made, "required_missed": required - made,
                            "forbidden_on_no_call": no_call, "forbidden_wrong_tool": wrong,
                            "forbidden": no_call + wrong})
    return pd.DataFrame.from_records(records, columns=columns)


def shown_tool(name: str, renamed: Mapping[str, str]) -> str:
    """A tool's name as the per-tool tables show it: ``"new (was old)"`` for a tool that
    ``renamed`` (old name -> new name, a toolset's aliases) says was renamed."""
    olds = sorted(old for old, new in renamed.items() if new == name)
    return f"{name} (was {', '.join(olds)})" if olds else name


SPECIAL_NAMES = (NO_CALL, UNPARSEABLE)
