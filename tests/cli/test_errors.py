"""Bad input: one line on stderr naming file/line/field, exit code 2, never a traceback."""

import pytest


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.slow
def test_unknown_dataset(run_bench):
    assert_one_line_error(run_bench("run", "--dataset", "nope"), "unknown dataset 'nope'",
                          "known: analytics, analytics-episodes, ecommerce, "
                          "ecommerce-episodes, logistics, logistics-episodes")


@pytest.mark.slow
def test_missing_dataset_file_is_not_found_naming_the_path(run_bench, project):
    result = run_bench("run", "--dataset", "./nope.jsonl")
    assert_one_line_error(result, f"{project / 'nope.jsonl'}: dataset file not found")
    assert "unknown dataset" not in result.stderr
    (project / "folder.jsonl").mkdir()
    assert_one_line_error(run_bench("run", "--dataset", "folder.jsonl"),
                          f"{project / 'folder.jsonl'}: dataset path is not a file")


@pytest.mark.slow
def test_unknown_variant(run_bench):
    assert_one_line_error(run_bench("run", "--variants", "l3,l99"), "unknown variant 'l99'")


@pytest.mark.slow
def test_unknown_provider(run_bench):
    assert_one_line_error(run_bench("run", "--provider", "bogus", "--limit", "1"),
                          "unknown provider 'bogus'")


@pytest.mark.slow
def test_malformed_jsonl_line(run_bench, project):
    cases = project / "datasets" / "ecommerce" / "cases.jsonl"
    lines = cases.read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4][:-5]
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_one_line_error(run_bench("run"), f"{cases}:5:", "malformed JSON")


def rewrite_first_case_with(project, old, new):
    """Replace ``old`` by ``new`` in the first line of the ecommerce cases holding ``old``;
    returns (cases path, 1-based line number)."""
    cases = project / "datasets" / "ecommerce" / "cases.jsonl"
    lines = cases.read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines) if old in line)
    lines[index] = lines[index].replace(old, new, 1)
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return cases, index + 1


@pytest.mark.slow
def test_case_with_unknown_tool(run_bench, project):
    cases, line = rewrite_first_case_with(project, '"name": "get_weather"',
                                          '"name": "get_forecast"')
    assert_one_line_error(run_bench("run"), f"{cases}:{line}:",
                          "unknown tool 'get_forecast'", "expected.calls.")


@pytest.mark.slow
def test_case_id_that_would_break_row_keys(run_bench, project):
    cases, line = rewrite_first_case_with(project, '"id": "ecom-0001"', '"id": "ecom|0001"')
    assert_one_line_error(run_bench("run"), f"{cases}:{line}:", "field 'id'", "'|'")


def test_invalid_schema_in_spec(run_bench, project):
    spec = project / "descriptions" / "ecommerce" / "specs" / "query_database.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("minimum: 1", "minimum: one", 1),
                    encoding="utf-8")
    assert_one_line_error(run_bench("variants", "--toolset", "ecommerce"), str(spec),
                          "field 'input_schema.properties.limit.minimum'", "invalid JSON Schema")


@pytest.mark.slow
def test_missing_model_file(run_bench, tmp_path):
    missing = tmp_path / "nope.gguf"
    assert_one_line_error(run_bench("run", "--limit", "1", "--model-path", str(missing)),
                          "model file not found", str(missing))


@pytest.mark.slow
def test_missing_model_file_from_env(run_bench, tmp_path, monkeypatch):
    missing = tmp_path / "gone.gguf"
    monkeypatch.setenv("BENCH_LOCAL_MODEL", str(missing))
    assert_one_line_error(run_bench("run", "--limit", "1"), "model file not found",
                          "BENCH_LOCAL_MODEL")


@pytest.mark.slow
def test_resume_unknown_run(run_bench):
    assert_one_line_error(run_bench("run", "--resume", "no-such-run"), "no run 'no-such-run'")


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["../x", "a/b"])
def test_run_id_is_not_a_path(run_bench, bad):
    assert_one_line_error(run_bench("run", "--run-id", bad, "--limit", "1"), "invalid run id")


@pytest.mark.slow
def test_variants_command_prints_lines_and_tokens(run_bench):
    result = run_bench("variants", "--toolset", "ecommerce")
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in result.stdout.splitlines() if line.startswith("│")}
    assert list(rows) == ["l3", "l10", "l30", "l50"]
    o200k = [int(rows[v][4]) for v in rows]
    assert o200k == sorted(o200k) and o200k[0] > 0
    lines = [float(rows[v][1]) for v in rows]
    assert lines == sorted(lines)
    local = rows["l3"][5]
    assert local == "-" or int(local) > 0


