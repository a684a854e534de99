"""docs/your-own-tools.md runs as written: from an empty folder to a report and a passing gate.

A block after ``<!-- file: PATH -->`` is written to PATH in a fresh folder; a block after
``<!-- run -->`` is run there line by line (``bench`` and ``pytest`` as ``python -m ...`` of
this checkout, ``python`` on PATH being this interpreter), each line must exit 0, and every
``<!-- expect: TEXT -->`` after the block must occur in the block's output. The figures the
page quotes are checked against the run's rows.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "your-own-tools.md"
_STEP = re.compile(r"<!-- (file|run):? ?(\S*) ?-->\n```[a-z]*\n(.*?)\n```\n"
                   r"((?:<!-- expect: .*? -->\n)*)", re.DOTALL)


def _steps() -> list[tuple[str, str, str, list[str]]]:
    """(kind, path, body, expectations) of each marked block, in page order."""
    return [(kind, path, body, re.findall(r"<!-- expect: (.*?) -->", expects))
            for kind, path, body, expects in _STEP.findall(PAGE.read_text(encoding="utf-8"))]


def test_the_page_has_its_steps():
    kinds = [kind for kind, *_ in _steps()]
    assert kinds.count("file") == 3 and kinds.count("run") == 4, kinds


def _command(line: str) -> list[str]:
    argv = shlex.split(line)
    if argv[0] in ("bench", "pytest"):
        return [sys.executable, "-m", argv[0], *argv[1:]]
    return argv


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    env = {**os.environ, "COLUMNS": "220",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": str(REPO) + os.pathsep + str(folder)}
    env.pop("BENCH_HOME", None)
    for kind, path, body, expects in _steps():
        if kind == "file":
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(body + "\n", encoding="utf-8")
            continue
        output = ""
        for line in body.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            result = subprocess.run(_command(line), cwd=folder, env=env, capture_output=True,
                                    text=True, timeout=600)
            output += result.stdout + result.stderr
            assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
        flat = " ".join(output.split())
        for text in expects:
            assert " ".join(text.split()) in flat, f"{text!r} not in the output of:\n{body}"
    # the figures the page quotes (step 5)
    rows = [json.loads(line) for line in
            (folder / "reports/runs/first/results.jsonl").read_text().splitlines()]
    current = [r["metrics"] for r in rows if r["variant"] == "current"]

    def count(metric: str) -> tuple[int, int]:
        values = [m[metric] for m in current if m.get(metric) is not None]
        return sum(values), len(values)
    assert count("selection_correct") == (8, 8)
    assert count("arguments_correct") == (5, 6)
    assert count("execution_success") == (4, 5)  # the refused delete_note row is not judged
    assert count("write_refused") == (1, 6)
    page = (folder / "reports/first/index.html").read_text(encoding="utf-8")
    assert "Execution:</strong> write calls refused" in page
    assert (folder / "gate/baseline.json").is_file()
    assert (folder / "reports/runs/first/mcp-server-notes.log").is_file()
