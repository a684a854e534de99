"""Parse provider answers into :class:`~bench.models.ToolCall` lists (BRIEF §8).

Strict decoding is recorded next to the lenient repairs that were needed, in ``ToolCall.notes``;
an answer that cannot be decoded is an *invalid* answer (``ParsedAnswer.error``), never an
empty call list, so a truncated answer can never pass as "no call". :func:`repair_arguments`
holds the schema-guided lenient repairs of argument values, used by both the lenient scores
(:mod:`bench.scoring.metrics`) and the executor's lenient mode (:mod:`bench.executor.decode`).

An invalid answer carries an error code (``ParsedAnswer.error_code``, one of
:data:`ANSWER_ERROR_CODES`) beside its one-line message, so that reports can count why answers
were invalid.

Unencodable text: a JSON reply may hold lone UTF-16 surrogates (``"\\ud83d"`` cut from its
pair), which no UTF-8 writer or reader (pandas, pyarrow) accepts. They are dealt with once, here,
where answers are parsed: in what scoring reads (tool names, call ids, argument keys and
values, prose) each lone surrogate becomes U+FFFD and the call gets the note
``broken_unicode``; in what records the reply as received (``ToolCall.raw_arguments`` and the
provider's raw body, :func:`storable`) each becomes the six characters of its
``\\udXXX`` escape, so the exact code points stay in the row.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import orjson
from pydantic import BaseModel, Field

from bench.jsonl import MAX_DEPTH, TOO_DEEP
from bench.models import ToolCall
from bench.results import RowCall, RowParsed


# Why an answer is invalid (``ParsedAnswer.error_code``). Reports and ``metrics.error_codes``
# key on these strings: a code is never renamed, only added.
MALFORMED_REPLY = "malformed_reply"      # the reply does not have the provider's documented shape
UNREADABLE_REPLY = "unreadable_reply"    # a 200 reply whose body is not JSON (after retries)
NO_ANSWER = "no_answer"                  # a well-formed reply that holds no answer (no choices)
TRUNCATED = "truncated"                  # the answer hit the token limit
BLOCKED = "blocked"                      # the provider's safety filter withheld the answer
REFUSAL = "refusal"                      # Anthropic stop_reason "refusal", OpenAI message.refusal
PAUSE_TURN = "pause_turn"                # Anthropic stop_reason "pause_turn" (turn left unfinished)
UNEXPECTED_TOOL_CALL = "unexpected_tool_call"        # Gemini finishReason UNEXPECTED_TOOL_CALL
MALFORMED_FUNCTION_CALL = "malformed_function_call"  # Gemini finishReason MALFORMED_FUNCTION_CALL
PROVIDER_ERROR = "provider_error"        # the provider refused this one request (e.g. HTTP 400)
PARSER_FAILED = "parser_failed"          # bench's parser raised on the reply (a bench bug)
UNDECODABLE_ANSWER = "undecodable_answer"  # the embedded model's answer is not the JSON asked for
ANSWER_ERROR_CODES = (MALFORMED_REPLY, UNREADABLE_REPLY, NO_ANSWER, TRUNCATED, BLOCKED, REFUSAL,
                      PAUSE_TURN, UNEXPECTED_TOOL_CALL, MALFORMED_FUNCTION_CALL, PROVIDER_ERROR,
                      PARSER_FAILED, UNDECODABLE_ANSWER)
# Codes of a row that holds no answer of the model's at all (the request failed, or the reply
# could not be read): unlike a cut-off or refused answer, nothing the model wrote can be judged.
NO_MODEL_ANSWER_CODES = frozenset({MALFORMED_REPLY, UNREADABLE_REPLY, NO_ANSWER, PROVIDER_ERROR,
                                   PARSER_FAILED})


class ParsedAnswer(BaseModel):
    """A provider answer in canonical form.

    Attributes:
        calls: the tool calls, in the order received.
        declined: True when the model explicitly said that no tool fits.
        error: why the answer could not be decoded (None when it could), one line.
        error_code: with ``error``: one of :data:`ANSWER_ERROR_CODES` (None on rows written
            before codes existed).
        text: prose the model wrote instead of or beside its calls.
    """

    calls: list[ToolCall] = Field(default_factory=list)
    declined: bool = False
    error: str | None = None
    error_code: str | None = None
    text: str | None = None


def row_call(call: ToolCall) -> RowCall:
    """``call`` as a result row stores it (:class:`bench.results.RowCall`): every field, and
    the provider's ``signature`` (an extra field of the contract) only when it sent one, as
    the call's dump has it."""
    stored = RowCall(id=call.id, name=call.name, arguments=call.arguments,
                     raw_arguments=call.raw_arguments, notes=call.notes, valid=call.valid)
    if call.signature is None:
        return stored
    return stored.model_copy(update={"signature": call.signature})


