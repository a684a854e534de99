"""docs/extending.md's "Add an episode factor" recipe stays true: a factor is one edit of
bench/episodes/factors.py (its settings, its Factors field with the first setting as default,
its help), and its `bench run` option, run config, rows and resume check follow."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from bench import cli
from bench.episodes.factors import FACTOR_HELP, FACTORS, Factors


def test_every_factor_has_a_field_with_its_default():
    fields = {f.name: f.default for f in dataclasses.fields(Factors)}
    assert fields == {name: settings[0] for name, settings in FACTORS.items()}


def test_every_factor_has_a_run_option_with_its_help():
    shown = CliRunner().invoke(cli.app, ["run", "--help"], env={"COLUMNS": "300"}).output
    for name in FACTORS:
        assert f"--{name.replace('_', '-')}" in shown
        assert FACTOR_HELP[name].split(":")[0] in shown


@pytest.mark.slow
def test_a_factor_option_reaches_the_run_config_and_its_rows_and_a_resume_checks_it(run_bench,
                                                                                      project):
    """Each factor's ``bench run --<factor>`` option, made from ``FACTORS``, sets the run's
    config and names its rows' condition; a resume given another setting is refused naming
    the option (so a factor added in bench/episodes/factors.py alone reaches the run)."""
    chosen = {name: settings[1] for name, settings in FACTORS.items()}
    options = [arg for name, setting in chosen.items()
               for arg in (f"--{name.replace('_', '-')}", setting)]
    made = run_bench("run", "--dataset", "ecommerce-episodes", "--provider", "oracle",
                     "--variants", "l3", "--limit", "1", "--run-id", "factors", *options)
    assert made.returncode == 0, made.stderr
    run = project / "reports" / "runs" / "factors"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["factors"] == {name: [s] for name, s in chosen.items()}
    condition = Factors(**chosen).condition("l3")
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert rows and {row["variant"] for row in rows} == {condition}

    name, settings = next(iter(FACTORS.items()))
    option = f"--{name.replace('_', '-')}"
    changed = run_bench("run", "--resume", "factors", option, settings[0])
    assert changed.returncode == 2
    assert f"{option} cannot change when resuming 'factors'" in changed.stderr
