"""The comparison section: which two sets of rows a report compares, and how it reads.

The statistics are :func:`bench.compare.core.compare_rows` (McNemar exact tests, paired
bootstrap intervals, Holm correction, minimum detectable difference, flipped cases); this
module only chooses A and B the way ``bench compare`` does and formats numbers.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from bench.compare.core import Comparison, RowSelection, compare_rows
from bench.compare import cells
from bench.errors import BenchError
from bench.plural import count
from bench.report.data import LoadedRun, variant_order
from bench.results import Row
from bench.scoring.registry import metric_title

FLIPS_SHOWN = 200  # per report; the rest are counted
_DIRECTION = {"lost": "A right, B wrong", "gained": "A wrong, B right"}


def choose_comparison(runs: Sequence[LoadedRun], pair: Sequence[str] | None = None,
                      n_boot: int = 2000, seed: int = 1234) -> Comparison | None:
    """Compare what the report's inputs suggest, as ``bench compare`` would.

    - ``pair`` = two variant labels (as the report shows them): those two, paired per provider.
    - Two runs: run A against run B, variant by variant on the variants both have (the others
      are left out), or, when each has one variant and they differ, those two against each
      other.
    - One or more runs with exactly two variant labels in all: those two.
    - Otherwise: None (nothing to compare).

    Raises:
        BenchError: ``pair`` names an unknown variant or not two of them, or the two it names
            share no (case, trial) pair (without ``pair``, such inputs give None).
    """
    group_by: tuple[str, ...] = ("provider",)
    sources = [run.rows for run in runs]  # read again on each pass, never held
    labels = variant_order(runs)

    def variant_is(label: str) -> Callable[[Row], bool]:
        return lambda row: row.variant == label

    rows_a: Iterable[Row]
    rows_b: Iterable[Row]
    if pair:
        if len(pair) != 2 or pair[0] == pair[1]:
            raise BenchError("--compare takes two different variants, e.g. --compare l3,l30")
        unknown = [p for p in pair if p not in labels]
        if unknown:
            raise BenchError(f"--compare: no variant '{unknown[0]}' in the report "
                             f"(it has {', '.join(labels)})")
        label_a, label_b = pair
        rows_a = RowSelection(sources, variant_is(label_a))
        rows_b = RowSelection(sources, variant_is(label_b))
    elif len(runs) == 2:
        rows_a, rows_b = runs[0].source_rows, runs[1].source_rows
        variants_a = set(runs[0].stats.variants)
        variants_b = set(runs[1].stats.variants)
        shared = variants_a & variants_b
        if len(variants_a) == 1 and len(variants_b) == 1 and not shared:
            pass  # one variant each, different: the two against each other
        elif shared:  # variant by variant, on the variants both runs have
            group_by = ("provider", "variant")
            rows_a = RowSelection([runs[0].source_rows], lambda row: row.variant in shared)
            rows_b = RowSelection([runs[1].source_rows], lambda row: row.variant in shared)
        else:
            return None
        label_a, label_b = runs[0].run_id, runs[1].run_id
    elif len(labels) == 2:
        label_a, label_b = labels
        rows_a = RowSelection(sources, variant_is(label_a))
        rows_b = RowSelection(sources, variant_is(label_b))
    else:
        return None
    try:
        return compare_rows(rows_a, rows_b, label_a=label_a, label_b=label_b,
                            group_by=group_by, n_boot=n_boot, seed=seed)
    except ValueError as exc:
        if not pair:  # a comparison nobody asked for must not stop the report
            return None
        raise BenchError(f"comparison of {label_a} and {label_b}: {exc}") from None



def comparison_view(comparison: Comparison) -> dict[str, Any]:
    """Tables of a comparison for the HTML template and the Markdown summary.

    Returns:
        ``{"title", "settings", "tests": {"columns", "rows"}, "flips": {"columns", "rows"},
        "flips_total", "flips_shown", "verdicts": [str per test row], "unpaired"}``; every
        cell is plain text (escaped where it is rendered).
    """
    level = round(comparison.confidence * 100)
    tests = [[t.group, metric_title(t.metric), str(t.n), cells.pct(t.rate_a), cells.pct(t.rate_b),
              f"{cells.points(t.diff)} [{cells.points(t.diff_low)}, {cells.points(t.diff_high)}]",
              f"{t.a_only}/{t.b_only}", cells.p_value(t.p_value), cells.p_value(t.p_holm),
              cells.mdd(t.mdd), t.verdict]
             for t in comparison.tests]
    flips = [[_DIRECTION[f.direction], metric_title(f.metric), f.group, f.case_id + (f" #{f.trial}" if f.trial else ""),
              f.query, f.expected, f.answer_a, f.answer_b]
             for f in comparison.flips[:FLIPS_SHOWN]]
    return {
        "title": f"{comparison.label_a} (A) vs {comparison.label_b} (B)",
        "settings": f"paired on (case, trial); McNemar exact test, Holm-adjusted across "
                    f"{count(len(comparison.tests), 'test')} at alpha {comparison.alpha}; "
                    f"{level}% paired bootstrap interval of B-A ({comparison.n_boot} "
                    f"resamples by case); minimum detectable difference (MDD) at "
                    f"{round(comparison.power * 100)}% power",
        "tests": {"columns": ["group", "metric", "pairs", "A", "B",
                              f"B-A points [{level}% CI]", "A only/B only", "p (McNemar)",
                              "p (Holm)", "MDD", "verdict"], "rows": tests},
        "flips": {"columns": ["flip", "metric", "group", "case", "query", "expected",
                              "answer A", "answer B"], "rows": flips},
        "flips_total": len(comparison.flips),
        "flips_shown": len(flips),
        "unpaired": (comparison.unpaired_a, comparison.unpaired_b),
    }
