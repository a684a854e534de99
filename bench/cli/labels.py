"""``bench labels record``: run each label's calls once on the user's own system, with consent,
and store what they returned with the case (``expected.recorded`` in ``cases.jsonl``), so that
later runs compare the model's results with them instead of running the label's calls again
(:mod:`bench.executor.judge`, docs/executor.md).

bench never runs a call no model made on a system it does not own by itself: this command is
the one place it does, and only after the user agreed to the list of write calls it will make
(an interactive confirmation, or ``--yes``); a shell that cannot ask refuses without
``--yes``. Labels whose calls all read run without asking. Reference toolsets (bench's own database copy) need no recording and are skipped.

Each case's results reach ``cases.jsonl`` (rewritten atomically) as soon as its calls ran, so
a stop of any kind (Ctrl-C, ``kill -9``, a power cut) loses at most the case being run: the
next ``bench labels record`` finds the others recorded and runs none of their calls again (a
write would change the user's system twice). The case being run is named in a marker file
(``reports/labels/in-progress-<hash>.json``) until its results are written; a stop leaves
it there, and the next recording says that case's calls may have run once already.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Mapping, Optional

import typer
from rich.console import Console

from bench.errors import BenchError
from bench.plural import count, first_few

if TYPE_CHECKING:
    from bench.datasets import Dataset
    from bench.toolset_config import ToolsetSettings

labels_app = typer.Typer(no_args_is_help=True, help="Expected results of the labels: record "
                                                     "them on your own system, with consent.")
out = Console(soft_wrap=True)
SHOWN_WRITES = 20
_RANK = {"read": 0, "write": 1, "sensitive": 2}


def _call_text(name: str, arguments: dict[str, Any], width: int = 100) -> str:
    """``name(key="value", ...)``, cut to ``width`` characters."""
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    text = f"{name}({shown})"
    return text if len(text) <= width else text[:width - 3] + "..."


def _file_lines(path: Path) -> list[str]:
    """``path``'s lines as the dataset loader numbers them
    (``bench.datasets.loader._jsonl_lines``), each with its own line end (``\\r\\n``,
    ``\\r``, ``\\n``, or none on an unterminated last line), the first with the file's BOM
    if it has one: joined, they are the file again."""
    from bench.datasets.loader import _LINE_BREAK

    text = path.read_bytes().decode("utf-8")
    pieces = _LINE_BREAK.split(text)
    ends = _LINE_BREAK.findall(text) + [""]
    lines = [line + end for line, end in zip(pieces, ends)]
    return lines[:-1] if lines and lines[-1] == "" else lines


def _rewrite(path: Path, lines: list[str], recorded: dict[int, dict[str, Any]]) -> None:
    """Write ``lines`` (:func:`_file_lines`) to ``path`` atomically with ``expected.recorded``
    set on the lines (0-based) in ``recorded``, each keeping its line end; every other line
    is kept byte for byte, the file its BOM and its permission bits, and a symlinked
    ``cases.jsonl`` is written where it points (the link stays a link)."""
    from bench.store.files import atomic_write_text

    text = []
    for number, line in enumerate(lines):
        if number in recorded:
            body = line.rstrip("\r\n")
            bom = "\ufeff" if body.startswith("\ufeff") else ""
            data = json.loads(body.removeprefix("\ufeff"))
            data["expected"]["recorded"] = recorded[number]
            line = bom + json.dumps(data, ensure_ascii=False) + (line[len(body):] or "\n")
        text.append(line)
    atomic_write_text(path, "".join(text))  # keeps the mode, writes through a link


@labels_app.command("record")
def record(
    dataset: Annotated[str, typer.Argument(help="A dataset under datasets/ or a .jsonl path.")],
    yes: Annotated[bool, typer.Option(
        "--yes", help="Agree to run the label calls listed (needed where bench cannot ask: "
                      "no terminal).")] = False,
    again: Annotated[bool, typer.Option(
        "--again", help="Record again the labels whose recording is current (default: only "
                        "labels never recorded or changed since).")] = False,
    variant: Annotated[Optional[str], typer.Option(
        "--variant", "-v", help="The variant whose schemas check the calls (default: l50, "
                                "else the toolset's first).")] = None,
    allow_sensitive: Annotated[bool, typer.Option(
        "--allow-sensitive", help="Also run calls of sensitive tools.")] = False,
) -> None:
    """Run each label's calls once on your toolset's system (its MCP server or Python module,
    pyproject.toml [tool.bench.toolsets.<name>]) and store the results with the case
    (expected.recorded in cases.jsonl), after you agree to the write calls listed (none:
    no question).

    Runs then compare the model's results with these instead of running a label's calls on
    your system. A $regex gives its "$example"; labels with an argument that offers only
    patterns without one ($any, a bare $regex) cannot be built and are skipped (named);
    a label whose call fails is recorded as failing and reported (a label problem).
    """
    from bench.datasets import load_dataset
    from bench.descriptions.aliases import apply_aliases
    from bench.executor.runhook import RunExecution
    from bench.paths import project_root, runs_dir
    from bench.toolset_config import load_toolset_settings

    root = project_root()
    loaded, _ = apply_aliases(load_dataset(dataset))
    if not isinstance(loaded.path, Path):
        raise BenchError(f"{dataset}: only a local cases.jsonl can hold recorded results")
    todo, skipped, tools = _to_record(loaded, load_toolset_settings(root), variant, again)
    for why, ids in skipped.items():
        out.print(f"skipped {count(len(ids), 'case')} ({first_few(ids)}): {why}", markup=False,
                  soft_wrap=True)
    marker = _marker(runs_dir().parent / "labels", Path(loaded.path))
    if not todo:
        out.print("nothing to record", markup=False)
        marker.unlink(missing_ok=True)  # its case is recorded, or no longer in the dataset
        return
    _say_stopped(marker)
    toolsets = sorted({case.toolset for case, _ in todo})
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_dir = runs_dir().parent / "labels" / f"record-{stamp}"
    execution = RunExecution(run_dir, f"labels-record-{stamp}", allow_writes=True,
                             allow_sensitive=allow_sensitive, project_root=root,
                             toolsets=toolsets)
    try:
        _consent(todo, tools, execution, yes)
        _run(loaded, todo, tools, execution, allow_sensitive, run_dir, stamp, marker)
    finally:
        execution.close()


def _to_record(loaded: Dataset, settings: Mapping[str, ToolsetSettings], variant: str | None,
               again: bool) -> tuple[list[tuple[Any, list[Any]]], dict[str, list[str]],
                                     dict[str, dict[str, Any]]]:
    """The cases whose labels ``bench labels record`` runs, and those it skips.

    Returns:
        (``[(case, its calls built)]``, ``{why: case ids}`` skipped: a toolset not executed
        on the user's system, a call that cannot be built, a recording already current
        (unless ``again``), ``{toolset: {tool name: the variant's Tool}}``).
    """
    from bench.descriptions.variants import default_variant, load_variant
    from bench.executor.judge import build_expected_call, recording_current

    todo: list[tuple[Any, list[Any]]] = []  # (case, built calls)
    skipped: dict[str, list[str]] = {}  # why -> case ids
    tools: dict[str, dict[str, Any]] = {}  # toolset -> tool name -> the variant's Tool
    for case in loaded.cases:
        if case.kind == "episode" or not case.expected.calls:
            continue
        own = settings.get(case.toolset)
        if own is None or own.execute == "none":
            why = (f"toolset '{case.toolset}' is not executed on your system (bench's own "
                   "backend, or none): nothing to record")
            skipped.setdefault(why, []).append(case.id)
            continue
        built = [build_expected_call(e, i) for i, e in enumerate(case.expected.calls)]
        if any(b is None for b in built):
            why = ("an argument offers only patterns without \"$example\" ($any, $regex): the "
                   "call cannot be built")
            skipped.setdefault(why, []).append(case.id)
            continue
        if case.toolset not in tools:
            tools[case.toolset] = {tool.name: tool for tool in load_variant(
                case.toolset, variant or default_variant(case.toolset)).tools}
        if not again and case.expected.recorded is not None and \
                recording_current(case.expected.recorded.results, case.expected,
                                  tools[case.toolset]):
            why = "already recorded (bench labels record --again records them again)"
            skipped.setdefault(why, []).append(case.id)
            continue
        todo.append((case, built))
    return todo, skipped, tools


def _marker(folder: Path, cases: Path) -> Path:
    """The in-progress marker of recording ``cases`` (a ``cases.jsonl``): one file per
    dataset file under ``folder`` (``reports/labels``), named by the SHA-256 of its resolved
    path."""
    key = hashlib.sha256(str(cases.resolve()).encode("utf-8")).hexdigest()[:16]
    return folder / f"in-progress-{key}.json"


def _say_stopped(marker: Path) -> None:
    """One line when the last recording of this dataset stopped while a case's calls ran
    (``marker`` left behind): they may have run once, and the case is recorded now only if
    the user agrees again."""
    try:
        left = json.loads(marker.read_text(encoding="utf-8"))
        case, calls = str(left["case"]), [str(c) for c in left["calls"]]
    except (OSError, ValueError, KeyError, TypeError):
        return
    out.print(f"note: the last bench labels record of this dataset stopped while case {case}'s "
              f"label calls ran ({'; '.join(calls)}): they may have run once on your system "
              "already; its results were not kept, so it is recorded again below",
              markup=False)


def _permission(tool: Any, handler: Any) -> str:
    """The stricter of the tool's and the backend's tag (the executor's rule)."""
    levels = [getattr(tool, "permission", "write"), getattr(handler, "permission", "read")]
    return max(levels, key=_RANK.__getitem__)


def _consent(todo: list[tuple[Any, list[Any]]], tools: dict[str, dict[str, Any]],
             execution: Any, yes: bool) -> None:
    """List the write calls and ask (or take ``--yes``); refuse where no one can be asked.
    Labels without a write call (every tool read-only) run without a word: consent is for
    what changes the user's system.

    Raises:
        BenchError: no terminal and no ``--yes``.
        typer.Exit: the user said no (exit 1).
    """
    writes: list[str] = []
    calls = 0
    systems = set()
    for case, built in todo:
        backend = execution.executor.handlers_for(case.toolset)
        systems.add(backend.describe or case.toolset)
        for call in built:
            calls += 1
            if _permission(tools[case.toolset].get(call.name), backend.get(call.name)) != "read":
                writes.append(f"{case.id}: {_call_text(call.name, call.arguments)}")
    if not writes:
        return
    where = ", ".join(sorted(systems))
    out.print(f"bench labels record runs {count(calls, 'label call')} of "
              f"{count(len(todo), 'case')} once on your system ({where}), "
              f"{count(len(writes), 'write call')} among them:", markup=False)
    for line in writes[:SHOWN_WRITES]:
        out.print(f"  {line}", markup=False)
    if len(writes) > SHOWN_WRITES:
        out.print(f"  ... and {len(writes) - SHOWN_WRITES} more", markup=False)
    if yes:
        return
    if not sys.stdin.isatty():
        raise BenchError(f"bench labels record would run {count(len(writes), 'write call')} "
                         "on your system and cannot ask here (no terminal): agree with --yes")
    if not typer.confirm("Run them now?", default=False):
        out.print("nothing run", markup=False)
        raise typer.Exit(1)


def _run(loaded: Any, todo: list[tuple[Any, list[Any]]], tools: dict[str, dict[str, Any]],
         execution: Any, allow_sensitive: bool, run_dir: Path, stamp: str,
         marker: Path) -> None:
    """Run the label calls case by case (after the toolset's reset, if declared) and write
    the results into the dataset file after each case (atomically: a stop of any kind keeps
    every case recorded before it). ``marker`` names the case whose calls run, until its
    results are written (:func:`_say_stopped` reads it after a stop)."""
    from bench.store.files import atomic_write_text
    from bench.executor.outcome import RunContext
    from bench.executor.judge import schema_sha256
    from bench.models import RecordedResult, Recording
    from bench.redact import redact, redact_data

    path = Path(loaded.path)
    lines = _file_lines(path)  # the loader's line numbers
    pending: dict[int, dict[str, Any]] = {}
    failed: list[str] = []
    refused: list[str] = []
    done = 0
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    marker.parent.mkdir(parents=True, exist_ok=True)
    for case, built in todo:
        atomic_write_text(marker, json.dumps({
            "dataset": str(path), "case": case.id,
            "calls": [_call_text(c.name, c.arguments) for c in built]}))
        backend = execution.executor.handlers_for(case.toolset)
        context = RunContext(run_id=f"labels-record-{stamp}", case_id=case.id,
                             allow_writes=True, allow_sensitive=allow_sensitive,
                             inject_faults=False, label_side=True)
        with backend.lock:
            if backend.reset is not None:
                backend.reset()
            outcomes = [execution.executor.execute(call, tools[case.toolset],
                                                   case.toolset, context)
                        for call in built]
        if any(o.error_code == "permission_denied" for o in outcomes):
            refused.append(case.id)  # not the label's result: nothing recorded
            marker.unlink(missing_ok=True)  # said below (--allow-sensitive), not a stop
            continue
        results = [RecordedResult(
            name=call.name, arguments=call.arguments,
            ok=o.success and not o.fallback_used,
            # what the file keeps: no secret (bench.redact), which runs compare alike
            data=redact_data(o.data) if o.success and not o.fallback_used else None,
            error_code=None if o.success else o.error_code,
            error=redact(o.error) if not o.success and o.error is not None else None,
            schema_sha256=schema_sha256(tools[case.toolset][call.name].input_schema)
            if call.name in tools[case.toolset] else None)
            for call, o in zip(built, outcomes)]
        if not all(r.ok for r in results):
            failed.append(case.id)
        made = Recording(at=at, system=backend.describe, results=results)
        pending[loaded.lines[case.id] - 1] = made.model_dump(mode="json")
        _rewrite(path, lines, pending)  # now: a stop must not make it run again
        marker.unlink(missing_ok=True)
        done += 1
    out.print(f"recorded {count(done, 'case')} into {path} (traces: {run_dir / 'traces.jsonl'})",
              markup=False)
    if refused:
        out.print(f"not recorded, a call needs --allow-sensitive: {', '.join(refused)}",
                  markup=False)
    if failed:
        out.print(f"label call failed: {count(len(failed), 'case')} ({', '.join(failed[:10])}"
                  f"{' ...' if len(failed) > 10 else ''}): recorded as failing; their rows get "
                  "no exec match until the label is fixed", markup=False)
