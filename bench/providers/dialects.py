"""Provider-neutral helpers the HTTP adapters share: conversation history with paired tool call
ids, and JSON Schema rewrites for provider dialects, each change logged as one line.

Schema dialects:
- OpenAI strict mode (Structured Outputs "Supported schemas"): every object has
  ``additionalProperties: false`` and lists every property in ``required``; a property that was
  optional becomes nullable (``"type": [T, "null"]``), so the model sends ``null`` to omit it;
  keywords strict mode rejects are dropped (:data:`OPENAI_STRICT_UNSUPPORTED`).
- Gemini ``FunctionDeclaration.parameters`` (a subset of the OpenAPI 3.0 Schema object,
  google-genai ``types.Schema``): only :data:`GEMINI_KEYWORDS` survive; ``const`` becomes a
  one-value ``enum``, ``oneOf`` becomes ``anyOf``, a type list with ``null`` becomes
  ``nullable: true``, non-string enums and unknown formats are dropped; type names are
  upper-cased (``OBJECT``), the spelling google-genai sends.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from bench.models import Message

# Keywords OpenAI strict mode does not accept (its "Supported schemas" list: string pattern and
# format, number bounds and multipleOf, array minItems/maxItems are supported; these are not).
OPENAI_STRICT_UNSUPPORTED = ("minLength", "maxLength", "patternProperties",
                             "unevaluatedProperties", "propertyNames", "minProperties",
                             "maxProperties", "unevaluatedItems", "contains", "minContains",
                             "maxContains", "uniqueItems", "default", "examples")
# google-genai types.Schema fields (camelCase on the wire) that FunctionDeclaration.parameters
# accepts.
GEMINI_KEYWORDS = frozenset({"type", "format", "title", "description", "nullable", "enum",
                             "items", "properties", "required", "anyOf", "minItems", "maxItems",
                             "minLength", "maxLength", "minimum", "maximum", "minProperties",
                             "maxProperties", "pattern", "default", "example",
                             "propertyOrdering"})
GEMINI_FORMATS = {"string": {"enum", "date-time"}, "integer": {"int32", "int64"},
                  "number": {"float", "double"}}


@dataclass
class HistoryCall:
    """An earlier assistant tool call, id assigned."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Turn:
    """One message of the conversation with tool calls and results paired by id.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the text ("" when none).
        calls: the assistant's tool calls (``assistant`` turns).
        call_id: the id of the call this result answers (``tool`` turns).
        name: the tool name of that call (``tool`` turns; Gemini needs it).
    """

    role: str
    content: str
    calls: list[HistoryCall]
    call_id: str | None = None
    name: str | None = None


def _call_parts(raw: dict[str, Any]) -> tuple[str | None, str, Any]:
    """(id, name, arguments) of a canonical or OpenAI-shaped call dict."""
    function = raw.get("function") if isinstance(raw.get("function"), dict) else raw
    return raw.get("id"), str(function.get("name", "")), function.get("arguments",
                                                                         function.get("input"))


def history(messages: Sequence[Message]) -> list[Turn]:
    """The case's conversation with every tool result paired to the call it answers.

    Earlier assistant calls may be canonical (``{"id", "name", "arguments"}``) or OpenAI-shaped
    (``{"id", "type": "function", "function": {"name", "arguments": "<json>"}}``). A call
    without id gets ``call_<turn>_<i>``; a tool message without ``tool_call_id`` answers the
    oldest unanswered call.

    Raises:
        ValueError: a tool result names an unknown call id, comes before any call, or a call's
            arguments are not a JSON object.
    """
    turns: list[Turn] = []
    pending: list[HistoryCall] = []
    known: dict[str, HistoryCall] = {}
    for position, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            calls = []
            for index, raw in enumerate(message.tool_calls):
                call_id, name, arguments = _call_parts(raw)
                if isinstance(arguments, str):
                    arguments = json.loads(arguments) if arguments.strip() else {}
                if arguments is None:
                    arguments = {}
                if not isinstance(arguments, dict):
                    raise ValueError(f"messages[{position}].tool_calls[{index}]: arguments "
                                     "must be a JSON object")
                call = HistoryCall(call_id or f"call_{position}_{index}", name, arguments)
                calls.append(call)
                known[call.id] = call
            pending = list(calls)
            turns.append(Turn("assistant", message.content or "", calls))
        elif message.role == "tool":
            if message.tool_call_id:
                call = known.get(message.tool_call_id)
                if call is None:
                    raise ValueError(f"messages[{position}]: tool_call_id "
                                     f"'{message.tool_call_id}' answers no earlier tool call")
            elif pending:
                call = pending[0]
            else:
                raise ValueError(f"messages[{position}]: a tool result without a tool call")
            pending = [c for c in pending if c.id != call.id]
            turns.append(Turn("tool", message.content or "", [], call.id, call.name))
        else:
            turns.append(Turn(message.role, message.content or "", []))
    return turns


def system_text(turns: Sequence[Turn]) -> str:
    """The system messages' text, joined by blank lines (APIs with a separate system field)."""
    return "\n\n".join(t.content for t in turns if t.role == "system" and t.content)


