"""A provider gets copies of its request's messages and tools: whatever it does to them (a
scripted agent that edits them in place) never reaches the dataset's cases, the variants'
tools, later requests (other variants, trials, episode steps) or the stored rows."""

from __future__ import annotations

import json

import pytest

# A function provider that records what each request received, then edits the messages and
# the tools in place: every message's text, a tool's description and schema, the tools list.
MUTATOR = '''
import json, os

def answer(messages, tools, trial):
    with open(os.environ["SEEN_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"messages": [m.model_dump() for m in messages],
                              "tools": [t.model_dump() for t in tools]}) + "\\n")
    done = any(m.role == "tool" for m in messages)
    first = tools[0].name
    for message in messages:
        message.content = (message.content or "") + " MUTATED"
        for call in message.tool_calls or []:
            call["arguments"] = {"MUTATED": True}
    tools[0].description += " MUTATED"
    tools[0].input_schema.setdefault("properties", {})["MUTATED"] = {"type": "string"}
    tools.append(tools[0])
    del tools[1]
    if done:  # an episode's second step: the final answer
        return {"tool_calls": [], "text": "done"}
    return [{"name": first, "arguments": {}}]
'''


def cases_by_id(path) -> dict[str, list[dict]]:
    """Each case's messages as the dataset file has them."""
    return {case["id"]: case["messages"] for case in
            map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.mark.slow
@pytest.mark.parametrize("dataset,requests_per_item", [("ecommerce", 1),
                                                       ("ecommerce-episodes", 2)])
def test_what_a_provider_does_to_its_input_changes_nothing_else(run_bench, project,
                                                                monkeypatch, dataset,
                                                                requests_per_item):
    (project / "mutator.py").write_text(MUTATOR, encoding="utf-8")
    seen_log = project / "seen.jsonl"
    monkeypatch.setenv("SEEN_LOG", str(seen_log))
    # one request at a time: every request after the first comes after an edit
    result = run_bench("run", "--dataset", dataset, "--limit", "2", "--variants", "l3,l10",
                       "--trials", "2", "--concurrency", "1", "--provider",
                       "function:mutator:answer", "--run-id", "mutated", timeout=600)
    assert result.returncode == 0, result.stderr
    cases = cases_by_id(project / "datasets" / dataset / "cases.jsonl")
    rows = [json.loads(line) for line in
            (project / "reports" / "runs" / "mutated" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 2 * 2
    for row in rows:  # the stored query is the case's own
        assert row["query"] == next(m["content"] for m in reversed(cases[row["case_id"]])
                                    if m["role"] == "user")
    seen = [json.loads(line) for line in seen_log.read_text().splitlines()]
    assert len(seen) == len(rows) * requests_per_item
    assert "MUTATED" not in seen_log.read_text()
    manifest = json.loads((project / "reports" / "runs" / "mutated" / "manifest.json")
                          .read_text())
    tool_counts = {v["tools"] for v in manifest["variants"]}
    for request in seen:  # a case's messages first, then the variant's whole tools list
        texts = [(m["role"], m["content"]) for m in request["messages"]]
        assert any(texts[:len(case)] == [(m["role"], m["content"]) for m in case]
                   for case in cases.values())
        names = [t["name"] for t in request["tools"]]
        assert len(names) in tool_counts and len(set(names)) == len(names)
    # two variants: two tools lists, each sent unchanged to every request of its variant
    assert len({json.dumps(r["tools"], sort_keys=True) for r in seen}) == 2
