"""The contract's foundation: the schema version, the migration of older records, the models'
shared configuration and the one-line form of a validation error."""

from __future__ import annotations

from typing import overload

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

SCHEMA_VERSION = 1
"""The version of :class:`Row`, :class:`Manifest` and :class:`TraceRecord` this bench writes
(0: the release before the contract, records without ``schema_version``)."""

JsonObject = dict[str, JsonValue]
"""A JSON object whose contents bench does not fix: a record of another part's own shape
(a provider's ``describe()``, a run's configuration as stored, to be migrated on resume).
Validated as JSON (objects, arrays, strings, numbers, booleans, null), never coerced."""

# allow_inf_nan=False: a hand-edited Infinity passed ``ge=0`` and broke every JSON writer
# downstream (the report's page data); bench itself writes non-finite numbers as null
_CONFIG = ConfigDict(extra="allow", strict=True, frozen=False, populate_by_name=True,
                     allow_inf_nan=False)


class SchemaTooNew(ValueError):
    """A record written by a newer bench (its ``schema_version`` is above
    :data:`SCHEMA_VERSION`)."""


@overload
def migrate(data: dict[str, object], kind: str) -> dict[str, object]: ...


@overload
def migrate(data: object, kind: str) -> object: ...


def migrate(data: object, kind: str) -> object:
    """``data`` (a decoded record) in the current shape, for the models' before-validators.

    Version 0 (no ``schema_version``: the release before the contract) has the current fields
    untyped; its rows may name execution metrics ``exec_success`` / ``exec_match`` (an early
    executor), which become ``execution_success`` / ``execution_match``.

    Args:
        data: the decoded JSON value (anything; non-objects are left to validation).
        kind: ``row``, ``manifest`` or ``trace`` (only rows carry renamed metrics).

    Raises:
        SchemaTooNew: ``schema_version`` is above :data:`SCHEMA_VERSION`.
        ValueError: ``schema_version`` is negative.
    """
    if not isinstance(data, dict):
        return data
    version = data.get("schema_version", 0)
    if type(version) is int and version > SCHEMA_VERSION:
        raise SchemaTooNew(f"written by a newer bench (schema_version {version}; this bench "
                           f"reads up to {SCHEMA_VERSION}): upgrade bench to read it")
    if type(version) is int and version < 0:
        raise ValueError(f"schema_version {version} is not a version (0 to {SCHEMA_VERSION})")
    if version == SCHEMA_VERSION:
        return data
    if type(version) is int and version == 0:  # absent, or written out as 0 by hand
        data = {"schema_version": SCHEMA_VERSION,
                **{k: v for k, v in data.items() if k != "schema_version"}}
        metrics = data.get("metrics") if kind == "row" else None
        if isinstance(metrics, dict) and ("exec_success" in metrics or "exec_match" in metrics):
            renamed = dict(metrics)
            for old, new in (("exec_success", "execution_success"),
                             ("exec_match", "execution_match")):
                if old in renamed:
                    value = renamed.pop(old)
                    renamed.setdefault(new, value)
            data["metrics"] = renamed
    return data


class _Record(BaseModel):
    """Base of the contract's models: strict types, unknown fields kept."""

    model_config = _CONFIG


def validation_problem(exc: ValidationError) -> tuple[str | None, str]:
    """(dotted field path, a few words) of the first error of ``exc``, for one-line messages
    such as ``corrupt result row: missing field`` with ``field=case_id``."""
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in error.get("loc", ())) or None
    kind = error.get("type", "")
    if kind == "missing":
        return where, "missing field"
    if kind == "value_error":
        message = str(error.get("ctx", {}).get("error") or error.get("msg"))
        return where, message.removeprefix("Value error, ")
    return where, str(error.get("msg", kind)).lower().replace("input should be",
                                                               "must be")
