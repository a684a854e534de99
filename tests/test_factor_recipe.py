"""docs/extending.md's "Add an episode factor" recipe stays true: every factor has its settings,
its Factors field with the first setting as default, a `bench run` option, and a place in the
resume check."""

from __future__ import annotations

import dataclasses

from typer.testing import CliRunner

from bench import cli
from bench.episodes.factors import FACTORS, Factors


def test_every_factor_has_a_field_with_its_default():
    fields = {f.name: f.default for f in dataclasses.fields(Factors)}
    assert fields == {name: settings[0] for name, settings in FACTORS.items()}


def test_every_factor_has_a_run_option_and_is_compared_on_resume():
    assert set(cli._FACTOR_OPTIONS) == set(FACTORS)
    shown = CliRunner().invoke(cli.app, ["run", "--help"], env={"COLUMNS": "300"}).output
    for name in FACTORS:
        assert f"--{name.replace('_', '-')}" in shown
