"""``bench synth`` (generate, verify and keep labeled cases) and ``bench review`` (a person
accepts, fixes or rejects them). The work is in :mod:`bench.synth`; see docs/synth.md."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from bench.cli.options import split_list
from bench.cli.output import piped_console, shown_text
from bench.errors import BenchError
from bench.plural import count

if TYPE_CHECKING:
    from bench.synth.review import Decision, Decisions

out = piped_console(160)


def synth(
    toolset: Annotated[str, typer.Option(help="The toolset to write cases for.")],
    generator: Annotated[str, typer.Option(
        help="Provider id that proposes cases (local, openai:<model>, function:<m>:<f>...).")],
    solver: Annotated[list[str], typer.Option(
        help="Provider id whose answers must agree with each label (repeat or comma-separate; "
             "two or more, or one with --solver-trials 2).")],
    dataset: Annotated[Optional[str], typer.Option(
        help="Dataset folder under datasets/ that receives kept cases "
             "(default <toolset>-synth).")] = None,
    kinds: Annotated[str, typer.Option(
        help="Kinds to ask for: single, multiple, parallel, no_call, ask.")]
    = "single,multiple,parallel,no_call,ask",
    languages: Annotated[str, typer.Option(help="Case languages: en, zh, mixed.")] = "en",
    count_: Annotated[int, typer.Option("--count", min=1,
                                        help="Requests per kind and language.")] = 2,
    variant: Annotated[Optional[str], typer.Option(
        help="Variant shown to generator and solvers (default l50, else the first).")] = None,
    distractors: Annotated[bool, typer.Option(
        help="Every second single request is a distractor phrasing naming a similar tool.")]
    = False,
    templates: Annotated[Optional[Path], typer.Option(
        help="Folder of prompt templates overriding the built-in ones (same file names).")]
    = None,
    seed: Annotated[int, typer.Option(help="Base seed of generator and solvers.")] = 1234,
    solver_trials: Annotated[int, typer.Option(min=1, max=10,
                                               help="Answers per solver (seed + trial).")] = 1,
    min_agree: Annotated[int, typer.Option(
        min=1, help="Answers that must agree with a label.")] = 2,
    execute: Annotated[bool, typer.Option(
        help="Run each label's calls on the toolset's executor.")] = True,
    allow_writes: Annotated[bool, typer.Option(help="Let the executor run write tools.")]
    = False,
    allow_sensitive: Annotated[bool, typer.Option(
        help="Let the executor run sensitive tools.")] = False,
    model: Annotated[Optional[str], typer.Option(help="The local model preset.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]
    = False,
) -> None:
    """Generate labeled candidate cases for a toolset, verify each, keep the good ones.

    Checks, in order (a candidate's first failure is its rejection reason): format, language,
    kind, schema, duplicate, leak, execution, unsolvable. Kept cases go to
    datasets/<dataset>/cases.jsonl in split dev with their provenance; the synthesis report is
    synth-report.json and synth-report.md beside them. Review them with 'bench review'.
    """
    from bench.project import current_project
    from bench.synth import candidates as synth_candidates, core as synth_core

    solvers = split_list(solver)
    settings = synth_candidates.SynthSettings(
        toolset=toolset, generator=generator, solvers=tuple(solvers),
        dataset=dataset or f"{toolset}-synth", kinds=tuple(split_list([kinds])),
        languages=tuple(split_list([languages])), count=count_, variant=variant,
        distractors=distractors, templates=templates, seed=seed,
        solver_trials=solver_trials, min_agree=min_agree, execute=execute,
        allow_writes=allow_writes, allow_sensitive=allow_sensitive, model=model)
    report = synth_core.synthesize(settings, current_project())
    if json_out:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=1))
        return
    counts = report.counts()
    table = Table(title=f"bench synth {toolset}: {report.requests} requests, "
                        f"{count(len(report.candidates), 'candidate')}", title_justify="left")
    kinds_seen = report.by_kind()
    table.add_column("verdict")
    for kind in kinds_seen:
        table.add_column(kind, justify="right")
    table.add_column("total", justify="right")
    for verdict in counts:
        table.add_row(verdict, *(str(k[verdict]) for k in kinds_seen.values()),
                      str(counts[verdict]))
    out.print(table)
    for check, n in sorted(report.skipped().items()):
        out.print(f"skipped (not failed): {escape(check)}: {n}")
    folder = Path(report.dataset_path).parent
    out.print(f"kept {counts['kept']} in {escape(report.dataset_path)} (split dev, "
              f"unreviewed); report {escape(str(folder / 'synth-report.md'))}")


def review(
    target: Annotated[str, typer.Argument(
        help="A dataset under datasets/, its folder, or its cases.jsonl.")],
    apply: Annotated[Optional[Path], typer.Option(
        help="Apply a decisions file (from the HTML page, the terminal, or by hand).")]
    = None,
    html: Annotated[Optional[Path], typer.Option(
        help="Write a static HTML review page that downloads a decisions file.")] = None,
    decisions_out: Annotated[Optional[Path], typer.Option(
        help="Write the decisions (all pending when not interactive) to this file.")] = None,
    reviewer: Annotated[Optional[str], typer.Option(help="Your name, for the record.")]
    = None,
    interactive: Annotated[Optional[bool], typer.Option(
        help="Ask accept/fix/reject for each case (default: when stdin is a terminal).")]
    = None,
) -> None:
    """Review generated cases: accept, fix or reject each one.

    Without --apply or --html, shows the unreviewed generated cases; on a terminal it asks for
    a decision per case and applies them (or writes them to --decisions-out); otherwise it
    writes a decisions file with every case pending (--decisions-out) for editing. --apply
    records the decisions, splits the dataset again (only reviewed cases may enter test) and
    updates the datasheet's review counts and audited precision.
    """
    from bench.datasets import load_dataset
    from bench.project import current_project
    from bench.store.files import atomic_write_text
    from bench.synth.review import (case_summary, load_decisions,
                                    render_html, template, unreviewed, dataset_file)

    path = dataset_file(target, current_project().datasets_dir)
    cases = load_dataset(str(path)).cases
    today = datetime.date.today().isoformat()
    if apply is not None:
        _apply(path, load_decisions(apply), today, source=apply)
        return
    if html is not None:
        atomic_write_text(html, render_html(path, cases))
        out.print(f"wrote {escape(str(html))}: {count(len(unreviewed(cases)), 'case')} to "
                  "review; open it, decide, download decisions.json, then "
                  f"'bench review {escape(target)} --apply decisions.json'")
        return
    todo = unreviewed(cases)
    decisions = template(path, cases, reviewer)
    asking = sys.stdin.isatty() if interactive is None else interactive
    for i, case in enumerate(todo, 1):
        summary = case_summary(case)
        body = (f"[bold]{shown_text(summary['query'])}[/bold]\n"
                f"label: {shown_text(json.dumps(summary['expected'], ensure_ascii=False))}\n"
                f"tags: {shown_text(', '.join(summary['tags']))}; generator "
                f"{shown_text(str(summary['generator']))}\n" +
                "; ".join(f"{shown_text(k)}: {shown_text(v)}" for k, v in summary["verdicts"].items()))
        out.print(Panel(body, title=f"{i}/{len(todo)} {shown_text(case.id)} ({case.lang})",
                        title_align="left"))
        if asking:
            decisions.decisions[i - 1] = _ask(decisions.decisions[i - 1])
    if not todo:
        out.print("no unreviewed generated case")
        return
    if decisions_out is not None:
        atomic_write_text(decisions_out, decisions.model_dump_json(indent=1,
                                                                   exclude_none=True) + "\n")
        out.print(f"wrote {escape(str(decisions_out))} ({count(len(todo), 'case')}); edit "
                  f"each 'decision' (accept, fix, reject), then 'bench review {escape(target)} "
                  f"--apply {escape(str(decisions_out))}'")
    elif asking:
        _apply(path, decisions, today)
    else:
        out.print("not a terminal: give --decisions-out FILE for a decisions file to edit, "
                  "or --html FILE for the review page")


def _ask(decision: Decision) -> Decision:
    """One case's decision, asked on the terminal: a(ccept), f(ix), r(eject), s(kip)."""
    from rich.prompt import Prompt

    choice = Prompt.ask("decision", choices=["a", "f", "r", "s"], default="s", console=out)
    if choice == "a":
        return decision.model_copy(update={"decision": "accept"})
    if choice == "r":
        return decision.model_copy(update={"decision": "reject"})
    if choice == "s":
        return decision
    label = Prompt.ask("corrected label as JSON (empty: keep)", default="", console=out)
    query = Prompt.ask("corrected query (empty: keep)", default="", console=out)
    try:
        expected = json.loads(label) if label else None
    except json.JSONDecodeError as exc:
        raise BenchError(f"the corrected label is not JSON: {exc.msg}") from None
    return decision.model_copy(update={"decision": "fix", "expected": expected,
                                       "query": query or None})


def _apply(path: Path, decisions: Decisions, today: str, source: Path | None = None) -> None:
    from bench.synth.apply import apply_decisions

    done = apply_decisions(path, decisions, date=today, source=source)
    c = done.counts
    shown = ", ".join(f"{k} {v}" for k, v in sorted(done.applied.items())) or "nothing"
    precision = "n/a" if c.precision is None else f"{100 * c.precision:.1f}%"
    out.print(f"applied: {shown}; {done.pending} pending; splits now "
              f"dev {done.splits.get('dev', 0)}, test {done.splits.get('test', 0)}; "
              f"review: accepted {c.accepted}, fixed {c.fixed}, rejected {c.rejected}, "
              f"unreviewed {c.unreviewed}; audited precision {precision}; datasheet "
              f"{escape(str(path.parent / 'README.md'))}")
