"""Lenient argument repairs, recorded next to the strict decoding (BRIEF §8).

Strict decoding executes exactly what the model sent. :func:`lenient_repairs` finds what a
forgiving runtime would change, guided by the tool's JSON Schema (never by how a value looks):
numbers sent as strings, enum values in the wrong case, arrays or objects sent as JSON strings,
booleans sent as strings. Double-encoded argument strings are decoded by the parser
(:func:`bench.parse.decode_arguments`) and only noted here.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def _number(text: str, integer: bool) -> int | float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    if integer:
        return int(value) if value.is_integer() else None
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() \
        else value


def _repair_value(value: Any, schema: dict[str, Any], path: str,
                  notes: list[str]) -> Any:
    if not isinstance(schema, dict):
        return value
    types = _types(schema)
    enum = schema.get("enum")
    if isinstance(value, str):
        if types & {"integer", "number"} and "string" not in types:
            number = _number(value, integer="number" not in types)
            if number is not None:
                notes.append(f"{path}: string {value!r} -> number {number!r}")
                return number
        if "boolean" in types and "string" not in types and value.strip().lower() in (
                "true", "false"):
            notes.append(f"{path}: string {value!r} -> boolean")
            return value.strip().lower() == "true"
        if types & {"array", "object"} and "string" not in types:
            try:
                decoded = json.loads(value)
            except (ValueError, RecursionError):
                decoded = None
            wanted = list if "array" in types else dict
            if isinstance(decoded, wanted):
                notes.append(f"{path}: JSON string -> {'array' if wanted is list else 'object'}")
                return _repair_value(decoded, schema, path, notes)
        if isinstance(enum, list) and value not in enum:
            folded = [e for e in enum if isinstance(e, str) and e.casefold() == value.casefold()]
            if len(folded) == 1:
                notes.append(f"{path}: enum case {value!r} -> {folded[0]!r}")
                return folded[0]
        return value
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        return {k: _repair_value(v, props[k], f"{path}.{k}", notes) if k in props else v
                for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_repair_value(v, schema["items"], f"{path}[{i}]", notes)
                for i, v in enumerate(value)]
    return value


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
    notes: list[str] = []
    repaired = {}
    props = schema.get("properties") or {}
    for name, value in arguments.items():
        repaired[name] = _repair_value(value, props[name], name, notes) if name in props \
            else value
    return repaired, notes
