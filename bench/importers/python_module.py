"""Tools from Python code: the typed functions (and pydantic models) of a module.

The way the major SDKs build a tool from a function, done with pydantic the same way:

- the MCP Python SDK (``mcp.server.mcpserver``, formerly FastMCP: ``func_metadata`` builds a
  pydantic model of the parameters with ``create_model`` and sends its
  ``model_json_schema()``; the docstring is the description);
- the OpenAI Agents SDK (``agents.function_schema.function_schema``: ``create_model`` over
  the signature, the docstring's description as the tool's, its ``Args:`` entries as the
  parameters' descriptions);
- pydantic models as tools: OpenAI's ``openai.pydantic_function_tool(Model)`` (name = class
  name, description = docstring, parameters = the model's JSON Schema).

So a tool's ``input_schema`` is ``create_model(<name>_arguments, **parameters)
.model_json_schema()`` (type hints as JSON Schema: ``Literal`` -> ``enum``, ``Annotated[int,
Field(ge=1)]`` -> ``minimum``, a pydantic model -> a nested object under ``$defs``), with the
generated ``title`` keys removed (a model is shown them as noise). The description is the
docstring (:func:`inspect.getdoc`) without its parameter section; each parameter's text from
that section (Google ``Args:``/``Parameters:``, Sphinx ``:param name:``, or NumPy
``Parameters`` with a dashed underline) becomes its property's ``description`` unless a
``Field(description=...)`` gave one.

Which names are tools: the module's ``__all__`` when it has one, else every public function
defined in the module itself (not imported), plus every public pydantic model defined there
that no tool function takes as a parameter type (a model used as a parameter is part of that
tool's schema, not a tool). A function's permission is ``write``: bench cannot know what
Python code changes, so it runs only when the project allows writes for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, create_model

from bench.errors import BenchError
from bench.importers.common import ImportedToolset, make_tool, tool_name

_GOOGLE_HEADERS = ("args", "arguments", "parameters", "params", "keyword args",
                   "keyword arguments")
_SECTION = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")
_SPHINX_OTHER = re.compile(r"^:(type|rtype)\b")


@dataclass
class PythonTool:
    """One tool made from Python code.

    Attributes:
        name: the tool name (the function's or model's, made valid).
        function: the function to call, or None for a pydantic model (a schema only: nothing
            to execute).
        arguments: the pydantic model of the parameters (the function's, or the model
            itself): it checks and converts a call's arguments before the call.
        description: the description shown to a model.
    """

    name: str
    function: Callable[..., Any] | None
    arguments: type[BaseModel]
    description: str


def load_module(source: str, base: Path | None = None) -> ModuleType:
    """Import a module of tools: a ``.py`` file (relative to ``base``, default the cwd), or
    a dotted module name importable here.

    A file is imported under the name ``bench_tools_<stem>`` with its folder added to
    ``sys.path`` (so it can import its neighbours); importing runs its top-level code, so
    give only code you trust.

    Raises:
        BenchError: the file does not exist, or importing it fails (names the file and the
            error's type and message; a module calling ``sys.exit()`` fails the same way, it
            does not end bench).
    """
    path = Path(source)
    if not path.is_absolute() and base is not None:
        path = base / path
    if source.endswith(".py") or path.is_file():
        if not path.is_file():
            raise BenchError("no such Python file", file=path)
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.append(folder)
        name = "bench_tools_" + re.sub(r"\W", "_", path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise BenchError("cannot import this file as a Python module", file=path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code: one line
            sys.modules.pop(name, None)
            raise BenchError(f"importing it failed: {type(exc).__name__}: {exc}",
                             file=path) from None
        return module
    try:
        return importlib.import_module(source)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - as above
        raise BenchError(f"cannot import module '{source}': {type(exc).__name__}: {exc}") \
            from None


def split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(the description without its parameter section, parameter -> its text) of a
    docstring (already dedented, e.g. by :func:`inspect.getdoc`).

    Google style (``Args:`` then indented ``name (type): text`` entries, continuation lines
    indented further), Sphinx (``:param name: text``; ``:type``/``:rtype`` lines dropped)
    and NumPy (``Parameters`` over a dashed line, then ``name : type`` and indented text).
    Other sections (``Returns:``, ``Raises:``, ``Example:``) stay in the description.
    """
    lines = doc.splitlines()
    kept: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        header = _SECTION.match(stripped)
        numpy = stripped.lower() in ("parameters", "other parameters") and i + 1 < len(lines) \
            and set(lines[i + 1].strip()) == {"-"}
        if (header and header.group(1).lower() in _GOOGLE_HEADERS) or numpy:
            i += 2 if numpy else 1
            current: str | None = None
            base_indent: int | None = None
            while i < len(lines):
                body = lines[i]
                if not body.strip():
                    i += 1
                    continue
                indent = len(body) - len(body.lstrip())
                if numpy:
                    if indent == 0 and (set(body.strip()) == {"-"} or (
                            i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"})):
                        break  # the next NumPy section
                    if indent == 0:
                        current = body.split(":")[0].strip()
                        params[current] = ""
                    elif current:
                        params[current] = (params[current] + " " + body.strip()).strip()
                    i += 1
                    continue
                if indent == 0:
                    break  # the section ended (a Google section is indented)
                if base_indent is None:
                    base_indent = indent
                entry = re.match(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", body.strip())
                if indent == base_indent and entry:
                    current = entry.group(1)
                    params[current] = entry.group(2).strip()
                elif current:
                    params[current] = (params[current] + " " + body.strip()).strip()
                i += 1
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            current_name = sphinx.group(1)
            params[current_name] = sphinx.group(2).strip()
            i += 1
            while i < len(lines) and lines[i].startswith((" ", "\t")) and lines[i].strip():
                params[current_name] += " " + lines[i].strip()
                i += 1
            continue
        if _SPHINX_OTHER.match(stripped):
            i += 1
            continue
        kept.append(line)
        i += 1
    description = "\n".join(kept).strip()
    description = re.sub(r"\n{3,}", "\n\n", description)
    return description, params


def _without_titles(schema: Any, in_properties: bool = False) -> Any:
    """A copy of a pydantic JSON Schema without its generated ``title`` keys (a property
    named ``title`` is kept)."""
    if isinstance(schema, dict):
        return {key: _without_titles(value, key in ("properties", "$defs"))
                for key, value in schema.items() if in_properties or key != "title"}
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    return schema


def _referenced_models(annotation: Any, found: set[type]) -> None:
    """Add every pydantic model class inside a type hint to ``found``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.add(annotation)
    for arg in typing.get_args(annotation):
        _referenced_models(arg, found)


def _where(obj: Any) -> dict[str, Any]:
    """``file`` and ``line`` of a function's or class's definition, for a
    :class:`BenchError` (empty when Python cannot tell, e.g. a builtin)."""
    try:
        file = inspect.getsourcefile(obj)
        code = getattr(obj, "__code__", None)
        line = code.co_firstlineno if code is not None else inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return {}
    return {"file": file, "line": line} if file else {}


def function_tool(function: Callable[..., Any], name: str | None = None) -> PythonTool:
    """A tool from one typed function (see the module docstring).

    Raises:
        BenchError: a ``*args``/``**kwargs`` parameter (no schema can say it), or a type hint
            pydantic cannot turn into JSON Schema (names the function and the error).
    """
    qualname = getattr(function, "__qualname__", repr(function))
    description, docs = split_docstring(inspect.getdoc(function) or "")
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - an unresolvable forward reference
        raise BenchError(f"function '{qualname}': its type hints cannot be resolved "
                         f"({type(exc).__name__}: {exc})", **_where(function)) from None
    fields: dict[str, Any] = {}
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise BenchError(f"function '{qualname}': parameter '{param.name}' is "
                             f"{'*args' if param.kind == param.VAR_POSITIONAL else '**kwargs'}"
                             "; a tool needs named parameters", **_where(function))
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        text = docs.get(param.name)
        fields[param.name] = (annotation, Field(default, description=text) if text
                              else Field(default))
    try:
        model = create_model(f"{function.__name__}_arguments",
                             __config__=ConfigDict(arbitrary_types_allowed=False), **fields)
        model.model_json_schema()
    except Exception as exc:  # noqa: BLE001 - pydantic's schema errors have many types
        raise BenchError(f"function '{qualname}': its type hints have no JSON Schema "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0]})",
                         **_where(function)) from None
    return PythonTool(name=name or function.__name__, function=function, arguments=model,
                      description=description)


def model_tool(model: type[BaseModel], name: str | None = None) -> PythonTool:
    """A tool from a pydantic model (as ``openai.pydantic_function_tool``): its fields are
    the arguments, its docstring the description; nothing to execute.

    Raises:
        BenchError: the model has no JSON Schema (e.g. a field of an arbitrary class).
    """
    try:
        model.model_json_schema()
    except Exception as exc:  # noqa: BLE001 - pydantic's schema errors have many types
        raise BenchError(f"model '{model.__qualname__}': it has no JSON Schema "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0]})",
                         **_where(model)) from None
    doc = model.__doc__ if model.__doc__ and model.__doc__ is not BaseModel.__doc__ else ""
    description, _ = split_docstring(inspect.cleandoc(doc))
    return PythonTool(name=name or model.__name__, function=None, arguments=model,
                      description=description)


def module_tools(module: ModuleType) -> list[PythonTool]:
    """The tools of a module (which names: see the module docstring), in source order.

    Raises:
        BenchError: ``__all__`` that is not a list of strings, a name in it that is neither a
            function nor a pydantic model, or a function :func:`function_tool` or a model
            :func:`model_tool` refuses.
    """
    listed = getattr(module, "__all__", None)
    if listed is not None and (isinstance(listed, str) or not isinstance(listed, (list, tuple))
                               or not all(isinstance(n, str) for n in listed)):
        raise BenchError(f"module '{module.__name__}': __all__ must be a list of names "
                         f"(strings), not {listed!r:.60}")
    members = [(name, getattr(module, name, None)) for name in listed] if listed is not None \
        else [(name, value) for name, value in vars(module).items() if not name.startswith("_")
              and getattr(value, "__module__", None) == module.__name__]
    functions = [(n, v) for n, v in members if inspect.isfunction(v)]
    models = [(n, v) for n, v in members
              if isinstance(v, type) and issubclass(v, BaseModel) and v is not BaseModel]
    if listed is not None:
        for name, value in members:
            if (name, value) not in functions and (name, value) not in models:
                raise BenchError(f"module '{module.__name__}': __all__ names '{name}', which is "
                                 "neither a function nor a pydantic model")
    tools = [function_tool(v) for _, v in functions]
    used: set[type] = set()
    for tool in tools:
        for field in tool.arguments.model_fields.values():
            _referenced_models(field.annotation, used)
    tools += [model_tool(v) for _, v in models if listed is not None or v not in used]

    def line(tool: PythonTool) -> int:
        target = tool.function or tool.arguments
        try:
            return inspect.getsourcelines(target)[1]
        except (OSError, TypeError):
            return 0
    return sorted(tools, key=line)


def tool_schema(tool: PythonTool) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments (titles removed)."""
    # a dict stays a dict in _without_titles
    schema: dict[str, Any] = _without_titles(tool.arguments.model_json_schema())
    schema.pop("description", None)  # a model's docstring: the tool's description already
    schema.setdefault("properties", {})
    return schema


def import_python(source: str, base: Path | None = None) -> tuple[ImportedToolset,
                                                                   list[PythonTool]]:
    """Read the tools of a Python module (file or dotted name) as canonical tools.

    Returns:
        (the tools, ready to write, with permission ``write`` for functions; the
        :class:`PythonTool` of each, same order, names as written).

    Raises:
        BenchError: the module cannot be imported, has no tools, or a tool's hints have no
            schema.
    """
    module = load_module(source, base)
    found = module_tools(module)
    if not found:
        raise BenchError(f"module '{source}' defines no public function or pydantic model "
                         "(a tool is a function with type hints and a docstring)")
    imported = ImportedToolset()
    for tool in found:
        name = tool_name(tool.name, (t.name for t in imported.tools))
        if name != tool.name:
            imported.renamed[tool.name] = name
            imported.notes.append(f"'{tool.name}' renamed '{name}'")
            tool.name = name
        if not tool.description:
            imported.notes.append(f"'{name}' has no docstring: its description is empty")
        made = make_tool(name, tool.description, tool_schema(tool), source=f"{source}: {name}")
        imported.tools.append(made.model_copy(update={"permission": "write"})
                              if tool.function is not None else made)
    return imported, found
