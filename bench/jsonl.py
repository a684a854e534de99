"""JSON text for the files bench writes (results.jsonl rows, traces, manifests)."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["canonical_bytes", "dumps", "line_bytes", "loads"]


def dumps(data: Any, indent: int | None = None) -> str:
    """JSON text that is always valid UTF-8: lone surrogates from model output stay escaped.

    Compact lines go through orjson (faster than ``json`` on result rows, which matters at
    hundreds of rows per second); what orjson refuses (lone surrogates, integers
    past 64 bits, non-string keys) falls back to ``json``. orjson writes NaN and infinities
    as ``null``, which keeps every line valid JSON.
    """
    if indent is None:
        try:
            return orjson.dumps(data).decode("utf-8")
        except (orjson.JSONEncodeError, TypeError):
            pass
    text = json.dumps(_finite(data), ensure_ascii=False, indent=indent,
                      separators=None if indent else (",", ":"))
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def line_bytes(data: Any) -> bytes:
    """One JSON Lines line (UTF-8, ending in a newline) of ``data``, as :func:`dumps` writes
    it; bytes, so that a binary file takes it without another encode."""
    try:
        return orjson.dumps(data, option=orjson.OPT_APPEND_NEWLINE)
    except (orjson.JSONEncodeError, TypeError):
        return (dumps(data) + "\n").encode("utf-8")


_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def canonical_bytes(data: Any) -> bytes:
    """Key-sorted compact UTF-8 JSON of ``data`` for hashing and equality keys inside one
    process (values JSON cannot hold become ``str(value)``).

    Not the response cache's key format (:func:`bench.providers.cache.canonical_json`, which
    must stay byte-stable across versions); orjson writes floats in its own shortest form.
    """
    try:
        return orjson.dumps(data, option=_SORTED, default=str)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                          default=str).encode("utf-8", "backslashreplace")


# orjson refuses documents nested deeper than 254 levels; the fallback keeps 200 and replaces
# what lies deeper (a provider's or model's absurd nesting) by this marker, so the row is
# still written (``json`` would exhaust the interpreter's recursion limit near 1,000).
MAX_DEPTH = 200
TOO_DEEP = "(nested deeper than 200 levels: dropped)"


def _finite(data: Any, depth: int = 0) -> Any:
    """``data`` with NaN and infinities replaced by None (as orjson writes them) and
    containers deeper than :data:`MAX_DEPTH` by :data:`TOO_DEEP`."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, (dict, list, tuple)) and depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(data, dict):
        return {k: _finite(v, depth + 1) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v, depth + 1) for v in data]
    return data


# orjson reads integers past 64 bits as floats (precision lost); ``json`` keeps them exact.
# A line holding a run of 19+ digits goes to ``json``. The run is found by mapping every digit
# to "0" and everything else to " " (bytes.translate) and searching for 19 zeros: ~1 us a row
# where the regex ``\d{19}`` took ~15 us (benchmarks/score_100k.py reads 100,000 rows).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_NINETEEN_DIGITS = b"0" * 19


def loads(data: bytes | str) -> Any:
    """Parse one JSON document: orjson first (several times faster on result rows), then
    ``json`` for what orjson refuses and ``json`` accepts (``NaN``/``Infinity`` written by
    older versions, escaped lone surrogates), and for lines with 19+ digit numbers, which
    orjson would turn into floats.

    Raises:
        json.JSONDecodeError: not JSON (the ``json`` module's message and position).
        UnicodeDecodeError: bytes that are not strict UTF-8 (lone surrogates encoded as
            bytes included).
        RecursionError: nesting too deep for ``json``.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if _NINETEEN_DIGITS not in raw.translate(_DIGITS_AS_ZEROS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw.decode("utf-8") if isinstance(data, bytes) else data)
