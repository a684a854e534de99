"""Tool specs: the rich, structured source that templates render into variants (BRIEF §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.models import Permission
from bench.schema_refs import depth_problem, ref_problem
from bench.yamlio import line_of, load_yaml


class SpecExample(BaseModel):
    """A usage example: a user request and the arguments it should produce (or why no call)."""

    model_config = ConfigDict(extra="forbid")

    query: str
    arguments: dict[str, Any] | None = None
    note: str | None = None


class SpecVariant(BaseModel):
    """A tool's own text for one variant, kept in its spec (``variants.<name>``): the
    imported description (``current``), or a longer or shorter version drafted by a model
    (``bench variants draft``: ``l3`` ... ``l50``), which stays ``draft: true`` until a
    person accepts it (``bench variants accept``).

    Attributes:
        description: the tool's description in this variant (plain text).
        draft: True until reviewed; a variant holding drafts is marked in tables and reports.
        drafted_by: the provider id that drafted it (None for a text a person wrote).
        drafted_from: what it was drafted from: ``<variant> sha256:<first 12 hex digits of
            the tool's hash>`` (:func:`bench.descriptions.lock.tool_hashes`).
        reviewed_at: when ``bench variants accept`` accepted it (UTC ISO 8601).
    """

    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1)
    draft: bool = False
    drafted_by: str | None = None
    drafted_from: str | None = None
    reviewed_at: str | None = None


class ToolSpec(BaseModel):
    """One tool's spec, ``descriptions/<toolset>/specs/<tool>.yaml``.

    ``input_schema`` is a JSON Schema (draft 2020-12) whose properties carry a one-line
    ``description``; rendered variants move those into the prose from l10 up and send the
    schema without them, so that description length is the one thing variants change.

    ``variants`` holds the tool's own text for named variants (:class:`SpecVariant`): such a
    text is used instead of rendering the template of that name (``current``, the imported
    description, is sent with the schema as imported; any other with the schema's property
    descriptions left out, as a rendered variant is).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    permission: Permission = "read"
    summary: str
    input_schema: dict[str, Any]
    when_to_use: list[str] = Field(default_factory=list)
    when_not_to_use: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    business_context: list[str] = Field(default_factory=list)
    returns: str = ""
    errors: list[str] = Field(default_factory=list)
    examples: list[SpecExample] = Field(default_factory=list)
    edge_cases: list[str] = Field(default_factory=list)
    variants: dict[str, SpecVariant] = Field(default_factory=dict)


def load_spec(path: Path) -> ToolSpec:
    """Load and check one spec file.

    Raises:
        BenchError: invalid YAML, a missing or unknown field, or an ``input_schema`` that is not
            a valid JSON Schema object (message names the file, line and field).
    """
    data, node = load_yaml(path)
    if not isinstance(data, dict):
        raise BenchError("a spec must be a YAML mapping", file=path, line=1)
    try:
        spec = ToolSpec.model_validate(data)
    except ValidationError as exc:
        field, msg = pydantic_error_field(exc)
        error_loc = exc.errors()[0].get("loc", ())
        raise BenchError(msg, file=path, line=line_of(node, error_loc), field=field) from None
    too_deep = depth_problem(spec.input_schema)
    if too_deep:
        raise BenchError(too_deep, file=path, line=line_of(node, ["input_schema"]),
                         field="input_schema")
    try:
        jsonschema.Draft202012Validator.check_schema(spec.input_schema)
    except jsonschema.SchemaError as exc:
        loc = ["input_schema", *exc.path]
        field = ".".join(str(p) for p in loc)
        raise BenchError(f"invalid JSON Schema: {exc.message}", file=path,
                         line=line_of(node, loc), field=field) from None
    found = ref_problem(spec.input_schema)
    if found:
        loc = ["input_schema", *found[0]]
        raise BenchError(f"invalid JSON Schema: {found[1]}", file=path,
                         line=line_of(node, loc), field=".".join(map(str, loc)))
    if spec.input_schema.get("type") != "object":
        raise BenchError("input_schema must have type 'object'", file=path,
                         line=line_of(node, ["input_schema"]), field="input_schema.type")
    if path.stem != spec.name:
        raise BenchError(f"spec name '{spec.name}' differs from its file name '{path.stem}'",
                         file=path, line=line_of(node, ["name"]), field="name")
    return spec


def load_specs(toolset_dir: Path) -> list[ToolSpec]:
    """Load every ``specs/*.yaml`` of a toolset folder, sorted by tool name.

    Raises:
        BenchError: the folder has no specs, or any spec is invalid.
    """
    paths = sorted((toolset_dir / "specs").glob("*.yaml"))
    if not paths:
        raise BenchError("no tool specs found (expected specs/*.yaml)", file=toolset_dir)
    return [load_spec(p) for p in paths]
