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
from typing import Any, NamedTuple

from bench.jsonl import dumps
from bench.models import ToolCall
from bench.parse import ParsedAnswer
from bench.results import RowCall, RowParsed, StepCall

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


class Capped(NamedTuple):
    """A value as a row stores it: ``value`` (whole, or a text's head and tail) and
    ``chars``, the full length of the text it was cut from (None: stored whole)."""

    value: object
    chars: int | None


def capped(text: str) -> tuple[str, int | None]:
    """``(text as stored, its full length when stored cut, else None)``
    (:meth:`CappedText.record`)."""
    kept = CappedText()
    kept.write(text)
    record = kept.record("text")
    chars = record.get("text_chars")
    return str(record["text"]), chars if isinstance(chars, int) else None


def capped_json(value: object) -> Capped:
    """A JSON value as a row stores it: whole when its JSON text (compact,
    :func:`bench.jsonl.dumps`; a string: itself) has at most :data:`STORED_CHARS`
    characters, else that text cut (:func:`capped`) with its full length."""
    text = value if isinstance(value, str) else dumps(value)
    return Capped(value, None) if len(text) <= STORED_CHARS else Capped(*capped(text))


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


class AnswerRecord(NamedTuple):
    """A step's record of the model's answer (:func:`answer_record`): the fields of its
    :class:`bench.results.EpisodeStep` (``text_chars``: None when ``text`` is whole)."""

    text: str
    text_chars: int | None
    calls: list[StepCall]
    parsed: RowParsed
    stored_cut: bool


def answer_record(parsed: ParsedAnswer, calls: list[ToolCall]) -> AnswerRecord:
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
        arguments = capped_json(call.arguments)
        entry = StepCall(id=call.id, name=call.name, arguments=arguments.value,
                         valid=call.valid)
        if arguments.chars is not None:
            entry.arguments_chars = arguments.chars
        if not call.valid:
            raw = capped_json(call.raw_arguments)
            entry.raw_arguments = raw.value
            if raw.chars is not None:
                entry.raw_arguments_chars = raw.chars
        shown.append(entry)
    text, text_chars = capped(parsed.text or "")
    cut = text_chars is not None
    kept_calls = []
    for i, call in enumerate(parsed.calls):
        given = shown[i].model_fields_set if i < len(shown) else set()
        kept = RowCall(id=call.id, name=call.name, notes=call.notes, valid=call.valid)
        extra: dict[str, object] = {} if call.signature is None else {
            "signature": call.signature}
        for key, value in (("arguments", call.arguments),
                           ("raw_arguments", call.raw_arguments)):
            if f"{key}_chars" in given or (key not in given and "arguments_chars" in given):
                cut = True  # stored cut in calls (a valid call's raw text: its arguments)
                continue
            if key not in given:  # only parsed holds it
                value, chars = capped_json(value)
                if chars is not None:
                    extra[f"{key}_chars"] = chars
                    cut = True
            setattr(kept, key, value)  # arguments or raw_arguments: any JSON value
        kept_calls.append(kept.model_copy(update=extra) if extra else kept)
    stored_parsed = RowParsed(calls=kept_calls, declined=parsed.declined, error=parsed.error,
                              error_code=parsed.error_code)
    if text_chars is None:  # else text holds it, cut
        stored_parsed.text = parsed.text
    return AnswerRecord(text, text_chars, shown, stored_parsed, cut)
