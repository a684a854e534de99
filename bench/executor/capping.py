"""Cap a tool result to a token budget, keeping its head and tail (BRIEF §7).

An 8 MB result must never reach a model's context. Results are measured in estimated tokens
(UTF-8 bytes / 4, the usual rule of thumb for OpenAI tokenizers on English and JSON; CJK text
is about 1 token per 3 bytes, so the estimate errs high there). A too-large result keeps the
first and last items of its largest list (or the first and last characters of its JSON text)
and says how much was cut and how to get the rest.
"""

from __future__ import annotations

import json
from typing import Any

from bench.plural import count

BYTES_PER_TOKEN = 4
PAGING_HINT = ("narrow the request (filters, aggregation) or page through it with the tool's "
               "page/limit arguments")


def to_json(data: Any) -> str:
    """Compact JSON text of a result (UTF-8 kept). Raises ValueError/TypeError if not JSON."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ceil(UTF-8 bytes / 4)."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def _largest_list(data: Any) -> tuple[list[Any] | None, str | None]:
    """The longest list at the top level or one level down, and its key (None at top)."""
    if isinstance(data, list):
        return data, None
    best: tuple[list[Any] | None, str | None] = (None, None)
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, list) and (best[0] is None or len(value) > len(best[0])):
                best = (value, key)
    return best


def _with_items(data: Any, key: str | None, items: list[Any], note: dict[str, Any]) -> Any:
    if key is None:
        return {"items": items, "truncation": note}
    out = dict(data)
    out[key] = items
    out["truncation"] = note
    return out


def cap_result(data: Any, budget_tokens: int) -> tuple[Any, bool, int]:
    """Fit ``data`` into ``budget_tokens``.

    Args:
        data: a JSON-compatible result.
        budget_tokens: the budget in estimated tokens (>= 64).

    Returns:
        (data or a capped copy, truncated?, estimated tokens of the full result). A capped list
        result keeps its first and last items and gains a ``truncation`` object: ``total_items``,
        ``kept_head``, ``kept_tail``, ``omitted``, ``total_tokens``, ``hint``. Other results
        become ``{"head": ..., "tail": ..., "truncation": ...}`` slices of the JSON text.
    """
    text = to_json(data)
    total = estimate_tokens(text)
    if total <= budget_tokens:
        return data, False, total
    items, key = _largest_list(data)
    if items and len(items) > 2:
        rest = 0 if key is None else estimate_tokens(to_json({**data, key: []}))
        room = budget_tokens - rest - 80  # the truncation note itself
        head = tail = 0
        while head + tail < len(items):  # alternate head/tail while they fit
            index = head if head <= tail else len(items) - 1 - tail
            nxt = estimate_tokens(to_json(items[index])) + 1
            if nxt > room:
                break
            room -= nxt
            if head <= tail:
                head += 1
            else:
                tail += 1
        if head + tail > 0:
            kept = items[:head] + (items[len(items) - tail:] if tail else [])
            note = {"total_items": len(items), "kept_head": head, "kept_tail": tail,
                    "omitted": len(items) - head - tail, "total_tokens": total,
                    "hint": f"items {head + 1}-{len(items) - tail} of {len(items)} were cut; "
                            + PAGING_HINT}
            return _with_items(data, key, kept, note), True, total
    keep_chars = max(32, budget_tokens * BYTES_PER_TOKEN // 2 // 3 - 40)
    note = {"total_chars": len(text), "kept_chars": 2 * keep_chars, "total_tokens": total,
            "hint": f"{count(len(text) - 2 * keep_chars, 'character')} "
                    f"{'was' if len(text) - 2 * keep_chars == 1 else 'were'} cut; " + PAGING_HINT}
    return {"head": text[:keep_chars], "tail": text[-keep_chars:], "truncation": note}, True, total
