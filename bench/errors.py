"""Errors that bench reports to users as one line, never as a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.redact import redact

#: The longest message bench prints on one line (characters): longer ones are cut by
#: :func:`shorten_message`. A few lines of a terminal: room for a file, a field, a provider's
#: error and the fix, not for a 100 KB exception text from a provider or user code.
MESSAGE_CHARS = 600
_TAIL_CHARS = 150  # the end kept of a cut message: where bench says how to go on


#: C0 and C1 control characters but tab and line breaks: an ESC sequence in a server's tool
#: name or error could clear or retitle the terminal, or write its clipboard (ECMA-48).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with its control characters (:data:`_CONTROL`) shown as ``\\x1b``-style
    escapes, for text bench did not write that reaches a terminal as plain text."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


#: Unicode's bidirectional formatting characters (UAX #9: the explicit embeddings, overrides
#: and isolates, and the implicit marks): in text bench did not write they reorder what a
#: reader sees on a terminal (the "Trojan Source" attack, CVE-2021-42574).
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible_text(text: str) -> str:
    """``text`` with its control characters (:func:`terminal_safe`) and its bidirectional
    formatting characters (:data:`_BIDI`, as ``\\u202e``) escaped: for model-written or
    imported text (a generated query, a drafted description) shown on a terminal for a person
    to judge."""
    return _BIDI.sub(lambda m: f"\\u{ord(m.group(0)):04x}", terminal_safe(text))


def shorten_message(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` with its secrets redacted (:func:`bench.redact.redact`, before the cut, which
    would leave a split secret's head unrecognised), on one line (line breaks as spaces), cut
    to about ``limit`` characters when longer: its head, ``… [N characters; cut] …`` with
    ``N`` its length, and its last :data:`_TAIL_CHARS` characters (a message ends with what
    to do next, e.g. ``continue with: bench run --resume <run>``).

    Every message bench prints that may hold text it did not write (an exception's message
    from a provider, an SDK or a function provider's code) goes through this function; its
    control characters are escaped (:func:`terminal_safe`).

    Args:
        text: the message.
        limit: the longest message kept whole, in characters.
    """
    text = terminal_safe(redact(text))
    text = " ".join(text.splitlines()) if "\n" in text or "\r" in text else text
    if len(text) <= limit:
        return text
    tail = min(_TAIL_CHARS, limit // 4)
    return (f"{text[:limit - tail].rstrip()} … [{len(text):,} characters; cut] … "
            f"{text[-tail:].lstrip()}")


class BenchError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name.

    The CLI prints ``str(error)`` on one line and exits with ``exit_code`` (2 by default).

    Args:
        message: what is wrong and, where possible, how to fix it.
        file: the file at fault (str or Path), if any.
        line: 1-based line number in ``file``, if known.
        field: dotted path of the offending field (e.g. ``expected.calls.0.name``), if known.
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self.format())

    def format(self) -> str:
        """Return ``file:line: field: message`` with the parts that are known."""
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        parts = [p for p in (where, f"field '{self.field}'" if self.field else "") if p]
        prefix = ": ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else self.message
        return " ".join(text.split("\n"))



class RunIncomplete(BenchError):
    """A run that ended with rows left to do that a resume can finish: requests that failed
    after every retry, or batch requests the batch answered with an error. The manifest says
    ``partial``; the CLI prints the table of the rows done, this message, and exits 3."""

    exit_code = 3

class FieldValueError(ValueError):
    """Raised by a pydantic validator about one part of the value it validates, so that the
    error names that part: :func:`pydantic_error_field` appends ``path`` to pydantic's own
    location (a model validator's is the model itself; a field validator's, the field).

    Args:
        path: dotted path below the validated value, as written in the file
            (``required_calls.0.after.1``).
        message: what is wrong (without the path).
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def pydantic_error_field(exc: Exception) -> tuple[str | None, str]:
    """Return (dotted field path, message) of the first error of a pydantic ``ValidationError``
    (a :class:`FieldValueError`'s path appended to the location, its message without
    pydantic's ``Value error,`` prefix)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None, str(exc)
    first = errors()[0]
    loc = [str(p) for p in first.get("loc", ())]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldValueError):
        return ".".join([*loc, cause.path]), cause.message
    return ".".join(loc) or None, str(first.get("msg", str(exc))).removeprefix("Value error, ")


def read_text_file(path: Path) -> str:
    """Read a UTF-8 text file for bench (datasets, specs, imports).

    Raises:
        BenchError: the file is missing, unreadable, or not UTF-8 (naming the file).
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BenchError("file not found", file=path) from None
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text ({exc.reason})", file=path) from None


def json_line(text: str, *, file: str | Path, line: int) -> Any:
    """Parse one line of a JSON-lines file bench reads.

    Raises:
        BenchError: not JSON (the decoder's message and column), or nested deeper than the
            decoder's limit; naming ``file`` and ``line``.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"malformed JSON: {exc.msg} (column {exc.colno})", file=file,
                         line=line) from None
    except RecursionError:
        raise BenchError("JSON nested deeper than the decoder's limit", file=file,
                         line=line) from None
    except ValueError as exc:  # e.g. an integer longer than sys.get_int_max_str_digits()
        raise BenchError(f"malformed JSON: {str(exc).split(';')[0]}", file=file,
                         line=line) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity)")


def json_document(text: str, *, file: str | Path, what: str = "JSON",
                  finite: bool = False) -> Any:
    """Parse a whole JSON document bench reads (a tools file, a lock, a baseline, a
    manifest).

    Args:
        text: the file's text.
        file: the file, named in errors.
        what: what the file is, for the message (e.g. ``"description lock"``).
        finite: refuse ``NaN``, ``Infinity`` and ``-Infinity``, which Python's decoder accepts
            but JSON (RFC 8259 section 6) does not, and which no model API takes.

    Raises:
        BenchError: not JSON (the decoder's message, line and column), nested deeper than
            the decoder's limit, an integer longer than Python converts
            (``sys.get_int_max_str_digits()``), or (``finite``) a non-finite number; one line
            naming ``file``.
    """
    try:
        return json.loads(text, parse_constant=_no_constant) if finite else json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"{what} is not valid JSON: {exc.msg} (column {exc.colno})",
                         file=file, line=exc.lineno) from None
    except RecursionError:
        raise BenchError(f"{what} is nested deeper than the JSON decoder's limit",
                         file=file) from None
    except ValueError as exc:  # a non-finite constant, or an integer too long to convert
        raise BenchError(f"{what} is not valid JSON: {str(exc).split(';')[0]}",
                         file=file) from None
