"""User-supplied jinja2 templates: the one way bench loads and renders them.

A template a user hands bench (``bench optimize --template FILE``, ``bench synth --templates
DIR``) is code bench runs, so it renders in jinja2's immutable sandbox
(:class:`jinja2.sandbox.ImmutableSandboxedEnvironment`, https://jinja.palletsprojects.com/en/
stable/sandbox/): no attribute starting with ``_`` (so no ``cycler.__init__.__globals__.os``),
no unsafe callables, and no change to the lists and dicts bench passes in (a template could
otherwise edit the tools it is shown). Undefined names are errors (``StrictUndefined``): a
misspelt variable names the template instead of rendering as an empty string. Output is plain
text for a model, not HTML (no autoescape).

A template that breaks a sandbox rule, does not parse or fails while rendering is one
:class:`~bench.errors.BenchError` naming its file (:func:`template_error`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from bench.errors import BenchError


def sandboxed_environment(loader: jinja2.BaseLoader | None = None, *,
                          trim_blocks: bool = False, lstrip_blocks: bool = False,
                          keep_trailing_newline: bool = False
                          ) -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    """The environment every user template renders in (see the module docstring).

    Args:
        loader: where ``{% include %}`` / ``get_template`` find templates (None: nowhere).
        trim_blocks, lstrip_blocks, keep_trailing_newline: jinja2's whitespace options, as
            the caller's templates were written for.
    """
    return jinja2.sandbox.ImmutableSandboxedEnvironment(
        loader=loader, undefined=jinja2.StrictUndefined, trim_blocks=trim_blocks,
        lstrip_blocks=lstrip_blocks, keep_trailing_newline=keep_trailing_newline,
        autoescape=False)


def template_error(exc: jinja2.TemplateError, file: str | Path) -> BenchError:
    """``exc`` raised by template ``file`` as one line naming the file (and the line, for a
    syntax error): a sandbox violation says so."""
    if isinstance(exc, jinja2.sandbox.SecurityError):
        return BenchError(f"the template did something its sandbox forbids ({exc.message}); "
                          "a template may read the variables it is given, not Python's "
                          "internals, files or commands", file=file)
    if isinstance(exc, jinja2.TemplateNotFound):
        return BenchError(f"template error: no template '{exc.name}' to include", file=file)
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return BenchError(f"template error: {exc.message}", file=exc.filename or file,
                          line=exc.lineno)
    return BenchError(f"template error: {exc.message or type(exc).__name__}", file=file)


def load_template_file(file: Path, *, trim_blocks: bool = False, lstrip_blocks: bool = False,
                       keep_trailing_newline: bool = False) -> jinja2.Template:
    """Template ``file`` compiled in :func:`sandboxed_environment` (with these whitespace
    options); it can include nothing (no loader), and its ``filename`` is ``file``.

    Raises:
        BenchError: the file cannot be read, is not UTF-8, or does not parse (names file and
            line).
    """
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"cannot read the template ({type(exc).__name__})", file=file) from None
    env = sandboxed_environment(trim_blocks=trim_blocks, lstrip_blocks=lstrip_blocks,
                                keep_trailing_newline=keep_trailing_newline)
    try:
        code = env.compile(text, name=file.name, filename=str(file))
    except jinja2.TemplateSyntaxError as exc:
        raise template_error(exc, file) from None
    return env.template_class.from_code(env, code, env.make_globals(None))


def render_template(template: jinja2.Template, file: str | Path | None = None,
                    **context: Any) -> str:
    """``template`` rendered with ``context``.

    Args:
        template: a template of :func:`sandboxed_environment`.
        file: the file named in an error (default: the template's own ``filename``).

    Raises:
        BenchError: a sandbox violation, an undefined name or any other failure while
            rendering (:func:`template_error`).
    """
    try:
        return template.render(**context)
    except jinja2.TemplateError as exc:
        raise template_error(exc, file or template.filename or template.name
                             or "<template>") from None
