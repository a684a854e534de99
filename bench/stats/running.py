"""The end-of-run table, summed while the rows stream by: no frame of every row, no pandas.

:class:`RunningSummary` gives the same records as :func:`bench.stats.summary.summarize` of
:func:`bench.stats.summary.summary_frame`, :func:`bench.stats.buckets.bucket_table` and
:func:`bench.stats.aggregate.pass_k_table` (episode task success) of the same rows, which
``tests/stats/test_running_summary.py`` checks on real runs. It keeps per (provider, variant)
counts and sums, each row's latency (8 bytes, for the median) and a 64-bit hash of each row
key (for "a row seen twice counts once"), so memory grows by tens of bytes per row instead of
a frame's hundreds, and ``bench run`` need not import pandas (about 0.25 s of CPU and 30 MiB
of RSS: ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import math
import statistics
from array import array
from typing import Iterable, Sequence

from bench.results import Row
from bench.scoring.registry import metric_specs
from bench.stats.buckets import BUCKET_METRICS, BUCKETS, UNTAGGED
from bench.stats.intervals import pass_at_k, pass_hat_k, wilson_interval
from bench.stats.readers import MetricReaders, row_reader

NAN = float("nan")
Record = dict[str, object]
"""One table row: column name -> int, float (NaN: not known) or str."""

# the usage figures the table shows besides the registry's ``table`` metrics
_NUMBERS = ("tool_definition_tokens", "prompt_tokens", "cached_tokens", "reasoning_tokens",
            "latency_s", "cost_usd")
_PASS_K_METRIC = "task_success"


def _number(value: object) -> float:
    """A stored figure as a float, NaN when absent or not a number (as ``pd.to_numeric(...,
    errors="coerce")`` reads it)."""
    if value is None:
        return NAN
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return NAN


class _Mean:
    """Sum and count of the known (non-NaN) values."""

    __slots__ = ("total", "count")

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def add(self, value: float) -> None:
        if not math.isnan(value):
            self.total += value
            self.count += 1

    def mean(self) -> float:
        return self.total / self.count if self.count else NAN


class _Group:
    """Running figures of one (provider, variant)."""

    def __init__(self, rates: int, means: int) -> None:
        self.cases: set[str] = set()
        self.rows = 0
        self.hits = [0] * rates
        self.known = [0] * rates
        self.means = [_Mean() for _ in range(means)]
        self.prompt, self.cached, self.reasoning = _Mean(), _Mean(), _Mean()
        self.tool_tokens = NAN
        self.latencies = array("d")  # known latencies, for the median
        self.first_latency = NAN
        self.cost = 0.0
        self.cost_missing = False


class RunningSummary:
    """Per-variant table, per-bucket table and pass@k of result rows fed one at a time.

    Args:
        variant_order: the variants' display order (others follow).
        unique_keys: the caller guarantees each row's ``key`` comes once (a run's own rows as
            it writes them): no key is kept, which saves about 70 bytes per row.

    Use :meth:`add` for each :class:`bench.results.Row` (or :meth:`add_all`), then read
    :meth:`summary`, :meth:`buckets`, :meth:`pass_k` and :attr:`trials`.
    """

    def __init__(self, variant_order: Sequence[str] = (), *, unique_keys: bool = False) -> None:
        self.variant_order = list(variant_order)
        self._unique_keys = unique_keys
        self._rows = 0
        specs = self._specs = metric_specs(view="table")  # read once: the columns stay fixed
        # as summary_frame: the bucket table and pass@k read only the table's rates
        self._rate_names = [s.name for s in specs if s.kind == "rate"]
        rates = MetricReaders([s for s in specs if s.kind == "rate"])
        self._read_rates = row_reader(rates)
        self._rate_at = {name: i for i, name in enumerate(rates.names())}
        self._mean_specs = [s for s in specs if s.kind != "rate"]
        number_specs = [s for s in metric_specs() if s.kind != "rate" and (
            s.name in _NUMBERS or s.name in {m.name for m in self._mean_specs})]
        numbers = MetricReaders(number_specs)
        self._read_numbers = row_reader(numbers)
        self._number_at = {name: i for i, name in enumerate(numbers.names())}
        self._carried: set[str] = set()
        self._groups: dict[tuple[str, str], _Group] = {}
        self._buckets: dict[tuple[str, str, str], list[int]] = {}
        self._has_info = False
        self._per_case: dict[tuple[str, str, str], list[int]] = {}
        self._seen: set[int] = set()
        self.trials = 0
        """Largest trial index + 1 (0 before any row)."""
        self._has_cost = False
        self._has_reasoning = False

    def add_all(self, rows: Iterable[Row]) -> RunningSummary:
        """:meth:`add` each of ``rows``; returns self."""
        for row in rows:
            self.add(row)
        return self

    def add(self, row: Row) -> None:
        """Count ``row`` (a second row with the same ``key`` is ignored: keys are kept as
        64-bit hashes, so two keys collide with odds of about rows² / 2⁶⁵)."""
        if not self._unique_keys:
            digest = hash(row.key)
            if digest in self._seen:
                return
            self._seen.add(digest)
        self._rows += 1
        self.trials = max(self.trials, row.trial + 1)
        key = (row.provider, row.variant)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(len(self._rate_names), len(self._mean_specs))
        group.rows += 1
        group.cases.add(row.case_id)
        rates = self._read_rates(row)
        for i, name in enumerate(self._rate_names):
            value = rates[self._rate_at[name]]
            if value is not None:
                self._carried.add(name)
                group.known[i] += 1
                group.hits[i] += bool(value)
        numbers = self._read_numbers(row)
        for mean, spec in zip(group.means, self._mean_specs):
            mean.add(_number(numbers[self._number_at[spec.name]]))
        self._add_usage(group, numbers)
        self._add_bucket(row, rates)
        if _PASS_K_METRIC in self._rate_at:
            success = rates[self._rate_at[_PASS_K_METRIC]]
            if success is not None:
                counts = self._per_case.setdefault((*key, row.case_id), [0, 0])
                counts[0] += bool(success)
                counts[1] += 1

    def _add_usage(self, group: _Group, numbers: tuple[object, ...]) -> None:
        def get(name: str) -> float:
            at = self._number_at.get(name)
            return NAN if at is None else _number(numbers[at])

        tokens = get("tool_definition_tokens")
        if not math.isnan(tokens) and not tokens <= group.tool_tokens:
            group.tool_tokens = tokens  # max of the known values (NaN compares False)
        group.prompt.add(get("prompt_tokens"))
        group.cached.add(get("cached_tokens"))
        reasoning = get("reasoning_tokens")
        group.reasoning.add(reasoning)
        self._has_reasoning = self._has_reasoning or reasoning > 0
        latency = get("latency_s")
        if group.rows == 1:
            group.first_latency = latency
        if not math.isnan(latency):
            group.latencies.append(latency)
        cost = get("cost_usd")
        if math.isnan(cost):
            group.cost_missing = True
        else:
            self._has_cost = True
            group.cost += cost

    def _add_bucket(self, row: Row, rates: tuple[object, ...]) -> None:
        info = row.info
        self._has_info = self._has_info or info is not None
        counts = self._buckets.setdefault((row.provider, row.variant, info or UNTAGGED),
                                          [0] * (1 + 2 * len(BUCKET_METRICS)))
        counts[0] += 1
        for i, metric in enumerate(BUCKET_METRICS):
            at = self._rate_at.get(metric)
            value = None if at is None else rates[at]
            if value is not None:
                counts[1 + 2 * i] += bool(value)
                counts[2 + 2 * i] += 1

    def __len__(self) -> int:
        """Rows counted (distinct keys)."""
        return self._rows

    def summary(self) -> list[Record]:
        """One record per (provider, variant), as :func:`bench.stats.summary.summarize`'s
        rows (same columns, same order, the same figures up to float rounding)."""
        records = [self._record(p, v, g) for (p, v), g in self._groups.items()]
        if self.variant_order:
            rank = {name: i for i, name in enumerate(self.variant_order)}
            records.sort(key=lambda r: (str(r["provider"]), r["variant"] not in rank,
                                        rank.get(str(r["variant"]), 0)))
        return records

    def _record(self, provider: str, variant: str, group: _Group) -> Record:
        record: Record = {"provider": provider, "variant": variant, "cases": len(group.cases)}
        means = iter(group.means)
        rate_index = 0
        for spec in self._specs:
            if spec.kind != "rate":
                record[f"{spec.name}_mean"] = next(means).mean()
                continue
            k, n = group.hits[rate_index], group.known[rate_index]
            rate_index += 1
            low, high = wilson_interval(k, n)
            record.update({f"{spec.name}_k": k, f"{spec.name}_n": n,
                           f"{spec.name}_rate": k / n if n else NAN,
                           f"{spec.name}_low": low, f"{spec.name}_high": high})
        record["tool_definition_tokens"] = group.tool_tokens
        record["mean_prompt_tokens"] = group.prompt.mean()
        record["mean_cached_tokens"] = group.cached.mean()
        if self._has_reasoning:
            record["mean_reasoning_tokens"] = group.reasoning.mean()
        latencies = group.latencies
        record["p50_latency_s"] = statistics.median(latencies) if latencies else NAN
        warm_total, warm_count = sum(latencies), len(latencies)
        if group.rows > 1 and not math.isnan(group.first_latency):
            warm_total -= group.first_latency  # the first row fills the prefix cache
            warm_count -= 1
        warm = warm_total / warm_count if warm_count else NAN
        record["cases_per_s"] = 1.0 / warm if warm > 0 else NAN
        if self._has_cost:
            cost = NAN if group.cost_missing else group.cost
            record["cost_usd"] = cost
            record["cost_per_case_usd"] = cost / group.rows
        return record

    def buckets(self) -> list[Record]:
        """One record per (provider, variant, information bucket), as
        :func:`bench.stats.buckets.bucket_table` gives them; empty when no row carries a
        bucket."""
        if not self._has_info:
            return []
        shown = [(i, m) for i, m in enumerate(BUCKET_METRICS) if m in self._carried]
        rank = {name: i for i, name in enumerate(self.variant_order)}
        order = {name: i for i, name in enumerate((*BUCKETS, UNTAGGED))}
        records: list[Record] = []
        for (provider, variant, bucket), counts in self._buckets.items():
            record: Record = {"provider": provider, "variant": variant, "info": bucket,
                              "n": counts[0]}
            for i, metric in shown:
                hits, n = counts[1 + 2 * i], counts[2 + 2 * i]
                low, high = wilson_interval(hits, n)
                record.update({metric: hits / n if n else NAN, f"{metric}_n": n,
                               f"{metric}_low": low, f"{metric}_high": high})
            records.append(record)
        records.sort(key=lambda r: (str(r["provider"]), rank.get(str(r["variant"]), len(rank)),
                                    str(r["variant"]), order.get(str(r["info"]), len(order))))
        return records

    def pass_k(self, ks: Sequence[int]) -> list[Record]:
        """pass@k and pass^k of episode task success per (provider, variant), averaged over
        cases, as :func:`bench.stats.aggregate.pass_k_table` gives them (columns
        ``provider, variant, cases, min_trials, pass@<k>, pass^<k>``; NaN when no case has
        k trials); empty when no row carries task success."""
        per_group: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for (provider, variant, _case), (hits, n) in sorted(self._per_case.items()):
            per_group.setdefault((provider, variant), []).append((n, hits))
        records: list[Record] = []
        for (provider, variant), counts in per_group.items():
            record: Record = {"provider": provider, "variant": variant, "cases": len(counts),
                              "min_trials": min(n for n, _ in counts)}
            for k in ks:
                enough = [(n, c) for n, c in counts if n >= k]
                n_list, c_list = [n for n, _ in enough], [c for _, c in enough]
                record[f"pass@{k}"] = float(pass_at_k(n_list, c_list, k).mean()) \
                    if enough else NAN
                record[f"pass^{k}"] = float(pass_hat_k(n_list, c_list, k).mean()) \
                    if enough else NAN
            records.append(record)
        return records

    @property
    def carries_pass_k_metric(self) -> bool:
        """Some row carries episode task success (the pass@k table applies)."""
        return bool(self._per_case)
