"""The machine checks ``bench run`` makes before its first case and ``bench doctor`` reports:
the llama.cpp build's CPU kernels against the CPU (a build with AMX kernels on an AMX CPU is
refused: ggml's AMX matrix multiply segfaults on Sapphire-Rapids-class CPUs, ggml-org/llama.cpp
issue 20824; a build using instructions the CPU lacks dies with SIGILL), and other processes
loading the cores (llama.cpp's threads spin-wait, so a busy core slows the model several
times).

Below both users: :class:`~bench.providers.local.provider.LocalProvider` (its
``start_notes``, :func:`quick_checks`) and :mod:`bench.providers.local.doctor` (the whole
report, which starts a provider), so neither imports the other back.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
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
