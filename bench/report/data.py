"""Everything a report shows, gathered from stored runs (no rendering here).

Rows are read through :class:`bench.store.RunStore`; rates and intervals come from
``bench.stats``. The report's own rules are few and live here: a row's outcome (pass / fail /
unparseable), how several runs are labelled, and what of each row the drill-down embeds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
import sys
from typing import Any, Iterable, Iterator, Mapping, Sequence, overload

import pandas as pd

from bench.errors import BenchError
from bench.plural import count, noun
from bench.project import Project, current_project
from bench.models import condition_variant
from bench.results import Manifest, Row
from bench.store import RowsRead, StoredRows
from bench.scoring.registry import get_metric, metric_names
from bench.stats.aggregate import aggregate
from bench.stats.frame import compact_frame
from bench.stats.summary import summarize

# The rates the report shows are the registry's ``report`` view, the per-tool and per-tag
# tables its ``groups`` view (bench.scoring.registry); a metric shows when at least one row
# carries it (execution outcomes only after the executor ran).
OUTCOMES = ("pass", "fail", "unparseable")
# Model-controlled fields are cut in the report (the run's results.jsonl keeps all): a hostile
# answer (a 1 MiB argument, thousands of calls) must not bloat the page (issue 19, item 5).
TEXT_LIMIT = 4000  # characters of a raw answer, model text or query
ARGUMENTS_LIMIT = 2000  # characters of one call's arguments (as JSON)
NAME_LIMIT = 120  # characters of a tool name
ERROR_LIMIT = 500  # characters of a parse error or one argument error
LIST_LIMIT = 20  # calls and argument errors shown per row


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


@overload
def _cut(text: str, limit: int = TEXT_LIMIT) -> str: ...
@overload
def _cut(text: object, limit: int = TEXT_LIMIT) -> str | None: ...
def _cut(text: object, limit: int = TEXT_LIMIT) -> str | None:
    """``text`` (JSON for non-strings; None stays None) cut to ``limit`` characters plus a
    note of how many more ``results.jsonl`` holds."""
    if text is None:
        return None
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    more = count(len(text) - limit, "more character")
    return text[:limit] + f"\n[... {more} in results.jsonl]"


def cap_text(value: object, limit: int = TEXT_LIMIT) -> str | None:
    """``value`` as text (JSON for non-strings) cut to ``limit`` characters plus a note of
    how many more ``results.jsonl`` holds; None stays None. For every model-controlled string
    a report shows (tool names, arguments, errors, answers)."""
    return _cut(value, limit)


def _cap_arguments(arguments: Any) -> Any:
    """A call's arguments as the page shows them: the object itself when its JSON is at most
    :data:`ARGUMENTS_LIMIT` characters, else that JSON cut (a string)."""
    if isinstance(arguments, str) or arguments is None:
        return _cut(arguments, ARGUMENTS_LIMIT)
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return arguments if len(text) <= ARGUMENTS_LIMIT else _cut(text, ARGUMENTS_LIMIT)


def _cap_list(items: Any, limit: int = LIST_LIMIT) -> tuple[list[Any], int]:
    """(the first ``limit`` items of a list, how many were left out); not a list: ([], 0)."""
    if not isinstance(items, list):
        return [], 0
    return items[:limit], max(0, len(items) - limit)


def _capped_calls(row: Row) -> list[list[Any]]:
    """``[[name, arguments], ...]`` of a row's parsed calls, every part capped; a last entry
    says how many calls were left out."""
    calls, more = _cap_list(row.calls())
    shown = [[_name(c.name),
              _cap_arguments(c.arguments) if c.valid
              else _cut(c.raw_arguments, ARGUMENTS_LIMIT)]
             for c in calls]
    if more:
        shown.append([f"[... {count(more, 'more call')} in results.jsonl]", ""])
    return shown


def _name(name: Any) -> str | None:
    """A tool name as the report shows it: text cut to :data:`NAME_LIMIT`; None stays None."""
    return None if name is None else _cut(str(name), NAME_LIMIT)


def _capped_errors(errors: Any) -> list[str]:
    """A row's argument errors as text, each cut to :data:`ERROR_LIMIT`, at most
    :data:`LIST_LIMIT` of them (a last line says how many more)."""
    shown, more = _cap_list(errors)
    lines = [_cut(str(e), ERROR_LIMIT) or "" for e in shown]
    if more:
        lines.append(f"[... {count(more, 'more argument error')} in results.jsonl]")
    return lines


def _optional_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


@dataclass
class Lookup:
    """Interns repeated strings (variants, providers, codes, tools) as list indexes."""

    values: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def __call__(self, value: str) -> int:
        """The index of ``value`` (added when new)."""
        if value not in self.index:
            self.index[value] = len(self.values)
            self.values.append(value)
        return self.index[value]


DRILLDOWN_FIELDS = ("case", "variant", "provider", "trial", "outcome", "codes", "tools", "raw",
                    "calls", "parse_error", "text", "argument_errors", "execution", "latency_s",
                    "tokens", "cost_usd", "run", "cache", "episode")


class Drilldown:
    """Builds the drill-down data the page embeds (:func:`drilldown`) one row at a time, so a
    writer can stream the rows (:func:`bench.report.html.write_html`) instead of holding a
    list per row of the run: :meth:`row` gives one row's list, :meth:`tables` the lookups the
    rows index into, complete once every row was given."""

    def __init__(self, runs: Sequence[LoadedRun],
                 anchors: Mapping[str, str] | None = None) -> None:
        self.anchors = anchors or {}
        self.variants, self.providers, self.codes = Lookup(), Lookup(), Lookup()
        self.tools, self.tags = Lookup(), Lookup()
        for name in variant_order(runs):
            self.variants(name)
        self.outcomes = Lookup(list(OUTCOMES), {o: i for i, o in enumerate(OUTCOMES)})
        self.cases: dict[str, int] = {}
        self.case_rows: list[list[Any]] = []
        self.run_ids = [run.run_id for run in runs]

    def row(self, run_index: int, row: Row) -> list[Any]:
        """One row's list, in :data:`DRILLDOWN_FIELDS` order (see :func:`drilldown`), of
        ``row`` of the run at ``run_index``."""
        expected = row.expected.model_dump(exclude_unset=True) if row.expected else {}
        case_key = f"{run_index}|{row.case_id}"
        if case_key not in self.cases:
            self.cases[case_key] = len(self.case_rows)
            self.case_rows.append([row.case_id, _cut(row.query),
                                   [self.tags(str(t)) for t in row.tags or []], expected])
        metrics = row.metrics
        calls = _capped_calls(row)
        parsed_calls = _cap_list(row.calls())[0]
        raw = row.response.raw if row.response is not None else None
        text = row.parsed.text if row.parsed is not None else None
        execution = {k: v for k, v in metrics.model_dump(exclude_unset=True).items()
                     if k.startswith("execution")}
        for name in ("execution", "executor"):  # the executor's per-call results
            if row.extra(name) is not None:
                execution["result"] = row.extra(name)
        names = {_name(c.get("name")) for c in expected.get("calls") or []
                 if isinstance(c, dict)} | {c[0] for c in calls[:len(parsed_calls)]}
        usage = row.usage
        outcome = row_outcome(row)
        return [
            self.cases[case_key], self.variants(row.variant), self.providers(row.provider),
            row.trial, self.outcomes(outcome),
            [self.codes(_cut(str(c), NAME_LIMIT)) for c in
             _cap_list(metrics.error_codes)[0] + execution_codes(row, outcome)],
            # names sorted first: a set's order changes between processes (str hashing),
            # and the lookup's numbering follows first use
            sorted(self.tools(n) for n in sorted(str(n) for n in names if n is not None)),
            _cut(raw), calls,
            _cut(row.parsed.error if row.parsed is not None else None, ERROR_LIMIT),
            None if text == raw else _cut(text),
            _capped_errors(metrics.argument_errors),
            _cut(execution, 2000) if execution else None,
            row.latency_s,
            [usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens]
            if usage is not None else [None, None, None],
            _optional_float(row.cost_usd), run_index, row.cache,
            None if row.episode is None else [
                self.anchors.get(row.key),
                row.episode.trajectory_text(TEXT_LIMIT)],
        ]

    def tables(self) -> dict[str, Any]:
        """``{"fields", "cases", "variants", "providers", "codes", "tools", "tags",
        "outcomes", "runs"}`` as :func:`drilldown` describes them, for the rows given so
        far."""
        return {"fields": list(DRILLDOWN_FIELDS), "cases": self.case_rows,
                "variants": self.variants.values, "providers": self.providers.values,
                "codes": self.codes.values, "tools": self.tools.values,
                "tags": self.tags.values, "outcomes": self.outcomes.values,
                "runs": self.run_ids}


def drilldown_rows(runs: Sequence[LoadedRun], builder: Drilldown) -> Iterable[list[Any]]:
    """Each row of ``runs`` as ``builder``'s list (:meth:`Drilldown.row`), in run order."""
    for run_index, run in enumerate(runs):
        for row in run.rows:
            yield builder.row(run_index, row)


