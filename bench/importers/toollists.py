"""Import tool lists in the OpenAI and Anthropic request formats.

Accepted shapes (a JSON file holding a list, or an object with a ``tools`` list):

- OpenAI Chat Completions: ``{"type": "function", "function": {"name", "description",
  "parameters", "strict"}}``; OpenAI Responses: ``{"type": "function", "name", "description",
  "parameters", "strict"}``. Non-function tools (``web_search``, ``file_search``...) are skipped
  with a note.
- Anthropic Messages: ``{"name", "description", "input_schema"}``; server and client tools
  with a versioned ``type`` (``web_search_20250305``, ``bash_20250124``...) have no schema of
  their own and are skipped with a note.

``strict`` and ``cache_control`` are request options, not part of the tool's description, and
are dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from bench.errors import BenchError, read_text_file
from bench.importers.common import ImportedToolset, make_tool, tool_name

Format = Literal["openai", "anthropic"]


def read_tool_list(path: Path) -> list[Any]:
    """Read a JSON file holding a tool list (or ``{"tools": [...]}``).

    Raises:
        BenchError: missing file, malformed JSON, or no list found.
    """
    text = read_text_file(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"malformed JSON: {exc.msg} (column {exc.colno})", file=path,
                         line=exc.lineno) from None
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise BenchError("expected a JSON list of tools (or an object with a 'tools' list)",
                         file=path)
    return data


def _fields(item: Any, fmt: Format) -> tuple[object, object, object] | None:
    """(name, description, schema) of one entry, as found (unchecked JSON values); None for a
    tool kind without a schema."""
    if not isinstance(item, dict):
        raise ValueError("a tool must be a JSON object")
    if fmt == "openai":
        if item.get("type", "function") != "function":
            return None
        body = item["function"] if isinstance(item.get("function"), dict) else item
        return body.get("name"), body.get("description"), body.get("parameters")
    if "input_schema" not in item and item.get("type") not in (None, "custom"):
        return None
    return item.get("name"), item.get("description"), item.get("input_schema")


def import_tool_list(path: Path, fmt: Format) -> ImportedToolset:
    """Read an OpenAI or Anthropic tool list into canonical tools.

    Args:
        path: JSON file.
        fmt: ``openai`` or ``anthropic``.

    Raises:
        BenchError: malformed file, a tool without a name, a duplicate name, or an invalid
            schema (names the file and the tool's index).
    """
    imported = ImportedToolset()
    for index, item in enumerate(read_tool_list(path)):
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
        if any(t.name == original for t in imported.tools):
            raise BenchError(f"{source}: duplicate tool name '{original}'")
        name = tool_name(original, (t.name for t in imported.tools))
        if name != original:
            imported.renamed[original] = name
            imported.notes.append(f"{source}: '{original}' renamed '{name}' (tool names match "
                                  "^[a-zA-Z0-9_-]{1,64}$)")
        if description is not None and not isinstance(description, str):
            raise BenchError(f"{source}: tool '{original}': 'description' must be a string")
        imported.tools.append(make_tool(name, description, schema, source=source))
    return imported
