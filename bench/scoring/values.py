"""Whether a sent value is acceptable: the label's acceptable-values lists (literals,
``$regex``, ``$any``) compared without coercion, and per-argument correctness of a call.

A value the model sends that equals its parameter's schema ``default`` is the same call as the
parameter left out, so it is right wherever leaving it out is (the label lists ``null``, or
does not list the parameter), besides wherever the label lists the value itself. Sources:
JSON Schema's ``default`` is "a default JSON value associated with a particular schema" (JSON
Schema Validation 2020-12, section 9.2), the value a tool takes when the argument is absent
(pydantic, and so the MCP SDK's and bench's Python tools, fill it in); BFCL's possible answers
say the same by listing the default beside ``""`` ("may be omitted"), e.g. ``"year": ["",
2022]`` for a ``year`` whose default is 2022 (gorilla repository, ``possible_answer/
BFCL_v4_simple_python.json``, simple_python_290; all 11 answers of ``../shared/bfcl-sample``
that accept ``""`` for a parameter with a default list the default too). BFCL's own checker (:mod:`bench.scoring.bfcl_checker`, the ``bfcl_valid`` metric)
reads the possible answer only and is left as BFCL wrote it. The converse does not hold: a
label that lists the default without ``null`` still needs it sent, as BFCL's checker does
(simple_python_120: ``equal_variance`` default true, answer ``[true]``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Mapping, Sequence

import regex

from bench.models import ExpectedCall, ToolCall


def _numbers_equal(a: object, b: object) -> bool:
    return (isinstance(a, (int, float)) and isinstance(b, (int, float))
            and not isinstance(a, bool) and not isinstance(b, bool)
            and math.isclose(a, b, rel_tol=0, abs_tol=1e-9))


def value_equal(got: object, want: object) -> bool:
    """Deep equality where ``1 == 1.0`` but ``True != 1`` and ``"1" != 1`` (no coercion)."""
    if _numbers_equal(got, want):
        return True
    if type(got) is not type(want):
        return False
    if isinstance(want, dict) and isinstance(got, dict):  # same type, so both or neither
        return got.keys() == want.keys() and all(value_equal(got[k], want[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(value_equal(g, w) for g, w in zip(got, want))
    return got == want


# Seconds a label's ``$regex`` may run on one value. The value is model output (untrusted),
# and a backtracking pattern such as ``^(a|a)+$`` would take exponential time on it.
REGEX_TIMEOUT_S = 0.1


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def regex_matches(pattern: str, text: str) -> bool:
    """``re.search`` semantics through the ``regex`` module (same syntax), stopped after
    :data:`REGEX_TIMEOUT_S` seconds; a search that runs out of time counts as no match."""
    try:
        return _regex(pattern).search(text, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        return False


def value_acceptable(got: object, acceptable: Sequence[object]) -> bool:
    """True when a sent value matches one entry of the label's acceptable-values list.

    Entries: literals (compared by :func:`value_equal`), ``{"$regex": p}`` (``re.search`` on
    a string value, time-limited: :func:`regex_matches`), ``{"$any": true}``. ``None`` entries mean "may be omitted" and never match
    a sent value.
    """
    for want in acceptable:
        if want is None:
            continue
        if isinstance(want, dict) and "$regex" in want:
            if isinstance(got, str) and regex_matches(want["$regex"], got):
                return True
        elif isinstance(want, dict) and "$any" in want:
            return True
        elif value_equal(got, want):
            return True
    return False


def schema_defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``default`` of each top-level property of a tool's input schema that declares a
    non-null one (``{"per_page": 30}``); {} for a schema without properties."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {name: spec["default"] for name, spec in properties.items()
            if isinstance(spec, Mapping) and spec.get("default") is not None}


def listed_argument_acceptable(name: str, sent: Mapping[str, object],
                               acceptable: Sequence[object],
                               defaults: Mapping[str, Any] | None = None) -> bool:
    """Whether a call's argument ``name``, which the label lists with ``acceptable``, is
    right: sent with an acceptable value (:func:`value_acceptable`), or omitted where the list
    holds ``None``, a sent value equal to the parameter's schema default counting as omitted
    (module docstring). The one rule of both single-answer scoring (:func:`argument_results`)
    and episodes (:func:`bench.scoring.episodes.label_matches`).

    Args:
        name: the argument.
        sent: the call's arguments without the ``null`` ones (a sent ``null`` is omitted).
        acceptable: the label's acceptable values of ``name`` (``None``: may be omitted).
        defaults: parameter -> schema default of the called tool (:func:`schema_defaults`;
            None: no defaults).
    """
    if name not in sent:
        return None in acceptable
    return value_acceptable(sent[name], acceptable) or (
        None in acceptable and defaults is not None and name in defaults
        and value_equal(sent[name], defaults[name]))


def argument_results(call: ToolCall, expected: ExpectedCall,
                     defaults: Mapping[str, Any] | None = None) -> dict[str, bool]:
    """Per-argument correctness of one call against one expected call.

    Every argument the label lists is checked (omitted is right only when the list holds
    ``None``); every argument sent that the label does not list is wrong. A sent ``null``
    counts as omitted (the schema-validity metric judges it separately), and so does a sent
    value equal to its parameter's schema default where omitting it is right (module
    docstring).

    Args:
        call: the model's call.
        expected: the label's call of the same tool.
        defaults: parameter -> schema default of the called tool (:func:`schema_defaults`;
            None: no defaults).
    """
    sent = {k: v for k, v in call.arguments.items() if v is not None}
    defaults = defaults or {}
    results: dict[str, bool] = {}
    for name, acceptable in expected.arguments.items():
        results[name] = listed_argument_acceptable(name, sent, acceptable, defaults)
    for name in sent:
        if name not in expected.arguments:
            results[name] = name in defaults and value_equal(sent[name], defaults[name])
    return results
