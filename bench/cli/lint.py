"""``bench lint``: check tool descriptions and schemas (rules in bench.descriptions.lint)."""

from __future__ import annotations

import json
from pathlib import Path
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from bench.cli.options import split_list
from bench.cli.output import err, out
from bench.errors import BenchError
from bench.plural import count

if TYPE_CHECKING:
    from bench.descriptions.containment import TestIndex
    from bench.descriptions.lint import Finding
    from bench.models import Case

def lint(
    toolset: Annotated[Optional[list[str]], typer.Option(
        help="Toolsets to lint (default: every folder under descriptions/).")] = None,
    variant: Annotated[Optional[list[str]], typer.Option(
        "--variant", "-v", help="Variants to lint (default: all of each toolset).")] = None,
    min_lines: Annotated[int, typer.Option(min=0, help="Description budget: fewest lines.")]
    = 15,
    max_lines: Annotated[int, typer.Option(min=1, help="Description budget: most lines.")]
    = 30,
    overlap: Annotated[float, typer.Option(min=0.0, max=1.0, help="TF-IDF cosine from which "
                                           "two tools' descriptions overlap.")] = 0.5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    dataset: Annotated[Optional[list[str]], typer.Option(
        help="Check that no variant mirrors these datasets' test cases (BL013/BL014; a name "
             "under datasets/ or a .jsonl path; default: every dataset under datasets/ of "
             "a linted toolset; 'none' skips the check).")] = None,
) -> None:
    """Lint descriptions and schemas: rule code, severity, tool/parameter, fix hint.

    Exit code 1 when any finding has severity 'error'; 2 for a toolset that does not exist
    or has no variants, or a dataset that cannot be loaded.
    """
    from bench.descriptions import available_variants, check_toolset, load_variant
    from bench.descriptions.containment import TestIndex
    from bench.descriptions.lint import (RULES, LintConfig, leak_findings,
                                         length_order_findings, lint_variant)
    from bench.descriptions.paraphrase import paraphrase_findings
    from bench.paths import descriptions_dir

    root = descriptions_dir()
    toolsets = split_list(toolset) or sorted(
        p.name for p in root.iterdir() if p.is_dir() and p.name != "templates")
    config = LintConfig(min_lines=min_lines, max_lines=max_lines, overlap=overlap)
    findings = []
    linted: list[tuple[str, str]] = []
    for name in split_list(toolset):  # named ones must exist: nothing linted is no pass
        check_toolset(name, root)
        if not split_list(variant) and not available_variants(name, root):
            from bench.descriptions.variants import no_variants_reason
            raise BenchError(f"toolset '{name}' has no variants: "
                             f"{no_variants_reason(name, root)}")
    tests = _test_cases(split_list(dataset), toolsets)
    everywhere = _everywhere(split_list(dataset))
    nothing = TestIndex(())
    for name in toolsets:
        of_toolset = []
        for v in split_list(variant) or available_variants(name):
            loaded = load_variant(name, v)
            of_toolset.append(loaded)
            findings += lint_variant(loaded, config)
            for cases, datasheet in tests.get(name, []):
                findings += leak_findings(loaded, cases, datasheet, everywhere=nothing)
                findings += paraphrase_findings(loaded, cases, datasheet)  # BL016
            if everywhere is not None:  # containment: every test split, once per variant
                findings += leak_findings(loaded, [], None, everywhere=everywhere)
            linted.append((name, v))
        findings += length_order_findings(of_toolset)  # BL018: l50 shorter than l10...
    from bench.executor.label_results import lint_findings  # BL015: labels whose calls fail
    findings += lint_findings(split_list(dataset), linted)
    if as_json:
        print(json.dumps({"findings": [f.to_dict() for f in findings],
                          "rules": {r.code: r.__dict__ for r in RULES.values()}},
                         ensure_ascii=False, indent=2))
    else:
        _print(findings, linted)
    if any(f.severity == "error" for f in findings):
        raise typer.Exit(1)


