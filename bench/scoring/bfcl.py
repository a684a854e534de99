"""BFCL-compatible checker mode: BFCL entries and the sources ``bench import bfcl`` keeps, and
BFCL's verdict on a run's answer (the ``bfcl_valid`` metric). The checker rules themselves,
and where they come from, are :mod:`bench.scoring.bfcl_checker`; their names are re-exported
here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Sequence

from pydantic import BaseModel, Field, ValidationError

from bench.errors import BenchError, json_line, pydantic_error_field, read_text_file
from bench.models import ToolCall
from bench.parse import NO_MODEL_ANSWER_CODES, ParsedAnswer
from bench.scoring.bfcl_checker import (NESTED_TYPES, NO_ANSWER_TYPE, PYTHON_TYPES, BfclObject,
                                        CheckResult, fail, check_entry, check_parallel,
                                        check_simple, function_name, is_call_format,
                                        is_empty_output, standardize_string)

__all__ = ["NESTED_TYPES", "NO_ANSWER_TYPE", "PYTHON_TYPES", "SOURCES_FILE", "BfclEntry",
           "BfclObject", "BfclSource", "CheckResult", "calls_to_outputs", "check_entry",
           "check_parallel", "check_simple", "fail", "function_name", "is_call_format",
           "is_empty_output", "load_entries", "load_sources", "outputs_from_answer",
           "run_verdict", "sources_path", "standardize_string"]


def outputs_from_answer(answer: ParsedAnswer) -> list[dict[str, object]] | None:
    """bench's parsed answer in BFCL's output form (None when undecodable; a call whose
    arguments are not an object makes the whole answer undecodable, as in BFCL)."""
    if answer.error is not None or any(not c.valid for c in answer.calls):
        return None
    return [{c.name: dict(c.arguments)} for c in answer.calls]


def calls_to_outputs(calls: Sequence[ToolCall]) -> list[dict[str, object]]:
    """Tool calls as BFCL outputs ``[{name: arguments}]``."""
    return [{c.name: dict(c.arguments)} for c in calls]


class BfclEntry(BaseModel):
    """One BFCL entry: id, category, question turns, function docs, possible answers."""

    id: str
    category: str
    question: list[Any]
    function: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]] | None = None


def load_entries(data_dir: Path, category: str) -> Iterator[BfclEntry]:
    """Read ``BFCL_v4_<category>.json`` and, when present,
    ``possible_answer/BFCL_v4_<category>.json`` (both JSON Lines) from ``data_dir``.

    Raises:
        ValueError: a line that is not JSON (names file and line).
    """
    def lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        yield number, json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None

    answers_path = data_dir / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = {item["id"]: item["ground_truth"] for _, item in lines(answers_path)} \
        if answers_path.is_file() else {}
    for _, item in lines(data_dir / f"BFCL_v4_{category}.json"):
        yield BfclEntry(id=item["id"], category=category, question=item["question"],
                        function=item["function"], ground_truth=answers.get(item["id"]))


# Beside a dataset's cases.jsonl: each case's BFCL entry (written by ``bench import bfcl``).
SOURCES_FILE = "bfcl.jsonl"


class BfclSource(BaseModel):
    """One case's BFCL entry, as ``bench import bfcl`` keeps it for ``bench run``.

    Attributes:
        id: the case id (the BFCL entry id).
        category: the BFCL category (``simple_python``, ``live_multiple``, ``irrelevance``...).
        function: BFCL's function docs, unchanged (BFCL types such as ``float``, ``tuple``).
        ground_truth: BFCL's possible answer, unchanged (conflicting values included: BFCL
            scores with them); None for irrelevance.
        tool_names: bench tool name -> BFCL function name for the functions BFCL offered
            (``math_hcf`` -> ``math.hcf``; a second definition's ``name_2`` -> ``name``).
    """

    id: str
    category: str
    function: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]] | None = None
    tool_names: dict[str, str] = Field(default_factory=dict)


def sources_path(dataset_path: Path | str) -> Path | None:
    """Where a dataset's BFCL entries are: ``bfcl.jsonl`` in the folder of a ``cases.jsonl``
    (None for other files and ``hf:`` specs)."""
    path = Path(dataset_path)
    if str(dataset_path).startswith("hf:") or path.name != "cases.jsonl":
        return None
    return path.with_name(SOURCES_FILE)


def load_sources(path: Path) -> dict[str, BfclSource]:
    """Read a ``bfcl.jsonl`` file into ``{case id: BfclSource}``.

    Raises:
        BenchError: a line that is not JSON or not an entry (names file, line and field).
    """
    sources: dict[str, BfclSource] = {}
    for number, line in enumerate(read_text_file(path).split("\n"), start=1):
        if not line.strip():
            continue
        data = json_line(line, file=path, line=number)
        try:
            source = BfclSource.model_validate(data)
        except ValidationError as exc:
            field, message = pydantic_error_field(exc)
            raise BenchError(message, file=path, line=number, field=field) from None
        sources[source.id] = source
    return sources


def run_verdict(source: BfclSource, answer: ParsedAnswer) -> CheckResult:
    """BFCL's verdict on one answer of a ``bench run`` (the ``bfcl_valid`` metric).

    The answer is put in BFCL's output form with each called tool renamed back to BFCL's
    function name (``source.tool_names``; a tool BFCL did not offer keeps its bench name and
    cannot match). An answer without any call, or one that cannot be decoded, counts as
    undecodable, which is what BFCL's function-calling handlers give for a text answer
    (``decode_ast`` fails on it: ``ast_decoder:decoder_failed``; irrelevance passes). A row
    with no answer of the model's at all (``answer.error_code`` in
    :data:`bench.parse.NO_MODEL_ANSWER_CODES`: a provider error, an unreadable reply...) fails
    with error type ``no_answer:<code>``: a failed request is not a model that made no call.

    Returns:
        A :class:`CheckResult`; a checker error (e.g. a BFCL type it does not know) gives
        ``valid=False`` with error type ``bfcl_checker_error``.
    """
    if answer.error is not None and answer.error_code in NO_MODEL_ANSWER_CODES:
        return fail(f"{NO_ANSWER_TYPE}:{answer.error_code}", answer.error)
    outputs = outputs_from_answer(answer)
    if outputs is not None:
        outputs = [{source.tool_names.get(name, name): args for name, args in call.items()}
                   for call in outputs] or None
    try:
        return check_entry(source.category, source.function, outputs, source.ground_truth)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, StopIteration,
            RecursionError) as exc:
        # StopIteration: an answer call with no function name ({}), as a hand-edited
        # bfcl.jsonl can hold; it must not escape into the run.
        return fail("bfcl_checker_error", f"{type(exc).__name__}: {exc}")
