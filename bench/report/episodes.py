"""What a report shows of agent episodes: per-episode timelines, task success per factor,
and a short summary per condition (no rendering here).

Episode rows are the rows with an ``episode`` trajectory (:class:`bench.results.RowEpisode`);
their ``factors`` and ``variant`` (the condition's name, ``l3~error_style=bare``) come from
:mod:`bench.episodes.factors`. Every model-controlled string (answer text, tool names,
arguments, final answer) and every tool result is returned as plain text cut to the report's
limits (:func:`bench.report.caps.cap_text`); the HTML template escapes it.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Callable, Sequence

import pandas as pd

from bench.episodes.factors import FACTORS, split_condition
from bench.plural import count
from bench.report.caps import ARGUMENTS_LIMIT, ERROR_LIMIT, NAME_LIMIT, TEXT_LIMIT, cap_text
from bench.report.data import LoadedRun, row_outcome, variant_order
from bench.results import EpisodeStep, Row, RowUsage, StepResult
from bench.stats.intervals import pass_at_k, pass_hat_k, wilson_interval

MAX_EPISODES_SHOWN = 100
"""Episodes the HTML report draws a timeline for; beyond it, a sample (see
:func:`sample_episodes`)."""
MAX_STEPS_SHOWN = 40  # steps per timeline (the loop's max_steps is usually far below)
MAX_CALLS_SHOWN = 20  # calls per step
RESULT_LIMIT = 2000  # characters of one tool result as sent back (a "huge" fault is ~8 MB)
FACTOR_NAMES: tuple[str, ...] = (*FACTORS, "variant")
"""The factors the success chart has a panel for: each :data:`bench.episodes.factors.FACTORS`
and the description variant (the condition's name without its factor settings)."""


def episode_rows(runs: Sequence[LoadedRun]) -> list[Row]:
    """The rows of episode cases (those with an ``episode`` trajectory), in run order."""
    return [row for run in runs for row in run.rows if row.episode is not None]


def base_variant(row: Row) -> str:
    """The description variant of an episode row: its condition's name without the factor
    settings (``l3~error_style=bare`` -> ``l3``; a report's ``run/`` prefix stays)."""
    return split_condition(row.variant)[0]


def condition_rank(order: Sequence[str]) -> Callable[[str], tuple[int, tuple[int, ...]]]:
    """A sort key for condition names: by description variant (its place in ``order``, the
    report's variant order), then by each factor's setting in
    :data:`bench.episodes.factors.FACTORS` order (defaults first), so ``l3``,
    ``l3~error_style=bare``, ``l3~fault=503``, ... ``l10`` ..."""
    bases: dict[str, int] = {}
    for name in order:
        bases.setdefault(split_condition(name)[0], len(bases))

    def key(name: str) -> tuple[int, tuple[int, ...]]:
        base, settings = split_condition(name)
        levels = tuple(FACTORS[f].index(settings[f]) if settings.get(f) in FACTORS[f] else 0
                       for f in FACTORS)
        return bases.get(base, len(bases)), levels

    return key


def sample_episodes(rows: Sequence[Row], order: Sequence[str],
                    limit: int = MAX_EPISODES_SHOWN) -> list[Row]:
    """At most ``limit`` episode rows, every (provider, condition) represented: the groups
    take turns (conditions as :func:`condition_rank` orders them, then provider), each
    giving its failed episodes first, then by case id and trial. All rows when there are at
    most ``limit``; the result keeps that group order either way."""
    rank = condition_rank(order)
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.provider, row.variant), []).append(row)
    queues = [sorted(part, key=lambda r: (row_outcome(r) == "pass", r.case_id, r.trial))
              for _, part in sorted(groups.items(), key=lambda item: (
                  rank(item[0][1]), item[0][0]))]
    if len(rows) <= limit:
        return [row for queue in queues for row in queue]
    picked: list[Row] = []
    depth = 0
    while len(picked) < limit:
        for queue in queues:
            if depth < len(queue) and len(picked) < limit:
                picked.append(queue[depth])
        depth += 1
    rank_of = {id(row): i for i, row in enumerate(row for q in queues for row in q)}
    return sorted(picked, key=lambda r: rank_of[id(r)])


def _json_text(value: Any, limit: int, indent: int | None = 1) -> str:
    """``value`` as text: strings as they are, anything else as JSON (indented by
    ``indent``; None: one line); cut to ``limit`` characters."""
    if isinstance(value, str):
        return cap_text(value, limit) or ""
    text = json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    return cap_text(text, limit) or ""


