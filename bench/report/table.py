"""The per-variant table ``bench run`` prints (rich)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence, Union

from rich.markup import escape
from rich.table import Table

from bench.providers.ids import shown_provider_ids
from bench.scoring.registry import MetricSpec, metric_specs

if TYPE_CHECKING:  # pandas is imported by whoever builds a frame, not by printing one
    import pandas as pd

Records = Union["pd.DataFrame", Sequence[Mapping[str, Any]]]
"""A table as a DataFrame or as its records (``frame.to_dict("records")``; the streamed
summary, :class:`bench.stats.running.RunningSummary`, gives records)."""


def as_records(table: Records) -> list[Mapping[str, Any]]:
    """``table``'s rows as mappings, in order."""
    to_dict = getattr(table, "to_dict", None)
    return to_dict("records") if to_dict is not None else list(table)


def as_float(value: object) -> float:
    """A figure of a record as a float: NaN for None, pandas' NA or a non-number."""
    if isinstance(value, (int, float)) and not _missing(value):
        return float(value)
    return float("nan")


def _missing(value: object) -> bool:
    """None, NaN or pandas' NA: a figure not known."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN is the one value unequal to itself
    except TypeError:  # pandas.NA cannot be a bool
        return True

def format_rate(rate: float, low: float, high: float, n: int) -> str:
    """``"62.5% [51.2-72.6]"``; ``"-"`` when the metric had no applicable rows."""
    if n == 0 or math.isnan(rate):
        return "-"
    return f"{rate * 100:.1f}% [{low * 100:.1f}-{high * 100:.1f}]"


def format_percent(value: float | None) -> str:
    """A fraction as ``"62.5%"``; ``"-"`` for None or NaN (nothing to estimate it from, e.g.
    pass@k of a condition where no case has k trials), as the HTML report shows it."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value * 100:.1f}%"


def format_pass_k(pass_k: tuple[int, float, float] | None) -> str:
    """``"pass@3 66.7% / pass^3 33.3%"`` from ``(k, pass@k, pass^k)``
    (:func:`bench.report.episodes.condition_summary`); ``"-"`` for None (one trial) or an
    estimate that is NaN."""
    if pass_k is None:
        return "-"
    k, at_k, hat_k = pass_k
    if math.isnan(at_k) or math.isnan(hat_k):
        return "-"
    return f"pass@{k} {format_percent(at_k)} / pass^{k} {format_percent(hat_k)}"


def _total(records: list[Mapping[str, Any]], column: str) -> float:
    """The sum of ``column`` over ``records`` (NaN and absent count 0)."""
    return sum(0 if _missing(r.get(column)) else r[column] for r in records)


def _shown(spec: MetricSpec, records: list[Mapping[str, Any]]) -> bool:
    """A metric's column shows unless it is ``optional`` and no row carries it, or the table
    is of agent episodes only and it is a single-answer rate no row carries."""
    columns = records[0].keys() if records else set()
    if not spec.optional:
        if spec.kind != "rate" or f"{spec.name}_n" not in columns:
            return True
        episodes_only = "task_success_n" in columns and "selection_correct_n" in columns \
            and _total(records, "task_success_n") > 0 \
            and _total(records, "selection_correct_n") == 0
        return not episodes_only or _total(records, f"{spec.name}_n") > 0
    column = f"{spec.name}_n" if spec.kind == "rate" else f"{spec.name}_mean"
    if column not in columns:
        return False
    if spec.kind == "rate":
        return _total(records, column) > 0
    return any(not _missing(r.get(column)) for r in records)


# decimals of a non-rate metric's mean, by kind
_DECIMALS = {"mean": 3, "count": 1, "tokens": 0, "usd": 6, "seconds": 2}


def _cell(spec: MetricSpec, record: Mapping[str, Any]) -> str:
    """One metric's cell: a rate with its interval, else the mean formatted by kind."""
    name = spec.name
    if spec.kind == "rate":
        return format_rate(record[f"{name}_rate"], record[f"{name}_low"],
                           record[f"{name}_high"], record[f"{name}_n"])
    value = record.get(f"{name}_mean")
    return "-" if _missing(value) else f"{value:.{_DECIMALS[spec.kind]}f}"


