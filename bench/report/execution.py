"""What the execution columns of a run do not show by themselves, as plain sentences for the
terminal table and the HTML report: toolsets whose calls were not executed (declared
no-execute mode, ``--no-execute``, or no backend), calls of a tool without an implementation
in its toolset's backend, write calls that were refused, with their reason, and MCP servers
that exited during calls and were restarted. They come from the run's own files: the
manifest's ``execution`` (:func:`bench.executor.runhook.describe_execution`),
``traces.jsonl`` (final attempts rejected with ``no_backend`` or ``permission_denied``, or
failed with the error class ``server_exited``) and, for the toolset of those, the rows of
``results.jsonl``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Mapping

from bench.errors import BenchError
from bench.results import ManifestExecution

_NOT_RUN = {"none", "off", "no_backend"}


#: Error codes of calls the executor rejected without running them that a note counts.
_UNRUN_CODES = ("permission_denied", "no_backend")


#: The error class of a call during which a stdio MCP server exited
#: (:mod:`bench.executor.backends.mcp`).
SERVER_EXITED = "server_exited"


def rejected_calls(traces: Path) -> dict[str, Counter[str]]:
    """Error code (``permission_denied``: a write the run did not allow; ``no_backend``: a
    tool without an implementation in its toolset's backend) -> tool -> calls rejected so
    (final trace attempts with status ``rejected``), in one pass; empty without a traces
    file.

    Raises:
        BenchError: a corrupt traces file (:func:`bench.executor.traces.iter_traces`).
    """
    return _scan_traces(traces)[0]


def _scan_traces(traces: Path) -> tuple[dict[str, Counter[str]], Counter[tuple[str, str]]]:
    """:func:`rejected_calls`, and ``(case id, tool)`` -> calls that ended with the error
    class ``server_exited``, in one pass over ``traces`` (empty without the file).

    Raises:
        BenchError: a corrupt traces file (:func:`bench.executor.traces.iter_traces`).
    """
    found: dict[str, Counter[str]] = {code: Counter() for code in _UNRUN_CODES}
    exited: Counter[tuple[str, str]] = Counter()
    if not traces.is_file():
        return found, exited
    from bench.executor.traces import iter_traces  # streamed: one record at a time
    for r in iter_traces(traces):
        if r.final and r.status == "rejected" and r.error_code in found:
            found[r.error_code][r.tool] += 1
        elif r.final and r.error_class == SERVER_EXITED:
            exited[(str(r.case_id), r.tool)] += 1
    return found, exited


def server_exits(exited: Counter[tuple[str, str]], results: Path) -> dict[str, Counter[str]]:
    """Toolset -> tool -> calls during which the toolset's MCP server exited, from
    ``exited`` (``(case id, tool)`` -> calls, :func:`_scan_traces`) and the toolset of each
    case in ``results`` (``results.jsonl``; only rows naming ``server_exited`` are decoded;
    a case without such a row counts under ``?``)."""
    toolsets: dict[str, str] = {}
    if exited:
        try:
            with open(results, "rb") as handle:
                for line in handle:
                    if SERVER_EXITED.encode() not in line:
                        continue
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict):
                        toolsets[str(row.get("case_id"))] = str(row.get("toolset") or "?")
        except OSError:
            pass
    found: dict[str, Counter[str]] = {}
    for (case_id, tool), calls in exited.items():
        found.setdefault(toolsets.get(case_id, "?"), Counter())[tool] += calls
    return found


def refused_writes(traces: Path) -> Counter[str]:
    """Tool -> calls refused because the tool writes and the run did not allow it (final
    trace attempts with error code ``permission_denied``); empty without a traces file.

    Raises:
        BenchError: a corrupt traces file (:func:`bench.executor.traces.iter_traces`).
    """
    return rejected_calls(traces)["permission_denied"]


def execution_notes(execution: Mapping[str, ManifestExecution] | None,
                    run_dir: Path | None) -> list[str]:
    """One sentence per toolset not executed and one for the refused writes, e.g.
    ``calls of toolset 'crm' were not executed (no-execute mode: the CRM has no sandbox):
    its figures score selection and arguments only`` and ``write calls refused (writes not
    allowed for these tools), counted per tool: create_event 3; a refusal ... is the run's
    policy, not an execution failure ...; allow one with writes = ["create_event"] under
    [tool.bench.toolsets.calendar] in pyproject.toml, or bench run --allow-writes; if it only
    reads, mark it read-only instead: ...`` (:func:`bench.toolset_config.read_only_fix`)
    (:mod:`bench.executor.judge` leaves refused calls out of ``execution_success`` and
    counts them in ``write_refused``).

    Args:
        execution: the manifest's ``execution`` (None for runs made before it existed: only
            the refused writes are told).
        run_dir: the run folder holding ``traces.jsonl`` (None: no refused-write note).
    """
    notes: list[str] = []
    execution = execution or {}
    for toolset, entry in execution.items():
        mode = entry.mode
        if mode in _NOT_RUN:
            label = {"none": "no-execute mode", "off": "execution off",
                     "no_backend": "no executor"}[str(mode)]
            notes.append(f"calls of toolset '{toolset}' were not executed ({label}: "
                         f"{entry.detail}); its exec columns are empty and its "
                         "figures score selection and arguments only")
    exited: Counter[tuple[str, str]] = Counter()
    try:
        rejected, exited = _scan_traces(run_dir / "traces.jsonl") if run_dir is not None \
            else ({}, exited)
    except BenchError as exc:
        notes.append(f"refused writes unknown: {exc}")
        rejected = {}
    refused = rejected.get("permission_denied", Counter())
    unrun = rejected.get("no_backend", Counter())
    if unrun:  # never a success, never silent: their rows' exec success is empty
        tools = ", ".join(f"{tool} {n}" for tool, n in sorted(unrun.items()))
        notes.append(f"calls not executed (their tool has no implementation in the "
                     f"toolset's backend), counted per tool: {tools}; the rows holding one "
                     "have no exec success or exec match (nothing of theirs was judged); "
                     "a tool an MCP server no longer lists, or a schema-only tool of a "
                     "Python module, has none")
    if refused:
        tools = ", ".join(f"{tool} {n}" for tool, n in sorted(refused.items()))
        own = [t for t, e in execution.items() if e.mode in ("mcp", "python")]
        where = (f"under [tool.bench.toolsets.{own[0]}] in pyproject.toml" if len(own) == 1
                 else "in its toolset's [tool.bench.toolsets.<name>] in pyproject.toml")
        example = sorted(refused)[0]
        from bench.toolset_config import read_only_fix
        notes.append(f"write calls refused (this run does not allow these tools to write), "
                     f"counted per tool: {tools}; a refusal (permission_denied) is the run's "
                     "policy, not an execution failure: exec success counts only the calls "
                     "that ran, and writes refused the rows with a refused call. Allow one "
                     f"with writes = [\"{example}\"] {where}, or all with bench run "
                     f"--allow-writes; {read_only_fix([example])}")
    if exited and run_dir is not None:
        notes += _exit_notes(server_exits(exited, run_dir / "results.jsonl"), execution,
                             run_dir)
    from bench.report.labels import label_notes  # where expected results came from
    return notes + label_notes(execution, run_dir)


def _exit_notes(exits: Mapping[str, Counter[str]], execution: Mapping[str, ManifestExecution],
                run_dir: Path) -> list[str]:
    """One sentence per toolset whose MCP server exited during calls (``exits``:
    :func:`server_exits`), naming the tools and the server's log."""
    from bench.executor.runhook import MCP_LOG
    from bench.plural import count

    notes = []
    for toolset, tools in sorted(exits.items()):
        entry = execution.get(toolset)
        shared = (entry is not None and entry.detail or "").startswith("--execute-mcp")
        log = run_dir / (MCP_LOG if shared else f"mcp-server-{toolset}.log")
        what = "the MCP server of --execute-mcp" if shared else \
            f"the MCP server of toolset '{toolset}'"
        named = ", ".join(tool if len(tools) == 1 else f"{tool} ({n})"
                          for tool, n in sorted(tools.items()))
        notes.append(f"{what} exited {count(sum(tools.values()), 'time')} (during calls of "
                     f"{named}); restarted: each call it ended is a failed call (error class "
                     "server_exited), the calls after it ran on the restarted server"
                     + (f"; its stderr: {log}" if log.is_file() else ""))
    return notes
