"""`bench run --resume` with options given again: a value equal to the stored one is no change
and is accepted; only a real change is refused, in one line naming the option, the stored and
the given value."""

from __future__ import annotations

import pytest

from bench.errors import BenchError
from bench.runner import RunConfig
from bench.runner.config import changed_settings


def test_a_setting_given_again_as_stored_is_no_change(project, monkeypatch):
    """Values are compared as the run stores them: a relative .jsonl path made absolute, a
    variant given twice kept once, a factor the run did not set taken at its default."""
    monkeypatch.chdir(project)
    cases = project / "datasets" / "ecommerce" / "cases.jsonl"
    stored = RunConfig(dataset=str(cases), variants=["l3", "l10"], trials=2, limit=5)
    same = {"dataset": "datasets/ecommerce/cases.jsonl", "variants": ["l3", "l10", "l3"],
            "trials": 2, "limit": 5, "seed": 1234, "execute": True,
            "factors": {"fault": ["none"]}, "concurrency": 64}  # concurrency: may change
    assert changed_settings(stored, same) == []
    assert changed_settings(stored, {"trials": 3, "limit": 5, "variants": ["l10", "l3"],
                                     "factors": {"fault": ["none", "timeout"]}}) == [
        ("trials", 2, 3), ("variants", ["l3", "l10"], ["l10", "l3"]),
        ("factors.fault", ["none"], ["none", "timeout"])]


def test_a_given_value_the_config_refuses_is_named_by_its_option():
    with pytest.raises(BenchError, match="^--fault: .*fault must be one of"):
        changed_settings(RunConfig(), {"factors": {"fault": ["bogus"]}},
                         {"factors.fault": "--fault"})


def test_a_check_across_settings_names_its_options_once_on_a_resume():
    """--error-pattern given to a resume of a run without --execute-mcp said "--error-pattern:
    --error-pattern goes with --execute-mcp": the option, then the check that names it.
    Said as a new run says it now."""
    with pytest.raises(BenchError) as refused:
        changed_settings(RunConfig(), {"error_pattern": "^E"},
                         {"error_pattern": "--error-pattern"})
    assert str(refused.value).startswith("--error-pattern goes with --execute-mcp (")
    assert str(refused.value).count("--error-pattern") == 1


@pytest.mark.slow
def test_resume_accepts_options_equal_to_the_stored_ones_and_names_a_change(run_bench):
    """Before: `bench run --resume X --trials 1` with 1 stored was refused like a change
    ("--trials cannot change"), and so was every option given with its stored value,
    --provider included."""
    made = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "2",
                     "--no-execute", "--run-id", "r1")
    assert made.returncode == 0, made.stderr
    same = run_bench("run", "--resume", "r1", "--trials", "1", "--limit", "2", "--variants",
                     "l3", "--dataset", "ecommerce", "--seed", "1234", "--no-execute",
                     "--provider", "oracle", "--run-id", "r1", "--max-tokens", "512",
                     "--tool-choice", "auto", "--fault", "none", "--concurrency", "2")
    assert same.returncode == 0, same.stderr
    assert "run r1 is already complete" in same.stderr

    for args, line in [
        (("--trials", "2"), "--trials cannot change when resuming 'r1': stored 1, given 2 "),
        (("--dataset", "logistics"),
         "--dataset cannot change when resuming 'r1': stored ecommerce, given logistics "),
        (("--execute",), "--execute cannot change when resuming 'r1': stored false, given "
                         "true "),
        (("--run-id", "r2"), "--run-id cannot change when resuming 'r1': stored r1, given r2"),
        (("--provider", "oracle", "--provider", "local"),
         "--provider cannot change when resuming 'r1': stored oracle, given local "),
        (("--variants", "l3,l10", "--cases", "ecom-0001", "--trials", "1"),
         "--variants, --cases cannot change when resuming 'r1': --variants stored l3, given "
         "l3,l10; --cases stored not set, given ecom-0001 (it would change what the run "
         "measures); start a new run")]:
        refused = run_bench("run", "--resume", "r1", *args)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: " + line), (args, lines)