def summary_table(summary: Records, title: str | None = None, trials: int = 1,
                  drafts: Iterable[str] = ()) -> Table:
    """A rich Table of :func:`bench.stats.summary.summarize` output (one row per variant).

    ``trials``: trials per case in the rows; with more than one the caption says that the
    Wilson intervals treat a case's trials as independent rows (the HTML report's
    case-clustered bootstrap does not). ``drafts``: variants whose descriptions are
    unreviewed drafts (``bench variants draft``), shown as ``<variant> (draft)``.

    Provider ids are never cut: ``replay:`` file paths are shortened to their distinguishing
    end (:func:`shown_provider_ids`), and an id wider than its column wraps onto more lines.
    The figure columns' headers wrap too (their values are single words), which leaves the
    provider column room on a narrow terminal."""
    drafts = set(drafts)
    records = as_records(summary)
    table = Table(title=title, title_justify="left",
                  caption="rates with 95% Wilson intervals \\[low-high]"
                          + (f" over rows ({trials} trials per case counted as independent "
                             "rows; bench report: case-clustered bootstrap intervals)"
                             if trials > 1 else "") + "; - : no case of that kind, or not reported by the provider",
                  caption_justify="left")
    providers = shown_provider_ids(str(r["provider"]) for r in records)
    # fold: a column squeezed below an id's length wraps it onto more lines, never cuts it
    table.add_column("provider", overflow="fold")
    table.add_column("variant", overflow="fold")
    table.add_column("cases", justify="right")
    columns = [spec for spec in metric_specs(view="table") if _shown(spec, records)]
    for spec in columns:
        table.add_column(spec.label, justify="right")
    # reasoning tokens: only when some row has them (most runs have none)
    keys = records[0].keys() if records else set()
    has_reasoning = "mean_reasoning_tokens" in keys
    for label in ("tool-def tokens", "mean prompt tokens",
                  *(("mean reasoning tokens",) if has_reasoning else ()),
                  "p50 latency s", "cases/s"):
        table.add_column(label, justify="right")
    has_cost = "cost_usd" in keys
    if has_cost:
        table.add_column("cost USD (per case)", justify="right")
    for record in records:
        variant = str(record["variant"]) + (" (draft)" if record["variant"] in drafts else "")
        cells = [escape(providers[str(record["provider"])]), escape(variant),
                 str(record["cases"])]
        for spec in columns:
            cells.append(_cell(spec, record))
        tokens = record["tool_definition_tokens"]
        cells.append("-" if _missing(tokens) else str(int(tokens)))
        cells.append(f"{record['mean_prompt_tokens']:.0f}")
        if has_reasoning:
            reasoning = record["mean_reasoning_tokens"]
            cells.append("-" if _missing(reasoning) else f"{reasoning:.0f}")
        cells.append(f"{record['p50_latency_s']:.2f}")
        cells.append(f"{record['cases_per_s']:.2f}")
        if has_cost:
            cost = record["cost_usd"]
            cells.append("-" if _missing(cost) else
                         f"{cost:.4f} ({record['cost_per_case_usd']:.6f})")
        table.add_row(*cells)
    return table


def bucket_rich_table(table: Records, title: str | None = None,
                      caption: str | None = None) -> Table:
    """A rich Table of :func:`bench.stats.buckets.bucket_table`: per provider and variant, one
    row per information bucket with tool selection and arguments (95% Wilson intervals), as
    :func:`bucket_view` gives them. ``caption``: printed under it (the inter-rater kappa of
    the buckets, :meth:`bench.datasets.agreement.InfoAgreement.line`)."""
    out = Table(title=title or "per information bucket (the lowest level whose text carries "
                               "what a case needs)", title_justify="left",
                caption=escape(caption) if caption else None, caption_justify="left")
    for column in ("provider", "variant", "info", "cases"):
        out.add_column(column, overflow="fold", justify="right" if column == "cases" else "left")
    view = bucket_view(table)
    if view is None:
        return out
    for label in view["metrics"]:
        out.add_column(label, justify="right")
    providers = shown_provider_ids(str(r[0]) for r in view["rows"])
    for provider, variant, info, *cells in view["rows"]:
        out.add_row(escape(providers[provider]), escape(variant), escape(info), *cells)
    return out


def bucket_view(table: Records) -> dict[str, Any] | None:
    """The per-bucket table as the page shows it: ``{"metrics": [label, ...], "rows":
    [[provider, variant, bucket, cases, rate text, ...], ...]}`` (rates as
    :func:`bench.report.table.format_rate`, ``-`` where no row applies); None when the table
    is empty (runs stored before buckets)."""
    from bench.scoring.registry import get_metric
    from bench.stats.buckets import BUCKET_METRICS

    records = as_records(table)
    if not records:
        return None
    shown = [m for m in BUCKET_METRICS if f"{m}_n" in records[0]]
    rows = []
    for record in records:
        cells = [str(record["provider"]), str(record["variant"]), str(record["info"]),
                 str(record["n"])]
        for metric in shown:
            n = int(record[f"{metric}_n"])
            cells.append(format_rate(record[metric], record[f"{metric}_low"],
                                     record[f"{metric}_high"], n) if n else "-")
        rows.append(cells)
    return {"metrics": [get_metric(m).label for m in shown], "rows": rows}