def merged_turns(turns: Sequence[Turn], *, assistant_role: str, key: str,
                 blocks: Callable[[Turn], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Non-system turns as ``{"role": ..., key: blocks(turn)}`` for APIs whose tool results
    travel in user turns (Anthropic, Gemini); consecutive same-role turns are merged, so the
    results of one assistant turn share one user message."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "system":
            continue
        role = assistant_role if turn.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            out[-1][key] += blocks(turn)
        else:
            out.append({"role": role, key: blocks(turn)})
    return out


def _strict_node(node: Any, path: str, changes: list[str]) -> Any:
    if not isinstance(node, dict):
        return node
    out = dict(node)
    for keyword in OPENAI_STRICT_UNSUPPORTED:
        if keyword in out:
            del out[keyword]
            changes.append(f"{path}: dropped '{keyword}' (not supported in strict mode)")
    for key in ("items", "not"):
        if key in out:
            out[key] = _strict_node(out[key], f"{path}.{key}", changes)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [_strict_node(sub, f"{path}.{key}[{i}]", changes)
                        for i, sub in enumerate(out[key])]
    for key in ("$defs", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {name: _strict_node(sub, f"{path}.{key}.{name}", changes)
                        for name, sub in out[key].items()}
    is_object = out.get("type") == "object" or "properties" in out
    if not is_object:
        return out
    properties = out.get("properties") or {}
    if out.get("additionalProperties") is not False:
        out["additionalProperties"] = False
        changes.append(f"{path}: set additionalProperties false")
    required = set(out.get("required") or [])
    new_properties = {}
    for name, sub in properties.items():
        converted = _strict_node(sub, f"{path}.{name}", changes)
        if name not in required:
            converted = nullable(converted)
            changes.append(f"{path}.{name}: optional -> required and nullable")
        new_properties[name] = converted
    out["properties"] = new_properties
    out["required"] = list(properties)
    return out


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts ``null`` (type list, enum, or an ``anyOf`` wrapper)."""
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"] if kind != "null" else kind
    elif isinstance(kind, list):
        out["type"] = kind if "null" in kind else [*kind, "null"]
    elif isinstance(out.get("anyOf"), list):
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        return out
    else:
        return {"anyOf": [out, {"type": "null"}]}
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def openai_strict_schema(schema: dict[str, Any], tool: str) -> tuple[dict[str, Any], list[str]]:
    """Rewrite a tool's JSON Schema for OpenAI strict mode (see the module docstring).

    Returns:
        (new schema, changes): one line per change, prefixed ``<tool>$``. The input is not
        modified.
    """
    changes: list[str] = []
    converted = _strict_node(copy.deepcopy(schema), f"{tool}$", changes)
    return converted, changes


def optional_properties(schema: dict[str, Any]) -> frozenset[str]:
    """Top-level properties a schema does not require (strict mode sends ``null`` for them)."""
    required = set(schema.get("required") or [])
    return frozenset(p for p in (schema.get("properties") or {}) if p not in required)


def _gemini_node(node: Any, path: str, changes: list[str]) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    source = dict(node)
    if "const" in source:
        value = source.pop("const")
        source.setdefault("enum", [value])
        changes.append(f"{path}: const -> enum [{json.dumps(value, ensure_ascii=False)}]")
    if "oneOf" in source:
        source["anyOf"] = source.pop("oneOf")
        changes.append(f"{path}: oneOf -> anyOf")
    kind = source.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) == 1:
            source["type"] = others[0]
            if "null" in kind:
                source["nullable"] = True
            changes.append(f"{path}: type {kind} -> {others[0]}"
                           + (" + nullable" if "null" in kind else ""))
        else:
            source.pop("type")
            source["anyOf"] = [{"type": k} for k in others]
            if "null" in kind:
                source["nullable"] = True
            changes.append(f"{path}: type {kind} -> anyOf")
    for key, value in source.items():
        if key not in GEMINI_KEYWORDS:
            changes.append(f"{path}: dropped '{key}' (not in Gemini's schema subset)")
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _gemini_node(sub, f"{path}.{name}", changes)
                        for name, sub in value.items()}
        elif key == "items":
            out[key] = _gemini_node(value, f"{path}.items", changes)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_gemini_node(sub, f"{path}.anyOf[{i}]", changes)
                        for i, sub in enumerate(value)]
        elif key == "enum" and isinstance(value, list):
            values = [v for v in value if v is not None]
            if not all(isinstance(v, str) for v in values):
                changes.append(f"{path}: dropped non-string enum {json.dumps(value)} "
                               "(Gemini enums are strings)")
                continue
            if len(values) != len(value):
                out["nullable"] = True
                changes.append(f"{path}: null in enum -> nullable")
            out[key] = values
        elif key == "format":
            allowed = GEMINI_FORMATS.get(str(source.get("type")), set())
            if value not in allowed:
                changes.append(f"{path}: dropped format '{value}' (Gemini supports "
                               f"{sorted(allowed) or 'none'} here)")
                continue
            out[key] = value
        else:
            out[key] = value
    if isinstance(out.get("type"), str):
        out["type"] = out["type"].upper()  # the Type enum's spelling, as google-genai sends it
    return out


def gemini_schema(schema: dict[str, Any], tool: str) -> tuple[dict[str, Any], list[str]]:
    """Rewrite a tool's JSON Schema to Gemini's schema subset (see the module docstring).

    Returns:
        (new schema, changes): one line per change, prefixed ``<tool>$``.
    """
    changes: list[str] = []
    return _gemini_node(copy.deepcopy(schema), f"{tool}$", changes), changes
