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
    """Run the gate's plan and write the baseline file named in the tool.bench.gate table."""
    from bench.gate.config import load_gate_config
    from bench.gate.core import GateRun, gate_project, run_gate, write_baseline

    gate = load_gate_config(config)
    if gate is None:
        raise BenchError("no [tool.bench.gate] table", file=config)
    project = gate_project(gate)
    if run:
        store = project.store(run)
        if not store.exists():
            raise BenchError(f"unknown run '{run}' under {project.runs_dir}")
        manifest = store.load_manifest()
        result = GateRun(rows=list(store.load_rows(manifest)), manifest=manifest, run_id=run)
    else:
        result = run_gate(gate, project=project)
    path = write_baseline(gate, result)
    typer.echo(f"baseline written: {path} (run {result.run_id}, {count(len(result.rows), 'row')})")