def _tokens(usage: RowUsage | None) -> str:
    """``"prompt 120 · completion 14 · cached 0"`` (reasoning when reported); "" without."""
    if usage is None:
        return ""
    names = (("prompt", usage.prompt_tokens), ("completion", usage.completion_tokens),
             ("cached", usage.cached_tokens), ("reasoning", usage.reasoning_tokens))
    return " · ".join(f"{label} {value}" for label, value in names if value is not None)


def _step_view(step: EpisodeStep, last: bool, stop_reason: str) -> dict[str, Any]:
    """One step of a timeline as plain text (see :func:`episode_view`)."""
    by_id = {r.call_id: r for r in step.results}
    calls = step.calls
    shown_calls = []
    for call in calls[:MAX_CALLS_SHOWN]:
        result = by_id.pop(call.id, None)
        shown_calls.append({
            "id": cap_text(str(call.id), NAME_LIMIT),
            "name": cap_text(str(call.name), NAME_LIMIT),
            "arguments": _json_text(call.arguments, ARGUMENTS_LIMIT),
            "valid": call.valid is not False,
            "result": None if result is None else _result_view(result),
            # the loop guard stops before the N-th identical call runs
            "not_run": result is None and last and stop_reason == "loop_guard",
        })
    orphans = [_result_view(r) for r in by_id.values()]  # a result whose call id is unknown
    return {
        "step": step.step,
        "text": cap_text(step.text, TEXT_LIMIT) or "",
        "calls": shown_calls,
        "calls_left_out": max(0, len(calls) - MAX_CALLS_SHOWN),
        "orphan_results": orphans,
        "error": cap_text(step.error, ERROR_LIMIT),
        "tokens": _tokens(step.usage),
        "latency_s": step.latency_s,
        "cache": step.cache,
        "finish_reason": cap_text(step.finish_reason, NAME_LIMIT),
        "user_reply": cap_text(step.user_reply, TEXT_LIMIT),
    }


def _result_view(result: StepResult) -> dict[str, Any]:
    return {"content": _json_text(result.content, RESULT_LIMIT),
            "is_error": bool(result.is_error),
            "error_code": cap_text(result.error_code, NAME_LIMIT),
            "truncated": bool(result.truncated)}


def episode_view(row: Row, anchor: str) -> dict[str, Any]:
    """One episode's timeline for the HTML report.

    Args:
        row: an episode row (``row.episode`` set).
        anchor: the element id the page gives it.

    Returns:
        ``{"anchor", "case", "variant", "provider", "trial", "factors": str, "outcome",
        "stop_reason", "final_answer", "query", "metrics": [(name, value text)],
        "tokens", "latency_s", "steps": [{"step", "text", "calls": [{"id", "name",
        "arguments", "valid", "result": {"content", "is_error", "error_code", "truncated"}
        or None, "not_run"}], "calls_left_out", "orphan_results", "error", "tokens",
        "latency_s", "cache", "finish_reason", "user_reply"}], "steps_left_out",
        "state_checks": [{"sql", "expect", "got", "ok"}] or None}``; texts capped, never
        marked safe.
    """
    episode = row.episode
    assert episode is not None
    steps = episode.steps
    shown = steps[:MAX_STEPS_SHOWN]
    metrics = row.metrics
    figures = [("task success", metrics.task_success),
               ("trajectory recall", metrics.trajectory_recall),
               ("trajectory precision", metrics.trajectory_precision),
               ("recovery", metrics.recovery), ("steps", metrics.steps),
               ("tool calls", metrics.tool_calls), ("repeated calls", metrics.repeated_calls),
               ("forbidden call attempted", metrics.forbidden_attempted)]
    return {
        "anchor": anchor,
        "case": row.case_id, "variant": row.variant, "provider": row.provider,
        "trial": row.trial,
        "factors": ", ".join(f"{k}={v}" for k, v in (row.factors or {}).items()),
        "outcome": row_outcome(row),
        "stop_reason": episode.stop_reason,
        "final_answer": cap_text(episode.final_answer, TEXT_LIMIT),
        "query": cap_text(row.query, TEXT_LIMIT),
        "metrics": [(name, _figure(value)) for name, value in figures if value is not None],
        "tokens": _tokens(row.usage),
        "latency_s": row.latency_s,
        "steps": [_step_view(s, i == len(steps) - 1, episode.stop_reason)
                  for i, s in enumerate(shown)],
        "steps_left_out": len(steps) - len(shown),
        "state_checks": None if episode.state_checks is None else [
            {"sql": cap_text(c.get("sql"), ERROR_LIMIT),
             "expect": _json_text(c.get("expect"), ERROR_LIMIT, None),
             "got": _json_text(c.get("got"), ERROR_LIMIT, None),
             "ok": bool(c.get("ok"))}
            for c in episode.state_checks if isinstance(c, dict)],
    }


