"""bench doctor: build checks against the CPU, load detection, and the command end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.providers.local.doctor import CpuInfo, build_features, busy_cores, check_build, cpu_info
from conftest import requires_local_model

PORTABLE = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
            "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
NATIVE_SPR = PORTABLE + "AVX512 = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | "
SPR_FLAGS = {"pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2", "avx512f", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"}


def test_build_features_reads_llama_cpp_system_info():
    assert build_features(PORTABLE) == {"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2",
                                        "LLAMAFILE", "OPENMP", "REPACK"}


def test_amx_kernels_on_an_amx_cpu_are_an_error_with_the_portable_fix():
    findings = check_build(NATIVE_SPR, CpuInfo("Intel Xeon (Sapphire Rapids)", 2, SPR_FLAGS))
    assert [f.level for f in findings] == ["error"]
    assert "AMX" in findings[0].text and "GGML_NATIVE=OFF" in findings[0].fix


def test_kernels_for_missing_instructions_are_an_error():
    avx2_only = {"pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2"}
    findings = check_build(NATIVE_SPR, CpuInfo("an AVX2 CPU", 2, avx2_only))
    assert findings[0].level == "error"
    assert "AVX512" in findings[0].text and "SIGILL" in findings[0].text


def test_the_portable_build_passes_on_both_cpu_kinds():
    for flags in (SPR_FLAGS, {"pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2"}):
        assert [f.level for f in check_build(PORTABLE, CpuInfo("x", 2, flags))] == ["ok"]


def test_cpu_info_reads_model_and_flags(tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu avx2 fma\n\n"
                    "processor\t: 1\nmodel name\t: Test CPU 9000\nflags\t\t: fpu avx2 fma\n")
    info = cpu_info(fake)
    assert info.model == "Test CPU 9000" and info.flags == {"fpu", "avx2", "fma"}


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")
def test_busy_cores_finds_a_spinning_process():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy, top = busy_cores(1.0)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy >= 0.5
    assert any(f"pid {spinner.pid}" in line for line in top), top


def test_the_readme_and_ci_install_with_the_doctors_build_flags():
    """One build recipe: the README's commands, .ci/run and the doctor's fix name the same
    CMAKE_ARGS and the constraints file."""
    from bench.providers.local.doctor import PORTABLE_CMAKE_ARGS
    root = Path(__file__).resolve().parents[3]
    readme = (root / "README.md").read_text(encoding="utf-8")
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    for text in (readme, ci):
        assert PORTABLE_CMAKE_ARGS in text
        assert "-c constraints.txt" in text
    assert "llama-cpp-python==0.3.16" in (root / "constraints.txt").read_text()


@requires_local_model
@pytest.mark.model
def test_doctor_answers_and_estimates(run_bench):
    result = run_bench("doctor", timeout=600)
    assert result.returncode in (0, 1), result.stderr
    out = result.stdout
    assert "answered 'What is the weather in Paris?'" in out, out
    assert "tokens/s" in out and "should take about" in out
    assert "Traceback" not in result.stderr
    if result.returncode == 1:  # only a real problem may fail it: the line says what
        assert "ERROR" in out


@pytest.mark.slow
def test_doctor_with_a_broken_model_file_fails_with_the_reason(run_bench, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00")
    result = run_bench("doctor", "--model-path", str(bad), timeout=120)
    assert result.returncode == 1
    assert str(bad) in result.stdout and "ERROR" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value, message", [("1000", "at most"), ("abc", "positive integer"),
                                            ("0", "positive integer")])
def test_thread_counts_beyond_the_cores_or_not_numbers_are_refused(monkeypatch, value, message):
    from bench.errors import BenchError
    from bench.providers.local import resolve_threads
    monkeypatch.setenv("BENCH_THREADS", value)
    with pytest.raises(BenchError, match=message):
        resolve_threads(None)
    monkeypatch.delenv("BENCH_THREADS")
    assert 1 <= resolve_threads(None) <= (os.cpu_count() or 1)
