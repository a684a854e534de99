"""Accuracy per information bucket: "the description lacked it" apart from "the model missed it".

A case's ``info`` bucket is the lowest description level whose text carries what the case
needs (``schema``, ``l10``, ``l30``, ``l50``; :class:`bench.models.Case`). A variant cannot be
blamed for a case whose information it does not show: at l3, a case of bucket ``l30`` measures
what the model guesses, not what it was told. The table puts each variant's rates per bucket
side by side, so the cases a variant carries the information for can be read apart.

A bucket is a judgement: the table is printed only for a dataset whose two labelling passes
agree on the buckets well enough (Cohen's kappa above 0.60, from its datasheet:
:mod:`bench.datasets.agreement`); the printing code decides, this module only counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # imported where a frame is built: the run's own table needs no pandas
    import pandas as pd

from bench.stats.intervals import wilson_interval

BUCKETS = ("schema", "l10", "l30", "l50")
UNTAGGED = "(untagged)"
#: Metrics the bucket table shows (rates where True is good).
BUCKET_METRICS = ("selection_correct", "arguments_correct")


def bucket_table(frame: pd.DataFrame, variant_order: Sequence[str] = (),
                 metrics: Sequence[str] = BUCKET_METRICS) -> pd.DataFrame:
    """Rates of ``metrics`` per provider, variant and information bucket.

    Args:
        frame: :func:`bench.stats.frame.results_frame` or
            :func:`bench.stats.summary.summary_frame` rows (columns ``provider``, ``variant``,
            ``info`` and the metrics).
        variant_order: the variants' display order (others follow, sorted).
        metrics: binary metric columns; those the frame lacks are left out.

    Returns:
        One row per (provider, variant, bucket) with ``n`` (rows), and per metric ``<m>``
        (rate 0-1, NaN when no row carries it), ``<m>_n``, ``<m>_low`` and ``<m>_high`` (95%
        Wilson interval). Empty when no row carries a bucket.
    """
    import pandas as pd

    if frame.empty or "info" not in frame or frame["info"].isna().all():
        return pd.DataFrame()
    shown = [m for m in metrics if m in frame.columns]
    info = frame["info"].fillna(UNTAGGED)
    order = {name: i for i, name in enumerate((*BUCKETS, UNTAGGED))}
    rank = {name: i for i, name in enumerate(variant_order)}
    records = []
    for (provider, variant, bucket), part in frame.assign(info=info).groupby(
            ["provider", "variant", "info"], sort=False):
        record: dict[str, object] = {"provider": provider, "variant": variant, "info": bucket,
                                     "n": int(len(part))}
        for metric in shown:
            values = part[metric].dropna()
            n, hits = int(len(values)), int(values.sum())
            low, high = wilson_interval(hits, n)
            record.update({metric: hits / n if n else float("nan"), f"{metric}_n": n,
                           f"{metric}_low": low, f"{metric}_high": high})
        records.append(record)
    table = pd.DataFrame(records)
    table["_v"] = [rank.get(v, len(rank)) for v in table["variant"]]
    table["_b"] = [order.get(b, len(order)) for b in table["info"]]
    return table.sort_values(["provider", "_v", "variant", "_b"]).drop(
        columns=["_v", "_b"]).reset_index(drop=True)