@pytest.mark.slow
def test_usage_errors_exit_2_without_traceback(run_bench):
    for args in (("run", "--trials", "0"), ("run", "--bogus"), ("frobnicate",)):
        result = run_bench(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_label_value_that_breaks_the_schema(run_bench, project):
    cases, line = rewrite_first_case_with(project, '"status": ["shipped"]',
                                          '"status": ["SHIPPED"]')
    assert_one_line_error(run_bench("run", "--limit", "1"), f"{cases}:{line}:",
                          "'SHIPPED' breaks the tool's schema", ".arguments.status")


@pytest.mark.slow
def test_variant_name_cannot_be_a_path(run_bench):
    assert_one_line_error(run_bench("run", "--variants", "../templates/l3"),
                          "invalid variant name")


NAPPING_COMMAND = """
import atexit, os, signal, sys, threading, time
import bench.cli as cli

@cli.app.command("nap")
def nap(seconds: float) -> None:
    time.sleep(seconds)  # a stand-in for any step outside a run loop (imports, loading)

late = os.environ.get("LATE_SIGNAL")
if late:  # registered before main(): runs after its own atexit handler, in the teardown
    atexit.register(lambda: (os.kill(os.getpid(), getattr(signal, late)), time.sleep(0.5)))
early = os.environ.get("EARLY_SIGNAL")
if early:
    threading.Timer(1.0, os.kill, (os.getpid(), getattr(signal, early))).start()
sys.argv = ["bench", "nap", sys.argv[1]]
cli.main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("signame, code, word", [("SIGTERM", 143, "terminated"),
                                                 ("SIGINT", 130, "interrupted")])
def test_a_stop_signal_outside_a_run_exits_with_its_code_and_says_so(signame, code, word):
    """typer turns a KeyboardInterrupt into a silent exit 130: a SIGTERM (a CI job's
    timeout) must still exit 143, and both say what happened."""
    import os
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", NAPPING_COMMAND, "30"], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "EARLY_SIGNAL": signame})
    assert result.returncode == code, result.stderr
    assert result.stderr.strip() == f"error: {word}"


@pytest.mark.slow
def test_a_signal_after_the_command_ended_does_not_change_its_exit_code():
    """Everything is written by then: a late Ctrl-C during the interpreter's teardown used to
    end a finished command by SIGINT (exit -2)."""
    import os
    import subprocess
    import sys
    for signame in ("SIGINT", "SIGTERM"):
        result = subprocess.run([sys.executable, "-c", NAPPING_COMMAND, "0"],
                                capture_output=True, text=True, timeout=60,
                                env={**os.environ, "LATE_SIGNAL": signame})
        assert result.returncode == 0, (signame, result.stderr)


def test_help_paragraphs_are_not_cut_at_the_docstrings_line_breaks(run_bench):
    """rich keeps a docstring's line breaks; bench joins each paragraph so that a wide
    terminal shows a sentence on one line."""
    result = run_bench("run", "--help")
    assert result.returncode == 0
    assert ("(a budget reached, or a provider skipped, e.g. for a missing key: one line says "
            "which)") in result.stdout


def test_a_missing_sdk_is_named_with_the_documented_install_command(run_bench, project,
                                                                    tmp_path, monkeypatch):
    """Without google-genai the Gemini provider is skipped with the install command of
    docs/providers.md, printed as is (rich would take ``[gemini]`` for markup)."""
    shadow = tmp_path / "shadow" / "google"  # a `google` package without `genai`
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    monkeypatch.setenv("GEMINI_API_KEY", "x")
    result = run_bench("run", "--provider", "gemini:gemini-2.5-flash", "--limit", "1",
                       "--variants", "l3", "--no-execute")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    hint = "pip install -c constraints.txt -e '.[gemini]'"
    assert f"google-genai is not installed ({hint})" in result.stderr, result.stderr
    from pathlib import Path
    docs = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text()
    assert hint in docs


def test_lint_of_an_unknown_toolset_is_an_error_not_a_clean_pass(run_bench, project):
    assert_one_line_error(run_bench("lint", "--toolset", "nope"), "unknown toolset 'nope'",
                          "known: analytics, ecommerce, logistics")
    (project / "descriptions" / "empty").mkdir()
    assert_one_line_error(run_bench("lint", "--toolset", "empty"),
                          "toolset 'empty' has no variants")


@pytest.mark.parametrize("option", ["--variants", "--provider", "--cases"])
def test_an_empty_name_list_is_a_usage_error_not_the_default(run_bench, project, option):
    # --dataset nope: without the check the command fails on the dataset, and never
    # reaches (or starts) the default provider
    result = run_bench("run", option, "", "--limit", "1", "--dataset", "nope")
    assert_one_line_error(result, f"{option} needs at least one name")
    assert not (project / "reports" / "runs").exists() or \
        not any((project / "reports" / "runs").iterdir())
