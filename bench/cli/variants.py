"""``bench variants``: list a toolset's variants with their token cost per provider family,
and ``bench variants diff A B``."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Annotated, Optional, TypedDict

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.cli.options import split_list
from bench.cli.output import out
from bench.errors import BenchError, shorten_message, visible_text
from bench.plural import count

if TYPE_CHECKING:
    from bench.datasets import Dataset
    from bench.datasets.labels import LabelProblem
    from bench.descriptions.diff import ToolDiff
    from bench.descriptions.variants import Variant
    from bench.drafting.outcomes import DraftResult

variants_app = typer.Typer(invoke_without_command=True, no_args_is_help=False,
                           help="List variants (lines, tokens per provider) or diff two.")


class _CostRow(TypedDict):
    """One :class:`bench.descriptions.cost.TokenCost` in ``--json`` (its fields and total)."""

    family: str
    label: str
    tokens: int | None
    overhead: int | None
    estimate: bool
    method: str
    total: int | None


class _VariantRow(TypedDict):
    """One variant's line counts and token costs: a row of the table, an item of ``--json``."""

    variant: str
    tools: int
    mean_lines: float
    lines_min: int
    lines_max: int
    lines_total: int
    local_tokens: int | None
    draft_tools: int
    same_text_as: str | None
    costs: list[_CostRow]


def _local_tool_tokens(variants: list[Variant], model_path: str | None) -> dict[str, int]:
    """Tools-block tokens in the local model's tokenizer; {} without the 'local' extra."""
    from bench.providers.local import find_default_model, tools_block_tokens

    if model_path is None and find_default_model() is None and \
            not os.environ.get("BENCH_LOCAL_MODEL"):
        return {}
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return {}
    return tools_block_tokens({v.name: v.tools for v in variants}, model_path)


