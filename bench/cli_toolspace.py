"""``bench run``'s tool-space options (``--tools``, ``--retriever``, ``--top-k``,
``--distractors``: :mod:`bench.toolspace`) read into :class:`bench.runner.RunConfig` fields,
and the retrieval signal printed under the run's table (recall@k per variant, no
generation: :mod:`bench.toolspace.signal`)."""

from __future__ import annotations

from typing import Any, Sequence

from bench.errors import BenchError

OPTION_FIELDS = {"tools": "tools", "retriever": "retrievers", "top_k": "top_k",
                 "distractors": "distractors"}
"""``bench run`` option (parameter name) -> :class:`bench.runner.RunConfig` field."""


def _names(values: Sequence[str] | None, option: str) -> list[str]:
    items = [v.strip() for value in values or [] for v in value.split(",") if v.strip()]
    if values is not None and not items:
        raise BenchError(f"{option} needs at least one value (got "
                         f"{', '.join(map(repr, values))})")
    return items


def _counts(values: Sequence[str] | None, option: str) -> list[int]:
    out = []
    for item in _names(values, option):
        if not item.isdigit() or int(item) < 1:
            raise BenchError(f"{option}: '{item}' is not a whole number of at least 1")
        out.append(int(item))
    return out


def option_value(name: str, values: Sequence[str] | None) -> Any:
    """The :class:`RunConfig` value of tool-space option ``name`` (a parameter name of
    :data:`OPTION_FIELDS`) given as comma-separated, repeatable ``values``.

    Raises:
        BenchError: an empty value, or a count that is not a whole number >= 1 (names the
            option).
    """
    option = f"--{name.replace('_', '-')}"
    if name in ("tools", "top_k"):
        return _counts(values, option)
    return _names(values, option)


def space_fields(tools: Sequence[str] | None, retriever: Sequence[str] | None,
                 top_k: Sequence[str] | None, distractors: Sequence[str] | None
                 ) -> dict[str, Any]:
    """The :class:`RunConfig` fields of the tool-space options given (those not given are
    left out, so the config's defaults hold).

    Raises:
        BenchError: as :func:`option_value`.
    """
    given = {"tools": tools, "retriever": retriever, "top_k": top_k,
             "distractors": distractors}
    return {OPTION_FIELDS[name]: option_value(name, values)
            for name, values in given.items() if values is not None}
