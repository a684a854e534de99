"""Lenient argument repairs, recorded next to the strict decoding (BRIEF §8).

Strict decoding executes exactly what the model sent. :func:`lenient_repairs` says what a
forgiving runtime would change, guided by the tool's JSON Schema (never by how a value looks):
numbers or booleans sent as strings, enum values in the wrong case, arrays or objects sent as
JSON strings. The repairs themselves are :func:`bench.parse.repair_arguments`, the same ones
the lenient scores use; double-encoded argument strings are decoded by the parser
(:func:`bench.parse.decode_arguments`) and only noted by the pipeline.
"""

from __future__ import annotations

from typing import Any

from bench.parse import (REPAIR_ENUM_CASE, REPAIR_JSON_STRING, REPAIR_STRING_BOOLEAN,
                         REPAIR_STRING_NUMBER, Repair, repair_arguments)


def _note(repair: Repair) -> str:
    """``"limit: string '5' -> number 5"`` and the like (trace and row notes)."""
    if repair.kind == REPAIR_STRING_NUMBER:
        return f"{repair.path}: string {repair.before!r} -> number {repair.after!r}"
    if repair.kind == REPAIR_STRING_BOOLEAN:
        return f"{repair.path}: string {repair.before!r} -> boolean"
    if repair.kind == REPAIR_JSON_STRING:
        shape = "array" if isinstance(repair.after, list) else "object"
        return f"{repair.path}: JSON string -> {shape}"
    if repair.kind == REPAIR_ENUM_CASE:
        return f"{repair.path}: enum case {repair.before!r} -> {repair.after!r}"
    return f"{repair.path}: {repair.kind}"


def lenient_repairs(arguments: dict[str, Any], schema: dict[str, Any]) -> tuple[dict[str, Any],
                                                                               list[str]]:
    """The arguments a lenient runtime would execute, and one note per repair.

    Args:
        arguments: decoded arguments object.
        schema: the tool's ``input_schema`` (JSON Schema object).

    Returns:
        (repaired copy of ``arguments``, notes like ``"limit: string '5' -> number 5"``);
        ``arguments`` itself is not modified.
    """
    repaired, repairs = repair_arguments(arguments, schema)
    return repaired, [_note(r) for r in repairs]
