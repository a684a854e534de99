"""Stored records redacted field by field (:func:`redact_fields`) at the paths that hold free
text (:data:`ROW_FREE_TEXT`, :data:`MANIFEST_FREE_TEXT`, :data:`ANSWER_FREE_TEXT`), and
free text given as JSON-like data (:func:`redact_data`); identifiers, keys, configuration
and data are never touched (:mod:`bench.redact`).
"""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

from bench.jsonl import MAX_DEPTH, TOO_DEEP
from bench.redact.text import MARK, _SECRET_FIELD, _literal_secrets, _redact

#: Paths (``*``: every item of a list) of the free text in a result row
#: (:class:`bench.results.Row`): the provider's answer as received, its prose, and the error
#: of an answer that could not be decoded (a provider's error message included), of the row
#: and of each episode step. The parsed calls are data (replay answers with them).
ROW_FREE_TEXT: tuple[tuple[str, ...], ...] = (
    ("response",), ("parsed", "error"), ("parsed", "text"), ("episode", "final_answer"),
    ("episode", "steps", "*", "error"), ("episode", "steps", "*", "text"),
    ("episode", "steps", "*", "parsed", "error"), ("episode", "steps", "*", "parsed", "text"),
    ("retrieval", "tool_search", "searches", "*", "input"))
#: Paths of the free text in a manifest (:class:`bench.results.Manifest`): the command line,
#: the MCP server's command line in the config (``--execute-mcp 'server --token ...'``: a
#: resume asks for it again when it held a secret, :func:`bench.runner.config.given_mcp_secrets`)
#: and every error text or reason.
MANIFEST_FREE_TEXT: tuple[tuple[str, ...], ...] = (
    ("command",), ("config", "mcp_server", "*"), ("error",), ("request_errors", "*", "error"), ("batch_errors", "*", "error"),
    ("providers_skipped", "*", "reason"), ("providers_paused", "*", "reason"),
    ("cases_skipped", "*", "why"), ("merged_from", "*", "providers_skipped", "*", "reason"))
#: Paths of the free text in a cached answer (:class:`bench.providers.base.ProviderResponse`):
#: the raw answer, the request id, the prose, a decode error and a native tool search's inputs
#: (the model's search text); the parsed calls are the answer itself.
ANSWER_FREE_TEXT: tuple[tuple[str, ...], ...] = (
    ("raw",), ("request_id",), ("parsed", "error"), ("parsed", "text"),
    ("tool_search", "searches", "*", "input"))


T = TypeVar("T")


def _redact_value(value: T, literals: list[str], depth: int = 0) -> T:
    """``value`` (JSON-like) with :func:`redact` applied to every string in it; a string
    field named like a secret (``authorization``, ``x-api-key``, ``password``...) becomes
    ``***`` whole. Dict keys are kept. The same object when nothing changed. Containers
    nested deeper than :data:`bench.jsonl.MAX_DEPTH` are replaced by its mark, as the writer
    stores them (a 1,200-level answer overflowed Python's recursion limit here)."""
    # the ignores below: the result keeps the value's JSON shape (T), which the checker
    # cannot follow through the isinstance tests; a too-deep container becomes the text mark
    if depth >= MAX_DEPTH and isinstance(value, (dict, list, tuple)):
        return TOO_DEEP  # type: ignore[return-value]
    if isinstance(value, str):
        return _redact(value, literals)  # type: ignore[return-value]
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and isinstance(item, str) and item and item != MARK \
                    and _SECRET_FIELD.fullmatch(key):
                new: Any = MARK
            else:
                new = _redact_value(item, literals, depth + 1)
            changed = changed or new is not item
            out[key] = new
        return out if changed else value  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        items = [_redact_value(item, literals, depth + 1) for item in value]
        if any(new is not old for new, old in zip(items, value)):
            return items  # type: ignore[return-value]
    return value


def redact_data(value: T) -> T:
    """Free text given as JSON-like data (a raw answer, a list of arguments): every string
    redacted by :func:`redact`, string fields with a secret's name (``x-api-key``...)
    replaced whole; dict keys kept. The same object when nothing changed."""
    return _redact_value(value, _literal_secrets())


def _at(value: Any, path: tuple[str, ...], literals: list[str]) -> Any:
    """``value`` with the free text at ``path`` (``*``: every list item) redacted."""
    if not path:
        return _redact_value(value, literals)
    head, rest = path[0], path[1:]
    if head == "*":
        if not isinstance(value, list):
            return value
        items = [_at(item, rest, literals) for item in value]
        return items if any(new is not old for new, old in zip(items, value)) else value
    if not isinstance(value, Mapping) or head not in value:
        return value
    inner = _at(value[head], rest, literals)
    return value if inner is value[head] else {**value, head: inner}


def redact_fields(record: Mapping[str, Any],
                  paths: tuple[tuple[str, ...], ...]) -> Mapping[str, Any]:
    """``record`` (a row, manifest or cached answer as a JSON dict) with the free text at
    ``paths`` (:data:`ROW_FREE_TEXT`, :data:`MANIFEST_FREE_TEXT`, :data:`ANSWER_FREE_TEXT`)
    redacted by :func:`redact_data`; every other field (identifiers, keys, config, data) is
    kept as it is. ``record`` itself when nothing changed, else a copy (never changed in
    place)."""
    literals = _literal_secrets()
    for path in paths:
        record = _at(record, path, literals)
    return record
