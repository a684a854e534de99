"""The metric registry: every per-row metric bench reports, defined once.

A :class:`MetricSpec` says what a metric is called (``name``: its results-frame column and its
key in a row's ``metrics``; ``title``: the report's and comparison's label; ``label``: the
terminal table's short header), which direction is better (``polarity``), what kind of figure it
is (``kind``), how to read its per-row value from a result row (``value``) and where it is shown
(``views``). The terminal table (:mod:`bench.stats.summary`, :mod:`bench.report.table`), the
HTML/Markdown report (:mod:`bench.report`), ``bench compare`` (:mod:`bench.compare`) and the gate
(:mod:`bench.gate`) all read this list, so a new metric is one :func:`register_metric` call (or
one entry in :data:`_BUILTIN`)::

    from bench.scoring.registry import MetricSpec, register_metric

    register_metric(MetricSpec(
        name="answered_briefly", title="brief answer", label="brief",
        value=lambda row: len(str(row.response.raw or "") if row.response else "") < 200))

The scorer (:mod:`bench.scoring.metrics`) computes most values into a row's ``metrics``; the
registry only reads rows, so it sits beside the scorer and everything downstream of it (stats,
report, compare, gate) imports it, never the other way round (design brief §3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal, Mapping

from pydantic import BaseModel

from bench.results import Row

Polarity = Literal["higher", "lower"]
# rate: a per-row bool, shown as successes / applicable rows with a confidence interval;
# mean: a per-row float averaged over the rows that carry it (e.g. selection F1);
# count, tokens, usd (US dollars), seconds: per-row numbers, shown as a mean per row.
Kind = Literal["rate", "mean", "count", "tokens", "usd", "seconds"]
KINDS: tuple[str, ...] = ("rate", "mean", "count", "tokens", "usd", "seconds")
# Where a metric is shown: ``table`` the terminal table of ``bench run`` / ``bench show``;
# ``report`` the HTML and Markdown headline tables; ``groups`` the report's per-tool and
# per-tag tables; ``compare`` tested by ``bench compare`` and eligible for the gate. Every view
# but ``table`` (which shows a mean for other kinds) takes rates only.
VIEWS: tuple[str, ...] = ("table", "report", "groups", "compare")
RowValue = Callable[[Row], object]
"""A metric's reader: ``value(row)`` is the row's value (bool / number / None; a metric read
from a row's ``metrics`` may be any JSON value a writer stored there)."""


def field_value(record: object, name: str) -> object:
    """Field ``name`` of ``record`` as the row's JSON object holds it: a contract model's
    field when it was set (read or built; None when left to its default, as the JSON object
    lacks it), else an unknown field kept from the file (``model_extra``); a mapping's key;
    None for anything else.
    """
    if isinstance(record, BaseModel):
        if name in type(record).model_fields:
            return getattr(record, name) if name in record.model_fields_set else None
        return (record.model_extra or {}).get(name)
    if isinstance(record, Mapping):
        return record.get(name)
    return None


def has_field(record: BaseModel, name: str) -> bool:
    """``name`` is in the JSON object of ``record``: a field that was set, or an unknown
    field kept from the file."""
    return name in record.model_fields_set or name in (record.model_extra or {})


@dataclass(frozen=True)
class MetricSpec:
    """One metric.

    Attributes:
        name: frame column and key in a row's ``metrics`` (snake_case, unique).
        title: long label (HTML/Markdown report, comparison tables), e.g. ``"tool selection"``.
        label: short header of the terminal table, e.g. ``"exec success"``.
        polarity: ``"higher"`` or ``"lower"`` is better (a regression in ``bench compare`` is a
            significant move the other way).
        kind: one of :data:`KINDS`; ``rate`` values are bool / None (None: the metric does not
            apply to the row and leaves its denominator), the others numbers / None.
        value: ``value(row) -> bool | float | None`` reading a result row (a
            :class:`bench.results.Row`: its fields are attributes, e.g. ``row.parsed.calls``,
            ``row.response.raw``); None reads ``path``.
        path: where the value sits in a row when ``value`` is None: ``()`` is
            ``row.metrics.<name>`` (or the first of ``aliases`` present), ``("latency_s",)``
            ``row.latency_s``, ``("usage", "prompt_tokens")`` ``row.usage.prompt_tokens``
            (:func:`field_value` at each step: a field left unset reads as None).
        aliases: other keys a row's ``metrics`` may use for the same value.
        views: the places it is shown, a subset of :data:`VIEWS`.
        primary: one of the headline pair: the gate's default metrics, the flips ``bench
            compare`` prints by default, the report's ablation charts.
        optional: the terminal table shows it only when some row carries it.
    """

    name: str
    title: str
    label: str
    polarity: Polarity = "higher"
    kind: Kind = "rate"
    value: RowValue | None = None
    aliases: tuple[str, ...] = ()
    path: tuple[str, ...] = ()
    views: frozenset[str] = field(default_factory=lambda: frozenset(VIEWS))
    primary: bool = False
    optional: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"metric name '{self.name}' is not a snake_case identifier")
        if self.polarity not in ("higher", "lower"):
            raise ValueError(f"metric '{self.name}': polarity must be 'higher' or 'lower', "
                             f"got '{self.polarity}'")
        if self.kind not in KINDS:
            raise ValueError(f"metric '{self.name}': kind must be one of {', '.join(KINDS)}, "
                             f"got '{self.kind}'")
        object.__setattr__(self, "views", frozenset(self.views))
        unknown = sorted(self.views - set(VIEWS))
        if unknown:
            raise ValueError(f"metric '{self.name}': unknown view(s) {', '.join(unknown)} "
                             f"(choose from {', '.join(VIEWS)})")
        rate_only = sorted(self.views - {"table"})
        if rate_only and self.kind != "rate":
            # the report's cells are rates with intervals; McNemar's test pairs binary outcomes
            raise ValueError(f"metric '{self.name}': only rates can be shown in "
                             f"{', '.join(rate_only)} (kind is '{self.kind}'; use views="
                             "{'table'})")

    def row_value(self, row: Row) -> object:
        """This metric's value in ``row`` (see ``value``); None when the row lacks it."""
        if self.value is not None:
            return self.value(row)
        if self.path:
            found: object = row
            for key in self.path:
                found = field_value(found, key)
            return found
        metrics = row.metrics
        for key in (self.name, *self.aliases):
            if has_field(metrics, key):
                return field_value(metrics, key)
        return None

    def is_good(self, value: bool) -> bool:
        """Whether a rate's per-row ``value`` is the good outcome under ``polarity``."""
        return bool(value) == (self.polarity == "higher")


