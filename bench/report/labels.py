"""What the ``exec match`` column of a run does not show by itself: where the expected results
came from and why some rows have none, as one sentence each for the terminal table and the
HTML report (:func:`bench.report.execution.execution_notes` adds them).

Read from the run's own files: the manifest's ``execution`` (``labels``: ``reference``,
``reset`` or ``recorded``; ``writes``, :func:`bench.executor.runhook.describe_execution`)
and the rows' ``execution_match_skipped`` (:data:`bench.executor.judge.SKIP_REASONS`),
``execution_match`` and ``provider``, streamed from ``results.jsonl`` one line at a time.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from bench.plural import count
from bench.results import ManifestExecution

#: The provider whose answers are the labels' own calls (:mod:`bench.providers.oracle`).
ORACLE = "oracle"


@dataclass
class LabelCounts:
    """Counts over a run's rows.

    Attributes:
        skipped: (toolset, reason) -> rows whose ``execution_match`` is None for the
            label's sake.
        failed_cases: toolset -> case ids whose label call failed (sorted when shown).
        unexecutable_cases: toolset -> case ids whose label declares ``not_executable``.
        oracle_rows: toolset -> the oracle's rows with an ``execution_match``.
        oracle_missed: toolset -> the oracle's rows without a match.
        oracle_misses: toolset -> tool -> the oracle's rows without a match that call it.
        unlabeled_cases: toolset -> case ids of the oracle's rows that answered an argument
            with a placeholder (``request.unlabeled``: ``$any``, or a ``$regex`` without
            ``$example`` its query does not match).
        unlabeled_rows: toolset -> such rows.
        unlabeled_arguments: toolset -> the arguments so answered (``"<tool>.<argument>"``).
        unexecuted_calls: toolset -> the calls of such rows never executed
            (``request.unexecutable_calls``).
    """

    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)
    failed_cases: dict[str, set[str]] = field(default_factory=dict)
    unexecutable_cases: dict[str, set[str]] = field(default_factory=dict)
    oracle_rows: Counter[str] = field(default_factory=Counter)
    oracle_missed: Counter[str] = field(default_factory=Counter)
    oracle_misses: dict[str, Counter[str]] = field(default_factory=dict)
    unlabeled_cases: dict[str, set[str]] = field(default_factory=dict)
    unlabeled_rows: Counter[str] = field(default_factory=Counter)
    unlabeled_arguments: dict[str, set[str]] = field(default_factory=dict)
    unexecuted_calls: Counter[str] = field(default_factory=Counter)

    def add(self, row: Mapping[str, Any]) -> None:
        """Count one decoded row (anything not shaped like a row is ignored)."""
        metrics = row.get("metrics")
        if not isinstance(metrics, dict):
            return
        toolset = str(row.get("toolset") or "")
        request = row.get("request")
        request = request if isinstance(request, dict) else {}
        unlabeled = request.get("unlabeled")
        if row.get("provider") == ORACLE and isinstance(unlabeled, list) and unlabeled:
            self.unlabeled_rows[toolset] += 1
            self.unlabeled_cases.setdefault(toolset, set()).add(str(row.get("case_id")))
            self.unlabeled_arguments.setdefault(toolset, set()).update(map(str, unlabeled))
            unexecuted = request.get("unexecutable_calls")
            self.unexecuted_calls[toolset] += len(unexecuted) \
                if isinstance(unexecuted, list) else 0
        why = metrics.get("execution_match_skipped")
        if isinstance(why, str):
            self.skipped[(toolset, why)] += 1
            if why == "label_failed":
                self.failed_cases.setdefault(toolset, set()).add(str(row.get("case_id")))
            elif why == "label_not_executable":
                self.unexecutable_cases.setdefault(toolset, set()).add(
                    str(row.get("case_id")))
        match = metrics.get("execution_match")
        if row.get("provider") == ORACLE and isinstance(match, bool):
            self.oracle_rows[toolset] += 1
            if not match:
                self.oracle_missed[toolset] += 1
                expected = row.get("expected") or {}
                calls = expected.get("calls") if isinstance(expected, dict) else None
                tools = {str(c.get("name")) for c in calls or [] if isinstance(c, dict)}
                misses = self.oracle_misses.setdefault(toolset, Counter())
                misses.update(tools or {"?"})


def count_rows(run_dir: Path) -> LabelCounts:
    """:class:`LabelCounts` of ``run_dir/results.jsonl`` (empty without the file; lines that
    do not decode are skipped: these notes are diagnostics, ``bench show`` reports a corrupt
    file itself)."""
    counts = LabelCounts()
    path = run_dir / "results.jsonl"
    if not path.is_file():
        return counts
    try:
        with open(path, "rb") as handle:
            for line in handle:
                if b"execution_match" not in line and b'"unlabeled"' not in line:
                    continue  # an unexecuted row: nothing to count (no JSON decoding)
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    counts.add(row)
    except OSError:
        pass
    return counts


def _cases(ids: set[str], shown: int = 3) -> str:
    first = sorted(ids)[:shown]
    return ", ".join(first) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def label_notes(execution: Mapping[str, ManifestExecution] | None,
                run_dir: Path | None) -> list[str]:
    """One sentence per fact the exec match column hides, e.g. ``label call failed: 2 rows
    (cases c1, c2) of toolset 'notes': ...``; [] when there is nothing to say.

    Facts, in order: a run made before labels stopped running on a user's system (its
    manifest's entry for an executed user toolset has no ``labels``: its exec match came from
    labels run there, not comparable), state carried over (a user's system with writes
    allowed and no ``reset``), rows without a comparison per reason (:data:`bench.executor.judge.
    SKIP_REASONS`), the oracle's rows with a placeholder for a pattern-only argument (its
    label calls not executed, its arguments score not counted: :mod:`bench.providers.oracle`),
    and the oracle's exec match below 100% (naming the tools).

    Args:
        execution: the manifest's ``execution`` (None: runs made before it existed).
        run_dir: the run folder (None: only the manifest's facts).
    """
    notes = _manifest_notes(execution or {})
    counts = count_rows(run_dir) if run_dir is not None else LabelCounts()
    for (toolset, why), rows in sorted(counts.skipped.items()):
        note = _skipped_note(toolset, why, rows, counts)
        if note is not None:
            notes.append(note)
    notes += _oracle_notes(counts)
    return notes


def _manifest_notes(execution: Mapping[str, ManifestExecution]) -> list[str]:
    """The facts the manifest's ``execution`` gives away: a run made before labels stopped
    running on a user's system, and state carried over between cases."""
    notes: list[str] = []
    for toolset, entry in execution.items():
        if entry.mode in ("mcp", "python") and "labels" not in entry.model_fields_set:
            # every run since labels stopped running on a user's system records where its
            # expected results came from (bench.executor.runhook: "labels"); an older run
            # of an executed user toolset ran its labels there
            notes.append(f"exec match of toolset '{toolset}' is not comparable with later "
                         "runs: this run was made before bench stopped running labels on "
                         "your system, so its expected results came from running the labels' "
                         "calls there")
            continue
        writes = entry.writes
        if entry.mode in ("mcp", "python") and entry.labels != "reset" and writes:
            allowed = "all tools (--allow-writes)" if writes == "all" else ", ".join(writes)
            notes.append(f"state carried over between cases and variants: toolset "
                         f"'{toolset}' runs on your system with writes allowed ({allowed}) "
                         "and no reset = [...] under its [tool.bench.toolsets."
                         f"{toolset}]: a row may see what an earlier row wrote")
    return notes


def _skipped_note(toolset: str, why: str, rows: int, counts: LabelCounts) -> str | None:
    """The sentence for ``rows`` of ``toolset`` without an exec match for reason ``why``
    (:data:`bench.executor.judge.SKIP_REASONS`); None for a reason without one."""
    where = f"{count(rows, 'row')} of toolset '{toolset}'"
    if why == "label_failed":
        cases = counts.failed_cases.get(toolset, set())
        return (f"label call failed: {where} (cases {_cases(cases)}): the label's "
                "own call returns an error, so exec match is empty there; fix the "
                "label (bench lint lists such labels)")
    if why == "not_recorded":
        return (f"exec match empty for {where}: bench does not run a label's calls "
                "on your system; record the expected results once with bench labels "
                "record (it asks first), or declare reset = [...] under "
                f"[tool.bench.toolsets.{toolset}]")
    if why == "recording_stale":
        return (f"exec match empty for {where}: the label or a called tool's input "
                "schema changed since its results were recorded (or they were "
                "recorded before bench stored the schema); record them again with "
                "bench labels record")
    if why == "label_refused":
        return (f"exec match empty for {where}: the run does not allow a write the "
                "label makes, so there is no expected result to compare")
    if why == "label_unbuildable":
        return (f"exec match empty for {where}: an argument of the label offers only "
                "patterns without \"$example\" ($any, $regex), so its call cannot be "
                "built")
    if why == "label_not_executable":
        cases = counts.unexecutable_cases.get(toolset, set())
        return (f"exec match empty for {where} (cases {_cases(cases)}): the label "
                "declares why its calls cannot run on their own (not_executable, "
                "e.g. a result id issued in the conversation's history)")
    if why == "not_compared":
        return (f"exec match empty for {where}: every tool called is compare = "
                "\"none\"")
    return None


def _oracle_notes(counts: LabelCounts) -> list[str]:
    """The oracle's rows: those with a placeholder for a pattern-only argument (their label
    calls not executed), and its exec match below 100% (naming the tools)."""
    notes: list[str] = []
    for toolset, rows in sorted(counts.unlabeled_rows.items()):
        cases = counts.unlabeled_cases.get(toolset, set())
        arguments = sorted(counts.unlabeled_arguments.get(toolset, set()))
        calls = counts.unexecuted_calls[toolset]
        notes.append(f"the oracle could not answer {count(rows, 'row')} of toolset "
                     f"'{toolset}' as labelled (cases {_cases(cases)}): "
                     f"{_cases(set(arguments))} {'is' if len(arguments) == 1 else 'are'} only "
                     "a pattern ($any, or $regex without \"$example\" that its query does "
                     "not match), so the label gives no value to send. bench sends no "
                     "placeholder, nor a value no label gave, to a system: "
                     f"{count(calls, 'label call')} {'was' if calls == 1 else 'were'} not "
                     "executed (those rows have no exec success or exec match), and the "
                     "oracle's arguments score of those rows is not meaningful, so it is not "
                     "counted; add a literal value to the argument's values, or \"$example\" "
                     "to its $regex, to check the label")
    for toolset, misses in sorted(counts.oracle_misses.items()):
        rows = counts.oracle_rows[toolset]
        rate = 100 * (1 - counts.oracle_missed[toolset] / rows) if rows else 0.0
        tools = ", ".join(f"{tool} {n}" for tool, n in sorted(misses.items()))
        notes.append(f"the oracle's exec match on toolset '{toolset}' is {rate:.0f}%, not "
                     f"100%: its calls are the labels' own, yet results differed for {tools} "
                     "(rows per tool); results that depend on the clock or on state need "
                     f"compare = {{tool = \"shape\"}} or {{tool = {{ignore = [...]}}}} under "
                     f"[tool.bench.toolsets.{toolset}], or a reset = [...]")
    return notes
