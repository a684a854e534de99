"""The report's caps on model-controlled text: a hostile answer (a 1 MiB argument, thousands
of calls) must not bloat the page (issue 19, item 5). Each field is cut to its limit with a
note of how much more the run's ``results.jsonl`` keeps (:func:`cap_text`).
"""

from __future__ import annotations

import json
from typing import Any, overload

from bench.plural import count
from bench.results import Row

TEXT_LIMIT = 4000  # characters of a raw answer, model text or query
ARGUMENTS_LIMIT = 2000  # characters of one call's arguments (as JSON)
NAME_LIMIT = 120  # characters of a tool name
ERROR_LIMIT = 500  # characters of a parse error or one argument error
LIST_LIMIT = 20  # calls and argument errors shown per row


@overload
def _cut(text: str, limit: int = TEXT_LIMIT) -> str: ...
@overload
def _cut(text: object, limit: int = TEXT_LIMIT) -> str | None: ...
def _cut(text: object, limit: int = TEXT_LIMIT) -> str | None:
    """``text`` (JSON for non-strings; None stays None) cut to ``limit`` characters plus a
    note of how many more ``results.jsonl`` holds."""
    if text is None:
        return None
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    more = count(len(text) - limit, "more character")
    return text[:limit] + f"\n[... {more} in results.jsonl]"


def cap_text(value: object, limit: int = TEXT_LIMIT) -> str | None:
    """``value`` as text (JSON for non-strings) cut to ``limit`` characters plus a note of
    how many more ``results.jsonl`` holds; None stays None. For every model-controlled string
    a report shows (tool names, arguments, errors, answers)."""
    return _cut(value, limit)


def _cap_arguments(arguments: Any) -> Any:
    """A call's arguments as the page shows them: the object itself when its JSON is at most
    :data:`ARGUMENTS_LIMIT` characters, else that JSON cut (a string)."""
    if isinstance(arguments, str) or arguments is None:
        return _cut(arguments, ARGUMENTS_LIMIT)
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return arguments if len(text) <= ARGUMENTS_LIMIT else _cut(text, ARGUMENTS_LIMIT)


def _cap_list(items: Any, limit: int = LIST_LIMIT) -> tuple[list[Any], int]:
    """(the first ``limit`` items of a list, how many were left out); not a list: ([], 0)."""
    if not isinstance(items, list):
        return [], 0
    return items[:limit], max(0, len(items) - limit)


def _capped_calls(row: Row) -> list[list[Any]]:
    """``[[name, arguments], ...]`` of a row's parsed calls, every part capped; a last entry
    says how many calls were left out."""
    calls, more = _cap_list(row.calls())
    shown = [[_name(c.name),
              _cap_arguments(c.arguments) if c.valid
              else _cut(c.raw_arguments, ARGUMENTS_LIMIT)]
             for c in calls]
    if more:
        shown.append([f"[... {count(more, 'more call')} in results.jsonl]", ""])
    return shown


def _name(name: Any) -> str | None:
    """A tool name as the report shows it: text cut to :data:`NAME_LIMIT`; None stays None."""
    return None if name is None else _cut(str(name), NAME_LIMIT)


def _capped_errors(errors: Any) -> list[str]:
    """A row's argument errors as text, each cut to :data:`ERROR_LIMIT`, at most
    :data:`LIST_LIMIT` of them (a last line says how many more)."""
    shown, more = _cap_list(errors)
    lines = [_cut(str(e), ERROR_LIMIT) or "" for e in shown]
    if more:
        lines.append(f"[... {count(more, 'more argument error')} in results.jsonl]")
    return lines