_NOWHERE: frozenset[str] = frozenset()
_TABLE_REPORT_COMPARE = frozenset({"table", "report", "compare"})
_REPORT_COMPARE = frozenset({"report", "compare"})
_ALL = frozenset(VIEWS)

# Display order = this order. Definitions of the scored values: bench.scoring.metrics.
_BUILTIN: tuple[MetricSpec, ...] = (
    MetricSpec("selection_correct", "tool selection", "tool selection", views=_ALL, primary=True),
    MetricSpec("arguments_correct", "arguments", "arguments", views=_ALL, primary=True),
    MetricSpec("arguments_correct_lenient", "arguments (lenient)", "arguments (lenient)",
               views=_REPORT_COMPARE),
    MetricSpec("schema_valid", "arg schema valid", "schema valid", views=_TABLE_REPORT_COMPARE),
    MetricSpec("schema_valid_lenient", "arg schema valid (lenient)", "schema valid (lenient)",
               views=frozenset({"compare"})),
    MetricSpec("no_call_correct", "no-call", "no-call", views=_TABLE_REPORT_COMPARE),
    MetricSpec("ask_correct", "ask", "ask", views=_TABLE_REPORT_COMPARE),
    MetricSpec("ask_no_call", "ask: no call", "ask: no call", views=_REPORT_COMPARE,
               optional=True),
    # the executor may name its outcomes exec_success / exec_match
    MetricSpec("execution_success", "execution success", "exec success", views=_ALL,
               aliases=("exec_success",)),
    MetricSpec("execution_match", "execution match", "exec match", aliases=("exec_match",),
               views=_TABLE_REPORT_COMPARE),
    # a policy figure, not the answer's quality: shown, never compared or gated
    # (bench.executor.judge: refused calls are left out of execution_success)
    MetricSpec("write_refused", "write calls refused (run's permissions)", "writes refused",
               "lower", views=frozenset({"table", "report"}), optional=True),
    # BFCL's own checker (bench.scoring.bfcl.run_verdict): imported BFCL datasets only
    MetricSpec("bfcl_valid", "BFCL checker", "BFCL checker", views=_TABLE_REPORT_COMPARE,
               optional=True),
    # tool retrieval (bench.toolspace; rows of --tools / --retriever runs only)
    MetricSpec("retrieved_all", "retrieval recall@k (all expected tools sent)",
               "retrieval@k", views=_TABLE_REPORT_COMPARE, optional=True),
    MetricSpec("retrieval_recall", "retrieval recall (fraction of expected tools sent)",
               "retr. recall", kind="mean", views=_NOWHERE, optional=True),
    MetricSpec("error_not_retrieved", "error: expected tool not retrieved", "not retrieved",
               "lower", views=_REPORT_COMPARE, optional=True),
    MetricSpec("error_confused", "error: retrieved but confused", "confused", "lower",
               views=_REPORT_COMPARE, optional=True),
    # error flags: how often a failure occurs
    MetricSpec("hallucinated_tool", "hallucinated tool", "halluc. tool", "lower",
               views=_NOWHERE),
    MetricSpec("hallucinated_argument", "hallucinated argument", "halluc. arg", "lower",
               views=_NOWHERE),
    MetricSpec("missing_required", "missing required argument", "missing req.", "lower",
               views=_NOWHERE),
    MetricSpec("enum_case_error", "enum case error", "enum case", "lower", views=_NOWHERE),
    MetricSpec("type_error", "argument type error", "type error", "lower", views=_NOWHERE),
    # fractions of a multi-call answer (NaN on no-call / ask cases)
    MetricSpec("selection_precision", "selection precision", "sel. precision", kind="mean",
               views=_NOWHERE),
    MetricSpec("selection_recall", "selection recall", "sel. recall", kind="mean",
               views=_NOWHERE),
    MetricSpec("selection_f1", "selection F1", "sel. F1", kind="mean", views=_NOWHERE),
    # agent episodes (bench.scoring.episodes): only rows of episode cases carry these
    MetricSpec("task_success", "task success", "task success", views=_ALL, optional=True),
    MetricSpec("forbidden_attempted", "forbidden call attempted", "forbidden", "lower",
               views=_TABLE_REPORT_COMPARE, optional=True),
    MetricSpec("stopped_by_guard", "stopped by the loop guard", "loop guard", "lower",
               views=_REPORT_COMPARE, optional=True),
    MetricSpec("trajectory_recall", "trajectory recall", "traj. recall", kind="mean",
               views=frozenset({"table"}), optional=True),
    MetricSpec("trajectory_precision", "trajectory precision", "traj. precision",
               kind="mean", views=frozenset({"table"}), optional=True),
    MetricSpec("recovery", "recovery after an error result", "recovery", kind="mean",
               views=frozenset({"table"}), optional=True),
    MetricSpec("steps", "steps (model answers)", "steps", "lower", "count",
               views=frozenset({"table"}), optional=True),
    MetricSpec("tool_calls", "tool calls", "calls", "lower", "count", views=_NOWHERE,
               optional=True),
    MetricSpec("repeated_calls", "repeated identical calls", "repeats", "lower", "count",
               views=frozenset({"table"}), optional=True),
    MetricSpec("order_violations", "order violations", "order viol.", "lower", "count",
               views=_NOWHERE, optional=True),
    MetricSpec("errors_seen", "error results", "errors", "lower", "count", views=_NOWHERE,
               optional=True),
    # usage, time and money per row (the terminal table and report aggregate these their own
    # way: median latency, summed cost, largest tool-definition size)
    MetricSpec("prompt_tokens", "prompt tokens", "prompt tokens", "lower", "tokens",
               path=("usage", "prompt_tokens"), views=_NOWHERE),
    MetricSpec("completion_tokens", "completion tokens (reasoning included)",
               "completion tokens", "lower", "tokens", path=("usage", "completion_tokens"),
               views=_NOWHERE),
    MetricSpec("cached_tokens", "cached prompt tokens", "cached tokens", "higher", "tokens",
               path=("usage", "cached_tokens"), views=_NOWHERE),
    MetricSpec("reasoning_tokens", "reasoning tokens", "reasoning tokens", "lower", "tokens",
               path=("usage", "reasoning_tokens"), views=_NOWHERE),
    MetricSpec("tool_definition_tokens", "tool-definition tokens", "tool-def tokens", "lower",
               "tokens", path=("tool_definition_tokens",), views=_NOWHERE),
    MetricSpec("sent_tool_tokens", "tool-definition tokens sent (o200k_base)",
               "sent tool tokens", "lower", "tokens", path=("retrieval", "tool_tokens"),
               views=frozenset({"table"}), optional=True),
    MetricSpec("latency_s", "latency (seconds)", "latency s", "lower", "seconds",
               path=("latency_s",), views=_NOWHERE),
    MetricSpec("cost_usd", "cost (USD at list price)", "cost USD", "lower", "usd",
               path=("cost_usd",), views=_NOWHERE),
)

