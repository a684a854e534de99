"""User-supplied jinja2 templates: the one way bench loads and renders them.

A template a user hands bench (``bench optimize --template FILE``, ``bench synth --templates
DIR``) is code bench runs, so it renders in jinja2's immutable sandbox
(:class:`jinja2.sandbox.ImmutableSandboxedEnvironment`, https://jinja.palletsprojects.com/en/
stable/sandbox/): no attribute starting with ``_`` (so no ``cycler.__init__.__globals__.os``),
no unsafe callables, and no change to the lists and dicts bench passes in (a template could
otherwise edit the tools it is shown). Undefined names are errors (``StrictUndefined``): a
misspelt variable names the template instead of rendering as an empty string. Output is plain
text for a model, not HTML (no autoescape).

A template that breaks a sandbox rule, does not parse or fails while rendering (any
exception: ``{{ 1/0 }}``, ``{{ total + "x" }}``, an include without a loader, a template that
includes itself until Python's recursion limit) is one :class:`~bench.errors.BenchError`
naming its file, and the template line where the failure happened when jinja2's traceback
gives it (:func:`template_error`); every caller renders through :func:`render_template`.
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


def _template_frame(exc: BaseException) -> tuple[str, int] | None:
    """The innermost template frame of ``exc``'s traceback, as ``(file, line)``: jinja2
    rewrites a rendering error's traceback so that frames of template code carry the
    template's file name and source line (``jinja2.debug.fake_traceback``, which marks them
    with ``__jinja_exception__`` in their globals); None when no frame is a template's."""
    found: tuple[str, int] | None = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if "__jinja_exception__" in frame.f_globals:
            found = (frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def template_error(exc: BaseException, file: str | Path) -> BenchError:
    """``exc``, raised while template ``file`` compiled or rendered, as one line naming the
    file (and the line, for a syntax error and wherever jinja2's traceback gives it): a
    sandbox violation says so; any other exception (``ZeroDivisionError``, ``TypeError``,
    ``RecursionError``...) is named by its type and message, never a traceback."""
    if isinstance(exc, BenchError):
        return exc
    if isinstance(exc, jinja2.sandbox.SecurityError):
        return BenchError(f"the template did something its sandbox forbids ({exc.message}); "
                          "a template may read the variables it is given, not Python's "
                          "internals, files or commands", file=file)
    if isinstance(exc, jinja2.TemplateNotFound):
        return BenchError(f"template error: no template '{exc.name}' to include", file=file)
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return BenchError(f"template error: {exc.message}", file=exc.filename or file,
                          line=exc.lineno)
    where = _template_frame(exc)
    at_file, at_line = (where if where is not None and where[0] not in ("", "<template>")
                        else (file, None))
    if isinstance(exc, jinja2.TemplateError):
        return BenchError(f"template error: {exc.message or type(exc).__name__}",
                          file=at_file, line=at_line)
    if isinstance(exc, RecursionError):
        return BenchError("template error: it includes or calls itself without end "
                          "(RecursionError)", file=at_file, line=at_line)
    if isinstance(exc, UnicodeDecodeError):
        return BenchError(f"template is not UTF-8 ({exc.reason})", file=at_file, line=at_line)
    if isinstance(exc, TypeError) and "no loader" in str(exc):
        return BenchError("template error: it includes, imports or extends another template, "
                          "and this template can include none (put what it needs in it)",
                          file=at_file, line=at_line)
    message = " ".join(str(exc).split())[:200]
    return BenchError(f"template error: {type(exc).__name__}"
                      + (f": {message}" if message else ""), file=at_file, line=at_line)


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
        BenchError: a sandbox violation, an undefined name or any other exception while
            rendering (arithmetic, type, lookup, recursion...: :func:`template_error`).
    """
    try:
        return template.render(**context)
    except Exception as exc:  # a template is code: any failure is the template's, one line
        raise template_error(exc, file or template.filename or template.name
                             or "<template>") from None
