"""JUnit XML: one testcase per row (case x variant x provider x trial), for CI test views."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from typing import IO, Any, Sequence

from bench.report.caps import TEXT_LIMIT
from bench.report.data import LoadedRun, all_rows, row_outcome, variant_order
from bench.results import Row

# Characters XML 1.0 forbids (model output may hold them); they become U+FFFD.
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: Any, limit: int = TEXT_LIMIT) -> str:
    """``value`` as text legal in XML 1.0, cut to ``limit`` characters."""
    text = _XML_INVALID.sub("\ufffd", str(value))
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more]"


def _details(row: Row) -> str:
    metrics = row.metrics
    parts = [f"query: {row.query if row.query is not None else ''}",
             f"error codes: {', '.join(metrics.error_codes or []) or '-'}"]
    parts += [f"argument error: {e}" for e in metrics.argument_errors or []]
    if row.episode is not None:  # an agent episode: its trajectory instead of one answer
        parts.append(f"stop reason: {row.episode.stop_reason}")
        parts.append(f"trajectory: {row.episode.trajectory_text(TEXT_LIMIT)}")
        return "\n".join(parts)
    if row.parsed is not None and row.parsed.error:
        parts.append(f"parse error: {row.parsed.error}")
    calls = [f"{c.name}({c.arguments})" for c in row.calls()]
    parts.append(f"calls: {'; '.join(calls) or '(none)'}")
    parts.append(f"raw response: {row.response.raw if row.response is not None else None}")
    return "\n".join(parts)


def render_junit(runs: Sequence[LoadedRun], name: str) -> str:
    """JUnit XML text of ``runs`` (:func:`write_junit` into memory), with declaration."""
    buffer = io.StringIO()
    write_junit(runs, name, buffer)
    return buffer.getvalue()


def _open_tag(tag: str, attributes: dict[str, str], level: int) -> str:
    """``<tag a="...">`` indented ``level`` steps, attributes escaped as ElementTree does."""
    empty = ET.tostring(ET.Element(tag, attributes), encoding="unicode")  # '<tag ... />'
    return "  " * level + empty[:-3] + ">\n"


def write_junit(runs: Sequence[LoadedRun], name: str, out: IO[str]) -> None:
    """Write JUnit XML for ``runs`` to ``out``: a ``<testsuite>`` per (provider, variant), a
    ``<testcase>`` per row, each serialized and written as it is made (a large run's XML is
    never held whole).

    A testcase's ``classname`` is ``bench.<provider>.<variant>``, its name the case id (with
    ``#<trial>`` when the run has several trials) and its ``time`` the row's latency in
    seconds. A row whose outcome is not ``pass`` (see
    :func:`bench.report.data.row_outcome`) carries a ``<failure>`` whose ``type`` is the
    outcome, whose ``message`` lists the error codes and whose text holds the query, argument
    errors, parsed calls and raw response (cut to the report's text limit). Suites and the
    root carry ``tests``, ``failures``, ``errors`` (0) and ``time`` (seconds), counted in a
    first pass over the rows; suites are ordered by provider, then variant.
    """
    order = {v: i for i, v in enumerate(variant_order(runs))}
    several_trials = False
    totals: dict[tuple[str, str], list[float]] = {}  # pair -> [tests, failures, seconds]
    for row in all_rows(runs):  # first pass: the counts the opening tags carry
        total = totals.setdefault((row.provider, row.variant), [0, 0, 0.0])
        total[0] += 1
        total[1] += row_outcome(row) != "pass"
        total[2] += float(row.latency_s or 0.0)
        several_trials = several_trials or bool(row.trial)
    pairs = sorted(totals, key=lambda pair: (pair[0], order.get(pair[1], 0)))
    out.write("<?xml version='1.0' encoding='utf-8'?>\n")
    out.write(_open_tag("testsuites", {
        "name": xml_text(name), "tests": str(int(sum(t[0] for t in totals.values()))),
        "failures": str(int(sum(t[1] for t in totals.values())))}, 0))
    with contextlib.ExitStack() as stack:
        # second pass: each suite's testcases in a spooled file (in memory up to 1 MiB),
        # then the suites in order: the rows are never held, nor sorted
        suites = {pair: stack.enter_context(tempfile.SpooledTemporaryFile(
            max_size=2 ** 20, mode="w+", encoding="utf-8")) for pair in pairs}
        for row in all_rows(runs):
            pair = (row.provider, row.variant)
            name_text = row.case_id + (f"#{row.trial}" if several_trials else "")
            case = ET.Element("testcase", name=xml_text(name_text),
                              classname=xml_text(f"bench.{pair[0]}.{pair[1]}"),
                              time=f"{float(row.latency_s or 0.0):.3f}")
            outcome = row_outcome(row)
            if outcome != "pass":
                codes = row.metrics.error_codes or []
                failure = ET.SubElement(case, "failure", type=outcome,
                                        message=xml_text(", ".join(codes) or outcome, 500))
                failure.text = xml_text(_details(row))
            ET.indent(case, level=2)
            suites[pair].write("    " + ET.tostring(case, encoding="unicode").rstrip() + "\n")
        for pair in pairs:
            tests, failures, seconds = totals[pair]
            out.write(_open_tag("testsuite", {
                "name": xml_text(f"{pair[0]} · {pair[1]}"), "tests": str(int(tests)),
                "failures": str(int(failures)), "errors": "0", "time": f"{seconds:.3f}"}, 1))
            suites[pair].seek(0)
            shutil.copyfileobj(suites[pair], out)
            out.write("  </testsuite>\n")
    out.write("</testsuites>\n")
