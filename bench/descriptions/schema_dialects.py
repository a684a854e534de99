"""JSON Schema dialects of the tool-calling APIs, one object per family: how a tool's schema is
rewritten for the API (the provider adapters), which parts the API rejects (``bench lint``) and
how the tools field looks in a request (token cost, :mod:`bench.descriptions.cost`).

Modelled on pydantic-ai's per-family JSON-Schema transformers (``pydantic_ai/profiles/`` and
``_json_schema.JsonSchemaTransformer``): a family's schema rules live in one place and every
consumer asks that place. :data:`DIALECTS` holds them by name; :func:`dialect` looks one up.

- ``openai`` (Chat Completions ``tools[].function.parameters``): JSON Schema as given.
- ``openai-strict`` (function calling with ``strict: true``, the Structured Outputs subset,
  https://platform.openai.com/docs/guides/structured-outputs#supported-schemas): every object
  has ``additionalProperties: false`` and lists every property in ``required``; a property that
  was optional becomes nullable (``"type": [T, "null"]``), so the model sends ``null`` to omit
  it; the rewrite drops the keywords of :data:`OPENAI_STRICT_UNSUPPORTED`. The check reports
  what the API rejects as sent: a root ``anyOf``, more than :data:`OPENAI_MAX_DEPTH` levels,
  the keywords of :data:`OPENAI_STRICT_REJECTED`, an object that is not closed or not fully
  required.
- ``anthropic`` (Messages ``tools[].input_schema``): JSON Schema as given.
- ``gemini`` (``FunctionDeclaration.parameters``, a ``Schema`` object: a subset of the OpenAPI
  3.0 Schema object, google-genai ``types.Schema``, https://ai.google.dev/api/caching#Schema):
  only :data:`GEMINI_KEYWORDS` survive; ``const`` becomes a one-value ``enum``, ``oneOf``
  becomes ``anyOf``, a type list with ``null`` becomes ``nullable: true``, non-string enums and
  unknown formats are dropped; type names are upper-cased (``OBJECT``), the spelling
  google-genai sends. (Gemini also accepts full JSON Schema in ``parametersJsonSchema``; bench
  sends ``parameters``, the field every SDK version sends.)

Every rewrite returns the changes it made, one line each, prefixed ``<tool>$``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from bench.models import Tool

# Keywords the strict rewrite drops (OpenAI's "Supported schemas" list: string pattern and
# format, number bounds and multipleOf, array minItems/maxItems are supported; these are not).
OPENAI_STRICT_UNSUPPORTED = ("minLength", "maxLength", "patternProperties",
                             "unevaluatedProperties", "propertyNames", "minProperties",
                             "maxProperties", "unevaluatedItems", "contains", "minContains",
                             "maxContains", "uniqueItems", "default", "examples")
# Keywords strict mode rejects and the rewrite cannot express (composition, conditionals):
# ``bench lint`` reports them.
OPENAI_STRICT_REJECTED = ("allOf", "not", "dependentRequired", "dependentSchemas", "if", "then",
                          "else")
OPENAI_MAX_DEPTH = 10
# google-genai types.Schema fields (camelCase on the wire) that FunctionDeclaration.parameters
# accepts.
GEMINI_KEYWORDS = frozenset({"type", "format", "title", "description", "nullable", "enum",
                             "items", "properties", "required", "anyOf", "minItems", "maxItems",
                             "minLength", "maxLength", "minimum", "maximum", "minProperties",
                             "maxProperties", "pattern", "default", "example",
                             "propertyOrdering"})
GEMINI_FORMATS = {"string": {"enum", "date-time"}, "integer": {"int32", "int64"},
                  "number": {"float", "double"}}


def walk_schema(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema of ``schema`` with its path (``""`` is the root; ``a.b``, ``a[]``,
    ``anyOf[0]``, ``$defs.X``)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    join = (lambda k: f"{path}.{k}") if path else (lambda k: k)
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        if isinstance(schema.get(key), dict):
            for name, sub in schema[key].items():
                yield from walk_schema(sub, join(name) if key == "properties"
                                       else join(f"{key}.{name}"))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(schema.get(key), list):
            for i, sub in enumerate(schema[key]):
                yield from walk_schema(sub, f"{path}{key}[{i}]" if not path
                                       else f"{path}.{key}[{i}]")
    if isinstance(schema.get("items"), dict):
        yield from walk_schema(schema["items"], f"{path}[]")
    for key in ("additionalProperties", "not", "if", "then", "else"):
        if isinstance(schema.get(key), dict):
            yield from walk_schema(schema[key], join(key))


def schema_types(schema: dict[str, Any]) -> set[str]:
    """The type names of a subschema's ``type`` (a name or a list of names; empty when unset)."""
    value = schema.get("type")
    return set(value) if isinstance(value, list) else {value} if isinstance(value, str) else set()


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


