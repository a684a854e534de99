"""Shared pieces of the importers: tool-name mapping and atomic writers.

A toolset is written as a hand-written variant, ``descriptions/<toolset>/variants/<name>.yaml``
(``tools: [{name, description, input_schema}]``, BRIEF §5); cases as
``datasets/<name>/cases.jsonl``. Both are written to a temporary file in the same folder and
renamed, so an interrupted import never leaves half a file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml
from pydantic import ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.models import NAME_PATTERN, Case, Tool
from bench.paths import datasets_dir, descriptions_dir
from bench.schema_refs import depth_problem, ref_problem

# OpenAI's tool-name rule (also bench's, see bench.models.Tool).
_TOOL_NAME_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass
class ImportedToolset:
    """Tools read from a foreign format, ready to be written as a variant.

    Attributes:
        tools: canonical tools, unique names.
        renamed: original name -> bench name, for every name that had to change (BFCL's
            ``math.hcf`` -> ``math_hcf``; a second, different definition of one name gets a
            ``_2`` suffix).
        notes: what the import changed or dropped, one line each (shown to the user).
        source_names: bench name -> the source's own name, for every renamed tool (one
            entry per tool, unlike ``renamed``, whose key a name listed twice repeats); an
            MCP server is called by its own name (``server_names`` of a toolset).
        server_log: what a stdio MCP server wrote to its stderr during the import, redacted
            (:func:`bench.redact.redact`); "" for other sources.
    """

    tools: list[Tool] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    source_names: dict[str, str] = field(default_factory=dict)
    server_log: str = ""


def tool_name(original: str, taken: Iterable[str] = ()) -> str:
    """Map ``original`` to a valid, unused tool name (``^[a-zA-Z0-9_-]{1,64}$``).

    Characters outside the pattern become ``_`` (the convention BFCL uses for OpenAI models);
    a name already in ``taken`` gets ``_2``, ``_3``... .

    Raises:
        BenchError: ``original`` is empty.
    """
    if not original:
        raise BenchError("a tool has an empty name")
    base = _TOOL_NAME_BAD_CHARS.sub("_", original)[:64]
    taken = set(taken)
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[:64 - len(suffix)] + suffix
    return name


def make_tool(name: str, description: str | None, input_schema: Any, *, source: str) -> Tool:
    """Build a :class:`Tool`, checking that the schema is a JSON Schema object.

    Args:
        name: the (already mapped) tool name.
        description: prose; ``None`` becomes ``""``.
        input_schema: a JSON Schema dict of type object (``None`` -> no arguments).
        source: where the tool came from, for error messages (e.g. ``file.json: tool 3``).

    Raises:
        BenchError: the schema is not a valid draft 2020-12 schema of type object.
    """
    schema = input_schema if input_schema is not None else {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise BenchError(f"{source}: tool '{name}': the input schema must be a JSON object")
    schema = dict(schema)
    schema.setdefault("type", "object")
    if schema["type"] != "object":
        raise BenchError(f"{source}: tool '{name}': the input schema must have type 'object'")
    too_deep = depth_problem(schema)
    if too_deep:
        raise BenchError(f"{source}: tool '{name}': {too_deep}")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = ".".join(str(p) for p in exc.path) or "(root)"
        raise BenchError(f"{source}: tool '{name}': invalid JSON Schema at {where}: "
                         f"{exc.message}") from None
    found = ref_problem(schema)
    if found:
        raise BenchError(f"{source}: tool '{name}': invalid JSON Schema at "
                         f"{'.'.join(map(str, found[0]))}: {found[1]}")
    try:
        return Tool(name=name, description=description or "", input_schema=schema)
    except ValidationError as exc:
        field_name, msg = pydantic_error_field(exc)
        raise BenchError(f"{source}: tool '{name}': {field_name}: {msg}") from None


def check_name(kind: str, value: str) -> str:
    """Return ``value`` if it can name a folder or file (:data:`bench.models.NAME_PATTERN`).

    Raises:
        BenchError: otherwise.
    """
    if not re.fullmatch(NAME_PATTERN, value):
        raise BenchError(f"invalid {kind} name '{value}' (letters, digits, '_' and '-'; "
                         "it names a folder or file)")
    return value


def _atomic_write(path: Path, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` with bench's one atomic writer
    (:func:`bench.store.files.atomic_write_text`: an existing file keeps its mode, a symbolic
    link stays a link), refusing an existing file unless ``force``."""
    from bench.store.files import atomic_write_text

    if path.exists() and not force:
        raise BenchError("already exists (pass --force to replace it)", file=path)
    atomic_write_text(path, text)


