"""How ``bench compare`` shows a :class:`~bench.compare.core.Comparison` in the terminal: its
table, the flipped cases and the verdict line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table

from bench.cli.output import terminal_text
from bench.compare import cells

if TYPE_CHECKING:  # the core loads pandas and scipy: imported only when a command runs
    from bench.compare.core import Comparison

_VERDICT_STYLE = {"regression": "bold red", "improvement": "bold green",
                  "within margin": "yellow", "no significant difference": "dim"}


def comparison_table(comparison: Comparison) -> Table:
    """A rich Table of a :class:`~bench.compare.core.Comparison`, one row per test."""
    level = round(comparison.confidence * 100)
    table = Table(title=f"{comparison.label_a} (A) vs {comparison.label_b} (B), paired; "
                        f"alpha {comparison.alpha}, margin {comparison.margin * 100:.1f} points",
                  title_justify="left")
    justify: JustifyMethod
    for column, justify in (("group", "left"), ("metric", "left"), ("pairs", "right"),
                            ("A", "right"), ("B", "right"),
                            (f"B-A points [{level}% CI]", "right"), ("A only/B only", "right"),
                            ("p (McNemar mid-p)" if comparison.mid_p else "p (McNemar exact)",
                             "right"), ("p (Holm)", "right"),
                            (f"MDD {round(comparison.power * 100)}% power", "right"),
                            ("verdict", "left")):
        table.add_column(column, justify=justify)
    for test in comparison.tests:
        table.add_row(escape(test.group), test.metric, str(test.n), cells.pct(test.rate_a),
                      cells.pct(test.rate_b),
                      f"{cells.points(test.diff)} [{cells.points(test.diff_low)}, {cells.points(test.diff_high)}]",
                      f"{test.a_only}/{test.b_only}", cells.p_value(test.p_value), cells.p_value(test.p_holm),
                      cells.mdd(test.mdd),
                      f"[{_VERDICT_STYLE[test.verdict]}]{test.verdict}[/]")
    return table


def print_flips(console: Console, comparison: Comparison, metrics: list[str],
                show: int) -> None:
    """Print flipped cases of ``metrics`` both ways, at most ``show`` per direction."""
    if show == 0:
        return
    for metric in metrics:
        for direction, title in (("lost", f"right in {comparison.label_a}, wrong in "
                                          f"{comparison.label_b}"),
                                 ("gained", f"wrong in {comparison.label_a}, right in "
                                            f"{comparison.label_b}")):
            flips = [f for f in comparison.flips if f.metric == metric
                     and f.direction == direction]
            if not flips:
                continue
            console.print(f"\n[bold]{metric}: {len(flips)} {title}[/]"
                          + (f" (first {show})" if len(flips) > show else ""))
            for flip in flips[:show]:
                trial = f" trial {flip.trial}" if flip.trial else ""
                # answers are model output: control characters shown escaped, as in traces
                console.print(f"  [cyan]{terminal_text(flip.case_id)}[/]{trial} "
                              f"[{terminal_text(flip.group)}] {terminal_text(flip.query)}",
                              soft_wrap=True)
                console.print(f"    expected: {terminal_text(flip.expected)}", soft_wrap=True)
                console.print(f"    A: {terminal_text(flip.answer_a)}", soft_wrap=True)
                console.print(f"    B: {terminal_text(flip.answer_b)}", soft_wrap=True)


def print_comparison(out: Console, comparison: Comparison, show: int) -> None:
    """The comparison's table, its unpaired rows, the flipped cases of the metrics decided
    and the headline ones (at most ``show`` per direction), and the verdict line, on ``out``."""
    from bench.scoring.registry import primary_metrics

    out.print(comparison_table(comparison))
    if comparison.unpaired_a or comparison.unpaired_b:
        out.print(f"unpaired rows left out: {comparison.unpaired_a} of A, "
                  f"{comparison.unpaired_b} of B")
    decided = [t.metric for t in comparison.tests
               if t.verdict in ("regression", "improvement")]
    tested = {t.metric for t in comparison.tests}
    headline = [m for m in primary_metrics() if m in tested]
    if not headline and "task_success" in tested:  # agent episodes only: their outcome
        headline = ["task_success"]
    shown = list(dict.fromkeys(decided + headline))
    print_flips(out, comparison, shown, show)
    regressions = comparison.regressions
    out.print("\n" + (f"[bold red]significant regression[/] in "
                      f"{', '.join(f'{t.metric} ({t.group})' for t in regressions)}"
                      if regressions else "no significant regression"))
