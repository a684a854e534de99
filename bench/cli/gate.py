"""``bench baseline update``: run the gate and write its baseline JSON (to commit)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bench.errors import BenchError
from bench.plural import count

baseline_app = typer.Typer(help="The pytest gate's baseline.", no_args_is_help=True)


@baseline_app.command("update")
def update(
    config: Annotated[Path, typer.Option(
        help="TOML file with a \\[tool.bench.gate] table.")] = Path("pyproject.toml"),
    run: Annotated[Optional[str], typer.Option(
        help="Take the rows of this stored gate run instead of running again.")] = None,
) -> None:
    """Run the gate's plan and write the baseline file named in the tool.bench.gate table.
    When the table has no floors key yet, floors from the baseline's rates are added to it."""
    from bench.gate.config import load_gate_config, read_gate_table, write_floors
    from bench.gate import baseline as gate_baseline, run as gate_run

    gate = load_gate_config(config)
    if gate is None:
        raise BenchError("no [tool.bench.gate] table", file=config)
    project = gate_run.gate_project(gate)
    if run:
        store = project.store(run)
        if not store.exists():
            raise BenchError(f"unknown run '{run}' under {project.runs_dir}")
        manifest = store.load_manifest()
        result = gate_run.GateRun(rows=list(store.load_rows(manifest)), manifest=manifest,
                                  run_id=run)
    else:
        result = gate_run.run_gate(gate, project=project)
    path = gate_baseline.write_baseline(gate, result)
    typer.echo(f"baseline written: {path} (run {result.run_id}, {count(len(result.rows), 'row')})")
    table = read_gate_table(config) or {}
    if "floors" not in table:  # the first baseline: a gate never runs without floors
        document = gate_baseline.load_baseline(path)
        floors = gate_baseline.baseline_floors(document) if document else {}
        if floors:
            write_floors(config, floors, "written by the first bench baseline update: the "
                         "lower end of the baseline rate's 99% Wilson interval (docs/gate.md)")
            typer.echo(f"floors written to [tool.bench.gate] of {config}: "
                       + ", ".join(f"{k} = {v:g}" for k, v in floors.items()))
