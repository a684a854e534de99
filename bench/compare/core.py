"""Paired comparison of two sets of result rows on the cases both have.

For each binary metric (a rate of :mod:`bench.scoring.registry`; its ``polarity`` says whether
True or False is the good outcome) and each group (provider by default) the rows of A and B
are paired on ``(case_id, trial)``; a pair counts when the metric applies to both rows. Per
pair set:

- McNemar's exact test: under "no difference" the discordant pairs split 50/50, so the
  p-value is a two-sided exact binomial test of (B right, A wrong) among all discordant pairs
  (McNemar 1947). Being exact it is conservative: its false-positive rate is at most alpha,
  and below it when there are few discordant pairs.
- The difference ``rate_B - rate_A`` with a paired percentile bootstrap interval that resamples
  cases (all trials of a case together), so trials of one case are not treated as independent.
- Holm's step-down correction across every (group, metric) test of the comparison (Holm 1979,
  "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6:65-70).
- The minimum detectable difference at the given power for this number of pairs: the
  smallest δ at which the test's exact power (summed over the binomial number of discordant
  pairs, :func:`bench.compare.paired.mcnemar_power`) reaches the target, with ψ the observed share of discordant
  pairs (or δ itself when larger: a difference cannot exceed the discordance).

With several trials per case, the McNemar pairs are (case, trial) pairs; trials of one case are
correlated, so the p-value is then somewhat optimistic while the bootstrap interval is not.

Verdict per test: ``regression`` when the Holm-adjusted p-value is below alpha and B is worse
than A by more than ``margin`` (a lower rate, or a higher one for a lower-is-better metric);
``improvement`` for the mirror case; ``within margin`` when it
is significant but no larger than the margin; else ``no significant difference``.

The tests themselves are :mod:`bench.compare.paired`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

import pandas as pd
from pydantic import BaseModel, Field

from bench.compare.cells import short_answer, short_expected
from bench.compare.paired import (holm_adjust, mcnemar_exact, minimum_detectable_difference,
                                  paired_bootstrap)
from bench.results import Row, as_row
from bench.scoring.registry import comparable_metrics, get_metric
from bench.stats.frame import compact_frame, metric_columns

Verdict = Literal["regression", "improvement", "within margin", "no significant difference"]
PAIR_ON = ("case_id", "trial")


class MetricComparison(BaseModel):
    """One paired test: one metric in one group.

    Attributes:
        group: the group label (e.g. ``local`` or ``local/l30``).
        metric: binary metric name (see :mod:`bench.stats.frame`).
        n: paired observations ((case, trial) pairs where the metric applies to both).
        cases: distinct cases among them.
        rate_a / rate_b: success rates of A and B on the pairs (fractions).
        diff: ``rate_b - rate_a`` (fraction; negative = B worse).
        diff_low / diff_high: paired cluster-bootstrap interval of ``diff``.
        a_only: pairs where only A is right; b_only: pairs where only B is right.
        p_value: McNemar exact two-sided p-value; p_holm: Holm-adjusted.
        mdd: minimum detectable |difference| at the comparison's power (fraction; NaN when
            n is too small for any difference).
        verdict: see the module docstring.
    """

    group: str
    metric: str
    n: int
    cases: int
    rate_a: float
    rate_b: float
    diff: float
    diff_low: float
    diff_high: float
    a_only: int
    b_only: int
    p_value: float
    p_holm: float = 1.0
    mdd: float
    verdict: Verdict = "no significant difference"


class Flip(BaseModel):
    """A pair whose outcome differs between A and B for one metric.

    Attributes:
        direction: ``lost`` (A right, B wrong) or ``gained`` (A wrong, B right).
        group, metric, case_id, trial: where.
        query: the case's last user message; expected: the label in short form;
        answer_a / answer_b: the two answers in short form (calls with arguments, or the
            parse error).
    """

    direction: Literal["lost", "gained"]
    group: str
    metric: str
    case_id: str
    trial: int
    query: str
    expected: str
    answer_a: str
    answer_b: str


class Comparison(BaseModel):
    """The result of :func:`compare_rows` (JSON-serialisable with ``model_dump_json``).

    Attributes:
        label_a / label_b: what A and B are (variant names or run ids).
        alpha, margin (fraction), confidence, power, n_boot, seed, mid_p: the settings used
            (``mid_p``: p-values are McNemar mid-p values instead of exact ones).
        tests: one :class:`MetricComparison` per (group, metric), Holm-adjusted together.
        flips: every flipped pair of every test.
        unpaired_a / unpaired_b: rows of A (B) without a partner in the other set.
    """

    label_a: str
    label_b: str
    alpha: float
    margin: float
    confidence: float
    power: float
    n_boot: int
    seed: int
    mid_p: bool = False
    tests: list[MetricComparison] = Field(default_factory=list)
    flips: list[Flip] = Field(default_factory=list)
    unpaired_a: int = 0
    unpaired_b: int = 0

    @property
    def regressions(self) -> list[MetricComparison]:
        """Tests whose verdict is ``regression``."""
        return [t for t in self.tests if t.verdict == "regression"]

    @property
    def exit_code(self) -> int:
        """1 when some test is a significant regression beyond the margin, else 0."""
        return 1 if self.regressions else 0



def _group_labels(frame: pd.DataFrame, group_by: Sequence[str]) -> pd.Series:
    if not group_by:
        return pd.Series(["all"] * len(frame), index=frame.index)
    return frame[list(group_by)].astype(str).agg("/".join, axis=1)


def compare_frames(frame_a: pd.DataFrame, frame_b: pd.DataFrame, *, label_a: str = "A",
                   label_b: str = "B", metrics: Iterable[str] | None = None,
                   group_by: Sequence[str] = ("provider",), alpha: float = 0.05,
                   margin: float = 0.0, confidence: float = 0.95, power: float = 0.8,
                   n_boot: int = 2000, seed: int = 0, mid_p: bool = False,
                   rows_a: Mapping[str, Row] | None = None,
                   rows_b: Mapping[str, Row] | None = None,
                   rows_of: Callable[[set[str], set[str]],
                                     tuple[Mapping[str, Row], Mapping[str, Row]]] | None = None
                   ) -> Comparison:
    """Compare two results frames (:mod:`bench.stats.frame`); see :func:`compare_rows`.

    ``rows_a``/``rows_b`` map a frame's ``key`` to its full row, used only to describe flipped
    cases (answers in short form); without them the flips carry no answers. ``rows_of``
    instead fetches the rows of the flipped keys only, ``(keys of A, keys of B) -> (rows_a,
    rows_b)``, once every flip is known (a large run's rows need not be held).

    Raises:
        ValueError: no metric to compare, an unknown metric, or no pair shared by A and B.
    """
    present = _shared_metrics(frame_a, frame_b, metrics)
    merged = _pairs(frame_a, frame_b, present, group_by, label_a, label_b)
    result = Comparison(label_a=label_a, label_b=label_b, alpha=alpha, margin=margin,
                        confidence=confidence, power=power, n_boot=n_boot, seed=seed,
                        mid_p=mid_p, unpaired_a=len(frame_a) - len(merged),
                        unpaired_b=len(frame_b) - len(merged))
    flipped_records: list[_FlipRecord] = []
    for group, part in merged.groupby("group", sort=True):
        for metric in present:
            both = part[part[f"{metric}_a"].notna() & part[f"{metric}_b"].notna()]
            if both.empty:
                continue
            result.tests.append(_paired_test(str(group), metric, both, result))
            flipped_records += _flipped(str(group), metric, both)
    if rows_of is not None and flipped_records:
        rows_a, rows_b = rows_of({r[5] for r in flipped_records},
                                 {r[6] for r in flipped_records})
    result.flips = _flips(flipped_records, rows_a, rows_b)
    _holm_verdicts(result.tests, alpha, margin)
    return result


#: A flipped pair before its rows are read: (direction, group, metric, case id, trial, key in
#: A, key in B).
_FlipRecord = tuple[Literal["lost", "gained"], str, str, str, int, str, str]


def _shared_metrics(frame_a: pd.DataFrame, frame_b: pd.DataFrame,
                    metrics: Iterable[str] | None) -> list[str]:
    """The metrics to compare: ``metrics`` (default: every comparable one) that both frames
    carry.

    Raises:
        ValueError: an unknown metric, or none shared.
    """
    known = comparable_metrics()
    wanted = list(metrics) if metrics is not None else known
    unknown = [m for m in wanted if m not in known]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)} (choose from "
                         f"{', '.join(known)})")
    present = [m for m in metric_columns(frame_a, wanted) if m in frame_b.columns]
    if not present:
        raise ValueError("A and B share none of the metrics " + ", ".join(wanted))
    return present


def _pairs(frame_a: pd.DataFrame, frame_b: pd.DataFrame, present: Sequence[str],
           group_by: Sequence[str], label_a: str, label_b: str) -> pd.DataFrame:
    """The (case, trial) pairs A and B share within each group: one row per pair, each
    metric as ``<metric>_a`` / ``<metric>_b``, the rows' keys as ``key_a`` / ``key_b``.

    Raises:
        ValueError: a frame without rows or the columns to pair on, or no shared pair
            (naming the groups each side has).
    """
    keys = [*group_by, *PAIR_ON]
    for name, frame in (("A", frame_a), ("B", frame_b)):
        missing = [k for k in keys if k not in frame.columns]
        if missing:
            raise ValueError(f"{name} has no rows to compare" if frame.empty else
                             f"{name} lacks column(s) {', '.join(missing)}")
    left = frame_a[[*keys, "key", *present]].assign(group=_group_labels(frame_a, group_by))
    right = frame_b[[*keys, "key", *present]].assign(group=_group_labels(frame_b, group_by))
    merged = left.merge(right, on=[*keys, "group"], suffixes=("_a", "_b"), how="inner")
    if merged.empty:
        sides = "".join(
            f"; {column}: {', '.join(sorted(map(str, frame_a[column].unique())))} in "
            f"{label_a}, {', '.join(sorted(map(str, frame_b[column].unique())))} in {label_b}"
            for column in group_by if set(frame_a[column]) != set(frame_b[column]))
        raise ValueError(f"{label_a} and {label_b} share no (case, trial) pair"
                         + (f" within the same {'/'.join(group_by)}" if group_by else "")
                         + sides)
    return merged


def _paired_test(group: str, metric: str, both: pd.DataFrame,
                 settings: Comparison) -> MetricComparison:
    """The paired test of ``metric`` in ``group`` over the pairs ``both`` where it applies
    on both sides: rates, the paired bootstrap interval of the difference, McNemar's exact
    p-value and the minimum detectable difference (``settings``: the comparison's alpha,
    power, bootstrap and mid-p settings)."""
    a = both[f"{metric}_a"].to_numpy(dtype=bool)
    b = both[f"{metric}_b"].to_numpy(dtype=bool)
    higher = get_metric(metric).polarity == "higher"
    good_a, good_b = (a, b) if higher else (~a, ~b)
    a_only, b_only = int((good_a & ~good_b).sum()), int((~good_a & good_b).sum())
    n = len(both)
    low, high = paired_bootstrap(a, b, both["case_id"].to_numpy(), settings.confidence,
                                  settings.n_boot, settings.seed)
    return MetricComparison(
        group=group, metric=metric, n=n, cases=int(both["case_id"].nunique()),
        rate_a=float(a.mean()), rate_b=float(b.mean()),
        diff=float(b.mean() - a.mean()), diff_low=low, diff_high=high,
        a_only=a_only, b_only=b_only, p_value=mcnemar_exact(a_only, b_only, settings.mid_p),
        mdd=minimum_detectable_difference(n, (a_only + b_only) / n, settings.alpha,
                                          settings.power, settings.mid_p))


def _flipped(group: str, metric: str, both: pd.DataFrame) -> list[_FlipRecord]:
    """The pairs of ``both`` whose ``metric`` differs between A and B, each ``lost`` (good
    in A) or ``gained``."""
    a = both[f"{metric}_a"].to_numpy(dtype=bool)
    b = both[f"{metric}_b"].to_numpy(dtype=bool)
    higher = get_metric(metric).polarity == "higher"
    return [("lost" if bool(record[f"{metric}_a"]) == higher else "gained",
             group, metric, str(record["case_id"]), int(record["trial"]),
             str(record["key_a"]), str(record["key_b"]))
            for record in both[a != b].to_dict("records")]


def _flips(records: Sequence[_FlipRecord], rows_a: Mapping[str, Row] | None,
           rows_b: Mapping[str, Row] | None) -> list[Flip]:
    """Each flipped pair as a :class:`Flip`, with its query, label and both answers in short
    form when its rows are given."""
    flips: list[Flip] = []
    for direction, group_name, metric, case_id, trial, key_a, key_b in records:
        row_a = (rows_a or {}).get(key_a)
        row_b = (rows_b or {}).get(key_b)
        flips.append(Flip(
            direction=direction, group=group_name, metric=metric, case_id=case_id,
            trial=trial, query=str(row_a.query or "") if row_a else "",
            expected=short_expected(row_a.expected) if row_a else "",
            answer_a=short_answer(row_a) if row_a else "",
            answer_b=short_answer(row_b) if row_b else ""))
    return flips


def _holm_verdicts(tests: Sequence[MetricComparison], alpha: float, margin: float) -> None:
    """Set each test's Holm-adjusted p-value (across all ``tests``) and, when it is below
    ``alpha``, its verdict: a regression or an improvement beyond ``margin`` (in the
    metric's good direction), else within the margin."""
    for test, adjusted in zip(tests, holm_adjust([t.p_value for t in tests])):
        test.p_holm = adjusted
        if adjusted < alpha:
            gain = test.diff if get_metric(test.metric).polarity == "higher" else -test.diff
            if gain < -margin:
                test.verdict = "regression"
            elif gain > margin:
                test.verdict = "improvement"
            else:
                test.verdict = "within margin"


def compare_rows(rows_a: Iterable[Row | Mapping[str, Any]],
                 rows_b: Iterable[Row | Mapping[str, Any]], *,
                 label_a: str = "A", label_b: str = "B", metrics: Iterable[str] | None = None,
                 group_by: Sequence[str] = ("provider",), alpha: float = 0.05,
                 margin: float = 0.0, confidence: float = 0.95, power: float = 0.8,
                 n_boot: int = 2000, seed: int = 0, mid_p: bool = False) -> Comparison:
    """Compare result rows of A and B, paired on the (group, case, trial) both have.

    Args:
        rows_a / rows_b: result rows (:class:`bench.results.Row`; dicts of the row's JSON
            shape are validated into one), e.g. one variant each.
        label_a / label_b: names shown for A and B.
        metrics: binary metrics to test (default: every rate of the registry's ``compare``
            view, :func:`bench.scoring.registry.comparable_metrics`, both sides carry, so
            execution outcomes join in when the executor has run).
        group_by: frame columns that must match for two rows to pair, and that split the tests
            (default provider; use ``("provider", "variant")`` to compare two runs variant by
            variant).
        alpha: family-wise significance level (Holm across all tests).
        margin: differences no larger than this (fraction, 0.02 = 2 points) are never called
            a regression or an improvement.
        confidence: bootstrap interval coverage.
        power: power for the minimum detectable difference.
        n_boot: bootstrap resamples; seed: their seed.
        mid_p: use McNemar mid-p values (see :func:`bench.compare.paired.mcnemar_exact`)
            instead of exact ones.

    Returns:
        A :class:`Comparison`; see the module docstring for every statistic.

    Raises:
        ValueError: no shared metric, an unknown metric, or no shared pair.
    """
    side_a, side_b = _reiterable(rows_a), _reiterable(rows_b)

    def rows_of(keys_a: set[str], keys_b: set[str]
                ) -> tuple[Mapping[str, Row], Mapping[str, Row]]:
        return ({r.key: r for r in map(as_row, side_a) if r.key in keys_a},
                {r.key: r for r in map(as_row, side_b) if r.key in keys_b})

    return compare_frames(compact_frame(map(as_row, side_a)),
                          compact_frame(map(as_row, side_b)), label_a=label_a,
                          label_b=label_b, metrics=metrics, group_by=group_by, alpha=alpha,
                          margin=margin, confidence=confidence, power=power, n_boot=n_boot,
                          seed=seed, mid_p=mid_p, rows_of=rows_of)


def _reiterable(rows: Iterable[Row | Mapping[str, Any]]) -> Iterable[Row | Mapping[str, Any]]:
    """``rows`` when it can be iterated again (a list, a :class:`RowSelection`, a stored
    run's rows), else a list of it (a generator is read once)."""
    return list(rows) if iter(rows) is rows else rows


class RowSelection:
    """The rows of ``sources`` (each re-iterable, e.g. a stored run's rows, which are read
    again from its file on each pass) that ``keep`` accepts, in order: a view that holds no
    row, for :func:`compare_rows`' two passes (the frame, then the flipped rows)."""

    def __init__(self, sources: Sequence[Iterable[Row]], keep: Callable[[Row], bool]) -> None:
        self.sources, self.keep = sources, keep

    def __iter__(self) -> Iterator[Row]:
        for source in self.sources:
            for row in source:
                if self.keep(row):
                    yield row
