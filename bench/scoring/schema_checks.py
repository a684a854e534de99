"""Checking a call's arguments against its tool's JSON Schema (memoised), and the lenient
repairs of arguments that fail it (:func:`repair_arguments`)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Sequence, TypedDict

import jsonschema

from bench.models import Tool, ToolCall
from bench.parse import repair_arguments as _repair_arguments
from bench.scoring.codes import (ENUM_CASE, HALLUCINATED_ARGUMENT, INVALID_ARGUMENTS,
                                 MISSING_REQUIRED, REPAIR_DOUBLE_ENCODED, SCHEMA_INVALID,
                                 TYPE_ERROR)

# Answers whose arguments' reprs exceed this many characters are not memoised (scores and
# validations): the memos' memory stays bounded (~100 MB at most) whatever a model sends.
MEMO_ARGUMENTS_CHARS = 512


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        json.loads(schema_json), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


_SCHEMA_KEYS: dict[int, tuple[dict[str, object], str]] = {}


def _schema_key(tool: Tool) -> str:
    """The tool schema's canonical JSON, cached by the identity of the schema object (no
    re-serialising per call); a reused id with another schema object is detected."""
    schema = tool.input_schema
    cached = _SCHEMA_KEYS.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_SCHEMA_KEYS) > 1024:
            _SCHEMA_KEYS.clear()
        cached = (schema, json.dumps(schema, sort_keys=True))
        _SCHEMA_KEYS[id(schema)] = cached
    return cached[1]


def _classify(validator: jsonschema.Draft202012Validator, arguments: object
              ) -> tuple[bool, frozenset[str]]:
    codes: set[str] = set()
    valid = True
    try:
        errors = list(validator.iter_errors(arguments))
    except (OverflowError, ValueError, TypeError, RecursionError):
        # e.g. 1e308 against multipleOf 0.01: jsonschema's arithmetic fails on the model's
        # value; the call is invalid, not the run
        return False, frozenset((TYPE_ERROR,))
    for error in errors:
        valid = False
        if error.validator == "required":
            codes.add(MISSING_REQUIRED)
        elif error.validator == "type":
            codes.add(TYPE_ERROR)
        elif error.validator == "enum" and isinstance(error.instance, str) and any(
                isinstance(e, str) and e.casefold() == error.instance.casefold()
                for e in error.validator_value):
            codes.add(ENUM_CASE)
    return valid, frozenset(codes)


_VALIDATION_MEMO: dict[tuple[str, str], tuple[bool, frozenset[str]]] = {}
_VALIDATION_MEMO_SIZE = 65536
validation_memo_stats = {"hits": 0, "misses": 0}


def _validation(tool: Tool, arguments: dict[str, object]) -> tuple[bool, frozenset[str]]:
    """(valid, codes among missing_required / type_error / enum_case) of one call's arguments
    against its tool's JSON Schema.

    Memoised on the schema and ``repr(arguments)`` (distinct JSON values have distinct reprs:
    ``1``, ``1.0``, ``True`` and ``"1"`` differ): a model repeats the same call across trials,
    variants and cases, and validation is the costliest step of scoring. The memo is cleared
    when it reaches 65,536 entries; arguments whose repr exceeds 512 characters are not kept.
    """
    key = (_schema_key(tool), repr(arguments))
    found = _VALIDATION_MEMO.get(key)
    if found is not None:
        validation_memo_stats["hits"] += 1
        return found
    validation_memo_stats["misses"] += 1
    found = _classify(_validator(key[0]), arguments)
    if len(key[1]) > MEMO_ARGUMENTS_CHARS:
        return found  # too big to keep
    if len(_VALIDATION_MEMO) >= _VALIDATION_MEMO_SIZE:
        _VALIDATION_MEMO.clear()
    _VALIDATION_MEMO[key] = found
    return found


def schema_errors(call: ToolCall, tool: Tool | None) -> list[str]:
    """JSON Schema errors of a call's arguments (``["unknown tool"]`` when there is no tool)."""
    if tool is None:
        return ["unknown tool"]
    if not call.valid:
        return ["arguments are not a JSON object"]
    validator = _validator(json.dumps(tool.input_schema, sort_keys=True))
    return [e.message for e in validator.iter_errors(call.arguments)]


def repair_arguments(arguments: dict[str, object], input_schema: dict[str, object],
                     tool_name: str = "") -> tuple[dict[str, object], list[str]]:
    """The lenient repairs of one call's arguments (:func:`bench.parse.repair_arguments`:
    decided by the schema, never by the value), as scoring records them.

    Args:
        arguments: decoded arguments (dict).
        input_schema: the tool's JSON Schema.
        tool_name: prefix of the repair paths.

    Returns:
        (repaired copy, ``["<tool>.<arg path>: <repair code>", ...]``, codes of
        :data:`REPAIRS`); the input is not modified.
    """
    repaired, repairs = _repair_arguments(arguments, input_schema)
    return repaired, [f"{tool_name}.{r.path}: {r.kind}" for r in repairs]


def lenient_calls(calls: Sequence[ToolCall], by_name: dict[str, Tool]
                  ) -> tuple[list[ToolCall], list[str]]:
    """(the calls after the lenient repairs, the repairs made as ``"<tool>.<path>: <repair>"``
    and ``"<tool>: double_encoded"``); a call that validates, or whose tool is unknown, is
    kept as it is."""
    lenient: list[ToolCall] = []
    repairs: list[str] = []
    for call in calls:
        if REPAIR_DOUBLE_ENCODED in call.notes and call.valid:
            repairs.append(f"{call.name}: {REPAIR_DOUBLE_ENCODED}")
        tool = by_name.get(call.name)
        if tool is None or not call.valid or _validation(tool, call.arguments)[0]:
            # every repair replaces a value its (sub)schema's type or enum rejects, so
            # arguments that validate need none (and the validation is memoised)
            lenient.append(call)
            continue
        fixed, found = repair_arguments(call.arguments, tool.input_schema, call.name)
        repairs += found
        lenient.append(call.model_copy(update={"arguments": fixed}) if found else call)
    return lenient, repairs


def strict_calls(calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The calls as the strict score takes them: a double-encoded call is invalid."""
    # Strictly, a double-encoded arguments string is not a JSON object: the call is invalid.
    return [c.model_copy(update={"valid": False}) if REPAIR_DOUBLE_ENCODED in c.notes else c
            for c in calls]


class SchemaFlags(TypedDict):
    """The :class:`CaseScore` fields an answer's calls set whatever the case expects."""

    hallucinated_tool: bool
    hallucinated_argument: bool
    missing_required: bool
    type_error: bool
    schema_valid: bool | None
    schema_valid_lenient: bool | None
    lenient_repairs: list[str]


def schema_flags(calls: Sequence[ToolCall], by_name: dict[str, Tool]) -> tuple[
        bool | None, set[str]]:
    """(all calls schema-valid or None without calls, error codes found in the schema check)."""
    if not calls:
        return None, set()
    codes: set[str] = set()
    valid = True
    for call in calls:
        tool = by_name.get(call.name)
        if tool is None:
            valid = False
            continue
        if not call.valid:
            valid = False
            codes.add(INVALID_ARGUMENTS)
            continue
        props = tool.input_schema.get("properties", {})
        if isinstance(props, dict) and any(k not in props for k in call.arguments):
            codes.add(HALLUCINATED_ARGUMENT)
        call_valid, call_codes = _validation(tool, call.arguments)
        valid = valid and call_valid
        codes |= call_codes
    if not valid:
        codes.add(SCHEMA_INVALID)
    return valid, codes