def drilldown(runs: Sequence[LoadedRun],
              anchors: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The drill-down data the page embeds: compact, strings interned, texts capped.

    Returns:
        ``{"fields": [...], "rows": [[...], ...], "cases": [[id, query, tags, expected], ...],
        "variants", "providers", "codes", "tools", "tags", "outcomes", "runs": [str]}``;
        each row is a list in ``fields`` order with indexes into those lists. Model output is
        plain data here; the page shows it with ``textContent`` only. Every model-controlled
        field is capped: answers and texts at :data:`TEXT_LIMIT` characters, each call's
        arguments at :data:`ARGUMENTS_LIMIT`, tool names at :data:`NAME_LIMIT`, parse and
        argument errors at :data:`ERROR_LIMIT`, calls and argument errors at
        :data:`LIST_LIMIT` per row. ``episode`` is None on a single-answer row, else
        ``[anchor or None, trajectory]``: the element id of the episode's timeline on the
        page (``anchors`` maps a row's key to it; None when the episode is not
        drawn) and :meth:`bench.results.RowEpisode.trajectory_text` cut to
        :data:`TEXT_LIMIT`. The page streams the same data (:class:`Drilldown`).
    """
    builder = Drilldown(runs, anchors)
    rows = list(drilldown_rows(runs, builder))
    return {"rows": rows, **builder.tables()}


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
