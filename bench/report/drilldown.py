"""The drill-down data the report page embeds (:func:`drilldown`): every row, compact,
strings interned, model-controlled texts capped (:mod:`bench.report.caps`); built one row
at a time (:class:`Drilldown`) so the page can be written as the rows are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from bench.report.caps import (ERROR_LIMIT, NAME_LIMIT, TEXT_LIMIT, _cap_list, _capped_calls,
                               _capped_errors, _cut, _name)
from bench.report.data import (OUTCOMES, LoadedRun, _optional_float, execution_codes,
                               row_outcome, variant_order)
from bench.results import Row


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
        field is capped (:mod:`bench.report.caps`): answers and texts at ``TEXT_LIMIT``
        characters, each call's arguments at ``ARGUMENTS_LIMIT``, tool names at
        ``NAME_LIMIT``, parse and argument errors at ``ERROR_LIMIT``, calls and argument
        errors at ``LIST_LIMIT`` per row. ``episode`` is None on a single-answer row, else
        ``[anchor or None, trajectory]``: the element id of the episode's timeline on the
        page (``anchors`` maps a row's key to it; None when the episode is not
        drawn) and :meth:`bench.results.RowEpisode.trajectory_text` cut to
        ``TEXT_LIMIT``. The page streams the same data (:class:`Drilldown`).
    """
    builder = Drilldown(runs, anchors)
    rows = list(drilldown_rows(runs, builder))
    return {"rows": rows, **builder.tables()}
