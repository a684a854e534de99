"""The generation prompts: jinja2 templates, one per kind, that the user can override.

Built-in templates live in ``bench/synth/templates/`` (``common.j2``, included by ``single.j2``,
``multiple.j2``, ``parallel.j2``, ``no_call.j2``, ``ask.j2``). ``bench synth --templates DIR``
puts DIR first: a file there of the same name replaces the built-in one, the rest stay.
Templates render in jinja2's sandbox with ``StrictUndefined`` (a misspelt variable is an error
naming the template, not an empty string), as every user template does
(:mod:`bench.templating`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import jinja2

from bench.errors import BenchError
from bench.models import Tool
from bench.synth.proposals import LANGUAGES
from bench.templating import render_template, sandboxed_environment, template_error

BUILTIN = Path(__file__).resolve().parent / "templates"


@dataclass(frozen=True)
class Prompt:
    """One rendered generation prompt.

    Attributes:
        template: the template's file name (``single.j2``).
        template_sha256: SHA-256 of the template's source as loaded (the user's file when it
            overrides the built-in one); included templates are not hashed separately.
        text: the rendered user message.
        sha256: SHA-256 of ``text``.
    """

    template: str
    template_sha256: str
    text: str

    @property
    def sha256(self) -> str:
        """SHA-256 of the rendered text (UTF-8)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def environment(override: Path | None = None) -> jinja2.Environment:
    """The sandboxed jinja2 environment: ``override`` (if given) before the built-ins.

    Raises:
        BenchError: ``override`` is not a folder.
    """
    folders = [BUILTIN]
    if override is not None:
        if not override.is_dir():
            raise BenchError("--templates must be a folder of .j2 files", file=override)
        folders.insert(0, override)
    return sandboxed_environment(jinja2.FileSystemLoader([str(f) for f in folders]),
                                 trim_blocks=True, lstrip_blocks=True)


def tool_view(tool: Tool) -> dict[str, Any]:
    """What templates see of a tool: name, summary (first line of the description),
    description, parameters (the JSON Schema as compact JSON text), required names."""
    description = tool.description.strip()
    return {"name": tool.name, "summary": description.splitlines()[0] if description else "",
            "description": description,
            "parameters": json.dumps(tool.input_schema, ensure_ascii=False,
                                     separators=(",", ":")),
            "required": list(tool.input_schema.get("required", []))}


def render(env: jinja2.Environment, kind: str, *, toolset: str, tools: Sequence[Tool],
           tool: Tool, similar: Tool | None, lang: str, index: int, distractor: bool = False,
           near_miss: bool = False) -> Prompt:
    """Render ``<kind>.j2`` for one request.

    Raises:
        BenchError: the template is missing, does not parse, breaks a sandbox rule or fails
            while rendering (names the template file, and the line where jinja2 knows it).
    """
    name = f"{kind}.j2"
    try:
        template = env.get_template(name)
        source, filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
    except jinja2.TemplateNotFound as exc:
        raise BenchError(f"no prompt template '{exc.name}' (built-ins: {BUILTIN})") from None
    except Exception as exc:  # a syntax error, a file that is not UTF-8: one line
        raise template_error(exc, _template_file(env, name)) from None
    text = render_template(
        template, filename or name, toolset=toolset, tools=[tool_view(t) for t in tools],
        tool=tool_view(tool), similar=tool_view(similar) if similar is not None else None,
        kind=kind, lang=lang, language=LANGUAGES[lang], index=index, distractor=distractor,
        near_miss=near_miss)
    return Prompt(name, hashlib.sha256(source.encode("utf-8")).hexdigest(), text.strip())


def _template_file(env: jinja2.Environment, name: str) -> str:
    """The file the environment's loader finds for template ``name`` (its name when the
    loader is not a folder loader or finds none)."""
    loader = env.loader
    if isinstance(loader, jinja2.FileSystemLoader):
        for folder in loader.searchpath:
            if (Path(folder) / name).is_file():
                return str(Path(folder) / name)
    return name
