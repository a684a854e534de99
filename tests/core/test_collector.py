"""The collector is paused while a run starts and restored after it (bench.collector)."""

from __future__ import annotations

import gc

import pytest

from bench.collector import RUN_THRESHOLD, paused_until_the_run


def test_the_collector_is_paused_until_the_run_starts_and_restored_after():
    before = gc.get_threshold()
    assert gc.isenabled()
    with paused_until_the_run() as start_the_run:
        assert not gc.isenabled()
        start_the_run()
        assert gc.isenabled()
        assert gc.get_threshold() == (RUN_THRESHOLD, *before[1:])
    assert gc.isenabled() and gc.get_threshold() == before


def test_a_run_that_fails_before_starting_leaves_the_collector_as_it_was():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), paused_until_the_run():
        raise RuntimeError("the dataset did not load")
    assert gc.isenabled() and gc.get_threshold() == before
    gc.disable()
    try:  # a caller that had it off keeps it off
        with paused_until_the_run() as start_the_run:
            start_the_run()
        assert not gc.isenabled()
    finally:
        gc.enable()
