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


@pytest.mark.slow
def test_a_bad_factor_setting_names_the_factors_option_on_a_new_run_and_a_resume(run_bench):
    """Before, a new run said "--factors: error_style must be one of ..." (RunConfig's field,
    no such option); a resume already named --error-style. Both name it now."""
    new = run_bench("run", "--dataset", "ecommerce-episodes", "--provider", "oracle",
                    "--error-style", "bare,Bare", "--run-id", "bad")
    said = "error: --error-style: error_style must be one of actionable, bare; got 'Bare'"
    assert new.returncode == 2 and new.stderr.strip() == said, new.stderr
    made = run_bench("run", "--dataset", "ecommerce-episodes", "--provider", "oracle",
                     "--variants", "l3", "--limit", "1", "--run-id", "good")
    assert made.returncode == 0, made.stderr
    resumed = run_bench("run", "--resume", "good", "--error-style", "Bare")
    assert resumed.returncode == 2 and resumed.stderr.strip() == said, resumed.stderr


@pytest.mark.slow
def test_episode_factors_on_a_dataset_without_episodes_are_refused_naming_the_option(
        run_bench, project):
    """ecommerce has no episode: --fault would change nothing, and was accepted silently
    (its rows ran once, as without it). Refused in one line, exit 2, no run left."""
    refused = run_bench("run", "--provider", "oracle", "--limit", "2", "--variants", "l3",
                        "--fault", "503", "--error-style", "bare", "--run-id", "plain")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == (
        "error: --error-style, --fault: dataset 'ecommerce' has no episode cases; episode "
        "factors change only episodes: drop them, or run a dataset of episodes")
    assert not (project / "reports" / "runs" / "plain").exists()


@pytest.mark.slow
def test_episode_factors_on_a_mixed_dataset_say_they_change_only_its_episodes(run_bench,
                                                                                project):
    """A dataset with episodes and single-answer cases: the factors run on the episodes
    (each setting once: a setting given twice is kept once, as a variant is), the
    single-answer cases once, and a note says so before the run starts."""
    lines = (project / "datasets" / "ecommerce" / "cases.jsonl").read_text().splitlines()
    episodes = (project / "datasets" / "ecommerce-episodes" / "cases.jsonl").read_text()
    mixed = project / "mixed.jsonl"
    mixed.write_text(lines[0] + "\n" + episodes.splitlines()[0] + "\n", encoding="utf-8")
    run = run_bench("run", "--dataset", str(mixed), "--provider", "oracle", "--variants",
                    "l3", "--fault", "503,503", "--run-id", "mixed")
    assert run.returncode == 0, run.stderr
    assert "note: episode factors (--fault) change only episodes: 1 of the run's 2 cases; " \
        "the single-answer cases run once, as they are" in " ".join(run.stderr.split())
    folder = project / "reports" / "runs" / "mixed"
    assert json.loads((folder / "manifest.json").read_text())["config"]["factors"] == \
        {"fault": ["503"]}
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert sorted(row["variant"] for row in rows) == ["l3", "l3~fault=503"]
