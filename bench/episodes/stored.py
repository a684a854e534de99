"""What an episode row keeps of a long text: the one cap for every text a row stores.

A result sent back, an answer's text, a call's arguments, a state check's rows: each is
stored whole up to :data:`STORED_CHARS` characters; a longer one keeps its first and last
halves of that, joined by a note of how many characters were cut, and its full length in
``<field>_chars``. Scores are computed on the full values before they are stored; the model
received them whole. Without the cap one uncapped ``--fault huge`` result (8 MB), one 50 MB
argument (stored three times) or one state check returning 2,000,000 rows made rows of
hundreds of MB (a break-it review of agent episodes).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from bench.jsonl import dumps
from bench.models import ToolCall
from bench.parse import ParsedAnswer

STORED_CHARS = 65_536
"""Characters of one text a row stores whole; a longer one keeps its first and last
``STORED_CHARS // 2`` and its full length."""

_HALF = STORED_CHARS // 2


class CappedText:
    """A text written in pieces, of which only what :data:`STORED_CHARS` allows is kept:
    every piece while the text is that long or shorter, then its first and last
    ``STORED_CHARS // 2`` characters (memory stays about ``STORED_CHARS`` however much is
    written).

    Attributes:
        chars: characters written so far.
    """

    def __init__(self) -> None:
        self.chars = 0
        self._whole: list[str] | None = []  # every piece, until the text outgrows the cap
        self._head = ""
        self._tail: deque[str] = deque()  # the last pieces, at least _HALF characters
        self._tail_chars = 0

    @property
    def cut(self) -> bool:
        """The text is longer than :data:`STORED_CHARS` (only its head and tail are kept)."""
        return self._whole is None

    def write(self, piece: str) -> None:
        """Append ``piece`` to the text."""
        self.chars += len(piece)
        if self._whole is not None:
            self._whole.append(piece)
            if self.chars <= STORED_CHARS:
                return
            text, self._whole = "".join(self._whole), None
            self._head, piece = text[:_HALF], text[-_HALF:]
        self._tail.append(piece[-_HALF:])
        self._tail_chars += len(self._tail[-1])
        while self._tail_chars - len(self._tail[0]) >= _HALF:
            self._tail_chars -= len(self._tail.popleft())

    def record(self, field: str) -> dict[str, Any]:
        """``{field: text}`` when the text is whole, else ``{field: head [... stored cut: n
        characters ...] tail, field + "_chars": full length}``."""
        if self._whole is not None:
            return {field: "".join(self._whole)}
        tail = "".join(self._tail)[-_HALF:]
        return {field: f"{self._head} [... stored cut: {self.chars - 2 * _HALF:,} "
                       f"characters ...] {tail}", f"{field}_chars": self.chars}


def stored(text: str, field: str) -> dict[str, Any]:
    """The row's record of ``text`` under ``field`` (:meth:`CappedText.record`)."""
    capped = CappedText()
    capped.write(text)
    return capped.record(field)


def stored_json(value: object, field: str) -> dict[str, Any]:
    """The row's record of a JSON value under ``field``: ``{field: value}`` when its JSON text
    (compact, :func:`bench.jsonl.dumps`; a string: itself) has at most :data:`STORED_CHARS`
    characters, else that text cut (:func:`stored`) with ``field + "_chars"``."""
    text = value if isinstance(value, str) else dumps(value)
    return {field: value} if len(text) <= STORED_CHARS else stored(text, field)


def answer_record(parsed: ParsedAnswer, calls: list[ToolCall]) -> dict[str, Any]:
    """A step's record of the model's answer: ``text``, ``calls`` (those the loop went on
    with, under the ids it gave them; ``{id, name, arguments, valid}`` and ``raw_arguments``
    when not valid) and ``parsed`` (the answer as replay rebuilds it).

    A value over :data:`bench.episodes.stored.STORED_CHARS` characters (an object: its JSON
    text) is stored once, as its head and tail with ``<field>_chars``: in ``text`` or
    ``calls`` when the step shows it there, and then left out of ``parsed`` (so is a valid
    call's ``raw_arguments`` when its arguments were cut: that text decodes to them); else
    in ``parsed``. The step then gets ``stored_cut: true``, and replay does not answer it:
    its whole answer is no longer in the row.
    """
    shown = []
    for call in calls:
        entry = {"id": call.id, "name": call.name, **stored_json(call.arguments, "arguments"),
                 "valid": call.valid}
        if not call.valid:
            entry.update(stored_json(call.raw_arguments, "raw_arguments"))
        shown.append(entry)
    record: dict[str, Any] = {**stored(parsed.text or "", "text"), "calls": shown}
    dump = parsed.model_dump()
    cut = "text_chars" in record
    if cut:
        del dump["text"]
    for i, kept in enumerate(dump["calls"]):
        entry = shown[i] if i < len(shown) else {}
        for key in ("arguments", "raw_arguments"):
            if f"{key}_chars" in entry or (key not in entry and "arguments_chars" in entry):
                del kept[key]  # stored cut in calls (a valid call's raw text: its arguments)
                cut = True
            elif key not in entry:  # only parsed holds it
                capped = stored_json(kept[key], key)
                kept.update(capped)
                cut = cut or len(capped) > 1
    record["parsed"] = dump
    return {**record, "stored_cut": True} if cut else record