def row_parsed(parsed: ParsedAnswer) -> RowParsed:
    """``parsed`` as a single-answer row stores it (:class:`bench.results.RowParsed`, every
    field; the calls as :func:`row_call`)."""
    return RowParsed(calls=[row_call(c) for c in parsed.calls], declined=parsed.declined,
                     error=parsed.error, error_code=parsed.error_code, text=parsed.text)


def invalid_answer(code: str, message: str, *, text: str | None = None) -> ParsedAnswer:
    """An invalid answer: ``error_code`` ``code`` (one of :data:`ANSWER_ERROR_CODES`) and the
    one-line ``message`` (prefixed with the code, e.g. ``"malformed_reply: choices[0].message:
    expected an object, got str"``)."""
    return ParsedAnswer(error=f"{code}: {message}", error_code=code, text=text)


# Notes of repairs that only the lenient reading accepts; a strict parser rejects such a call.
LENIENT_REPAIRS = frozenset({"double_encoded", "arguments_as_object", "broken_unicode"})


def _reject_constant(name: str) -> Any:
    # NaN, Infinity and -Infinity are not JSON (RFC 8259), though Python's json reads them;
    # a row could not store them faithfully either.
    raise ValueError(f"{name} is not JSON")


def decode_arguments(raw: Any, *, expect_string: bool = False
                     ) -> tuple[dict[str, Any], list[str], bool]:
    """Decode a call's arguments as sent by a provider.

    Args:
        raw: a dict, a JSON string, a double-encoded JSON string, ``""`` or None.
        expect_string: the provider's wire format sends arguments as a JSON string (OpenAI);
            an object then gets the note ``arguments_as_object``.

    Returns:
        (arguments, notes, valid). ``""`` and None decode to ``{}`` with note ``empty``
        (tools without parameters); a string that is not a JSON object is invalid (``NaN`` and
        ``Infinity`` included: they are not JSON), and so are arguments nested deeper than
        :data:`MAX_ARGUMENT_DEPTH` levels (note ``too_deep``). Lone
        UTF-16 surrogates (a ``\\uD83D`` escape cut from its pair) become U+FFFD with note
        ``broken_unicode``.
    """
    if isinstance(raw, dict):
        try:
            repaired, broken = _repair_surrogates(raw)
        except _TooDeep:
            return {}, ["too_deep"], False
        notes: list[str] = (["arguments_as_object"] if expect_string else []) + \
            (["broken_unicode"] if broken else [])
        return repaired, notes, True
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, ["empty"], True
    if not isinstance(raw, str):
        return {}, ["not_an_object"], False
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return {}, ["malformed_json"], False
    notes = []
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_constant=_reject_constant)
            notes.append("double_encoded")
        except (ValueError, RecursionError):
            return {}, ["malformed_json"], False
    if not isinstance(value, dict):
        return {}, [*notes, "not_an_object"], False
    try:
        value, broken = _repair_surrogates(value)
    except _TooDeep:
        return {}, [*notes, "too_deep"], False
    return value, notes + (["broken_unicode"] if broken else []), True


# Arguments nested deeper than this are an invalid call: no tool schema needs it, and deeper
# values would exhaust the recursion of every later step (validation, scoring, row encoding).
MAX_ARGUMENT_DEPTH = 64