def openai_strict_problems(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, problem) of every reason OpenAI strict mode rejects ``schema`` (see the module
    docstring)."""
    problems = []
    if "anyOf" in schema:
        problems.append(("", "the root is anyOf"))
    for path, sub in walk_schema(schema):
        where = path or "(root)"
        for key in OPENAI_STRICT_REJECTED:
            if key in sub:
                problems.append((where, f"'{key}' is not supported"))
        if "object" in schema_types(sub) or "properties" in sub:
            if sub.get("additionalProperties") is not False:
                problems.append((where, "additionalProperties is not false"))
            missing = [p for p in (sub.get("properties") or {}) if p not in
                       set(sub.get("required", []))]
            if missing:
                problems.append((where, f"not in required: {', '.join(missing)}"))
        depth = path.count(".") + path.count("[]") + 1 if path else 0
        if depth > OPENAI_MAX_DEPTH:
            problems.append((where, f"nested deeper than {OPENAI_MAX_DEPTH} levels"))
    return problems


def gemini_problems(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, problem) of every field Gemini's ``Schema`` object rejects (see the module
    docstring)."""
    problems = []
    for path, sub in walk_schema(schema):
        where = path or "(root)"
        unknown = sorted(k for k in sub if k not in GEMINI_KEYWORDS)
        if unknown:
            problems.append((where, f"unsupported: {', '.join(unknown)}"))
        if isinstance(sub.get("type"), list):
            problems.append((where, "type is a list (use one type and nullable)"))
        if any(not isinstance(v, str) for v in sub.get("enum", []) or []):
            problems.append((where, "enum values must be strings"))
    return problems


def openai_tool(tool: Tool, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Chat Completions ``tools`` entry: ``{"type": "function", "function": {name,
    description, parameters}}`` (``parameters``: the tool's schema unless given)."""
    return {"type": "function", "function": {
        "name": tool.name, "description": tool.description,
        "parameters": tool.input_schema if parameters is None else parameters}}


def anthropic_tool(tool: Tool, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Messages ``tools`` entry: ``{name, description, input_schema}``."""
    return {"name": tool.name, "description": tool.description,
            "input_schema": tool.input_schema if parameters is None else parameters}


def gemini_tool(tool: Tool, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``functionDeclaration``; a tool without parameters leaves ``parameters`` unset."""
    parameters = tool.input_schema if parameters is None else parameters
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    if parameters.get("properties"):
        declaration["parameters"] = parameters
    return declaration


def _unchanged(schema: dict[str, Any], tool: str) -> tuple[dict[str, Any], list[str]]:
    return schema, []


def _no_problems(schema: dict[str, Any]) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class SchemaDialect:
    """One API family's JSON Schema rules.

    Attributes:
        name: ``openai``, ``openai-strict``, ``anthropic`` or ``gemini``.
        rewrite: ``rewrite(schema, tool_name) -> (schema, changes)``: the schema as the API
            takes it, and one line per change (the input is never modified).
        problems: ``problems(schema) -> [(path, problem)]``: what the API rejects in the schema
            as given (``bench lint``); empty when it accepts any JSON Schema.
        entry: ``entry(tool, parameters) -> dict``: one element of the request's ``tools``
            field, with ``parameters`` as the schema.
        source: the API documentation the rules come from.
    """

    name: str
    rewrite: Callable[[dict[str, Any], str], tuple[dict[str, Any], list[str]]]
    problems: Callable[[dict[str, Any]], list[tuple[str, str]]]
    entry: Callable[..., dict[str, Any]]
    source: str

    def tool_entry(self, tool: Tool) -> tuple[dict[str, Any], list[str]]:
        """``tool`` as one element of the request's tools field, schema rewritten; and the
        changes made."""
        parameters, changes = self.rewrite(tool.input_schema, tool.name)
        return self.entry(tool, parameters), changes

    def tools_field(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The request's whole tools field (what token cost counts)."""
        return [self.tool_entry(t)[0] for t in tools]


DIALECTS: dict[str, SchemaDialect] = {d.name: d for d in (
    SchemaDialect("openai", _unchanged, _no_problems, openai_tool,
                  "https://platform.openai.com/docs/guides/function-calling"),
    SchemaDialect("openai-strict", openai_strict_schema, openai_strict_problems, openai_tool,
                  "https://platform.openai.com/docs/guides/structured-outputs#supported-schemas"),
    SchemaDialect("anthropic", _unchanged, _no_problems, anthropic_tool,
                  "https://docs.claude.com/en/docs/agents-and-tools/tool-use/overview"),
    SchemaDialect("gemini", gemini_schema, gemini_problems, gemini_tool,
                  "https://ai.google.dev/api/caching#Schema"),
)}


def dialect(name: str) -> SchemaDialect:
    """The dialect named ``name`` (a key of :data:`DIALECTS`).

    Raises:
        KeyError: an unknown name.
    """
    return DIALECTS[name]
