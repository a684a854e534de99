"""``bench split``: give a dataset's cases a seeded, stratified ``dev``/``test`` split."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from bench.cli.options import split_list
from bench.errors import BenchError
from bench.plural import count

out = Console()


def split(
    dataset: Annotated[str, typer.Argument(help="A dataset under datasets/ or a .jsonl path.")],
    dev_fraction: Annotated[float, typer.Option(
        min=0.0, max=0.95, help="Share of each stratum (kind x expected tool x language) "
                                "for dev.")] = 0.3,
    seed: Annotated[int, typer.Option(help="The split's seed.")] = 20261203,
    force_dev: Annotated[Optional[list[str]], typer.Option(
        help="Case ids that must be dev (comma-separated or repeated).")] = None,
    leaks: Annotated[bool, typer.Option(
        help="Put in dev every case that a variant of the dataset's toolsets mirrors "
             "(bench lint's BL013, and the datasheet's reviewed cross-language and paraphrase "
             "mirrors).")]
    = True,
    dry_run: Annotated[bool, typer.Option(help="Print the split; do not write the file.")]
    = False,
) -> None:
    """Write a 'split' (dev or test) into every case of a .jsonl dataset.

    Stratified by kind, expected tool (or no-call / ask) and language; seeded (a case keeps
    its split when others are added); cases a description mirrors go to dev, since only dev
    cases may inform descriptions. Exit code 2 for a dataset that cannot be loaded.
    """
    from bench.datasets import load_dataset
    from bench.datasets.splits import assign_splits, render_splits
    from bench.descriptions import available_variants, load_variant
    from bench.descriptions.leaks import find_leaks, reviewed_mirrors, unique_cases
    from bench.store.files import atomic_write_text

    loaded = load_dataset(dataset)
    path = Path(loaded.path)
    if not path.is_file():
        raise BenchError(f"'{dataset}' is not a .jsonl file bench can write a split into")
    forced = set(split_list(force_dev))
    unknown = sorted(forced - {c.id for c in loaded.cases})
    if unknown:
        raise BenchError(f"--force-dev: unknown case id(s): {', '.join(unknown)}", file=path)
    mirrored: set[str] = set()
    if leaks:
        reviewed = reviewed_mirrors(path.parent / "README.md")
        from bench.descriptions.paraphrase import reviewed_paraphrases
        mirrored |= set(reviewed_paraphrases(path.parent / "README.md"))
        for toolset in loaded.toolsets:
            cases = [c for c in loaded.cases if c.toolset == toolset]
            for name in available_variants(toolset):
                mirrored |= unique_cases(find_leaks(load_variant(toolset, name), cases,
                                                    reviewed))
    assignment = assign_splits(loaded.cases, dev_fraction=dev_fraction, seed=seed,
                               forced_dev=forced | mirrored)
    text, summary = render_splits(path, loaded.cases, assignment, forced | mirrored)
    table = Table(title=f"{loaded.name}: split by stratum (seed {seed}, dev fraction "
                        f"{dev_fraction})", title_justify="left")
    for column in ("stratum", "dev", "test"):
        table.add_column(column, justify="left" if column == "stratum" else "right")
    for stratum, counts in summary.by_stratum.items():
        table.add_row(stratum, str(counts.get("dev", 0)), str(counts.get("test", 0)))
    out.print(table)
    out.print(f"dev {summary.counts.get('dev', 0)}, test {summary.counts.get('test', 0)}; "
              f"{count(len(mirrored), 'case')} mirrored by a description and "
              f"{count(len(forced - mirrored), 'more case')} forced into dev; "
              f"{count(summary.moved, 'case')} changed split")
    if not dry_run:
        atomic_write_text(path, text)
        out.print(f"wrote {path}")
