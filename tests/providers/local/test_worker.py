"""The embedded model's worker process: a native crash or hang is contained and reported.

The crashes are real: the worker is sent SIGSEGV (what a fault in a llama.cpp CPU kernel
raises) or stopped with SIGSTOP (a hang), from outside, as the kernel or a stuck kernel would.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from conftest import requires_local_model

pytestmark = [requires_local_model, pytest.mark.model]


def _weather_tool():
    from bench.models import Tool
    return Tool(name="get_weather", description="Current weather of a city.",
                input_schema={"type": "object", "required": ["city"],
                              "properties": {"city": {"type": "string",
                                                      "description": "City name"}}})


def _ask(provider):
    from bench.models import Message
    return asyncio.run(provider.complete([Message(role="user", content="Weather in Paris?")],
                                         [_weather_tool()], variant_key="t", trial=0))


def test_a_crashed_worker_is_restarted_once_then_the_provider_reports_the_signal():
    from bench.providers.errors import ProviderError
    from bench.providers.local import LocalProvider
    provider = LocalProvider(threads=1)
    try:
        first = provider._process.pid
        assert _ask(provider).parsed.calls[0].name == "get_weather"
        os.kill(first, signal.SIGSEGV)
        answer = _ask(provider)  # the provider notices the death, restarts, asks again
        assert answer.parsed.calls[0].name == "get_weather"
        assert provider.restarts == 1
        assert provider._process.pid != first
        os.kill(provider._process.pid, signal.SIGSEGV)
        with pytest.raises(ProviderError) as raised:
            _ask(provider)
        assert raised.value.error_class == "permanent"
        assert "SIGSEGV" in str(raised.value)
    finally:
        provider.close()


def test_a_hung_worker_is_killed_and_restarted():
    from bench.providers.local import LocalProvider
    provider = LocalProvider(threads=1, answer_timeout_s=60)  # roomy: a busy machine is slow
    try:
        _ask(provider)  # grammars built: the next answer is quick
        hung = provider._process.pid
        os.kill(hung, signal.SIGSTOP)
        answer = _ask(provider)
        assert answer.parsed.calls[0].name == "get_weather"
        assert provider.restarts == 1
        assert provider._process.pid != hung
    finally:
        provider.close()


def _model_workers(pid: int) -> list[int]:
    """Child processes of ``pid`` that are multiprocessing workers (not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == pid and \
                    b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def test_a_run_whose_model_keeps_crashing_stops_with_one_line_and_resumes(run_bench, project):
    """Two SIGSEGVs of the model's process: the run stops with one line naming the case,
    variant, signal and the resume command; rows finished before are kept; the manifest says
    failed; ``--resume`` finishes the run."""
    import subprocess
    import sys
    env = {**os.environ, "BENCH_HOME": str(project), "COLUMNS": "200", "BENCH_THREADS": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    run_dir = project / "reports" / "runs" / "crashy"
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--variants", "l3", "--limit", "4",
         "--no-execute", "--run-id", "crashy"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kills: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 600
        while len(kills) < 2 and time.monotonic() < deadline and process.poll() is None:
            rows = run_dir / "results.jsonl"
            done = len(rows.read_text().splitlines()) if rows.is_file() else 0
            workers = [p for p in _model_workers(process.pid) if p not in kills]
            if done >= 1 and workers:  # after the first row, kill each new worker once
                os.kill(workers[0], signal.SIGSEGV)
                kills.append(workers[0])
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    out, err = process.communicate(timeout=900)
    thread.join()
    assert len(kills) == 2, (out, err)
    assert process.returncode == 2, err
    assert "Traceback" not in err
    message = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(message) == 1, err
    assert "SIGSEGV" in message[0] and "variant 'l3'" in message[0] and "case '" in message[0]
    assert "bench run --resume crashy" in message[0]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    kept = len((run_dir / "results.jsonl").read_text().splitlines())
    assert kept >= 1
    resumed = run_bench("run", "--resume", "crashy")
    assert resumed.returncode == 0, resumed.stderr
    rows = [json.loads(l) for l in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and len({r["key"] for r in rows}) == 4


@pytest.mark.parametrize("content, why", [
    (b"not a gguf file at all" * 10, "not a GGUF"),
    (b"GGUF\x03\x00\x00\x00" + b"\x00" * 4, "truncated"),
])
def test_a_model_path_that_is_not_a_loadable_gguf_is_one_line(run_bench, project, tmp_path,
                                                              content, why):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(content)
    result = run_bench("run", "--variants", "l3", "--limit", "1", "--model-path", str(bad))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], result.stderr


def test_a_gguf_that_llama_cpp_refuses_names_llama_cpps_reason(run_bench, project, tmp_path):
    """A header that passes bench's GGUF check but names a tensor llama.cpp does not expect
    (one renamed, same length): the one line carries llama.cpp's own reason, which
    llama-cpp-python's exception leaves out."""
    from bench.providers.local import find_default_model
    data = bytearray(find_default_model().read_bytes())
    name = b"blk.0.attn_q.weight"
    at = data.find(name)
    assert 0 < at < 50_000_000
    data[at:at + len(name)] = b"blk.0.attn_X.weight"
    bad = tmp_path / "renamed.gguf"
    bad.write_bytes(bytes(data))
    result = run_bench("run", "--variants", "l3", "--limit", "1", "--no-execute",
                       "--model-path", str(bad))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(bad) in lines[0] and "llama.cpp:" in lines[0], lines[0]


def test_ctrl_c_while_a_tools_block_is_read_stops_without_waiting_for_the_row(project):
    """A first row reads its tools block for up to minutes: Ctrl-C says what it waits for,
    gives the worker its grace period, then kills it; the row is not written (a resume redoes
    it), the manifest says interrupted and no model process is left."""
    import subprocess
    import sys
    env = {**os.environ, "BENCH_HOME": str(project), "COLUMNS": "200",
           "BENCH_LOCAL_STATE_CACHE": "0",  # the tools block is read, never loaded
           "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--variants", "l10", "--limit", "2",
         "--no-execute", "--run-id", "stopped"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stderr:  # wait until the long first row has started
        lines.append(line)
        if "reading the tools block" in line:
            break
    workers = _model_workers(process.pid)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    err = "".join(lines) + err
    assert process.returncode == 130, err
    assert re.search(r"stopping: waiting up to 5 s for \d requests? in flight", err), err
    assert "bench run --resume stopped" in err
    run_dir = project / "reports" / "runs" / "stopped"
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    results = run_dir / "results.jsonl"
    assert not results.is_file() or results.read_text() == ""
    assert workers and not any(Path(f"/proc/{pid}").exists() for pid in workers)