def bounds(record: Any, metric: str) -> tuple[Any, Any]:
    """The interval of ``metric`` in an aggregate record or frame: the case-clustered
    bootstrap one (``<m>_boot_low/_high``, present with trials > 1) when it is there, else
    Wilson's (``<m>_low/_high``)."""
    boot = f"{metric}_boot_low"
    if boot in record:
        low, high = record[boot], record[f"{metric}_boot_high"]
        if not isinstance(low, float) or not math.isnan(low):
            return low, high
    return record[f"{metric}_low"], record[f"{metric}_high"]


# what one column of a rich table takes besides its text: a space each side and a rule
_COLUMN_FRAME = 3
# a key column (provider, variant) wider than this folds onto more lines instead of pushing
# the figures into another table
_KEY_FOLD = 24


def _plain(cell: Any) -> str:
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(str(cell)).plain if isinstance(cell, str) else str(cell)


def _needed(column: Any) -> int:
    """The narrowest width at which no word of ``column`` (header or cell) is cut: its
    longest word (rich wraps a cell at spaces, so "62.5% [51.2-72.6]" stacks its rate over
    its interval)."""
    words = [word for text in (_plain(column.header), *map(_plain, column.cells))
             for word in text.split()]
    return max((len(word) for word in words), default=1)


def _natural(column: Any) -> int:
    """The width of ``column`` with no cell wrapped: its longest line."""
    return max((len(line) for text in (_plain(column.header), *map(_plain, column.cells))
                for line in text.splitlines() or [""]), default=1)


def _widths(needed: list[int], natural: list[int], room: int) -> list[int]:
    """Column widths summing to at most ``room`` (when the ``needed`` ones do): each column
    starts at its ``needed`` width, and what is left widens the columns closest to their
    ``natural`` width first, so that as many as possible fit on one line."""
    widths = list(needed)
    left = room - sum(widths)
    for index in sorted(range(len(widths)), key=lambda i: natural[i] - needed[i]):
        grow = max(0, min(natural[index] - widths[index], left))
        widths[index] += grow
        left -= grow
    return widths


def fitted_tables(table: Table, width: int, keys: int = 1) -> list[Table]:
    """``table`` as one or more tables that fit ``width`` terminal columns without cutting
    a word of any cell or header: figures wrap at spaces (an interval under its rate, a
    metric name over two lines), and when even that is too wide, the columns after the
    first ``keys`` are split over stacked tables that each repeat the ``keys`` columns
    (provider, variant: which row is which), the first with the title, the last with the
    caption. A key column wider than 24 characters folds onto more lines.

    rich itself shrinks the widest columns first when a table is too wide, which can cut a
    narrower column's word; so each column's width is set here: at least its longest word,
    more where there is room.

    Args:
        table: a rich table (its cells are read back: :attr:`rich.table.Column.cells`).
        width: the terminal's width in characters (e.g. ``Console.width``).
        keys: how many leading columns identify a row.

    Returns:
        ``[table]`` unchanged when it fits at its natural width, else the fitted tables.
    """
    columns = list(table.columns)
    keys = min(keys, len(columns))
    natural = [_natural(c) for c in columns]
    if sum(natural) + _COLUMN_FRAME * len(columns) + 1 <= width:
        return [table]
    needed = [min(_needed(c), _KEY_FOLD) if i < keys else _needed(c)
              for i, c in enumerate(columns)]
    key_width = sum(needed[:keys]) + _COLUMN_FRAME * keys + 1
    chunks: list[list[int]] = [[]]
    used = key_width
    for index in range(keys, len(columns)):
        need = needed[index] + _COLUMN_FRAME
        if chunks[-1] and used + need > width:
            chunks.append([])
            used = key_width
        chunks[-1].append(index)
        used += need
    cells = [list(column.cells) for column in columns]
    out = []
    for number, chunk in enumerate(chunks):
        shown = list(range(keys)) + chunk
        room = width - _COLUMN_FRAME * len(shown) - 1
        sizes = _widths([needed[i] for i in shown], [natural[i] for i in shown], room)
        part = Table(title=table.title if number == 0 else
                     f"{_plain(table.title or '')} (continued)".strip(),
                     title_justify=table.title_justify,
                     caption=table.caption if number == len(chunks) - 1 else None,
                     caption_justify=table.caption_justify, box=table.box,
                     show_lines=table.show_lines)
        for index, size in zip(shown, sizes):
            column = columns[index]
            part.add_column(column.header, justify=column.justify, overflow="fold",
                            width=size)
        for row in range(table.row_count):
            part.add_row(*(cells[index][row] for index in shown))
        out.append(part)
    return out
