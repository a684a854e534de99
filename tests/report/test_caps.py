"""The HTML report caps every model-controlled field (issue 19, item 5): hostile answers (a
1 MiB argument, a 1 MiB tool name, thousands of calls, 1 MiB of prose) make a small page."""

from __future__ import annotations

import pytest
import json

from bench.report.caps import ARGUMENTS_LIMIT, ERROR_LIMIT, LIST_LIMIT, NAME_LIMIT
from bench.report.data import load_runs
from bench.report.drilldown import drilldown
from bench.report.html import render_html
from tests.report_runs import expected_answer, make_run

MIB = 2 ** 20


def huge_answer(case) -> str:
    """One kind of hostile answer per case, by the number in its id."""
    number = int("".join(ch for ch in case.id if ch.isdigit()))
    name = case.expected.calls[0].name if case.expected.calls else "reply_without_tool"
    kind = number % 5
    if kind == 0:  # one 1 MiB argument (also a 1 MiB argument error: the value is wrong)
        calls = [{"name": name, "arguments": {"order_id": "A" * MIB, "keyword": "B" * MIB}}]
    elif kind == 1:  # a made-up 1 MiB tool name
        calls = [{"name": "t" * MIB, "arguments": {}}]
    elif kind == 2:  # thousands of calls
        calls = [{"name": f"{name}", "arguments": {"n": i}} for i in range(5000)]
    elif kind == 3:  # arguments that are not JSON, 1 MiB of them
        calls = [{"name": name, "arguments": "{" + "C" * MIB}]
    else:  # 1 MiB of prose
        return "D" * MIB
    return json.dumps({"tool_calls": calls})


@pytest.mark.slow
def test_hostile_answers_make_a_small_page(project):
    make_run("plain", expected_answer, limit=10, variants=("l3",))
    make_run("huge", huge_answer, limit=10, variants=("l3",))
    plain = len(render_html(load_runs(["plain"]), "plain").encode("utf-8"))
    huge = render_html(load_runs(["huge"]), "huge").encode("utf-8")
    stored = (project / "reports/runs/huge/results.jsonl").stat().st_size
    assert stored > 5 * MIB  # the rows keep everything
    # 10 rows of capped fields: at most ~10 x (2 answers + 20 calls x arguments + errors)
    assert len(huge) < plain + 10 * (2 * 4200 + LIST_LIMIT * (ARGUMENTS_LIMIT + NAME_LIMIT + 200)
                                     + LIST_LIMIT * (ERROR_LIMIT + 100)), (len(huge), plain)
    assert len(huge) < 2 * MIB


@pytest.mark.slow
def test_every_capped_field_says_how_much_was_left_out(project):
    make_run("huge", huge_answer, limit=10, variants=("l3",))
    data = drilldown(load_runs(["huge"]))
    fields = {name: i for i, name in enumerate(data["fields"])}
    assert max(len(t) for t in data["tools"]) <= NAME_LIMIT + 60
    for row in data["rows"]:
        calls = row[fields["calls"]]
        assert len(calls) <= LIST_LIMIT + 1
        for name, arguments in calls:
            assert len(name) <= NAME_LIMIT + 60
            assert len(json.dumps(arguments)) <= ARGUMENTS_LIMIT + 80
        assert len(row[fields["argument_errors"]]) <= LIST_LIMIT + 1
        assert all(len(e) <= ERROR_LIMIT + 60 for e in row[fields["argument_errors"]])
        assert len(row[fields["parse_error"]] or "") <= ERROR_LIMIT + 60
    texts = json.dumps(data)
    assert "more calls in results.jsonl" in texts
    assert "more characters in results.jsonl" in texts
