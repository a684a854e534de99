"""Description variants: rendered from specs by jinja2 templates, or hand-written files.

A rendered variant ``lN`` uses the template ``lN.j2``: the project's own
``descriptions/templates/lN.j2`` when it has one, else the one shipped in this package
(``bench/data/templates/``, :data:`PACKAGE_TEMPLATES`), so a new project needs no copy of the
built-in l3/l10/l30/l50 templates. The template receives
``spec`` (a :class:`~bench.descriptions.specs.ToolSpec` as a dict) and ``params`` (one dict per
argument: name, type, required, enum, default, minimum, maximum, format, pattern, description)
and returns the tool's description prose. A hand-written variant is
``descriptions/<toolset>/variants/<name>.yaml`` with ``tools: [{name, description,
input_schema, permission}]``.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Sequence

import jinja2
import jsonschema
from pydantic import BaseModel, ConfigDict, ValidationError

from bench.descriptions.specs import ToolSpec, load_specs
from bench.errors import BenchError, pydantic_error_field
from bench.models import NAME_PATTERN, Tool
from bench.paths import descriptions_dir
from bench.schema_refs import depth_problem, ref_problem
from bench.yamlio import line_of, load_yaml

#: The built-in templates (l3, l10, l30, l50), shipped as package data.
PACKAGE_TEMPLATES = Path(__file__).resolve().parent.parent / "data" / "templates"

# Target description lines per tool of each rendered variant (the classic length ablation).
LINE_TARGETS = {"l3": 3, "l10": 10, "l30": 30, "l50": 50}

_SCHEMA_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAP_KEYS = ("properties", "$defs", "definitions", "patternProperties")


class Variant(BaseModel):
    """One complete rendering of a toolset's tools.

    Attributes:
        name: ``l3`` ... ``l50`` or a hand-written variant's file stem.
        toolset: the toolset (folder under ``descriptions/``).
        tools: the tools, in a stable order.
        source: the template or file it came from (relative path, for the manifest).
        draft_tools: the tools whose description in this variant is an unreviewed draft
            (``draft: true`` in their spec's ``variants``: :mod:`bench.drafting`).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    toolset: str
    tools: tuple[Tool, ...]
    source: str
    draft_tools: tuple[str, ...] = ()

    @cached_property
    def sha256(self) -> str:
        """Hash of the canonical JSON of the tools (what the model is shown)."""
        payload = json.dumps([t.model_dump() for t in self.tools], sort_keys=True,
                             ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return next((t for t in self.tools if t.name == name), None)

    @property
    def line_counts(self) -> dict[str, int]:
        """Non-empty description lines per tool name."""
        return {t.name: count_lines(t.description) for t in self.tools}

    @property
    def mean_lines(self) -> float:
        """Mean description lines per tool."""
        counts = list(self.line_counts.values())
        return sum(counts) / len(counts) if counts else 0.0


def count_lines(text: str) -> int:
    """Number of non-blank lines in ``text``."""
    return sum(1 for line in text.splitlines() if line.strip())


def strip_descriptions(schema: Any) -> Any:
    """Return a copy of a JSON Schema without ``description`` keywords (property names kept)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key in _SCHEMA_MAP_KEYS and isinstance(value, dict):
            out[key] = {k: strip_descriptions(v) for k, v in value.items()}
        elif key in _SCHEMA_LIST_KEYS and isinstance(value, list):
            out[key] = [strip_descriptions(v) for v in value]
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = strip_descriptions(value)
        else:
            out[key] = value
    return out


def _params(spec: ToolSpec) -> list[dict[str, Any]]:
    required = set(spec.input_schema.get("required", []))
    params = []
    for name, prop in spec.input_schema.get("properties", {}).items():
        if not isinstance(prop, dict):  # a boolean schema: true (anything), false (nothing)
            prop = {}
        params.append({
            "name": name,
            "type": prop.get("type", "any"),
            "required": name in required,
            "enum": prop.get("enum"),
            "default": prop.get("default"),
            "minimum": prop.get("minimum"),
            "maximum": prop.get("maximum"),
            "format": prop.get("format"),
            "pattern": prop.get("pattern"),
            "description": prop.get("description", ""),
        })
    return params


def template_dirs(root: Path) -> list[Path]:
    """Where templates are looked up, first match wins: the project's
    ``<root>/templates`` (when it exists), then :data:`PACKAGE_TEMPLATES`."""
    own = root / "templates"
    return [own, PACKAGE_TEMPLATES] if own.is_dir() else [PACKAGE_TEMPLATES]


def template_names(root: Path) -> list[str]:
    """Names of the rendered variants the templates offer (``l3``, ``l10``, ...), the
    project's own and the built-in ones, ordered by length then name."""
    names = {p.stem for folder in template_dirs(root) for p in folder.glob("*.j2")}
    return sorted(names, key=lambda n: (len(n), n))


def template_path(root: Path, name: str) -> Path | None:
    """The file of template ``name`` (the project's, else the built-in one), or None."""
    return next((folder / f"{name}.j2" for folder in template_dirs(root)
                 if (folder / f"{name}.j2").is_file()), None)


def _environment(templates: list[Path]) -> jinja2.Environment:
    """The project's variant templates render in bench's sandbox
    (:func:`bench.templating.sandboxed_environment`): a ``descriptions/templates/*.j2`` is
    prose around a spec's fields, and must not reach Python's internals, files or commands
    (a template reading the test split into a description would pass as wording)."""
    from bench.templating import sandboxed_environment

    env = sandboxed_environment(jinja2.FileSystemLoader([str(t) for t in templates]),
                                trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson_compact"] = lambda v: json.dumps(v, ensure_ascii=False)
    return env


def render_tool(spec: ToolSpec, template: jinja2.Template) -> Tool:
    """Render one spec with one template into a :class:`Tool` (schema without descriptions).

    Raises:
        BenchError: the template fails while rendering, any exception
            (:func:`bench.templating.render_template`: names the template file).
    """
    from bench.templating import render_template

    text = render_template(template, None, spec=spec.model_dump(), params=_params(spec))
    lines = [line.rstrip() for line in text.strip().splitlines()]
    description = "\n".join(lines)
    return Tool(name=spec.name, description=description,
                input_schema=strip_descriptions(spec.input_schema), permission=spec.permission)


# The variant of an imported toolset that holds the tools' descriptions as imported.
CURRENT = "current"
# What ``bench import`` called it before: an old project's file is read as ``current`` too.
LEGACY_CURRENT = "original"


def available_variants(toolset: str, root: Path | None = None) -> list[str]:
    """Names of the variants a toolset has: rendered templates (when it has specs) and the
    variants its specs carry texts for (``variants:``, e.g. drafts), then hand-written files
    (an imported toolset has ``current``; an old project's ``original`` is also listed as
    ``current``)."""
    root = root or descriptions_dir()
    spec_paths = sorted((root / toolset / "specs").glob("*.yaml"))
    rendered = set(template_names(root)) if spec_paths else set()
    for path in spec_paths:
        rendered |= _spec_variant_names(path)
    ordered = sorted(rendered, key=lambda n: (len(n), n))
    written = sorted(p.stem for p in (root / toolset / "variants").glob("*.yaml"))
    if LEGACY_CURRENT in written and CURRENT not in written and CURRENT not in rendered:
        written.insert(0, CURRENT)
    return ordered + [w for w in written if w not in rendered]


def _spec_variant_names(path: Path) -> set[str]:
    """The names under a spec file's ``variants:`` (read leniently: a broken spec is reported
    when the variant is loaded)."""
    try:
        data, _ = load_yaml(path)
    except BenchError:
        return set()
    found = data.get("variants") if isinstance(data, dict) else None
    return {str(k) for k in found} if isinstance(found, dict) else set()


def no_variants_reason(toolset: str, root: Path | None = None) -> str:
    """Why ``toolset`` has no variant, naming the real cause: no such folder, no specs and
    no hand-written variants, or specs but no templates (the built-in ones missing from this
    installation). Used by the commands that need at least one variant."""
    root = root or descriptions_dir()
    folder = root / toolset
    if not folder.is_dir():
        return f"there is no folder {folder}"
    specs = any((folder / "specs").glob("*.yaml"))
    if specs and not template_names(root):
        return (f"it has specs under {folder / 'specs'}, but no template renders them: "
                f"neither {root / 'templates'} nor the built-in {PACKAGE_TEMPLATES} holds a "
                "*.j2 file (reinstall bench)")
    return (f"{folder} has no specs/*.yaml (rendered by the l3..l50 templates) and no "
            "variants/*.yaml (hand-written tool lists); `bench init` or `bench import` "
            "writes them")


def _load_written(path: Path, name: str, toolset: str, root: Path) -> Variant:
    data, node = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        raise BenchError("a variant file needs a 'tools' list", file=path, line=1, field="tools")
    if not data["tools"]:
        raise BenchError("a variant needs at least one tool", file=path,
                         line=line_of(node, ["tools"]), field="tools")
    tools: list[Tool] = []
    for i, raw in enumerate(data["tools"]):
        try:
            tool = Tool.model_validate(raw)
        except ValidationError as exc:
            field, msg = pydantic_error_field(exc)
            loc = ["tools", i, *exc.errors()[0].get("loc", ())]
            raise BenchError(msg, file=path, line=line_of(node, loc),
                             field=".".join(map(str, loc))) from None
        too_deep = depth_problem(tool.input_schema)
        if too_deep:
            raise BenchError(too_deep, file=path, line=line_of(node, ["tools", i, "input_schema"]),
                             field=f"tools.{i}.input_schema")
        try:
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        except jsonschema.SchemaError as exc:
            loc = ["tools", i, "input_schema", *exc.path]
            raise BenchError(f"invalid JSON Schema: {exc.message}", file=path,
                             line=line_of(node, loc), field=".".join(map(str, loc))) from None
        found = ref_problem(tool.input_schema)
        if found:
            loc = ["tools", i, "input_schema", *found[0]]
            raise BenchError(f"invalid JSON Schema: {found[1]}", file=path,
                             line=line_of(node, loc), field=".".join(map(str, loc)))
        tool_line = line_of(node, ["tools", i])
        if tool.input_schema.get("type") != "object":
            raise BenchError("input_schema must have type 'object'", file=path, line=tool_line,
                             field=f"tools.{i}.input_schema.type")
        if any(t.name == tool.name for t in tools):
            raise BenchError(f"duplicate tool name '{tool.name}'", file=path, line=tool_line,
                             field=f"tools.{i}.name")
        tools.append(tool)
    return Variant(name=name, toolset=toolset, tools=tuple(tools),
                   source=str(path.relative_to(root.parent)) if root.parent in path.parents
                   else str(path))


def check_toolset(toolset: str, root: Path | None = None) -> Path:
    """The folder of ``toolset`` under ``root`` (default: ``descriptions/``).

    Raises:
        BenchError: no such folder, or a name that is not one folder's (``../..``, a path:
            :data:`bench.models.NAME_PATTERN`, the pattern a case's ``toolset`` has), so that
            nothing reads or writes outside ``root``; the message lists the known toolsets.
    """
    root = root or descriptions_dir()
    toolset_dir = root / toolset
    if not re.fullmatch(NAME_PATTERN, toolset) or not toolset_dir.is_dir():
        known = available_toolsets(root)
        raise BenchError(f"unknown toolset '{toolset}' (known: {', '.join(known) or 'none'})",
                         file=root)
    return toolset_dir


def available_toolsets(root: Path | None = None) -> list[str]:
    """The toolsets under ``root`` (default: ``descriptions/``): its folders other than
    ``templates`` (a project's own templates), sorted; ``[]`` when there is no such folder."""
    root = root or descriptions_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "templates")


def default_toolset(toolset: str | None, root: Path | None = None) -> str:
    """The toolset a command works on: ``toolset`` (its ``--toolset``) when given, else the
    project's only one (a ``bench init`` project has one).

    Raises:
        BenchError: none given and ``root`` (default: ``descriptions/``) holds no toolset, or
            several: the message names them and asks for ``--toolset``.
    """
    if toolset is not None:
        return toolset
    root = root or descriptions_dir()
    known = available_toolsets(root)
    if len(known) == 1:
        return known[0]
    if not known:
        raise BenchError("no toolset here (bench init makes a project with one)", file=root)
    raise BenchError(f"{len(known)} toolsets here ({', '.join(known)}): name one with "
                     "--toolset", file=root)


def load_variant(toolset: str, name: str, root: Path | None = None) -> Variant:
    """Render or load the variant ``name`` of ``toolset``.

    Raises:
        BenchError: unknown toolset or variant (the message lists the available ones), or an
            invalid spec, template or variant file.
    """
    root = root or descriptions_dir()
    for kind, value in (("toolset", toolset), ("variant", name)):
        if not re.fullmatch(NAME_PATTERN, value):
            raise BenchError(f"invalid {kind} name '{value}' (letters, digits, '_' and '-'; "
                             "it names a folder or file)")
    toolset_dir = check_toolset(toolset, root)
    written = toolset_dir / "variants" / f"{name}.yaml"
    if written.is_file():
        return _load_written(written, name, toolset, root)
    found = template_path(root, name)
    spec_paths = list((toolset_dir / "specs").glob("*.yaml"))
    specs = load_specs(toolset_dir) if spec_paths and (
        found is not None or any(name in _spec_variant_names(p) for p in spec_paths)) else []
    own = [spec for spec in specs if name in spec.variants]
    legacy = toolset_dir / "variants" / f"{LEGACY_CURRENT}.yaml"
    if not own and name == CURRENT and legacy.is_file():  # a project from before "current"
        return _load_written(legacy, name, toolset, root)
    if own and found is None and len(own) < len(specs):
        missing = [spec.name for spec in specs if name not in spec.variants]
        raise BenchError(f"variant '{name}' of toolset '{toolset}': {len(missing)} tool(s) "
                         f"have no text for it in their spec ({', '.join(missing)}) and there "
                         f"is no template {name}.j2 (draft them: bench variants draft "
                         f"--toolset {toolset} --provider <id>)", file=toolset_dir / "specs")
    if not own and found is None:
        available = available_variants(toolset, root)
        raise BenchError(f"unknown variant '{name}' for toolset '{toolset}' "
                         + (f"(available: {', '.join(available)})" if available
                            else f"(it has none: {no_variants_reason(toolset, root)})"))
    if not specs:
        raise BenchError(f"variant '{name}' is rendered from specs, and toolset '{toolset}' "
                         f"has none (expected {toolset_dir / 'specs'}/<tool>.yaml); its "
                         "hand-written variants: "
                         f"{', '.join(available_variants(toolset, root)) or 'none'}")
    return specs_variant(toolset, name, specs, root,
                         source=str((toolset_dir / "specs").relative_to(root.parent))
                         if root.parent in toolset_dir.parents else str(toolset_dir / "specs"))


def specs_variant(toolset: str, name: str, specs: Sequence[ToolSpec], root: Path,
                  source: str = "specs") -> Variant:
    """Variant ``name`` of ``toolset`` made from ``specs`` (already loaded, or not yet
    written: ``bench init`` compares its variants before writing its guide): each spec's own
    text for ``name`` (``variants:``), the others rendered by the template ``name.j2`` of
    :func:`template_dirs` of ``root`` (the ``descriptions/`` folder). ``source`` is what the
    manifest names when every tool has its own text.

    Raises:
        BenchError: a tool has no text of its own and there is no template ``name.j2``, or
            the template fails (:func:`bench.templating.template_error`: names its file).
    """
    own = [spec for spec in specs if name in spec.variants]
    drafts = tuple(spec.name for spec in own if spec.variants[name].draft)
    if len(own) == len(specs):  # every tool has its own text: no template needed
        return Variant(name=name, toolset=toolset, draft_tools=drafts,
                       tools=tuple(spec_variant_tool(spec, name) for spec in specs),
                       source=source)
    found = template_path(root, name)
    if found is None:
        raise BenchError(f"variant '{name}' of toolset '{toolset}': no template {name}.j2 "
                         "renders the tools without a text of their own for it")
    template_file = found
    from bench.templating import template_error

    env = _environment(template_dirs(root))
    try:
        template = env.get_template(f"{name}.j2")
        tools = tuple(spec_variant_tool(spec, name) if name in spec.variants
                      else render_tool(spec, template) for spec in specs)
    except BenchError:
        raise
    except Exception as exc:  # does not parse, not UTF-8, a tool the text does not make
        raise template_error(exc, template_file) from None
    rendered_from = template_file.relative_to(root.parent) \
        if root.parent in template_file.parents \
        else Path("bench/data/templates") / template_file.name  # the built-in one
    return Variant(name=name, toolset=toolset, tools=tools, draft_tools=drafts,
                   source=str(rendered_from))


def spec_variant_tool(spec: ToolSpec, name: str) -> Tool:
    """The tool of ``spec`` with its own text for variant ``name`` (``spec.variants[name]``,
    lines stripped of trailing blanks): ``current`` (the imported description) keeps the
    schema as imported; any other text (a drafted length) is sent with the schema's property
    descriptions left out (:func:`strip_descriptions`), as a rendered variant is, so that
    description length stays the one thing the variants change.

    Raises:
        KeyError: ``spec`` has no text for ``name``.
    """
    text = "\n".join(line.rstrip() for line in
                     spec.variants[name].description.strip().splitlines())
    schema = spec.input_schema if name == CURRENT else strip_descriptions(spec.input_schema)
    return Tool(name=spec.name, description=text, input_schema=schema,
                permission=spec.permission)


def same_text_groups(variants: Iterable[Variant]) -> list[tuple[str, list[str]]]:
    """The sets of two or more ``variants`` of one toolset that show the model the same
    tools, byte for byte (same :attr:`Variant.sha256`: names, descriptions, schemas):
    ``(toolset, [variant names in the given order])``, in the order first met. Comparing
    such variants measures nothing; an imported toolset's l30 and l50 render as its l10
    until its specs' longer sections are written."""
    groups: dict[tuple[str, str], list[str]] = {}
    for variant in variants:
        names = groups.setdefault((variant.toolset, variant.sha256), [])
        if variant.name not in names:
            names.append(variant.name)
    return [(toolset, names) for (toolset, _), names in groups.items() if len(names) > 1]


def same_text_note(toolset: str, names: Sequence[str]) -> str:
    """One line saying that variants ``names`` of ``toolset`` render the same text, and the
    shortest way to make them differ (fill the spec sections the longer templates add, or
    draft the lengths with ``bench variants draft``)."""
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    rendered = all(name in LINE_TARGETS for name in names)
    how = ("; the sections the longer templates add are empty in its specs (l10: when to use "
           "it, returns; l30: constraints, errors; l50: examples, edge cases): fill them in "
           f"descriptions/{toolset}/specs/ or draft the lengths: bench variants draft "
           f"--toolset {toolset} --provider local") if rendered else ""
    return (f"variants {listed} of toolset '{toolset}' render the same text, so comparing "
            f"them measures nothing{how}")


def same_text_notes(toolset: str, root: Path | None = None) -> list[str]:
    """:func:`same_text_note` for each set of ``toolset``'s variants (all it has:
    :func:`available_variants`) that render the same text, as ``bench init`` says it. A
    variant that does not load is left out: the command that uses it says why."""
    loaded = []
    for name in available_variants(toolset, root):
        try:
            loaded.append(load_variant(toolset, name, root))
        except BenchError:
            continue
    return [same_text_note(group_toolset, names)
            for group_toolset, names in same_text_groups(loaded)]


def default_variant(toolset: str) -> str:
    """``l50`` when the toolset has it, else its first variant (an imported toolset has only
    hand-written ones).

    Raises:
        BenchError: the toolset has no variant.
    """
    names = available_variants(toolset)
    if not names:
        raise BenchError(f"toolset '{toolset}' has no variants")
    return "l50" if "l50" in names else names[0]