class _TooDeep(Exception):
    pass


def _repair_surrogates(value: Any, depth: int = 0) -> tuple[Any, bool]:
    """Replace lone surrogates in every string of a decoded JSON value; report if any.

    Raises:
        _TooDeep: containers nested deeper than :data:`MAX_ARGUMENT_DEPTH`.
    """
    if depth > MAX_ARGUMENT_DEPTH:
        raise _TooDeep
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value, False
        except UnicodeEncodeError:
            return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch
                           for ch in value), True
    if isinstance(value, dict):
        out, broken = {}, False
        for key, item in value.items():
            new_key, key_broken = _repair_surrogates(key, depth + 1)
            out[new_key], item_broken = _repair_surrogates(item, depth + 1)
            broken = broken or key_broken or item_broken
        return out, broken
    if isinstance(value, list):
        pairs = [_repair_surrogates(item, depth + 1) for item in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def clean_text(value: Any) -> tuple[Any, bool]:
    """``value`` (a str or None) with lone surrogates replaced by U+FFFD, and whether any was.
    For what scoring and reports read: tool names, call ids, prose."""
    if not isinstance(value, str):
        return value, False
    try:
        value.encode("utf-8")
        return value, False
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in value), True


def storable(value: Any, *, walk: bool = False) -> Any:
    """``value`` (any decoded JSON) in the form a row keeps of what was received: each lone
    surrogate in its strings and keys written as its escape ``\\udXXX`` (six characters),
    and containers nested deeper than :data:`bench.jsonl.MAX_DEPTH` levels replaced by
    :data:`bench.jsonl.TOO_DEEP` (the row writer does the same, and the response cache's
    serializer refuses 255 levels). A value that needs neither is returned as it is (the same
    object).

    Args:
        value: decoded JSON.
        walk: check every level even when orjson can encode the value (orjson accepts up
            to 254 levels).
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if not isinstance(value, (dict, list)):
        return value
    if not walk:
        try:
            orjson.dumps(value)  # fast path: orjson refuses lone surrogates and deep nesting
            return value
        except (orjson.JSONEncodeError, TypeError):
            pass
    return _storable(value, 0)


def _storable(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, (dict, list)) and depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        return {storable(k) if isinstance(k, str) else k: _storable(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v, depth + 1) for v in value]
    return value


def strictly_valid(call: ToolCall) -> bool:
    """The strict reading of a call: decodable without any lenient repair (BRIEF §8)."""
    return call.valid and not LENIENT_REPAIRS.intersection(call.notes)


@dataclass
class RawCall:
    """A tool call as a provider sent it, before decoding.

    Attributes:
        id: the provider's call id (None when it gave none).
        name: the tool name.
        arguments: a JSON string, an object, ``""`` or None, exactly as received.
        signature: a token to send back with the call in later turns (see
            :attr:`bench.models.ToolCall.signature`), or None.
    """

    id: str | None
    name: str
    arguments: Any = None
    signature: str | None = None


def answer_from_calls(calls: Sequence[RawCall], *, text: str | None, truncated: bool,
                      expect_string: bool = False) -> ParsedAnswer:
    """Decode a provider's native tool calls into a :class:`ParsedAnswer`.

    Args:
        calls: the calls in the order received.
        text: prose the model wrote (None or "" when none).
        truncated: the provider stopped at the token limit (finish reason ``length``,
            ``max_tokens``, ``MAX_TOKENS``, ``max_output_tokens``). The answer is then invalid
            (``error`` set, code :data:`TRUNCATED`) and its last call is marked invalid with
            note ``truncated``, even when its arguments happen to decode (never a silent
            ``{}``).
        expect_string: the wire format sends arguments as a JSON string (see
            :func:`decode_arguments`).

    Returns:
        The parsed answer; no calls and no error means the model made no call
        (``declined=True``). Lone surrogates are cleaned as the module docstring says.
    """
    parsed: list[ToolCall] = []
    for index, call in enumerate(calls):
        arguments, notes, valid = decode_arguments(call.arguments, expect_string=expect_string)
        name, broken_name = clean_text(call.name)
        call_id, broken_id = clean_text(call.id)
        if (broken_name or broken_id) and "broken_unicode" not in notes:
            notes = [*notes, "broken_unicode"]
        if not name:
            notes, valid = [*notes, "missing_name"], False
        parsed.append(ToolCall(id=call_id or f"call_{index}", name=name or "",
                               arguments=arguments if valid else {},
                               raw_arguments=storable(call.arguments,
                                                      walk="too_deep" in notes), notes=notes,
                               valid=valid, signature=call.signature))
    prose = clean_text(text)[0] or None
    if truncated:
        if parsed:
            last = parsed[-1]
            parsed[-1] = last.model_copy(update={
                "valid": False, "arguments": {},
                "notes": [n for n in last.notes if n != "empty"] + ["truncated"]})
        return ParsedAnswer(calls=parsed, error="truncated: the answer hit the token limit",
                            error_code=TRUNCATED, text=prose)
    return ParsedAnswer(calls=parsed, declined=not parsed, text=prose)


@dataclass
class CallDelta:
    """One streamed fragment of a tool call (an OpenAI ``delta.tool_calls[]`` entry, an
    Anthropic ``input_json_delta``...).

    Attributes:
        index: the position the provider gave (may repeat across parallel calls), or None.
        id: the call id when this fragment carries one (usually the first fragment).
        name: the tool name when this fragment carries it.
        arguments: a piece of the arguments JSON string, or a whole object.
    """

    index: int | None = None
    id: str | None = None
    name: str | None = None
    arguments: Any = None


def assemble_call_deltas(deltas: Iterable[CallDelta]) -> list[RawCall]:
    """Join streamed fragments into whole calls, keyed by call id.

    A fragment with an id not seen before starts a new call, even when its ``index`` repeats
    one already used (some OpenAI-compatible servers send every parallel call at index 0). A
    fragment without an id continues the call last seen at its index, else the last call.

    Returns:
        The calls in the order their first fragment arrived; string fragments concatenated.
    """
    calls: list[RawCall] = []
    by_id: dict[str, RawCall] = {}
    at_index: dict[int | None, RawCall] = {}
    for delta in deltas:
        call = by_id.get(delta.id) if delta.id else at_index.get(delta.index)
        if call is None and not delta.id and calls and delta.index is None:
            call = calls[-1]
        if call is None:
            call = RawCall(id=delta.id, name="", arguments=None)
            calls.append(call)
            if delta.id:
                by_id[delta.id] = call
        at_index[delta.index] = call
        if delta.name:
            call.name = call.name + delta.name if call.name and call.name != delta.name \
                else delta.name
        if isinstance(delta.arguments, str):
            call.arguments = (call.arguments if isinstance(call.arguments, str) else "") \
                + delta.arguments
        elif delta.arguments is not None:
            call.arguments = delta.arguments
    return calls


def parse_json_tool_calls(text: str, finish_reason: str | None,
                          decline_tool: str | None = None) -> ParsedAnswer:
    """Parse a JSON answer ``{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}``, with
    an optional ``"text"`` string (prose for the user: an episode's final answer).

    This is the answer format of the embedded model, whose decoding a grammar constrains.

    Args:
        text: the model's completion text.
        finish_reason: ``"length"`` marks a truncated answer (always invalid).
        decline_tool: name of the pseudo-tool that means "no tool fits", if the prompt layout
            offers one; calls to it become ``declined=True`` and are dropped from ``calls``.

    Returns:
        A :class:`ParsedAnswer`; ``error`` is set for truncated or undecodable answers. Lone
        surrogates in names and prose become U+FFFD (as :func:`parse_calls` does).
    """
    if finish_reason == "length":
        return ParsedAnswer(error="truncated: the answer hit the token limit",
                            error_code=TRUNCATED, text=text)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParsedAnswer(error=f"malformed JSON answer: {exc.msg}",
                            error_code=UNDECODABLE_ANSWER, text=text)
    except (ValueError, RecursionError) as exc:  # huge integers, absurd nesting
        return ParsedAnswer(error=f"undecodable JSON answer: {type(exc).__name__}",
                            error_code=UNDECODABLE_ANSWER, text=text)
    if not isinstance(obj, dict) or not isinstance(obj.get("tool_calls"), list):
        return ParsedAnswer(error="answer has no 'tool_calls' list",
                            error_code=UNDECODABLE_ANSWER, text=text)
    calls: list[ToolCall] = []
    declined = False
    for index, item in enumerate(obj["tool_calls"]):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return ParsedAnswer(error=f"tool_calls[{index}] has no 'name'",
                                error_code=UNDECODABLE_ANSWER, text=text)
        if decline_tool is not None and item["name"] == decline_tool:
            declined = True
            said = item.get("arguments")  # the reply-tool-message layout's words
            if isinstance(said, dict) and isinstance(said.get("message"), str):
                obj.setdefault("text", said["message"])
            continue
        raw = item.get("arguments")
        arguments, notes, valid = decode_arguments(raw)
        name, broken_name = clean_text(item["name"])
        if broken_name and "broken_unicode" not in notes:
            notes = [*notes, "broken_unicode"]
        calls.append(ToolCall(id=f"call_{index}", name=name, arguments=arguments,
                              raw_arguments=storable(raw), notes=notes, valid=valid))
    if declined and calls:
        # "no tool fits" next to real calls: keep the calls, the decline is contradictory.
        declined = False
    prose = obj.get("text")  # an optional message to the user (an episode's final answer)
    return ParsedAnswer(calls=calls, declined=declined or not calls,
                        text=clean_text(prose)[0] if isinstance(prose, str) else None)


# Lenient argument repairs (BRIEF §8), shared by scoring (lenient scores) and the executor
# (what a forgiving runtime would execute). The kinds double as scoring's repair codes.
REPAIR_STRING_NUMBER = "string_number"      # "3" for an integer/number property -> 3
REPAIR_STRING_BOOLEAN = "string_boolean"    # "true" for a boolean property -> true
REPAIR_JSON_STRING = "json_string_array"    # '["a","b"]' for an array (or object) -> decoded
REPAIR_ENUM_CASE = "enum_case"              # "ASC" for enum ["asc", "desc"] -> "asc"
_NUMERIC = frozenset(("integer", "number"))


@dataclass(frozen=True, slots=True)
class Repair:
    """One lenient repair of one argument value.

    Attributes:
        path: where the value sits in the arguments, ``"limit"``, ``"items[0].sku"``.
        kind: :data:`REPAIR_STRING_NUMBER`, :data:`REPAIR_STRING_BOOLEAN`,
            :data:`REPAIR_JSON_STRING` or :data:`REPAIR_ENUM_CASE`.
        before: the value sent.
        after: the value a lenient reader takes instead.
    """

    path: str
    kind: str
    before: Any
    after: Any


def _schema_types(schema: dict[str, Any]) -> frozenset[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset((kind,))
    return frozenset(k for k in kind if isinstance(k, str)) if isinstance(kind, list) \
        else frozenset()


def _string_number(text: str, integer: bool) -> int | float | None:
    """A JSON number written in a string (``"3"``, ``" 2.5 "``, ``"1e3"``), or None; for an
    ``integer`` property only whole values (``"3.0"`` -> 3, ``"3.5"`` -> None; a float-written
    whole value only below 2**53, where a float is exact: ``"1e23"`` -> None)."""
    try:
        number = json.loads(text.strip())
    except (ValueError, RecursionError):
        return None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return None
    if isinstance(number, int):
        return number  # exact, however large
    if not math.isfinite(number):
        return None  # json reads NaN / Infinity; neither is a JSON number
    if integer:
        # "3.0" -> 3; past 2**53 a float no longer holds the integer the text wrote
        return int(number) if number.is_integer() and abs(number) < 2 ** 53 else None
    return number


def _repair_string(value: str, schema: dict[str, Any], path: tuple[Any, ...],
                   repairs: list[Repair]) -> Any:
    kind = schema.get("type")
    types = frozenset(("string",)) if kind == "string" else _schema_types(schema)
    if "string" not in types:
        if types & _NUMERIC:
            number = _string_number(value, integer="number" not in types)
            if number is not None:
                repairs.append(Repair(_path_text(path), REPAIR_STRING_NUMBER, value, number))
                return number
        if "boolean" in types and value.strip().lower() in ("true", "false"):
            repaired = value.strip().lower() == "true"
            repairs.append(Repair(_path_text(path), REPAIR_STRING_BOOLEAN, value, repaired))
            return repaired
        if "array" in types or "object" in types:
            try:
                decoded = json.loads(value)
            except (ValueError, RecursionError):
                decoded = None
            if isinstance(decoded, (list, dict)) and \
                    _depth(decoded) + len(path) > MAX_ARGUMENT_DEPTH:
                decoded = None  # as deep as an invalid call: no repair
            if (isinstance(decoded, list) and "array" in types) or (
                    isinstance(decoded, dict) and "object" in types):
                repairs.append(Repair(_path_text(path), REPAIR_JSON_STRING, value, decoded))
                return _repair_value(decoded, schema, path, repairs)
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        folded = [e for e in enum if isinstance(e, str) and e.casefold() == value.casefold()]
        if len(folded) == 1:
            repairs.append(Repair(_path_text(path), REPAIR_ENUM_CASE, value, folded[0]))
            return folded[0]
    return value


def _path_text(path: tuple[Any, ...]) -> str:
    # built only when a repair is recorded: most values need none
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _repair_value(value: Any, schema: Any, path: tuple[Any, ...],
                  repairs: list[Repair]) -> Any:
    if not isinstance(schema, dict):
        return value
    if isinstance(value, str):
        return _repair_string(value, schema, path, repairs)
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        return {k: _repair_value(v, props.get(k), (*path, k), repairs) for k, v in value.items()}
    if isinstance(value, list):
        # JSON Schema 2020-12: prefixItems[i] for the first positions, items for the rest
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        if not prefix and items is None:
            return value
        return [_repair_value(v, prefix[i] if i < len(prefix) else items, (*path, i), repairs)
                for i, v in enumerate(value)]
    return value


def _depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value (a scalar 0, ``[]`` 1, ``[[1]]`` 2), iteratively:
    the value may be deeper than the interpreter's recursion limit."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (
                item.values() if isinstance(item, dict) else item))
    return deepest


def repair_arguments(arguments: dict[str, Any], input_schema: dict[str, Any]
                     ) -> tuple[dict[str, Any], list[Repair]]:
    """The lenient repairs of one call's arguments, decided by the schema, never by the value.

    Repairs (BRIEF §8), applied recursively through ``properties`` and ``items``, only where
    the (sub)schema does not allow a string: a string holding a JSON number for an
    ``integer``/``number`` property becomes the number (``"3"`` -> 3; ``"3.5"`` stays a string
    for an ``integer``; ``"NaN"`` stays); ``"true"``/``"false"`` (any case) for a ``boolean``
    becomes the boolean; a string holding a JSON array or object for an ``array``/``object``
    property is decoded. Then, for any string: a value outside its ``enum`` that equals
    exactly one member case-insensitively becomes that member.

    Args:
        arguments: decoded arguments (dict).
        input_schema: the tool's JSON Schema.

    Returns:
        (repaired copy, one :class:`Repair` per change, in argument order); the input is not
        modified.
    """
    repairs: list[Repair] = []
    props = input_schema.get("properties") if isinstance(input_schema, dict) else None
    if not isinstance(props, dict):
        return dict(arguments), repairs
    repaired = {k: _repair_value(v, props.get(k), (k,), repairs) for k, v in arguments.items()}
    return repaired, repairs
