"""The built-in l3..l50 templates are found without copying them into a project, a project's
own template overrides the built-in one of its name, and a toolset without variants is
refused with its real cause."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.descriptions.variants import (PACKAGE_TEMPLATES, available_variants, load_variant,
                                         no_variants_reason)
from bench.errors import BenchError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare(tmp_path) -> Path:
    """``descriptions/`` with one toolset's specs and no ``templates/`` folder."""
    root = tmp_path / "descriptions"
    shutil.copytree(REPO / "descriptions" / "ecommerce" / "specs", root / "shop" / "specs")
    return root


def test_the_builtin_templates_are_package_data():
    assert sorted(p.name for p in PACKAGE_TEMPLATES.glob("*.j2")) == \
        ["l10.j2", "l3.j2", "l30.j2", "l50.j2"]


def test_a_project_without_templates_renders_every_level(bare):
    assert available_variants("shop", bare) == ["l3", "l10", "l30", "l50"]
    l30 = load_variant("shop", "l30", bare)  # l30 extends l10: found in the package too
    assert len(l30.tools) == 13
    assert l30.source == "bench/data/templates/l30.j2"
    assert l30.mean_lines > load_variant("shop", "l3", bare).mean_lines


def test_a_project_template_overrides_the_builtin_one(bare):
    (bare / "templates").mkdir()
    (bare / "templates" / "l3.j2").write_text("OWN {{ spec.summary }}\n", encoding="utf-8")
    (bare / "templates" / "short.j2").write_text("{{ spec.name }}\n", encoding="utf-8")
    own = load_variant("shop", "l3", bare)
    assert all(t.description.startswith("OWN ") for t in own.tools)
    assert available_variants("shop", bare) == ["l3", "l10", "l30", "l50", "short"]
    assert load_variant("shop", "short", bare).tools[0].description == "cancel_order"
    # the built-in l10 is still used where the project has none
    assert load_variant("shop", "l10", bare).source == "bench/data/templates/l10.j2"


def test_a_project_template_cannot_reach_python_to_read_files(bare, tmp_path):
    # a variant template rendered with jinja2's plain Environment could run commands and
    # read any file (the test split included) into a description
    secret = tmp_path / "test-split.txt"
    secret.write_text("a held-out query", encoding="utf-8")
    (bare / "templates").mkdir()
    (bare / "templates" / "l3.j2").write_text(
        "{{ cycler.__init__.__globals__.os.popen('cat " + str(secret) + "').read() }}\n",
        encoding="utf-8")
    with pytest.raises(BenchError, match="sandbox forbids") as raised:
        load_variant("shop", "l3", bare)
    assert raised.value.file is not None and str(raised.value.file).endswith("l3.j2")


@pytest.mark.parametrize("body, said", [
    ('{% include "l3.j2" %}', "it includes or calls itself without end (RecursionError)"),
    ("{{ 1/0 }}", "ZeroDivisionError: division by zero"),
    ("{{ spec.name.nope() }}", "template error: "),
])
def test_a_project_template_that_fails_while_rendering_is_one_line_naming_its_file(
        bare, body, said):
    (bare / "templates").mkdir()
    mine = bare / "templates" / "l3.j2"
    mine.write_text("{{ spec.name }}\n" + body + "\n", encoding="utf-8")
    with pytest.raises(BenchError) as raised:
        load_variant("shop", "l3", bare)
    message = str(raised.value)
    assert message.startswith(f"{mine}:2: ") and said in message and "\n" not in message


def test_no_variants_names_the_real_cause(tmp_path):
    root = tmp_path / "descriptions"
    (root / "calendar").mkdir(parents=True)
    assert available_variants("calendar", root) == []
    reason = no_variants_reason("calendar", root)
    assert "has no specs/*.yaml" in reason and "no variants/*.yaml" in reason
    with pytest.raises(BenchError, match="rendered from specs, and toolset .calendar. has none"):
        load_variant("calendar", "l10", root)


def test_a_rendered_level_of_a_toolset_with_only_written_variants_says_why(tmp_path):
    root = tmp_path / "descriptions"
    (root / "cal" / "variants").mkdir(parents=True)
    (root / "cal" / "variants" / "current.yaml").write_text(
        "tools:\n- name: a\n  description: A.\n  input_schema: {type: object}\n",
        encoding="utf-8")
    with pytest.raises(BenchError, match="rendered from specs, and toolset 'cal' has none"):
        load_variant("cal", "l10", root)


def test_bench_variants_in_a_project_without_templates(run_bench, project):
    shutil.rmtree(project / "descriptions" / "templates", ignore_errors=True)
    result = run_bench("variants", "--toolset", "ecommerce", "--json")
    assert result.returncode == 0, result.stderr
    assert '"l50"' in result.stdout
    (project / "descriptions" / "calendar").mkdir()
    failed = run_bench("variants", "--toolset", "calendar")
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "has no specs/*.yaml" in failed.stderr, failed.stderr
