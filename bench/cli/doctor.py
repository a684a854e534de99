"""``bench doctor``: check that the embedded model runs well here (:mod:`bench.providers.local.doctor`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from bench.errors import BenchError


def doctor(
    model: Annotated[Optional[str], typer.Option(help="A model preset (default qwen2.5-coder-0.5b).")]
    = None,
    model_path: Annotated[Optional[str], typer.Option(help="A GGUF file instead of a preset.")]
    = None,
) -> None:
    """Check that the embedded model runs well here: versions, CPU and llama.cpp build, load on
    the cores, a one-line answer, tokens/s, and the default run's expected time. Exit 1 on a
    failed check (each says its fix)."""
    if model and model_path:
        raise BenchError("--model and --model-path both name the model: give one")
    from bench.providers.local.doctor import main as doctor_main
    raise typer.Exit(doctor_main(model, model_path))
