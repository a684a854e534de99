"""Your own tools with the embedded model, for real: ``bench variants draft --provider local``
on a project made by ``bench init --python`` (a usable draft is written marked draft and
``bench run`` takes the variant; a cut answer leaves the spec unchanged, on one line), and
``bench init`` -> labeled cases -> ``bench run --provider local`` -> ``bench report`` -> the
project's gate in ``pytest``. Kept short in model time: one tool or two cases, greedy
decoding (the same prompt gives the same answer)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import requires_local_model

pytestmark = [requires_local_model, pytest.mark.model]

REPO = Path(__file__).resolve().parents[2]

TOOLS_MODULE = '''"""Two tools: the weather and the time."""


def get_weather(city: str, unit: str = "c") -> dict:
    """Current weather for a city.

    Use it when the user asks about the weather now.

    Args:
        city: The city's name.
        unit: c or f.
    """
    return {"city": city, "temp": 20, "unit": unit}


def get_time(timezone: str) -> str:
    """Current time in a time zone.

    Args:
        timezone: An IANA zone such as Europe/Oslo.
    """
    return "12:00"
'''

CASES = [
    {"id": "sky-01", "messages": [{"role": "user", "content": "What's the weather in Oslo?"}],
     "expected": {"calls": [{"name": "get_weather",
                             "arguments": {"city": ["Oslo"], "unit": [None, "c"]}}]}},
    {"id": "sky-02", "messages": [{"role": "user",
                                   "content": "What time is it in the zone Asia/Tokyo?"}],
     "expected": {"calls": [{"name": "get_time", "arguments": {"timezone": ["Asia/Tokyo"]}}]}},
]


def bench(cwd: Path, *args: str, module: str = "bench",
          timeout: float = 1800) -> subprocess.CompletedProcess:
    """``python -m <module> ARGS`` in ``cwd`` with this checkout's code, no BENCH_HOME."""
    env = {**os.environ, "COLUMNS": "200",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": str(REPO) + os.pathsep + str(cwd)}
    env.pop("BENCH_HOME", None)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def sky(tmp_path: Path) -> Path:
    """``bench init sky --python sky_tools.py`` (both tools read-only) with two cases."""
    (tmp_path / "sky_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    made = bench(tmp_path, "init", "sky", "--python", "sky_tools.py",
                 "--read-only", "get_weather,get_time")
    assert made.returncode == 0, made.stderr
    root = tmp_path / "sky"
    (root / "datasets/sky/cases.jsonl").write_text("".join(
        json.dumps({"toolset": "sky", "lang": "en", **case}) + "\n" for case in CASES),
        encoding="utf-8")
    return root


def test_variants_draft_with_the_embedded_model(sky: Path):
    specs = sky / "descriptions/sky/specs"
    drafted = bench(sky, "variants", "draft", "--provider", "local", "--toolset", "sky",
                    "--lengths", "3", "--tools", "get_time")
    assert drafted.returncode == 0, drafted.stdout + drafted.stderr
    spec = yaml.safe_load((specs / "get_time.yaml").read_text(encoding="utf-8"))
    l3 = spec["variants"]["l3"]
    assert (l3["draft"], l3["drafted_by"]) == (True, "local")
    assert l3["drafted_from"].startswith("current sha256:")
    assert 2 <= sum(1 for line in l3["description"].splitlines() if line.strip()) <= 5
    assert "variants" not in yaml.safe_load((specs / "get_weather.yaml").read_text())

    listed = bench(sky, "variants", "--toolset", "sky")
    assert "l3 (draft: 1 of 2)" in listed.stdout, listed.stdout
    # bench run takes the drafted variant (get_weather's l3 is the template's) and marks it
    (sky / "answers.py").write_text(
        "def answer(messages, tools, trial):\n"
        "    return [{'name': 'get_weather', 'arguments': {'city': 'Oslo'}}]\n",
        encoding="utf-8")
    ran = bench(sky, "run", "--dataset", "sky", "--variants", "l3", "--split", "all",
                "--provider", "function:answers:answer", "--run-id", "drafted")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    manifest = json.loads((sky / "reports/runs/drafted/manifest.json").read_text())
    assert [(v["name"], v["draft_tools"]) for v in manifest["variants"]] == \
        [("l3", ["get_time"])]
    rows = (sky / "reports/runs/drafted/results.jsonl").read_text().splitlines()
    assert len(rows) == 2

    # a whole answer cut by the token cap is no draft: one line, the spec byte for byte as
    # it was, exit 1 (nothing was written)
    before = (specs / "get_weather.yaml").read_bytes()
    cut = bench(sky, "variants", "draft", "--provider", "local", "--toolset", "sky",
                "--lengths", "10", "--tools", "get_weather", "--max-tokens", "64",
                "--method", "whole")
    assert cut.returncode == 1, cut.stdout + cut.stderr
    assert [line for line in cut.stdout.splitlines() if "get_weather" in line] == [
        "get_weather: no usable draft from local (l10: invalid answer (truncated: the answer "
        "hit the token limit))"]
    assert (specs / "get_weather.yaml").read_bytes() == before


@pytest.mark.slow
def test_the_embedded_model_drafts_every_default_length_section_by_section(sky: Path):
    """The default lengths 3, 10, 30, 50 on a two-tool toolset: one short question per line of
    the empty spec sections, a progress line each, and all four lengths of both tools written,
    each within its line range and each text its own (bench at 2a945e9 wrote none of them in
    36 minutes; greedy decoding gives the same answers on every run)."""
    from bench.drafting.filters import usable_range

    drafted = bench(sky, "variants", "draft", "--provider", "local", "--toolset", "sky")
    assert drafted.returncode == 0, drafted.stdout + drafted.stderr
    progress = [line for line in drafted.stderr.splitlines() if line.startswith("draft ")]
    assert progress, drafted.stderr
    assert all(re.match(r"draft \d+/\d+ get_(weather|time) \w+ \d+: ", line)
               for line in progress), progress
    assert "(sections; draft: true" in " ".join(drafted.stdout.split())
    specs = sky / "descriptions/sky/specs"
    for tool in ("get_weather", "get_time"):
        variants = yaml.safe_load((specs / f"{tool}.yaml").read_text()).get("variants") or {}
        assert sorted(variants) == ["l10", "l3", "l30", "l50"], (tool, drafted.stdout)
        texts = {}
        for name, lines in (("l3", 3), ("l10", 10), ("l30", 30), ("l50", 50)):
            entry = variants[name]
            assert (entry["draft"], entry["drafted_by"]) == (True, "local")
            texts[name] = entry["description"]
            low, high = usable_range(lines)
            assert low <= sum(1 for line in texts[name].splitlines() if line.strip()) <= high
        assert len(set(texts.values())) == 4  # four lengths, not l10 three times


@pytest.mark.slow
def test_init_run_report_and_gate_with_the_embedded_model(sky: Path):
    recorded = bench(sky, "run", "--dataset", "sky", "--variants", "current", "--split", "all",
                     "--provider", "local", "--cache", "write",
                     "--cache-path", "gate/responses.sqlite", "--run-id", "record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    rows = [json.loads(line) for line in
            (sky / "reports/runs/record/results.jsonl").read_text().splitlines()]
    assert sorted((r["case_id"], r["variant"], r["provider"]) for r in rows) == [
        ("sky-01", "current", "local"), ("sky-02", "current", "local")]

    reported = bench(sky, "report", "record")
    assert reported.returncode == 0, reported.stdout + reported.stderr
    page = (sky / "reports/record/index.html").read_text(encoding="utf-8")
    assert "get_weather" in page and "get_time" in page

    assert bench(sky, "baseline", "update").returncode == 0
    # the gate replays the recorded answers against the baseline written from them: it passes
    gate = bench(sky, "-q", "-p", "no:cacheprovider", module="pytest")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "passed" in gate.stdout and "failed" not in gate.stdout
    # a changed description is not what was recorded: the gate fails, naming the case
    current = sky / "descriptions/sky/variants/current.yaml"
    current.write_text(current.read_text(encoding="utf-8").replace(
        "Current time in a time zone.", "The time now in one time zone."), encoding="utf-8")
    stale = bench(sky, "-q", "-p", "no:cacheprovider", module="pytest")
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "sky-02" in stale.stdout
