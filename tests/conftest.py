"""Fixtures shared by the test folders (the project fixtures, the markers and the embedded
model's skip condition are in the repository root's conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakeserver import FakeServer, set_dummy_keys


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    """One loopback fake server (:class:`tests.fakeserver.FakeServer`) for the module's tests;
    a test that scripts replies clears them itself. The fixture's name gives its tests the
    ``server`` marker."""
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy API keys (:data:`tests.fakeserver.DUMMY_KEYS`): the SDKs only ever reach the
    loopback server. A module asks for it with ``pytest.mark.usefixtures("keys")``."""
    set_dummy_keys(monkeypatch)


@pytest.fixture
def proj(elsewhere: Path) -> Path:
    """A project folder while the cwd and BENCH_HOME point elsewhere (the root conftest's
    ``elsewhere``, under the name the hostile-input tests of bench.evaluate use)."""
    return elsewhere
