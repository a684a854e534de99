"""What the ``bench`` commands share to read their options: the one parser of
comma-separated, repeatable list options (``--variants a,b --variants c``), the maps from a
``bench run`` option to its :class:`bench.runner.RunConfig` field (run settings, tool-space
options, episode factors), and the factor options made from the factor registry."""

from __future__ import annotations

import re
from typing import Annotated, Any, Callable, Optional, Sequence

import typer

from bench.episodes.factors import FACTORS
from bench.errors import BenchError


def split_list(values: Sequence[str] | None, option: str | None = None,
               what: str = "name") -> list[str]:
    """The items of a comma-separated, repeatable option (``--variants a,b --variants c`` ->
    ``["a", "b", "c"]``): each stripped, empty ones dropped, in the order given.

    Args:
        values: the option's values as typer gives them (None: not given).
        option: the option's name (``--variants``) when giving it with no item at all is an
            error; None: such a value is an empty list.
        what: the item's word in that error (``name``, ``value``).

    Raises:
        BenchError: ``option`` given (not None) and ``values`` given with no item
            (``--variants ""``): an empty list would silently mean the default.
    """
    items = [v.strip() for value in values or [] for v in value.split(",") if v.strip()]
    if option is not None and values is not None and not items:
        raise BenchError(f"{option} needs at least one {what} (got "
                         f"{', '.join(map(repr, values))})")
    return items


OPTION_FIELDS = {"provider": "providers", "cases": "case_ids",
                 "request_timeout": "request_timeout_s", "execute_mcp": "mcp_server"}
"""``bench run`` options (parameter names) whose :class:`bench.runner.RunConfig` field has
another name; the tool-space options are in :data:`SPACE_OPTIONS`, the factor options set
``factors.<option>`` (:data:`FACTOR_OPTIONS`)."""

SPACE_OPTIONS = {"tools": "tools", "retriever": "retrievers", "top_k": "top_k",
                 "distractors": "distractors", "always_loaded": "always_loaded"}
"""``bench run``'s tool-space option (parameter name) -> :class:`bench.runner.RunConfig`
field (:mod:`bench.toolspace`)."""

FACTOR_OPTIONS = tuple(FACTORS)
"""``bench run``'s episode factor options (parameter names): one per factor of
:data:`bench.episodes.factors.FACTORS`."""


def option_name(parameter: str) -> str:
    """The command-line option of a parameter name: ``top_k`` -> ``--top-k``."""
    return f"--{parameter.replace('_', '-')}"


def with_factors(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (whose last parameter is ``**factor_values``) with one keyword option per
    episode factor of :data:`bench.episodes.factors.FACTORS` in its signature, as typer reads
    it (``inspect.signature``, then the annotations): ``--<factor>`` takes comma-separated or
    repeated settings and reaches ``factor_values[<factor>]``. A new factor needs no edit
    here (docs/extending.md, "Add an episode factor").
    """
    import inspect

    from bench.episodes.factors import FACTOR_HELP

    signature = inspect.signature(command, eval_str=True)
    fixed = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation=Annotated[Optional[list[str]],
                                                    typer.Option(help=FACTOR_HELP[name])])
             for name in FACTORS]
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*fixed, *added])
    command.__annotations__ = {**{p.name: p.annotation for p in fixed},
                               **{p.name: p.annotation for p in added}, "return": None}
    return command


def _counts(values: Sequence[str] | None, option: str) -> list[int]:
    """Each count of ``values``: ASCII digits only (``str.isdigit`` also takes ``²`` and
    other digits ``int`` refuses), between 1 and :data:`bench.toolspace.space.MAX_TOOLS`
    (checked on the text first, so a number of thousands of digits is not converted)."""
    from bench.toolspace.space import MAX_TOOLS

    out = []
    for item in split_list(values, option, "value"):
        digits = item.lstrip("0")
        if not _DIGITS.fullmatch(item) or not digits:
            raise BenchError(f"{option}: '{_short(item)}' is not a whole number of at least 1")
        if len(digits) > len(str(MAX_TOOLS)) or int(digits) > MAX_TOOLS:
            raise BenchError(f"{option}: '{_short(item)}' is more than {MAX_TOOLS} (the most "
                             "tools a catalog holds)")
        out.append(int(digits))
    return out


_DIGITS = re.compile(r"[0-9]+")


def _short(item: str, limit: int = 40) -> str:
    """``item`` cut to ``limit`` characters for an error line."""
    return item if len(item) <= limit else f"{item[:limit]}... ({len(item)} characters)"


def option_value(name: str, values: Sequence[str] | None) -> Any:
    """The :class:`RunConfig` value of tool-space option ``name`` (a parameter name of
    :data:`SPACE_OPTIONS`) given as comma-separated, repeatable ``values``.

    Raises:
        BenchError: an empty value, or a count that is not a whole number (ASCII digits)
            from 1 to :data:`bench.toolspace.space.MAX_TOOLS` (names the option).
    """
    option = option_name(name)
    if name in ("tools", "top_k"):
        return _counts(values, option)
    return split_list(values, option, "value")


def space_fields(tools: Sequence[str] | None, retriever: Sequence[str] | None,
                 top_k: Sequence[str] | None, distractors: Sequence[str] | None,
                 always_loaded: Sequence[str] | None = None) -> dict[str, Any]:
    """The :class:`RunConfig` fields of the tool-space options given (those not given are
    left out, so the config's defaults hold).

    Raises:
        BenchError: as :func:`option_value`.
    """
    given = {"tools": tools, "retriever": retriever, "top_k": top_k,
             "distractors": distractors, "always_loaded": always_loaded}
    return {SPACE_OPTIONS[name]: option_value(name, values)
            for name, values in given.items() if values is not None}
