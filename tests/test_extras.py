"""The ``test`` extra of pyproject.toml installs what the test suite drives.

The README's test command (``pip install -c constraints.txt -e '.[local,test]'``) installs no
other extra, so every SDK the tests point at the loopback fake server must be in ``test``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement  # a pytest dependency

REPO = Path(__file__).resolve().parents[1]


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]


def test_the_test_extra_installs_the_gemini_sdk():
    """tests/providers/test_recorded_fidelity.py and tests/providers/test_stream_quirks.py run
    Gemini through google-genai; without it they fail, not skip."""
    extras = _extras()
    assert set(extras["gemini"]) <= set(extras["test"])


def test_every_extra_requirement_is_pinned_in_constraints():
    pinned = {line.split("==")[0].strip().lower()
              for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines()
              if "==" in line and not line.lstrip().startswith("#")}
    for requirement in _extras()["test"]:
        assert Requirement(requirement).name.lower() in pinned, requirement


def test_the_local_and_gate_extras_run_the_gate():
    """The gate is a pytest plugin: `.[local]` (the README's install) and `.[gate]` (a CI job
    that only replays) bring pytest, so `pytest` runs the gate without the `test` extra."""
    extras = _extras()
    for name in ("local", "gate"):
        assert "pytest" in {Requirement(r).name for r in extras[name]}, name