def _figure(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def episodes_section(runs: Sequence[LoadedRun], limit: int = MAX_EPISODES_SHOWN
                     ) -> dict[str, Any] | None:
    """The HTML report's episode drill-down: a timeline per episode, or per sampled episode
    when there are more than ``limit`` (:func:`sample_episodes`).

    Returns:
        None without episode rows, else ``{"total": int, "shown": [episode_view, ...],
        "anchors": {row key: anchor}, "note": str}`` (``note`` says what was sampled, ""
        when every episode is shown); each view's anchor is ``ep-<n>``.
    """
    rows = episode_rows(runs)
    if not rows:
        return None
    picked = sample_episodes(rows, variant_order(runs), limit)
    note = ""
    if len(picked) < len(rows):
        note = (f"Showing {len(picked)} of {count(len(rows), 'episode')}: the conditions "
                "take turns, each giving its failed episodes first. Every episode is in the "
                "Cases table below and in each run's results.jsonl.")
    return {"total": len(rows),
            "shown": [episode_view(row, f"ep-{i}") for i, row in enumerate(picked)],
            "anchors": {row.key: f"ep-{i}" for i, row in enumerate(picked)},
            "note": note}


def factor_success(runs: Sequence[LoadedRun]) -> pd.DataFrame:
    """Task success per setting of each factor, pooled over everything else, with 95% Wilson
    intervals (:func:`bench.stats.intervals.wilson_interval`; trials count as independent
    rows).

    Returns:
        One row per (factor, level, provider): ``factor`` (one of :data:`FACTOR_NAMES`),
        ``level``, ``provider``, ``k`` (successes), ``n`` (episodes scored), ``rate``,
        ``low``, ``high`` (fractions). Levels come in :data:`bench.episodes.factors.FACTORS`
        order (variants in the report's order). Empty without episode rows that carry
        ``task_success``.
    """
    counts: Counter[tuple[str, str, str]] = Counter()
    wins: Counter[tuple[str, str, str]] = Counter()
    for row in episode_rows(runs):
        success = row.metrics.task_success
        if success is None:
            continue
        settings = dict(row.factors or {})
        settings["variant"] = base_variant(row)
        for factor in FACTOR_NAMES:
            if factor in settings:
                key = (factor, str(settings[factor]), row.provider)
                counts[key] += 1
                wins[key] += bool(success)
    columns = ["factor", "level", "provider", "k", "n", "rate", "low", "high"]
    if not counts:
        return pd.DataFrame(columns=columns)
    bases = list(dict.fromkeys(split_condition(v)[0] for v in variant_order(runs)))
    level_rank = {("variant", name): i for i, name in enumerate(bases)}
    level_rank.update({(f, level): i for f, levels in FACTORS.items()
                       for i, level in enumerate(levels)})
    records = []
    for (factor, level, provider), n in counts.items():
        k = wins[(factor, level, provider)]
        low, high = wilson_interval(k, n)
        records.append({"factor": factor, "level": level, "provider": provider, "k": k,
                        "n": n, "rate": k / n, "low": low, "high": high})
    table = pd.DataFrame.from_records(records, columns=columns)
    table["_f"] = table["factor"].map({f: i for i, f in enumerate(FACTOR_NAMES)})
    table["_l"] = [level_rank.get((f, lv), 10**6) for f, lv in zip(table["factor"],
                                                                   table["level"])]
    return table.sort_values(["_f", "_l", "level", "provider"], kind="stable") \
        .drop(columns=["_f", "_l"]).reset_index(drop=True)


def condition_summary(runs: Sequence[LoadedRun]) -> list[dict[str, Any]]:
    """Per (provider, condition), conditions as :func:`condition_rank` orders them:
    ``provider``, ``variant``, ``episodes`` (rows), ``k``/``n``/``rate``/``low``/``high`` of task success (95% Wilson,
    trials as independent rows), ``steps`` (mean model answers), ``recovery`` (mean over
    episodes that saw an error result; None when none did), ``stops`` (stop reason ->
    episodes), and with several trials ``pass_k`` = ``(k, pass@k, pass^k)``: k the fewest
    trials of a case, the unbiased estimates averaged over cases
    (:func:`bench.stats.intervals.pass_at_k`, :func:`~bench.stats.intervals.pass_hat_k`);
    None with one trial. [] without episode rows."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in episode_rows(runs):
        groups.setdefault((row.provider, row.variant), []).append(row)
    rank = condition_rank(variant_order(runs))
    out = []
    for (provider, variant), rows in sorted(groups.items(), key=lambda item: (
            item[0][0], rank(item[0][1]))):
        scored = [r.metrics.task_success for r in rows if r.metrics.task_success is not None]
        k, n = sum(bool(s) for s in scored), len(scored)
        low, high = wilson_interval(k, n)
        steps = [r.metrics.steps for r in rows if r.metrics.steps is not None]
        recovery = [r.metrics.recovery for r in rows if r.metrics.recovery is not None]
        stops = Counter(r.episode.stop_reason for r in rows if r.episode is not None)
        per_case: dict[str, list[bool]] = {}
        for row in rows:
            if row.metrics.task_success is not None:
                per_case.setdefault(row.case_id, []).append(bool(row.metrics.task_success))
        trials = min((len(v) for v in per_case.values()), default=0)
        pass_k = None
        if trials > 1:
            tried = [len(v) for v in per_case.values()]
            good = [sum(v) for v in per_case.values()]
            pass_k = (trials, float(pass_at_k(tried, good, trials).mean()),
                      float(pass_hat_k(tried, good, trials).mean()))
        out.append({"provider": provider, "variant": variant, "episodes": len(rows),
                    "pass_k": pass_k,
                    "k": k, "n": n, "rate": k / n if n else None, "low": low, "high": high,
                    "steps": sum(steps) / len(steps) if steps else None,
                    "recovery": sum(recovery) / len(recovery) if recovery else None,
                    "stops": dict(stops)})
    return out


def factor_pairs(runs: Sequence[LoadedRun]) -> list[dict[str, Any]]:
    """Paired statistics of task success for each factor: every setting against the factor's
    first one (its default; for ``variant`` the first variant), episodes paired on (case,
    trial, every other setting), per provider: McNemar's exact test and the paired bootstrap
    interval of the difference (:func:`bench.compare.core.compare_rows`).

    Returns:
        One dict per (factor, setting, provider) with pairs: ``factor``, ``base``, ``level``,
        ``provider``, ``pairs``, ``base_only`` / ``level_only`` (pairs where only that side
        succeeded), ``diff`` / ``diff_low`` / ``diff_high`` (fractions, level minus base),
        ``p_value``. [] without two settings of any factor.
    """
    from bench.compare.core import compare_rows

    rows = [r for r in episode_rows(runs) if r.metrics.task_success is not None]
    settings = []
    for row in rows:
        found = {name: str(value) for name, value in (row.factors or {}).items()}
        found["variant"] = base_variant(row)
        settings.append(found)
    bases = list(dict.fromkeys(split_condition(v)[0] for v in variant_order(runs)))
    out = []
    for factor in FACTOR_NAMES:
        order = bases if factor == "variant" else list(FACTORS.get(factor, ()))
        levels = sorted({s[factor] for s in settings if factor in s},
                        key=lambda v: order.index(v) if v in order else len(order))
        if len(levels) < 2:
            continue

        def side(level: str) -> list[dict[str, Any]]:
            out_rows = []
            for row, found in zip(rows, settings):
                if found.get(factor) != level:
                    continue
                rest = "~".join(f"{k}={v}" for k, v in sorted(found.items()) if k != factor)
                data = row.to_json_dict()
                data["case_id"] = f"{row.case_id}~{rest}"  # pair within equal other settings
                out_rows.append(data)
            return out_rows

        base_rows = side(levels[0])
        for level in levels[1:]:
            try:
                comparison = compare_rows(base_rows, side(level), metrics=["task_success"],
                                          group_by=("provider",))
            except ValueError:  # no pair
                continue
            for test in comparison.tests:
                out.append({"factor": factor, "base": levels[0], "level": level,
                            "provider": test.group, "pairs": test.n,
                            "base_only": test.a_only, "level_only": test.b_only,
                            "diff": test.diff, "diff_low": test.diff_low,
                            "diff_high": test.diff_high, "p_value": test.p_value})
    return out
