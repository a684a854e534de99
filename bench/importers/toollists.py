"""Import tool lists in the OpenAI and Anthropic request formats.

Accepted shapes (a JSON file holding a list, or an object with a ``tools`` list):

- OpenAI Chat Completions: ``{"type": "function", "function": {"name", "description",
  "parameters", "strict"}}``; OpenAI Responses: ``{"type": "function", "name", "description",
  "parameters", "strict"}``. Non-function tools (``web_search``, ``file_search``...) are skipped
  with a note.
- Anthropic Messages: ``{"name", "description", "input_schema"}``; server and client tools
  with a versioned ``type`` (``web_search_20250305``, ``bash_20250124``...) have no schema of
  their own and are skipped with a note.

- Gemini: function declarations ``{"name", "description", "parameters" |
  "parametersJsonSchema"}``, given as a list of them, as a ``Tool``
  (``{"functionDeclarations": [...]}``, or ``function_declarations`` as the Python SDK writes
  it), as a list of such tools, or as ``{"tools": [...]}``; tools of other kinds
  (``googleSearch``, ``codeExecution``...) are skipped with a note. ``parameters`` is
  Gemini's ``Schema`` (an OpenAPI 3.0 subset, ai.google.dev/api/caching#Schema) and is
  converted to JSON Schema (:func:`gemini_schema`); ``parametersJsonSchema`` already is one.

``strict`` and ``cache_control`` are request options, not part of the tool's description, and
are dropped. :func:`detect_format` tells the three apart by their keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from bench.errors import BenchError, json_document, read_text_file
from bench.importers.common import ImportedToolset, make_tool, tool_name

Format = Literal["openai", "anthropic", "gemini"]
FORMATS: tuple[str, ...] = ("openai", "anthropic", "gemini")

# Gemini Schema keys that are JSON Schema integers but int64 (JSON strings) in the REST API.
_GEMINI_INT64 = ("minItems", "maxItems", "minLength", "maxLength", "minProperties",
                 "maxProperties")
# Gemini Schema keys with no JSON Schema meaning for a tool's arguments (dropped).
_GEMINI_DROPPED = ("propertyOrdering", "property_ordering")
_GEMINI_DECLARATIONS = ("functionDeclarations", "function_declarations")


def read_tool_list(path: Path) -> list[Any]:
    """Read a JSON file holding a tool list (or ``{"tools": [...]}``).

    Raises:
        BenchError: missing file, malformed JSON, or no list found.
    """
    data = json_document(read_text_file(path), file=path, what="the tools file", finite=True)
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    elif isinstance(data, dict) and any(k in data for k in _GEMINI_DECLARATIONS):
        data = [data]  # one Gemini Tool
    if not isinstance(data, list):
        raise BenchError("expected a JSON list of tools (or an object with a 'tools' list)",
                         file=path)
    return data


def gemini_schema(schema: Any) -> Any:
    """Gemini's ``Schema`` (OpenAPI 3.0 subset) as JSON Schema, recursively: ``type`` in
    lower case (``STRING`` -> ``string``), ``nullable: true`` -> a ``null`` type added,
    ``example`` -> ``examples: [example]``, int64 bounds given as strings (``"5"``) ->
    integers, snake_case keys of the Python SDK (``any_of``, ``min_items``) -> camelCase,
    ``propertyOrdering`` dropped. Keys Gemini shares with JSON Schema pass unchanged."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    nullable = False
    for key, value in schema.items():
        key = _camel(key)
        if key in _GEMINI_DROPPED:
            continue
        if key == "type" and isinstance(value, str):
            if value.upper() != "TYPE_UNSPECIFIED":
                out["type"] = value.lower()
        elif key == "nullable":
            nullable = value is True
        elif key == "example":
            out["examples"] = [value]
        elif key in _GEMINI_INT64 and isinstance(value, str) and value.isdigit():
            out[key] = int(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: gemini_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = gemini_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [gemini_schema(sub) for sub in value]
        else:
            out[key] = value
    if nullable and isinstance(out.get("type"), str) and out["type"] != "null":
        out["type"] = [out["type"], "null"]
    return out


def _camel(key: str) -> str:
    """``min_items`` -> ``minItems`` (the Python SDK's field names -> the REST API's)."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _gemini_declarations(items: list[Any], notes: list[str], path: Path) -> list[Any]:
    """The function declarations of a Gemini tool list (tools of other kinds noted)."""
    found: list[Any] = []
    for index, item in enumerate(items):
        if isinstance(item, dict) and any(k in item for k in _GEMINI_DECLARATIONS):
            declarations = next(item[k] for k in _GEMINI_DECLARATIONS if k in item)
            if not isinstance(declarations, list):
                raise BenchError(f"{path}: tool {index}: functionDeclarations must be a list")
            found += declarations
            others = [k for k in item if k not in _GEMINI_DECLARATIONS]
            if others:
                notes.append(f"{path}: tool {index}: skipped {', '.join(others)} (not a "
                             "function declaration)")
        elif isinstance(item, dict) and "name" in item:
            found.append(item)
        else:
            kinds = ", ".join(item) if isinstance(item, dict) else type(item).__name__
            notes.append(f"{path}: tool {index}: skipped a tool of kind '{kinds}' (no "
                         "function declarations)")
    return found


def detect_format(path: Path) -> Format:
    """Which tool-list format a JSON file holds, from the first tool that says: Gemini
    (``functionDeclarations`` or ``parametersJsonSchema``), OpenAI (``"type": "function"``
    or a ``function`` object), Anthropic (``input_schema``).

    A bare ``{name, description, parameters}`` is a Gemini function declaration (OpenAI's
    Chat and Responses shapes both carry ``"type": "function"``).

    Raises:
        BenchError: the file cannot be read, or no tool says which format it is (names the
            file and the keys to use).
    """
    data = json_document(read_text_file(path), file=path, what="the tools file", finite=True)
    if isinstance(data, dict) and any(k in data for k in _GEMINI_DECLARATIONS):
        return "gemini"
    items = data.get("tools") if isinstance(data, dict) else data
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if any(k in item for k in _GEMINI_DECLARATIONS) or "parametersJsonSchema" in item:
            return "gemini"
        if item.get("type") == "function" or isinstance(item.get("function"), dict):
            return "openai"
        if "input_schema" in item:
            return "anthropic"
        if "parameters" in item and "name" in item:
            return "gemini"
    raise BenchError("cannot tell the tool-list format: expected OpenAI tools "
                     "({\"type\": \"function\", ...}), Anthropic tools ({name, description, "
                     "input_schema}) or Gemini function declarations ({\"functionDeclarations\": "
                     "[...]}); give --format", file=path)


def _fields(item: Any, fmt: Format) -> tuple[object, object, object] | None:
    """(name, description, schema) of one entry, as found (unchecked JSON values); None for a
    tool kind without a schema."""
    if not isinstance(item, dict):
        raise ValueError("a tool must be a JSON object")
    if fmt == "gemini":
        if "parametersJsonSchema" in item:
            return item.get("name"), item.get("description"), item["parametersJsonSchema"]
        return item.get("name"), item.get("description"), gemini_schema(item.get("parameters"))
    if fmt == "openai":
        if item.get("type", "function") != "function":
            return None
        body = item["function"] if isinstance(item.get("function"), dict) else item
        return body.get("name"), body.get("description"), body.get("parameters")
    if "input_schema" not in item and item.get("type") not in (None, "custom"):
        return None
    return item.get("name"), item.get("description"), item.get("input_schema")


def import_tool_list(path: Path, fmt: Format) -> ImportedToolset:
    """Read an OpenAI, Anthropic or Gemini tool list into canonical tools.

    Args:
        path: JSON file.
        fmt: ``openai``, ``anthropic`` or ``gemini``.

    Raises:
        BenchError: malformed file, a tool without a name, a duplicate name, or an invalid
            schema (names the file and the tool's index).
    """
    imported = ImportedToolset()
    originals: set[str] = set()
    items = read_tool_list(path)
    if fmt == "gemini":
        items = _gemini_declarations(items, imported.notes, path)
    for index, item in enumerate(items):
        source = f"{path}: tool {index}"
        try:
            fields = _fields(item, fmt)
        except ValueError as exc:
            raise BenchError(f"{source}: {exc}") from None
        if fields is None:
            imported.notes.append(f"{source}: skipped a built-in tool of type "
                                  f"'{item.get('type')}' (it has no schema of its own)")
            continue
        original, description, schema = fields
        if not isinstance(original, str) or not original:
            raise BenchError(f"{source}: a tool needs a non-empty string 'name'")
        if original in originals:
            raise BenchError(f"{source}: duplicate tool name '{original}'")
        originals.add(original)
        name = tool_name(original, (t.name for t in imported.tools))
        if name != original:
            imported.renamed[original] = name
            imported.notes.append(f"{source}: '{original}' renamed '{name}' (tool names match "
                                  "^[a-zA-Z0-9_-]{1,64}$)")
        if description is not None and not isinstance(description, str):
            raise BenchError(f"{source}: tool '{original}': 'description' must be a string")
        imported.tools.append(make_tool(name, description, schema, source=source))
    return imported