def write_file(path: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file in the same folder, fsynced,
    then renamed; an existing file keeps its mode, a symbolic link stays a link), creating
    its folders.

    Raises:
        BenchError: the file exists and ``force`` is False.
    """
    _atomic_write(path, text, force)


def variant_yaml(tools: Iterable[Tool], header: str = "") -> str:
    """The text of a hand-written variant file for ``tools`` (YAML, UTF-8 kept).

    ``permission`` is written only when it is not the default ``read``.
    """
    items = []
    for tool in tools:
        item: dict[str, Any] = {"name": tool.name, "description": tool.description,
                                "input_schema": tool.input_schema}
        if tool.permission != "read":
            item["permission"] = tool.permission
        items.append(item)
    # without a stream safe_dump returns the document as str
    body: str = yaml.safe_dump({"tools": items}, allow_unicode=True, sort_keys=False,
                               width=100)
    comments = "".join(f"# {line}\n" for line in header.splitlines())
    return comments + body


def write_variant(toolset: str, variant: str, imported: ImportedToolset, *, header: str = "",
                  force: bool = False, root: Path | None = None) -> Path:
    """Write ``descriptions/<toolset>/variants/<variant>.yaml`` atomically.

    Returns:
        the written path.

    Raises:
        BenchError: invalid names, no tools, or the file exists and ``force`` is False.
    """
    check_name("toolset", toolset)
    check_name("variant", variant)
    if not imported.tools:
        raise BenchError("nothing to write: no tools were imported")
    root = root or descriptions_dir()
    path = root / toolset / "variants" / f"{variant}.yaml"
    _atomic_write(path, variant_yaml(imported.tools, header), force)
    return path


def write_cases(dataset: str, cases: list[dict[str, Any]], *, force: bool = False,
                root: Path | None = None) -> Path:
    """Validate ``cases`` as :class:`~bench.models.Case` and write ``datasets/<dataset>/cases.jsonl``.

    Raises:
        BenchError: a case breaks the format (names its id and field), or the file exists and
            ``force`` is False.
    """
    check_name("dataset", dataset)
    lines = []
    for case in cases:
        try:
            Case.model_validate(case)
        except ValidationError as exc:
            field_name, msg = pydantic_error_field(exc)
            raise BenchError(f"case '{case.get('id')}': {msg}", field=field_name) from None
        lines.append(json.dumps(case, ensure_ascii=False, separators=(", ", ": ")))
    root = root or datasets_dir()
    path = root / dataset / "cases.jsonl"
    _atomic_write(path, "\n".join(lines) + "\n", force)
    return path


def write_dataset_file(dataset: str, name: str, rows: list[dict[str, Any]], *,
                       force: bool = False, root: Path | None = None) -> Path:
    """Write ``rows`` as JSON Lines to ``datasets/<dataset>/<name>`` (a file beside
    ``cases.jsonl``, e.g. the BFCL importer's ``bfcl.jsonl``); an empty list writes an empty
    file.

    Raises:
        BenchError: the file exists and ``force`` is False.
    """
    check_name("dataset", dataset)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path = (root or datasets_dir()) / dataset / name
    _atomic_write(path, text, force)
    return path

