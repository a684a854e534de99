"""Fast readers of registered metrics from result rows, without pandas.

One place decides where a metric's value lives in a :class:`bench.results.Row` (its
``metrics``, the row itself, its ``usage``, or a custom reader), so the frame
(:mod:`bench.stats.frame`) and the streamed run summary (:mod:`bench.stats.running`) read
the same values.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Callable

from pydantic import BaseModel

from bench.results import Row, RowMetrics, RowUsage
from bench.scoring.registry import MetricSpec

_ROW_FIELDS = frozenset(Row.model_fields)
_METRIC_FIELDS = frozenset(RowMetrics.model_fields)
_USAGE_FIELDS = frozenset(RowUsage.model_fields)
Reader = Callable[[Row], object]


def _as_stored(model: type[BaseModel], name: str) -> bool:
    """Field ``name`` of ``model`` reads as the row's JSON object holds it: it is required
    (always there) or defaults to None (None whether absent or null)."""
    info = model.model_fields.get(name)
    return info is not None and (info.is_required() or (
        info.default is None and info.default_factory is None))


def _first_present(names: tuple[str, ...]) -> Reader:
    """A reader of the first of ``names`` a row's ``metrics`` holds (a field that was set, or
    an unknown field kept from the file), None when it holds none."""
    declared = tuple((name, name in _METRIC_FIELDS) for name in names)

    def read(row: Row) -> object:
        metrics = row.metrics
        given = metrics.model_fields_set
        extra = metrics.model_extra or {}
        for name, is_field in declared:
            if is_field:
                if name in given:
                    return getattr(metrics, name)
            elif name in extra:
                return extra[name]
        return None
    return read


class MetricReaders:
    """Where the per-row loop finds the values of a group of metrics, cheapest first:
    attributes of ``row.metrics`` (``metric_names``), of ``row`` (``row_names``) and of
    ``row.usage`` (``usage_names``) that are required or default to None, read with one
    ``attrgetter`` per object; then any other reader (``other``: aliases, unknown fields,
    custom readers: :meth:`MetricSpec.row_value`)."""

    def __init__(self, specs: list[MetricSpec]) -> None:
        self.metric_names: list[str] = []
        self.row_names: list[str] = []
        self.usage_names: list[str] = []
        self.other: list[tuple[str, Reader]] = []
        for spec in specs:
            plain = spec.value is None and not spec.aliases
            path = spec.path
            if plain and not path and spec.name in _METRIC_FIELDS \
                    and _as_stored(RowMetrics, spec.name):
                self.metric_names.append(spec.name)
            elif plain and len(path) == 1 and path[0] in _ROW_FIELDS \
                    and _as_stored(Row, path[0]):
                self.row_names.append(spec.name)
            elif plain and len(path) == 2 and path[0] == "usage" \
                    and path[1] in _USAGE_FIELDS and _as_stored(RowUsage, path[1]):
                self.usage_names.append(spec.name)
            elif spec.value is None and not path and spec.aliases:
                self.other.append((spec.name, _first_present((spec.name, *spec.aliases))))
            else:
                self.other.append((spec.name, spec.row_value))
        by_name = {s.name: s for s in specs}
        self.metric_get = _getter(self.metric_names)
        self.row_get = _getter([by_name[n].path[0] for n in self.row_names])
        self.usage_get = _getter([by_name[n].path[1] for n in self.usage_names])
        self._no_usage: tuple[None, ...] = (None,) * len(self.usage_names)

    def names(self) -> list[str]:
        """Every metric's name, in the order the getters fill them."""
        return [*self.metric_names, *self.row_names, *self.usage_names,
                *(n for n, _ in self.other)]

    def parts(self) -> tuple[Callable[[object], tuple[object, ...]],
                             Callable[[object], tuple[object, ...]],
                             Callable[[object], tuple[object, ...]], tuple[None, ...],
                             list[Reader]]:
        """(metrics getter, row getter, usage getter, the usage values of a row without usage,
        the other readers): what the per-row loop concatenates, in :meth:`names` order."""
        return (self.metric_get, self.row_get, self.usage_get, self._no_usage,
                [read for _, read in self.other])


def _getter(names: list[str]) -> Callable[[object], tuple[object, ...]]:
    """``attrgetter`` of ``names`` that always returns a tuple."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda record: (get(record),)
    return attrgetter(*names)


def row_reader(readers: MetricReaders) -> Callable[[Row], tuple[object, ...]]:
    """A function of a row giving its values of ``readers``' metrics, in
    :meth:`MetricReaders.names` order (None where the row does not carry one)."""
    get_metric, get_row, get_usage, no_usage, others = readers.parts()

    def read(row: Row) -> tuple[object, ...]:
        usage = row.usage
        found = get_metric(row.metrics) + get_row(row) + (
            no_usage if usage is None else get_usage(usage))
        return found + tuple([other(row) for other in others]) if others else found
    return read
