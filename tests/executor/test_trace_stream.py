"""A run's traces are read one record at a time: the end-of-run note on refused writes no
longer holds every trace of a 100,000-row run in memory."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bench.errors import BenchError
from bench.executor.traces import iter_traces, read_traces
from bench.report.execution import refused_writes


def line(tool: str, status: str = "ok", code: str | None = None) -> str:
    return json.dumps({"schema_version": 1, "tool": tool, "attempt": 0, "status": status,
                       "final": True, "error_code": code}) + "\n"


def test_records_stream_and_a_half_written_last_line_is_skipped(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text(line("a") + "\n" + line("b") + '{"tool": "c", "sta', encoding="utf-8")
    records = iter_traces(path)
    assert isinstance(records, Iterator)
    assert [r.tool for r in records] == ["a", "b"]
    assert [r.tool for r in read_traces(path)] == ["a", "b"]


def test_a_corrupt_line_is_named_when_reached(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text(line("a") + "not json\n", encoding="utf-8")
    records = iter_traces(path)
    assert next(records).tool == "a"  # given before the bad line is read
    with pytest.raises(BenchError) as caught:
        next(records)
    assert "traces.jsonl:2: not a JSON line" in str(caught.value)


def test_refused_writes_are_counted_per_tool(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text(line("cancel", "rejected", "permission_denied") * 3
                    + line("cancel") + line("refund", "rejected", "permission_denied"),
                    encoding="utf-8")
    assert refused_writes(path) == {"cancel": 3, "refund": 1}
    assert refused_writes(tmp_path / "none.jsonl") == {}
