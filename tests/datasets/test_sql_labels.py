"""Every SQL ``$regex`` label of the shipped datasets accepts at least two correct SQL forms (a
plain query, a CTE or a subquery) and rejects at least one plausible wrong one; the correct
forms run on the reference executor's real schema (the generated shop database).

The forms live in ``tests/data/sql_label_forms.jsonl``, one line per labelled argument:
``{"case": id, "call": index, "argument": "sql", "accept": [sql, ...], "reject": [sql, ...],
"why_rejected": "..."}``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.datasets import load_dataset
from bench.executor.backends.base import ShopDB
from bench.executor.backends.shopcache import shop_db_path
from bench.scoring.metrics import value_acceptable

FORMS = Path(__file__).parents[1] / "data" / "sql_label_forms.jsonl"
SQL_TOOLS = {"run_sql", "query_database"}
DATASETS = ("ecommerce", "analytics", "logistics", "ecommerce-episodes", "analytics-episodes",
            "logistics-episodes")


def _sql_labels() -> dict[tuple[str, int, str], list]:
    """``(case id, call index, argument) -> acceptable values`` of every SQL regex label."""
    found: dict[tuple[str, int, str], list] = {}
    for name in DATASETS:
        for case in load_dataset(name).cases:
            for index, call in enumerate(case.expected.calls):
                if call.name not in SQL_TOOLS:
                    continue
                for argument, values in call.arguments.items():
                    if any(isinstance(v, dict) and "$regex" in v for v in values):
                        found[(case.id, index, argument)] = values
    return found


def _forms() -> dict[tuple[str, int, str], dict]:
    out = {}
    for line in FORMS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[(row["case"], row.get("call", 0), row.get("argument", "sql"))] = row
    return out


LABELS = _sql_labels()


@pytest.fixture(scope="module")
def shop_db() -> ShopDB:
    """The reference executor's shop database (generated once per machine and cached)."""
    return ShopDB(shop_db_path())


def test_every_sql_regex_label_has_forms():
    assert LABELS, "the shipped datasets have SQL regex labels"
    missing = sorted(f"{c}#{i}.{a}" for c, i, a in set(LABELS) - set(_forms()))
    assert missing == []


@pytest.mark.parametrize("key", sorted(LABELS), ids=lambda k: f"{k[0]}#{k[1]}.{k[2]}")
def test_sql_label_accepts_correct_forms_and_rejects_a_wrong_one(key, shop_db):
    forms = _forms().get(key)
    if forms is None:
        pytest.fail(f"no forms for {key} in {FORMS.name}")
    acceptable = LABELS[key]
    assert len(forms["accept"]) >= 2 and len(forms["reject"]) >= 1
    for sql in forms["accept"]:
        assert value_acceptable(sql, acceptable), f"label rejects a correct form: {sql}"
        result = shop_db.select(sql, 1000, None)  # raises ToolError on a wrong column
        assert result["columns"], sql
    for sql in forms["reject"]:
        assert not value_acceptable(sql, acceptable), f"label accepts a wrong form: {sql}"
