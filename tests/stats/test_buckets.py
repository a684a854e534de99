"""Accuracy per information bucket: rates per (provider, variant, bucket) with intervals, and
``bench show`` / ``bench report`` print the table when cases carry buckets and two labelling
passes agree on them (Cohen's kappa in the datasheet above 0.60), else one line saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench.datasets.agreement import KAPPA_MIN, cohen_kappa, read_agreement
from bench.errors import BenchError
from bench.stats.buckets import bucket_table

REPO = Path(__file__).resolve().parents[2]


def test_rates_per_bucket_and_variant():
    frame = pd.DataFrame({
        "provider": ["p"] * 6, "variant": ["l3", "l3", "l3", "l50", "l50", "l50"],
        "info": ["schema", "l50", "l50", "schema", "l50", None],
        "selection_correct": pd.array([True, False, False, True, True, None], dtype="boolean"),
    })
    table = bucket_table(frame, ["l3", "l50"]).set_index(["variant", "info"])
    assert table.loc[("l3", "schema"), "selection_correct"] == 1.0
    assert table.loc[("l3", "l50"), "selection_correct"] == 0.0
    assert table.loc[("l3", "l50"), "selection_correct_n"] == 2
    assert table.loc[("l50", "l50"), "selection_correct"] == 1.0
    assert table.loc[("l50", "(untagged)"), "selection_correct_n"] == 0
    assert list(bucket_table(frame, ["l50", "l3"])["variant"])[:3] == ["l50"] * 3
    assert bucket_table(frame.assign(info=None)).empty


def agreement_block(first: str, second: str, agreed: int, kappa: str) -> str:
    return ("# Datasheet\n\n<!-- info-agreement:begin -->\n"
            f"- first pass: {first}\n- second pass: {second}\n- same bucket: {agreed}\n"
            f"- Cohen's kappa: {kappa}\n<!-- info-agreement:end -->\n")


def test_kappa_is_cohens_from_the_two_passes_counts():
    # the logistics datasheet's own arithmetic: p_o = 135/198, p_e = 25626/39204 = 0.654
    first = {"schema": 187, "l10": 9, "l30": 2, "l50": 0}
    second = {"schema": 136, "l10": 12, "l30": 43, "l50": 7}
    p_o, p_e = 135 / 198, (187 * 136 + 9 * 12 + 2 * 43) / 198 ** 2
    assert cohen_kappa(first, second, 135) == pytest.approx((p_o - p_e) / (1 - p_e))
    assert round(cohen_kappa(first, second, 135), 2) == 0.08
    assert cohen_kappa({"a": 3, "b": 2}, {"a": 3, "b": 2}, 5) == 1.0  # full agreement
    with pytest.raises(ValueError):
        cohen_kappa(first, second, 190)  # more agreements than the counts allow


def test_shipped_datasheets_state_the_kappa_their_counts_give():
    """Every shipped dataset records its two passes; the stated kappa is the computed one,
    ecommerce's 0.62 is the one above 0.60, and analytics' 0.59 is below it."""
    kappas = {}
    for sheet in sorted((REPO / "datasets").glob("*/README.md")):
        agreement = read_agreement(sheet, sheet.parent.name)
        assert agreement.kappa is not None, sheet
        cases = (sheet.parent / "cases.jsonl").read_text(encoding="utf-8").splitlines()
        assert sum(agreement.first.values()) == len(cases), sheet
        kappas[sheet.parent.name] = agreement.kappa
    assert kappas == {"analytics": 0.59, "analytics-episodes": 0.06, "ecommerce": 0.62,
                      "ecommerce-episodes": 0.06, "logistics": 0.08,
                      "logistics-episodes": -0.03}
    assert [name for name, kappa in kappas.items() if kappa > KAPPA_MIN] == ["ecommerce"]


def test_landis_koch_boundary_kappa_0_60_is_not_shown(tmp_path):
    # Landis & Koch (1977): 0.41-0.60 moderate, 0.61-0.80 substantial; 0.60 stays moderate
    sheet = tmp_path / "README.md"
    # 70 of 100 agree, each pass 50/50 over two buckets: p_e 0.5, kappa exactly 0.40
    sheet.write_text(agreement_block("schema 50, l10 50", "schema 50, l10 50", 70, "0.40"),
                     encoding="utf-8")
    low = read_agreement(sheet, "t")
    assert low.kappa == 0.40 and not low.shown
    assert "not shown: inter-rater kappa 0.40 is not above 0.60" in low.line()
    sheet.write_text(agreement_block("schema 50, l10 50", "schema 50, l10 50", 80, "0.60"),
                     encoding="utf-8")
    assert read_agreement(sheet, "t").kappa == 0.60 and not read_agreement(sheet, "t").shown
    sheet.write_text(agreement_block("schema 50, l10 50", "schema 50, l10 50", 81, "0.62"),
                     encoding="utf-8")
    assert read_agreement(sheet, "t").shown


def test_a_kappa_the_counts_do_not_give_names_the_datasheet_line(tmp_path):
    sheet = tmp_path / "README.md"
    sheet.write_text(agreement_block("schema 50, l10 50", "schema 50, l10 50", 70, "0.59"),
                     encoding="utf-8")
    with pytest.raises(BenchError) as caught:
        read_agreement(sheet, "t", "datasets/t/README.md")
    assert "datasets/t/README.md:7: cohen's kappa: states 0.59, but the counts give 0.4000" \
        in str(caught.value)
    sheet.write_text("# Datasheet\n", encoding="utf-8")
    missing = read_agreement(sheet, "t")
    assert missing.kappa is None and not missing.shown
    assert "no inter-rater kappa recorded" in missing.line()


def tagged_dataset(project: Path, name: str, kappa_block: str | None) -> None:
    """Six ecommerce cases with buckets as dataset ``name``, with a datasheet holding
    ``kappa_block`` (None: no datasheet)."""
    lines = (project / "datasets/ecommerce/cases.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[:6]]
    for i, row in enumerate(rows):
        row["info"] = "schema" if i % 2 else "l30"
        row.pop("split", None)
    folder = project / "datasets" / name
    folder.mkdir()
    (folder / "cases.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    if kappa_block is not None:
        (folder / "README.md").write_text(kappa_block, encoding="utf-8")


@pytest.mark.slow
def test_show_prints_the_bucket_table_with_its_kappa(project, run_bench):
    tagged_dataset(project, "tagged", agreement_block("schema 3, l30 3", "schema 3, l30 3", 5,
                                                      "0.67"))
    done = run_bench("run", "--dataset", "tagged", "--provider", "oracle", "--variants", "l3",
                     "--run-id", "b1", "--no-execute")
    assert done.returncode == 0, done.stderr
    shown = run_bench("show", "b1")
    assert "per information bucket" in shown.stdout
    table = shown.stdout.split("per information bucket", 1)[1]
    assert "│ oracle   │ l3      │ schema │     3 │" in table
    assert "│ oracle   │ l3      │ l30    │     3 │" in table
    assert "information buckets of 'tagged': inter-rater kappa 0.67 between two labelling " \
           "passes (datasets/tagged/README.md)" in " ".join(table.split())
    markdown = run_bench("report", "b1", "--format", "md", "--output", "-").stdout
    assert "per information bucket" in markdown and "| oracle | l3 | schema | 3 |" in markdown
    assert "information buckets of 'tagged': inter-rater kappa 0.67" in markdown


@pytest.mark.slow
def test_buckets_below_the_kappa_threshold_are_one_line_not_a_table(project, run_bench):
    """Terminal, Markdown and HTML: no per-bucket table for a dataset whose two labelling
    passes agree at chance level; one line naming the kappa and the datasheet instead."""
    tagged_dataset(project, "chance", agreement_block("schema 3, l30 3", "schema 3, l30 3", 3,
                                                      "0.00"))
    tagged_dataset(project, "unrated", None)
    for name in ("chance", "unrated"):
        done = run_bench("run", "--dataset", name, "--provider", "oracle", "--variants", "l3",
                         "--run-id", name, "--no-execute")
        assert done.returncode == 0, done.stderr
    shown = " ".join(run_bench("show", "chance").stdout.split())
    assert "per information bucket" not in shown and "│ schema │" not in shown
    assert "information buckets of 'chance' not shown: inter-rater kappa 0.00 is not above " \
           "0.60 (datasets/chance/README.md; Landis & Koch 1977" in shown
    unrated = " ".join(run_bench("show", "unrated").stdout.split())
    assert "per information bucket" not in unrated
    assert "information buckets of 'unrated' not shown: no inter-rater kappa recorded" in unrated
    markdown = run_bench("report", "chance", "--format", "md", "--output", "-")
    assert markdown.returncode == 0, markdown.stderr
    assert "per information bucket" not in markdown.stdout
    assert "information buckets of 'chance' not shown: inter-rater kappa 0.00" in \
        markdown.stdout
    page = run_bench("report", "chance", "--output", "-")
    assert page.returncode == 0, page.stderr
    assert "Per information bucket" not in page.stdout
    assert "information buckets of &#39;chance&#39; not shown: inter-rater kappa 0.00" in \
        page.stdout
