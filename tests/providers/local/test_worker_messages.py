"""How the model worker's death is explained: the signal decides whom the message blames."""

from __future__ import annotations

import pytest

from bench.providers.local import likely_cause, signal_name


@pytest.mark.parametrize("exitcode, name, blames", [
    (-11, "SIGSEGV", "crash in llama.cpp"), (-6, "SIGABRT", "crash in llama.cpp"),
    (-9, "SIGKILL", "out-of-memory killer"), (1, "exit code 1", "crash in llama.cpp")])
def test_the_signal_names_the_likely_cause(exitcode, name, blames):
    assert signal_name(exitcode) == name
    assert blames in likely_cause(signal_name(exitcode))


def test_a_hang_is_not_called_a_crash():
    assert "hang" in likely_cause("no answer within 900 s (hung; killed)")


def test_prune_states_drops_dead_writers_partials_and_the_oldest_states(tmp_path):
    import os
    import subprocess
    import sys
    from bench.providers.local.states import prune_states
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = tmp_path / f".a.state.{gone}.partial"
    alive = tmp_path / f".b.state.{os.getpid()}.partial"
    for path in (dead, alive):
        path.write_bytes(b"x")
    states = []
    for age, name in enumerate(["new", "mid", "old"]):
        path = tmp_path / f"{name}.state"
        path.write_bytes(b"s" * 100)
        os.utime(path, (1_000_000 - age * 1000, 1_000_000 - age * 1000))
        states.append(path)
    deleted = prune_states(tmp_path, keep_bytes=200, keep=states[2])
    # the oldest state is the one just written (kept); the next oldest goes, then the budget fits
    assert set(deleted) == {dead, states[1]}
    assert alive.exists() and states[0].exists() and states[2].exists()
