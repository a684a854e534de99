"""The datasheet command: ``python -m bench.descriptions.datasheet ecommerce`` prints a dataset's
count tables (:func:`bench.datasets.stats.markdown`) and ``--write`` replaces the generated block
in ``datasets/<name>/README.md``.

It lives in the descriptions tier, not beside the tables in :mod:`bench.datasets.stats`, because
the per-tool counts need the toolset's tool names, which only the variants know (imports run
only down bench's tiers: ``[tool.importlinter]`` in pyproject.toml).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from bench.datasets.loader import Dataset, load_dataset
from bench.datasets.stats import markdown, write_block
from bench.descriptions.variants import load_variant
from bench.errors import BenchError


def toolset_tools(dataset: Dataset) -> list[str] | None:
    """Tool names of the dataset's toolset(s) from their l50 variant, or None if unknown."""
    names: list[str] = []
    for toolset in dataset.toolsets:
        try:
            names += [t.name for t in load_variant(toolset, "l50").tools]
        except BenchError:
            return None
    return names


def main(
    datasets: Annotated[list[str], typer.Argument(help="Dataset names under datasets/.")],
    write: Annotated[bool, typer.Option(
        "--write", help="Replace the stats block in datasets/<name>/README.md.")] = False,
) -> None:
    """Print (or write into each datasheet) the datasets' count tables."""
    try:
        for name in datasets:
            dataset = load_dataset(name)
            block = markdown(dataset, toolset_tools(dataset))
            if write and isinstance(dataset.path, Path):
                readme = dataset.path.parent / "README.md"
                print(f"{readme}: {'updated' if write_block(readme, block) else 'up to date'}")
            else:
                print(block)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(exc.exit_code) from None


if __name__ == "__main__":
    typer.run(main)
