"""Accuracy per information bucket: rates per (provider, variant, bucket) with intervals, and
``bench show`` prints the table when cases carry buckets."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.stats.buckets import bucket_table


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


@pytest.mark.slow
def test_show_prints_the_bucket_table(project, run_bench):
    lines = (project / "datasets/ecommerce/cases.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[:6]]
    for i, row in enumerate(rows):
        row["info"] = "schema" if i % 2 else "l30"
        row.pop("split", None)
    path = project / "tagged.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    done = run_bench("run", "--dataset", str(path), "--provider", "oracle", "--variants", "l3",
                     "--run-id", "b1", "--no-execute")
    assert done.returncode == 0, done.stderr
    shown = run_bench("show", "b1")
    assert "per information bucket" in shown.stdout
    table = shown.stdout.split("per information bucket", 1)[1]
    assert "│ oracle   │ l3      │ schema │     3 │" in table
    assert "│ oracle   │ l3      │ l30    │     3 │" in table
