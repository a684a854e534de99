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