def _test_cases(names: list[str], toolsets: list[str]
                ) -> dict[str, list[tuple[list[Case], Path]]]:
    """``toolset -> [(test cases, datasheet)]`` of the datasets to check for leaks: ``names``
    (``["none"]``: none), else every dataset under ``datasets/`` using a linted toolset. A
    dataset without splits counts every case as test. Labels are read through each
    toolset's aliases (``descriptions/<toolset>/aliases.yaml``) as a run reads them, so a
    label naming a renamed tool's old name is checked against the tool it names now.

    Raises:
        BenchError: a dataset that cannot be loaded, or an invalid ``aliases.yaml``.
    """
    from bench.datasets import available_datasets, load_dataset
    from bench.datasets.splits import select_split
    from bench.descriptions.aliases import apply_aliases

    if names == ["none"]:
        return {}
    out: dict[str, list[tuple[list[Case], Path]]] = {}
    for name in names or available_datasets():
        if not names and _no_cases_yet(name):
            # a new project (bench init) lints its descriptions before it has cases
            err.print(f"note: dataset '{name}' has no cases yet: no leak check against it",
                      markup=False)
            continue
        loaded, _ = apply_aliases(load_dataset(name))
        source = Path(loaded.path)
        datasheet = source.parent / "README.md"
        has_split = any(c.split for c in loaded.cases)
        cases = select_split(loaded.cases, "test") if has_split else list(loaded.cases)
        for toolset in loaded.toolsets:
            if toolset in toolsets or names:
                out.setdefault(toolset, []).append(
                    ([c for c in cases if c.toolset == toolset], datasheet))
    return out


def _everywhere(names: list[str]) -> "TestIndex | None":
    """The test queries BL013's ``containment`` signal searches in every variant, whatever
    its toolset: every test split of the project (``datasets/``), or of ``names``; None for
    ``--dataset none``.

    Raises:
        BenchError: a dataset that cannot be loaded.
    """
    from bench.datasets import load_dataset
    from bench.descriptions.containment import TestIndex, project_test_cases, test_split
    from bench.paths import datasets_dir

    if names == ["none"]:
        return None
    if not names:
        return TestIndex(project_test_cases(datasets_dir()))
    return TestIndex((name, case) for name in names
                     for case in test_split(load_dataset(name).cases))


def _no_cases_yet(name: str) -> bool:
    """True when ``datasets/<name>/cases.jsonl`` holds only blank lines (as ``bench init``
    writes it)."""
    from bench.paths import datasets_dir

    path = datasets_dir() / name / "cases.jsonl"
    try:
        with path.open("rb") as handle:
            return not any(line.strip() for line in handle)
    except OSError:
        return False  # load_dataset names the problem


def _print(findings: list[Finding], linted: list[tuple[str, str]]) -> None:
    from bench.descriptions.lint import RULES

    table = Table(show_header=True)
    for column in ("code", "rule", "severity", "variant", "tool", "parameter", "message",
                   "fix"):
        table.add_column(column)
    for f in findings:
        table.add_row(f.code, f.rule, f.severity, f"{f.toolset}/{f.variant}", f.tool,
                      f.param or "", escape(f.message), escape(f.hint))
    if findings:
        out.print(table)
    counts = Counter((f.toolset, f.variant, f.code) for f in findings)
    summary = Table(title="findings per variant and rule (" + ", ".join(
        f"{r.code} {r.name}" for r in RULES.values()) + ")", title_justify="left")
    summary.add_column("variant")
    for rule in RULES.values():
        summary.add_column(rule.code + ("!" if rule.severity == "error" else ""),
                           justify="right")
    summary.add_column("total", justify="right")
    for ts, v in linted:
        row = [counts.get((ts, v, rule.code), 0) for rule in RULES.values()]
        summary.add_row(f"{ts}/{v}", *map(str, row), str(sum(row)))
    out.print(summary)
    errors = sum(1 for f in findings if f.severity == "error")
    out.print(f"{count(len(findings), 'finding')}, {count(errors, 'error')} in "
              f"{count(len(linted), 'variant')}")