_REGISTRY: dict[str, MetricSpec] = {spec.name: spec for spec in _BUILTIN}


def register_metric(spec: MetricSpec, *, replace: bool = False) -> MetricSpec:
    """Add ``spec`` at the end of the registry (shown after the built-in metrics).

    Returns:
        ``spec`` (so the call can wrap a definition).

    Raises:
        ValueError: a metric of that name exists and ``replace`` is false.
    """
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"metric '{spec.name}' is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def unregister_metric(name: str) -> None:
    """Remove a registered metric (no-op for an unknown name); mainly for tests."""
    _REGISTRY.pop(name, None)


def metric_specs(*, kind: str | Iterable[str] | None = None, view: str | None = None,
                 polarity: str | None = None) -> list[MetricSpec]:
    """The registered metrics in display order, filtered.

    Args:
        kind: a kind of :data:`KINDS` or several; None: any.
        view: only metrics shown in this view of :data:`VIEWS`; None: any.
        polarity: ``"higher"`` / ``"lower"``; None: any.
    """
    kinds = {kind} if isinstance(kind, str) else set(kind) if kind is not None else None
    return [s for s in _REGISTRY.values()
            if (kinds is None or s.kind in kinds) and (view is None or view in s.views)
            and (polarity is None or s.polarity == polarity)]


def metric_names(*, kind: str | Iterable[str] | None = None, view: str | None = None,
                 polarity: str | None = None) -> list[str]:
    """Names of :func:`metric_specs` (same filters)."""
    return [s.name for s in metric_specs(kind=kind, view=view, polarity=polarity)]


def get_metric(name: str) -> MetricSpec:
    """The spec named ``name``.

    Raises:
        KeyError: no such metric.
    """
    return _REGISTRY[name]


def metric_title(name: str) -> str:
    """The title of ``name``; the name itself for an unregistered one."""
    spec = _REGISTRY.get(name)
    return spec.title if spec else name


def primary_metrics() -> list[str]:
    """The headline metrics (``primary``), in display order."""
    return [s.name for s in _REGISTRY.values() if s.primary]


def comparable_metrics() -> list[str]:
    """Rates ``bench compare`` tests (view ``compare``), in display order."""
    return metric_names(kind="rate", view="compare")


def gate_metrics() -> list[str]:
    """Rates the gate accepts: compared rates where higher is better (floors are minimums)."""
    return metric_names(kind="rate", view="compare", polarity="higher")