@variants_app.callback()
def variants_list(
    ctx: typer.Context,
    toolset: Annotated[Optional[str], typer.Option(
        help="Toolset under descriptions/ (default: the project's only one).")] = None,
    names: Annotated[Optional[list[str]], typer.Option(
        "--variants", "-v", help="Variants to show (default: all).")] = None,
    model_path: Annotated[Optional[str], typer.Option(help="GGUF whose tokenizer counts.")]
    = None,
    anthropic_model: Annotated[str, typer.Option(
        help="Claude model for the token count and its documented overhead.")]
    = "claude-sonnet-4-5",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Each variant's line count and tool-definition tokens per provider family.

    OpenAI: o200k_base / cl100k_base (estimates). Anthropic: the token-count endpoint when
    ANTHROPIC_API_KEY is set, else an estimate plus the documented tool-use system prompt.
    Local: the embedded model's tokenizer over its exact tools block. A variant that renders
    the same text as an earlier one is marked (same text as ...), and a note says so.
    """
    if ctx.invoked_subcommand:
        return
    from bench.descriptions import available_variants, check_toolset, load_variant
    from bench.descriptions.cost import anthropic_cost, openai_costs
    from bench.descriptions.variants import (default_toolset, no_variants_reason,
                                             same_text_groups, same_text_note)

    toolset = default_toolset(toolset)
    check_toolset(toolset)  # an unknown one: the message lists the known toolsets
    chosen = split_list(names) or available_variants(toolset)
    if not chosen:
        raise BenchError(f"toolset '{toolset}' has no variants: "
                         f"{no_variants_reason(toolset)}")
    loaded = [load_variant(toolset, name) for name in chosen]
    local = _local_tool_tokens(loaded, model_path)
    same = same_text_groups(loaded)  # one toolset: (toolset, names) per set of equal texts
    same_as = {name: names[0] for _, names in same for name in names[1:]}
    rows: list[_VariantRow] = []
    for variant in loaded:
        counts = list(variant.line_counts.values())
        costs = openai_costs(variant.tools) + [anthropic_cost(variant.tools, anthropic_model)]
        rows.append({"variant": variant.name, "tools": len(variant.tools),
                     "mean_lines": round(variant.mean_lines, 1),
                     "lines_min": min(counts), "lines_max": max(counts),
                     "lines_total": sum(counts), "local_tokens": local.get(variant.name),
                     "draft_tools": len(variant.draft_tools),
                     "same_text_as": same_as.get(variant.name),
                     "costs": [_CostRow(family=c.family, label=c.label, tokens=c.tokens,
                                        overhead=c.overhead, estimate=c.estimate,
                                        method=c.method, total=c.total) for c in costs]})
    if as_json:
        print(json.dumps({"toolset": toolset, "variants": rows}, ensure_ascii=False, indent=2))
        return
    _print_variants(toolset, rows, anthropic_model, bool(local),
                    [same_text_note(same_toolset, names) for same_toolset, names in same])


def _print_variants(toolset: str, rows: list[_VariantRow], anthropic_model: str, local: bool,
                    notes: list[str]) -> None:
    """The table of ``bench variants`` (one row per variant of ``rows``), its footnotes on
    estimates and on local tokens (``local``: some were counted), and ``notes``: the
    variants that render the same text."""
    anth = rows[0]["costs"][-1] if rows else None
    anth_head = "anthropic " + ("count_tokens" if anth and not anth["estimate"]
                                else "estimate*")
    table = Table(title=f"toolset {toolset}", title_justify="left")
    for column in ("variant", "tools", "lines/tool (mean)", "lines/tool (min-max)",
                   "lines total", "openai o200k*", "openai cl100k*", anth_head, "local tokens"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for row in rows:
        o200k, cl100k, claude = row["costs"]
        claude_text = str(claude["tokens"]) + (f" +{claude['overhead']}" if claude["overhead"]
                                               else "")
        shown = row["variant"] + (f" (draft: {row['draft_tools']} of {row['tools']})"
                                  if row["draft_tools"] else "") \
            + (f" (same text as {row['same_text_as']})" if row["same_text_as"] else "")
        table.add_row(escape(shown), str(row["tools"]), f"{row['mean_lines']:.1f}",
                      f"{row['lines_min']}-{row['lines_max']}", str(row["lines_total"]),
                      str(o200k["tokens"]), str(cl100k["tokens"]), claude_text,
                      "-" if row["local_tokens"] is None else str(row["local_tokens"]))
    out.print(table)
    out.print("* estimate. OpenAI: its own tool rendering is not published; counted over the "
              "tools JSON. Anthropic: " + escape(anth["method"] if anth else ""), soft_wrap=True)
    if anth and anth["overhead"]:
        out.print(f"  '+N' = tokens of the tool-use system prompt Anthropic adds for "
                  f"{anthropic_model} (tool_choice auto).", soft_wrap=True)
    if not local:
        out.print("local tokens: install the 'local' extra to count with the model's tokenizer")
    for note in notes:  # bench init's and bench run's note
        out.print(f"note: {note}", markup=False, soft_wrap=True)


@variants_app.command("diff")
def variants_diff(
    a: Annotated[str, typer.Argument(help="The variant before (e.g. l30).")],
    b: Annotated[str, typer.Argument(help="The variant after (e.g. variant_a).")],
    toolset: Annotated[Optional[str], typer.Option(
        help="Toolset under descriptions/ (default: the project's only one).")] = None,
    dataset: Annotated[Optional[list[str]], typer.Option(
        help="Datasets whose labels are re-checked (default: every dataset using the "
             "toolset).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per tool what changed from A to B, and which cases' expected arguments B breaks.

    A rename declared in descriptions/<toolset>/aliases.yaml is shown as a rename (with any
    other change of that tool), and labels naming the old name are read as naming the new
    one, as a run reads them.

    Exit code 1 when B makes any case's label invalid.
    """
    from bench.datasets import available_datasets, load_dataset
    from bench.descriptions import load_variant
    from bench.descriptions.diff import diff_to_json, diff_variants, label_breaks

    from bench.descriptions.aliases import load_aliases
    from bench.descriptions.variants import default_toolset

    toolset = default_toolset(toolset)
    va, vb = load_variant(toolset, a), load_variant(toolset, b)
    renamed = load_aliases(toolset)
    diffs = diff_variants(va.tools, vb.tools, renamed)
    names = split_list(dataset)
    if names:
        datasets = [load_dataset(n) for n in names]
    else:
        datasets = []
        for name in available_datasets():
            try:
                loaded = load_dataset(name)
            except BenchError:
                continue  # a broken, unrelated dataset must not hide this diff
            if toolset in loaded.toolsets:
                datasets.append(loaded)
    broken = []
    for ds in datasets:
        new, still = label_breaks(ds, toolset, va.tools, vb.tools, renamed)
        broken += [(ds, p, True) for p in new] + [(ds, p, False) for p in still]
    if as_json:
        print(json.dumps({
            "toolset": toolset, "a": a, "b": b, "tools": diff_to_json(diffs),
            "datasets": [d.name for d in datasets],
            "broken_labels": [dict(dataset=ds.name, file=str(ds.path), new=new, **p.__dict__)
                              for ds, p, new in broken]}, ensure_ascii=False, indent=2,
            default=str))
    else:
        _print_diff(toolset, a, b, diffs, datasets, broken)
    if any(new for _, _, new in broken):
        raise typer.Exit(1)


def _print_diff(toolset: str, a: str, b: str, diffs: list[ToolDiff], datasets: list[Dataset],
                broken: list[tuple[Dataset, LabelProblem, bool]]) -> None:
    out.print(f"[bold]{escape(toolset)}: {escape(a)} -> {escape(b)}[/bold]: "
              f"{count(len(diffs), 'tool')} changed")
    table = Table(show_header=True, title_justify="left")
    for column in ("tool", "change", "parameter", "detail"):
        table.add_column(column)
    for tool_diff in diffs:
        for change in tool_diff.changes:
            detail = change.detail
            if change.kind == "tool_renamed":
                detail = f"{change.before} -> {change.after}" + (
                    f" ({change.detail})" if change.detail else "")
            elif change.kind == "param_description":
                detail = f"{change.before!r} -> {change.after!r}"
            table.add_row(tool_diff.name, change.kind, escape(visible_text(change.param or "")),
                          escape(visible_text(str(detail))))
    if diffs:
        out.print(table)
    for tool_diff in diffs:
        if tool_diff.description_diff:
            out.print(f"[bold]{escape(tool_diff.name)}[/bold] description:")
            for line in tool_diff.description_diff[:40]:
                style = "green" if line.startswith("+") else "red"
                out.print(f"  [{style}]{escape(visible_text(line))}[/{style}]",
                          soft_wrap=True)
    checked = ", ".join(d.name for d in datasets) or "none"
    new = [(ds, p) for ds, p, is_new in broken if is_new]
    out.print(f"labels checked against {escape(b)} in datasets: {escape(checked)}; "
              f"{len(new)} newly invalid")
    if broken:
        table = Table(show_header=True)
        for column in ("case", "where", "field", "problem", "new"):
            table.add_column(column)
        for ds, problem, is_new in broken:
            # an hf: dataset's path is its spec string, not a file
            where = ds.path.name if not isinstance(ds.path, str) else ds.path
            table.add_row(problem.case_id, f"{where}:{problem.line}", problem.field,
                          escape(problem.message), "yes" if is_new else "already")
        out.print(table)


@variants_app.command("draft")
def variants_draft(
    provider: Annotated[str, typer.Option(
        "--provider", "-p", help="Provider id that drafts (any bench provider: local, "
                                 "openai:<model>, function:<module>:<callable>...).")],
    toolset: Annotated[str, typer.Option(help="Toolset under descriptions/.")],
    lengths: Annotated[str, typer.Option(
        help="Target lines per description, comma-separated: one variant l<N> each.")]
    = "3,10,30,50",
    source: Annotated[str, typer.Option(help="The variant drafted from.")] = "current",
    tools: Annotated[Optional[list[str]], typer.Option(
        "--tools", help="Only these tools (default: all).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Draft every length again, also where a spec already has a text "
                        "for it (without it, those are kept and only the missing ones are "
                        "drafted).")]
    = False,
    method: Annotated[str, typer.Option(
        help="whole: one request per tool and length for the whole text; sections: one "
             "short request per empty spec section, each length rendered by its template; "
             "auto: sections for the embedded model (local), whole for the others.")]
    = "auto",
    request_timeout: Annotated[float, typer.Option(
        min=1, help="Seconds per request (the embedded model's process counts as hung "
                    "after it: it is restarted once and asked again).")] = 120.0,
    tool_timeout: Annotated[float, typer.Option(
        min=1, help="Seconds of requests per tool: no new request for a tool after it; its "
                    "lengths drafted so far are written, the others named.")] = 600.0,
    max_tokens: Annotated[Optional[int], typer.Option(
        min=64, help="Completion cap per request (default: whole, 40 tokens per line of the "
                     "longest length, at least 256; sections, 256 per line).")] = None,
) -> None:
    """Draft shorter and longer versions (about 3/10/30/50 lines) of each tool's description
    from its imported text (the 'current' variant), so that the length ablation runs on any
    toolset. Each draft goes into the tool's spec (descriptions/<toolset>/specs/<tool>.yaml,
    made from the imported tool when missing) under variants.l<N> with draft: true; tables
    and reports mark the variants until bench variants accept. One progress line per request
    on stderr. Every usable draft is written as soon as it is known; a length without one
    (empty, cut, far from the length asked for, out of time...) is named on one line per
    tool. Run again, it resumes: a length a spec already has a text for is kept (one line
    says which), the others are drafted; --force drafts them all again. Exit code 1 when no
    draft at all was written."""
    from bench.drafting.outcomes import DraftStep
    from bench.drafting.run import draft_variants
    from bench.progress import format_duration

    try:
        wanted = sorted({int(v) for v in split_list([lengths])})
    except ValueError:
        raise BenchError(f"--lengths: whole line counts, comma-separated (got '{lengths}')") \
            from None
    err = Console(stderr=True, soft_wrap=True)

    def say(step: DraftStep) -> None:
        eta = step.elapsed_s / step.done * (step.total - step.done)
        err.print(f"draft {step.done}/{step.total} {step.tool} {step.part}: "
                  f"{visible_text(shorten_message(step.outcome))} "
                  f"({format_duration(step.seconds)}; elapsed "
                  f"{format_duration(step.elapsed_s)}, ETA {format_duration(eta)})",
                  markup=False)

    result = draft_variants(toolset, provider, wanted, source=source,
                            tools=split_list(tools) or None, force=force, method=method,
                            timeout_s=request_timeout, tool_timeout_s=tool_timeout,
                            max_tokens=max_tokens, progress=say,
                            notice=lambda line: out.print(line, soft_wrap=True, markup=False))
    _print_drafted(result, provider, source, toolset)
    if not result.drafts:
        raise typer.Exit(1)


def _print_drafted(result: DraftResult, provider: str, source: str, toolset: str) -> None:
    """What ``bench variants draft`` did: the drafts written (a table), one line per tool
    with lengths not drafted and why, how many of those asked were written, and the next
    step."""
    if result.drafts:
        table = Table(title=f"drafted by {escape(provider)} from '{escape(source)}' "
                            f"({result.method}; draft: true until bench variants accept)",
                      title_justify="left")
        for column in ("tool", "variant", "target lines", "lines"):
            table.add_column(column,
                             justify="left" if column in ("tool", "variant") else "right")
        for draft in result.drafts:
            table.add_row(escape(draft.tool), draft.variant, str(draft.target),
                          str(draft.lines))
        out.print(table)
    for tool, why in result.failed.items():
        done = [d.variant for d in result.drafts if d.tool == tool]
        head = (f"{escape(tool)}: drafted {', '.join(done)}; not drafted or incomplete"
                if done else f"{escape(tool)}: no usable draft from {escape(provider)}")
        out.print(f"{head} ({escape(visible_text(shorten_message(why)))})", soft_wrap=True)
    if result.failed:
        out.print(f"{len(result.drafts)} of {count(result.asked, 'draft')} written"
                  + ("; the same command again drafts only the others (or with a larger "
                     "--tool-timeout, or another --provider)"
                     if result.drafts and len(result.drafts) < result.asked else ""),
                  soft_wrap=True)
    if result.drafts:
        out.print(f"review the texts in descriptions/{escape(toolset)}/specs/, then: bench "
                  f"variants accept --toolset {escape(toolset)}", soft_wrap=True)


@variants_app.command("accept")
def variants_accept(
    toolset: Annotated[str, typer.Option(help="Toolset under descriptions/.")],
    names: Annotated[Optional[list[str]], typer.Option(
        "--variants", "-v", help="Only these variants (default: every drafted one).")] = None,
    tools: Annotated[Optional[list[str]], typer.Option(
        "--tools", help="Only these tools (default: all).")] = None,
) -> None:
    """Mark reviewed drafts as accepted (draft: false, reviewed_at set in the spec)."""
    from bench.drafting.spec_writes import accept_drafts

    accepted = accept_drafts(toolset, split_list(names) or None, split_list(tools) or None)
    for tool, variant in accepted:
        out.print(f"accepted {escape(tool)} {escape(variant)}")
    out.print(f"{count(len(accepted), 'draft')} accepted")
