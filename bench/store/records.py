"""The stored records (:class:`bench.results.Row`, :class:`bench.results.Manifest`) as lines
and objects: their required fields, the line a row is written as (stamped, redacted), the
key a row must have, and the one-line problem of a record that does not fit the contract."""

from __future__ import annotations

from pydantic import ValidationError

from bench.jsonl import line_bytes, loads
from bench.redact import ROW_FREE_TEXT, redact_fields
from bench.results import Manifest, Row, validation_problem

# The fields every result row and manifest must have (present, possibly null): the
# required fields of bench.results.Row and bench.results.Manifest.
ROW_FIELDS = tuple(name for name, info in Row.model_fields.items() if info.is_required())
MANIFEST_FIELDS = tuple(name for name, info in Manifest.model_fields.items()
                        if info.is_required())


def stored_problem(exc: ValidationError, what: str) -> tuple[str | None, str]:
    """(field, message) of a failed validation of a stored ``what`` (``result row``,
    ``manifest``): a record of a newer schema says so, anything else is corrupt."""
    field, problem = validation_problem(exc)
    if problem.startswith("written by a newer bench"):
        return field, f"{what} {problem}"
    return field, f"corrupt {what}: {problem}"


def whole_row(line: bytes) -> bool:
    """True when ``line`` (a last line without its newline) is a whole result row that fits
    the contract (:class:`bench.results.Row`) rather than one cut by an interrupted write."""
    try:
        data = loads(line)
        if not isinstance(data, dict):
            return False
        Row.model_validate(data)
    except (ValueError, RecursionError):  # JSON, UTF-8 and validation errors included
        return False
    return True


def row_line(row: Row) -> bytes:
    """The ``results.jsonl`` line of ``row`` (:func:`stamped`): secrets in its free text (the
    provider's answer, error texts) redacted, identifiers (key, case, toolset, variant,
    provider) and data (labels, parsed calls) written as they are
    (:data:`bench.redact.ROW_FREE_TEXT`), so that resume, merge and replay read what ran.

    Raises:
        TypeError: ``row`` is not a :class:`bench.results.Row` (a dict is built into one
            first: ``Row(...)``, or ``Row.model_validate`` for JSON read from elsewhere).
    """
    if not isinstance(row, Row):
        raise TypeError(f"a result row is a bench.results.Row, not {type(row).__name__}")
    return line_bytes(redact_fields(stamped(row), ROW_FREE_TEXT))


def stamped(record: Row | Manifest) -> dict[str, object]:
    """The JSON object to write for ``record``: its dump, ``schema_version`` first
    (:meth:`bench.results.Row.to_json_dict`, :meth:`bench.results.Manifest.to_json_dict`)."""
    return record.to_json_dict()


def key_of(row: Row) -> str:
    """The key a row's case, variant, provider and trial make (what its ``key`` must be)."""
    return f"{row.case_id}|{row.variant}|{row.provider}|{row.trial}"
