"""The embedded provider meets schemas it cannot express and prompts it cannot fit."""

import json

import yaml

from conftest import requires_local_model

pytestmark = [requires_local_model]


def test_schema_the_grammar_converter_rejects_fails_before_the_run(run_bench, project):
    variants = project / "descriptions" / "ecommerce" / "variants"
    variants.mkdir()
    tool = {"name": "get_order_status", "description": "Order status.",
            "input_schema": {"type": "object", "required": ["order_id"],
                             "properties": {"order_id": {"type": "string",
                                                         "pattern": "ORD[0-9]{8}"}}}}
    (variants / "unanchored.yaml").write_text(yaml.safe_dump({"tools": [tool]}), encoding="utf-8")
    cases = project / "datasets" / "ecommerce" / "cases.jsonl"
    keep = [l for l in cases.read_text(encoding="utf-8").splitlines()
            if '"name": "get_order_status"' in l and '"name": "' not in l.split("get_order_status")[1]]
    cases.write_text(keep[0] + "\n", encoding="utf-8")
    result = run_bench("run", "--variants", "unanchored", "--split", "all", "--run-id", "bad-grammar")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "rejects tool 'get_order_status'" in result.stderr
    assert not (project / "reports" / "runs" / "bad-grammar").exists()


def test_case_longer_than_the_context_is_an_invalid_row_not_a_crash(run_bench, project):
    cases = project / "datasets" / "ecommerce" / "cases.jsonl"
    first, second = cases.read_text(encoding="utf-8").splitlines()[:2]
    huge = json.loads(first)
    from bench.providers.local import DEFAULT_N_CTX
    huge["messages"][0]["content"] = "order " * (DEFAULT_N_CTX + 1000)  # ~1 token per word
    cases.write_text(json.dumps(huge, ensure_ascii=False) + "\n" + second + "\n", encoding="utf-8")
    result = run_bench("run", "--variants", "l3", "--split", "all", "--run-id", "long")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(l) for l in
            (project / "reports" / "runs" / "long" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert rows[0]["parsed"]["error"].startswith("provider error:")
    # the answer's own code (bench.parse) next to the scoring's
    assert rows[0]["metrics"]["error_codes"] == ["provider_error", "unparseable"]
    assert rows[1]["parsed"]["error"] is None
