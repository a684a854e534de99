"""``bench doctor``: can this machine run the main job, how fast, and what to fix if not.

Checks, in order: versions; the CPU and the llama.cpp build's CPU kernels (a build with AMX
kernels on an AMX CPU is refused: ggml's AMX matrix multiply segfaults on Sapphire-Rapids-class
CPUs, ggml-org/llama.cpp issue 20824; a build using instructions the CPU lacks dies with
SIGILL); other processes loading the cores (llama.cpp's threads spin-wait, so a busy core slows
the model several times); whether the model loads and answers a one-line prompt with a tool
call; prompt-reading and decoding speed; and the expected wall time of the default run.

``bench run`` runs the quick part (:func:`quick_checks`) before its first case.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from bench.errors import BenchError

# llama-cpp-python's build with portable CPU kernels (x86-64-v3: AVX2, FMA, F16C), as the
# README's commands and .ci/run install it. No AMX kernels (they crash on Sapphire-Rapids-class
# CPUs, ggml-org/llama.cpp issue 20824) and no -march=native (a wheel built on one machine and
# cached by pip would carry that machine's instructions to another).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
PORTABLE_INSTALL = (f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --force-reinstall '
                    "--no-cache-dir --no-deps -c constraints.txt llama-cpp-python")
# llama.cpp's system-info feature names -> /proc/cpuinfo flags they need.
BUILD_FEATURE_FLAGS = {
    "SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c",
    "FMA": "fma", "BMI2": "bmi2", "AVX_VNNI": "avx_vnni", "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi", "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
# A core counts as busy above this share of its time (other processes, sampled over 1 s).
BUSY_SHARE = 0.25
# The default model's rows on this project's machine (2-core AMD EPYC, portable build, idle;
# benchmarks/local_model_speed.py, benchmarks/RESULTS.md): per variant (first row s, mean of
# the later rows s), no saved prefix state, and the doctor's decode speed measured there.
REFERENCE: dict[str, Any] = {
    "model": "qwen2.5-coder-0.5b", "decode_tokens_per_s": 37.4,
    "rows": {"l3": (29.19, 2.13), "l10": (53.45, 2.37), "l30": (96.04, 2.85),
             "l50": (189.96, 3.98)}}


@dataclass
class Finding:
    """One line of the doctor's report.

    Attributes:
        level: ``ok``, ``warn`` or ``error``.
        topic: what was checked (``cpu``, ``build``, ``load``, ``model``...).
        text: what was found.
        fix: what to do about it (errors and warnings).
    """

    level: str
    topic: str
    text: str
    fix: str | None = None


@dataclass
class CpuInfo:
    """The CPU as Linux reports it: model name, logical cores, feature flags."""

    model: str
    cores: int
    flags: set[str] = field(default_factory=set)


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuInfo:
    """Read the CPU's model name and flags (``/proc/cpuinfo``; other systems: what
    :mod:`platform` knows and no flags)."""
    model = platform.processor() or platform.machine()
    flags: set[str] = set()
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and value.strip():
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return CpuInfo(model=model, cores=os.cpu_count() or 1, flags=flags)


def build_features(system_info: str) -> set[str]:
    """The CPU features a llama.cpp build uses, from ``llama_print_system_info()``
    (``"CPU : SSE3 = 1 | AVX = 1 | ..."``)."""
    features = set()
    for part in system_info.replace("CPU :", "|").split("|"):
        name, _, value = part.partition("=")
        if value.strip() == "1":
            features.add(name.strip())
    return features


def check_build(system_info: str, cpu: CpuInfo) -> list[Finding]:
    """Compare the llama.cpp build's CPU kernels with the CPU.

    Returns error findings for AMX kernels on an AMX CPU (the crash of ggml-org/llama.cpp issue
    20824) and for kernels needing instructions the CPU lacks (SIGILL); else one ``ok``.
    Without ``/proc/cpuinfo`` flags only the build is reported.
    """
    used = build_features(system_info)
    shown = " ".join(sorted(f for f in used if f in BUILD_FEATURE_FLAGS)) or "none listed"
    findings = []
    if cpu.flags:
        if "AMX_INT8" in used and "amx_int8" in cpu.flags:
            findings.append(Finding(
                "error", "build", "llama.cpp was built with AMX kernels and this CPU has AMX: "
                "ggml's AMX matrix multiply crashes on this CPU class (llama.cpp issue 20824)",
                f"reinstall it with portable kernels: {PORTABLE_INSTALL}"))
        missing = sorted(f for f in used
                         if f in BUILD_FEATURE_FLAGS and BUILD_FEATURE_FLAGS[f] not in cpu.flags)
        if missing:
            findings.append(Finding(
                "error", "build", f"llama.cpp was built for CPU features this CPU lacks: "
                f"{', '.join(missing)} (it dies with SIGILL)",
                f"reinstall it with portable kernels: {PORTABLE_INSTALL}"))
    if not findings:
        findings.append(Finding("ok", "build", f"llama.cpp CPU kernels: {shown}"))
    return findings


def _cpu_times() -> tuple[float, float] | None:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    values = [float(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0.0)
    return sum(values), idle


def _process_ticks() -> dict[int, tuple[str, float]]:
    ticks = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.find("(") + 1:raw.rfind(")")]
        rest = raw[raw.rfind(")") + 2:].split()
        try:
            ticks[int(entry.name)] = (name, float(rest[11]) + float(rest[12]))
        except (IndexError, ValueError):
            continue
    return ticks


def busy_cores(seconds: float = 1.0, *, exclude: set[int] | None = None,
               sleep: Callable[[float], None] = time.sleep) -> tuple[float, list[str]]:
    """How many cores other processes kept busy over ``seconds``, and the busiest of them.

    Returns:
        (busy cores as a float, e.g. 1.3 of 2; up to 3 ``"name (pid N): 97%"`` strings).
        ``(0.0, [])`` where ``/proc`` is not available.
    """
    exclude = {os.getpid(), *(exclude or set())}
    before, procs = _cpu_times(), _process_ticks()
    if before is None:
        return 0.0, []
    sleep(seconds)
    after, later = _cpu_times(), _process_ticks()
    if after is None:
        return 0.0, []
    hertz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, idle = after[0] - before[0], after[1] - before[1]
    cores = os.cpu_count() or 1
    busy = cores * (total - idle) / total if total > 0 else 0.0
    ours = sum(later[p][1] - procs[p][1] for p in exclude if p in later and p in procs)
    busy = max(0.0, busy - ours / hertz / seconds)
    heavy = sorted(((later[p][1] - procs[p][1]) / hertz / seconds, p, later[p][0])
                   for p in later if p in procs and p not in exclude)
    top = [f"{name} (pid {pid}): {share:.0%}" for share, pid, name in reversed(heavy[-3:])
           if share >= 0.05]
    return busy, top


def check_load(seconds: float = 1.0) -> Finding:
    """A warning when other processes keep more than :data:`BUSY_SHARE` of a core busy."""
    busy, top = busy_cores(seconds)
    if busy > BUSY_SHARE:
        return Finding("warn", "load",
                       f"other processes keep {busy:.1f} of {os.cpu_count()} cores busy"
                       + (f" ({'; '.join(top)})" if top else ""),
                       "llama.cpp's threads spin-wait: stop them or expect a several times "
                       "slower run (set BENCH_THREADS=1 to leave a core free)")
    return Finding("ok", "load", f"cores idle ({busy:.1f} of {os.cpu_count()} busy)")


def quick_checks(provider: Any) -> list[Finding]:
    """What ``bench run`` checks before its first case: the build against the CPU (from the
    started worker's system info) and the load.

    Raises:
        BenchError: an error finding (the run would crash or cannot be trusted), with its fix.
    """
    findings = check_build(provider.system_info.get("system_info", ""), cpu_info())
    for finding in findings:
        if finding.level == "error":
            raise BenchError(f"{finding.text}; {finding.fix}")
    return [*findings, check_load(0.5)]


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
