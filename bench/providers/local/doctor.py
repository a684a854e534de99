"""``bench doctor``: can this machine run the main job, how fast, and what to fix if not.

Checks, in order: versions; the CPU and the llama.cpp build's CPU kernels (a build with AMX
kernels on an AMX CPU is refused: ggml's AMX matrix multiply segfaults on Sapphire-Rapids-class
CPUs, ggml-org/llama.cpp issue 20824; a build using instructions the CPU lacks dies with
SIGILL); other processes loading the cores (llama.cpp's threads spin-wait, so a busy core slows
the model several times); whether the model loads and answers a one-line prompt with a tool
call; prompt-reading and decoding speed; and the expected wall time of the default run.

``bench run`` runs the quick part (:func:`bench.providers.local.machine.quick_checks`: the
build against the CPU, the load) before its first case.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from importlib import metadata
from typing import Any, Callable

from bench.errors import BenchError
# the machine checks, which bench run makes too (LocalProvider.start_notes), are one module
# below this one and the provider; their names are kept here for callers of this module
from bench.providers.local.machine import BUILD_FEATURE_FLAGS as BUILD_FEATURE_FLAGS
from bench.providers.local.machine import BUSY_SHARE as BUSY_SHARE
from bench.providers.local.machine import PORTABLE_CMAKE_ARGS as PORTABLE_CMAKE_ARGS
from bench.providers.local.machine import PORTABLE_INSTALL as PORTABLE_INSTALL
from bench.providers.local.machine import CpuInfo as CpuInfo
from bench.providers.local.machine import Finding as Finding
from bench.providers.local.machine import build_features as build_features
from bench.providers.local.machine import busy_cores as busy_cores
from bench.providers.local.machine import check_build as check_build
from bench.providers.local.machine import check_load as check_load
from bench.providers.local.machine import cpu_info as cpu_info
from bench.providers.local.machine import quick_checks as quick_checks

# The default model's rows on this project's machine (2-core AMD EPYC, portable build, idle;
# benchmarks/local_model_speed.py, benchmarks/RESULTS.md): per variant (first row s, mean of
# the later rows s), no saved prefix state, and the doctor's decode speed measured there.
REFERENCE: dict[str, Any] = {
    "model": "qwen2.5-coder-0.5b", "decode_tokens_per_s": 37.4,
    "rows": {"l3": (29.19, 2.13), "l10": (53.45, 2.37), "l30": (96.04, 2.85),
             "l50": (189.96, 3.98)}}


def estimate_default_run(speed: dict[str, float], cases: int,
                         reference: dict[str, Any] | None = None) -> float | None:
    """Seconds the default run should take here, scaled from a measured reference run.

    Args:
        speed: this machine's ``decode_tokens_per_s`` (:meth:`LocalProvider.speed`).
        cases: cases per variant.
        reference: per variant ``(first row s, mean later row s)`` and the ``decode`` speed
            measured with them (default :data:`REFERENCE`, the default model on this project's
            machine; benchmarks/RESULTS.md).

    Returns:
        ``sum(first + (cases - 1) * mean) * reference decode / this decode``, or None when the
        reference does not cover every default variant. Decoding dominates a row, so its speed
        ratio carries the estimate to another machine; an estimate, not a measurement.
    """
    reference = REFERENCE if reference is None else reference
    from bench.limits import DEFAULT_VARIANTS
    rows = reference["rows"]
    if not all(name in rows for name in DEFAULT_VARIANTS):
        return None
    seconds = sum(float(rows[n][0]) + (cases - 1) * float(rows[n][1]) for n in DEFAULT_VARIANTS)
    return seconds * float(reference["decode_tokens_per_s"]) / speed["decode_tokens_per_s"]


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version(), "platform": platform.platform()}
    for name in ("bench", "llama-cpp-python", "numpy", "openai", "anthropic"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def run_doctor(model: str | None = None, model_path: str | None = None,
               out: Callable[[str], None] = print) -> list[Finding]:
    """Run every check, print each finding as it comes, and return them all.

    Args:
        model / model_path: the local model to check (as ``bench run``).
        out: where lines go.
    """
    findings: list[Finding] = []

    def say(finding: Finding) -> None:
        findings.append(finding)
        mark = {"ok": "ok   ", "warn": "WARN ", "error": "ERROR"}[finding.level]
        out(f"{mark} {finding.topic:8s} {finding.text}")
        if finding.fix:
            out(f"      {'':8s} fix: {finding.fix}")

    versions = _versions()
    out("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    cpu = cpu_info()
    interesting = sorted(f for f in cpu.flags if f in set(BUILD_FEATURE_FLAGS.values())
                         or f.startswith("amx"))
    threads = os.environ.get("BENCH_THREADS") or str(max(1, min(4, cpu.cores)))
    say(Finding("ok", "cpu", f"{cpu.model}, {cpu.cores} logical cores, model threads "
                f"{threads}; features: {' '.join(interesting) or 'unknown'}"))
    say(check_load(1.0))
    if versions["llama-cpp-python"] == "not installed":
        say(Finding("error", "model", "llama-cpp-python is not installed",
                    "pip install -c constraints.txt -e '.[local]' (README)"))
        return findings
    from bench.providers.local import LocalProvider
    started = time.perf_counter()
    try:
        provider = LocalProvider(model_path, model=model)
    except BenchError as exc:
        say(Finding("error", "model", str(exc), "see the message; bench doctor --help"))
        return findings
    try:
        load_s = time.perf_counter() - started
        for finding in check_build(provider.system_info.get("system_info", ""), cpu):
            say(finding)
        say(_answer_check(provider, load_s))
        speed = provider.speed()
        say(Finding("ok", "speed", f"prompt reading {speed['prefill_tokens_per_s']:.0f} "
                    f"tokens/s, decoding {speed['decode_tokens_per_s']:.1f} tokens/s "
                    f"(short context, {provider.threads} threads)"))
        from bench.providers.local.presets import MODEL_PRESETS
        seconds = estimate_default_run(speed, _default_cases())
        if seconds is None or \
                provider.model_path.name != MODEL_PRESETS[REFERENCE["model"]].file_name:
            say(Finding("ok", "estimate", "no reference timing for this model: time a short "
                        "run (bench run --limit 20) to plan a long one"))
        else:
            slow = speed["decode_tokens_per_s"] < 0.5 * REFERENCE["decode_tokens_per_s"]
            idle = estimate_default_run(REFERENCE, _default_cases()) or 0.0
            say(Finding("warn" if slow else "ok", "estimate",
                        f"the default run (bench run) should take about {_duration(seconds)} "
                        "on this machine as loaded now, without saved tools-block states "
                        "(scaled from benchmarks/RESULTS.md)",
                        f"decoding runs at under half the reference speed: free the cores; "
                        f"on 2 idle cores of the reference machine it took about "
                        f"{_duration(idle)}" if slow else None))
    except Exception as exc:  # noqa: BLE001 - a crashed worker or a bad answer is the finding
        say(Finding("error", "model", f"{type(exc).__name__}: {exc}",
                    f"reinstall llama-cpp-python with portable kernels: {PORTABLE_INSTALL}"))
    finally:
        provider.close()
    return findings


def _answer_check(provider: Any, load_s: float) -> Finding:
    from bench.models import Message, Tool
    tool = Tool(name="get_weather", description="Current weather of a city.",
                input_schema={"type": "object", "properties": {
                    "city": {"type": "string", "description": "City name"}},
                    "required": ["city"]})
    started = time.perf_counter()
    response = provider.complete_blocking(
        [Message(role="user", content="What is the weather in Paris?")], [tool],
        variant_key="doctor", trial=0)
    seconds = time.perf_counter() - started
    calls = response.parsed.calls if response.parsed else []
    if response.parsed is None or response.parsed.error:
        return Finding("error", "model", f"the model's answer did not parse: {response.raw!r}",
                       f"reinstall llama-cpp-python: {PORTABLE_INSTALL}")
    shown = ", ".join(f"{c.name}({c.arguments})" for c in calls) or "no call"
    return Finding("ok", "model", f"{provider.model_id} loaded in {load_s:.1f} s and answered "
                   f"'What is the weather in Paris?' in {seconds:.1f} s with {shown}")


def _duration(seconds: float) -> str:
    """``"42 minutes"`` up to 90 minutes, else ``"3.5 hours"``."""
    minutes = seconds / 60
    return f"{minutes:.0f} minutes" if minutes < 90 else f"{minutes / 60:.1f} hours"


def _default_cases() -> int:
    from bench.datasets.loader import load_dataset
    return len(load_dataset("ecommerce").cases)


def main(model: str | None, model_path: str | None) -> int:
    """The command: print the report; exit 1 when a check failed, else 0."""
    findings = run_doctor(model, model_path)
    errors = [f for f in findings if f.level == "error"]
    warnings = [f for f in findings if f.level == "warn"]
    print(f"{len(errors)} error{'s' if len(errors) != 1 else ''}, {len(warnings)} "
          f"warning{'s' if len(warnings) != 1 else ''}", file=sys.stdout)
    return 1 if errors else 0
