"""Reading a provider's reply: the JSON body of an HTTP 200 answer, then typed models of the
fields an adapter uses.

Two kinds of bad reply, two outcomes:

- A 200 reply whose body is not JSON (not UTF-8, not JSON, nested past the decoder's limit) is
  a server fault, like a 5xx: :func:`reply_json` raises :class:`UnreadableReply`, a
  ``transient`` :class:`~bench.providers.errors.ProviderError` that the runner retries; after
  the last attempt the runner records it as the row's invalid answer (code
  ``unreadable_reply``), never as the end of the run.
- A JSON body of unexpected shape (``message`` a string, ``tool_calls`` a dict, a token count
  ``"12"`` or ``NaN``...) is the row's invalid answer with code ``malformed_reply`` and a
  message naming the field: adapters read replies through subclasses of :class:`ReplyModel`
  declaring exactly the fields they use, and :func:`read_reply` turns a validation error
  into that message (:class:`MalformedReply`).

The models are strict (a string is not an integer, an integer is not a string, ``NaN`` is not
a count) and lenient only where real servers are known to differ: every field may be missing
or ``null``, unknown fields are ignored, and Chat Completions ``content`` may be a list of
parts (:data:`Text`). Each function here works on one body or one decoded chunk, so streaming
code can reuse it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Mapping, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from bench.providers.errors import ProviderError


class UnreadableReply(ProviderError):
    """An HTTP 200 reply whose body could not be decoded as JSON: a transient server fault
    (retried like a 5xx; the runner records the last one as the row's invalid answer).

    Args:
        message: what was wrong with the body (one line).
        request_id: the provider's request id, when known.
    """

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message, error_class="transient", status=200, request_id=request_id)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by the constructor's arguments (sender processes send it back as is)."""
        return _unreadable, (self.detail, self.request_id)


def _unreadable(message: str, request_id: str | None) -> UnreadableReply:
    return UnreadableReply(message, request_id=request_id)


def reply_json(content: bytes | str, *, request_id: str | None = None) -> object:
    """The JSON value of a 200 reply's body.

    Args:
        content: the body as received (bytes; str when a client already decoded it).
        request_id: the provider's request id, for the error.

    Raises:
        UnreadableReply: the body is not UTF-8, not JSON, or nested deeper than the decoder's
            recursion limit.
    """
    try:
        text = content.decode("utf-8-sig") if isinstance(content, (bytes, bytearray)) \
            else content
    except UnicodeDecodeError as exc:
        raise UnreadableReply(f"HTTP 200 reply body is not UTF-8 (byte {exc.start} of "
                              f"{len(content)})", request_id=request_id) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise UnreadableReply("HTTP 200 reply body is JSON nested deeper than the decoder's "
                              "limit", request_id=request_id) from None
    except ValueError as exc:
        where = f" ({exc.msg} at line {exc.lineno} column {exc.colno})" \
            if isinstance(exc, json.JSONDecodeError) else ""
        start = text[:40].encode("unicode_escape").decode("ascii") if text else ""
        raise UnreadableReply(f"HTTP 200 reply body is not JSON{where}"
                              + (f", starting {start!r}" if start else ", empty"),
                              request_id=request_id) from None


class ReplyModel(BaseModel):
    """Base of the typed reply models: strict types, unknown fields ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


def _text(value: Any) -> Any:
    """Chat Completions ``content``: a string, ``null``, or a list of content parts
    (``{"type": "text", "text": ...}``; other part types, e.g. ``thinking``, are not prose
    and are skipped). Real OpenAI-compatible servers send lists of parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for index, part in enumerate(value):
            if not isinstance(part, dict):
                raise ValueError(f"part [{index}]: expected an object, got {json_type(part)}")
            kind, text = part.get("type"), part.get("text")
            if kind in (None, "text", "output_text"):
                if not isinstance(text, str):
                    raise ValueError(f"part [{index}].text: expected a string, got "
                                     f"{json_type(text)}")
                texts.append(text)
        return "".join(texts)
    raise ValueError(f"expected a string, a list of parts or null, got {json_type(value)}")


# Prose: a string, null, or a list of text parts (joined).
Text = Annotated[str | None, BeforeValidator(_text)]


class MalformedReply(Exception):
    """A reply body of unexpected shape; ``str(exc)`` names the field, e.g.
    ``choices[0].message: expected an object, got string``."""


M = TypeVar("M", bound=ReplyModel)


def read_reply(model: type[M], value: object, path: str = "") -> M:
    """``value`` validated as ``model``.

    Args:
        model: a :class:`ReplyModel` subclass.
        value: decoded JSON (the body, or a part of it).
        path: where ``value`` sits in the body (``"output[2]"``), prefixed to field names.

    Raises:
        MalformedReply: the value does not fit the model; the message names the first bad
            field and what it is.
    """
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise MalformedReply(describe_error(exc, path)) from None
    except RecursionError:
        raise MalformedReply(f"{path or 'the reply'}: nested too deeply") from None


_EXPECTED = {"dict_type": "an object", "model_type": "an object", "list_type": "a list",
             "string_type": "a string", "int_type": "an integer", "bool_type": "a boolean",
             "float_type": "a number", "int_from_float": "an integer"}


def json_type(value: object) -> str:
    """The JSON type name of a decoded value (``object``, ``array``, ``string``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        if value != value:
            return "NaN"
        return "number" if abs(value) != float("inf") else \
            ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """``("choices", 0, "message")`` -> ``"choices[0].message"`` (after ``prefix``)."""
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def describe_error(exc: ValidationError, prefix: str = "") -> str:
    """One line naming the first invalid field of a reply and what it holds instead."""
    error = exc.errors(include_url=False)[0]
    where = field_path(tuple(error["loc"]), prefix) or "the reply"
    expected = _EXPECTED.get(error["type"])
    if expected:
        return f"{where}: expected {expected}, got {json_type(error.get('input'))}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}"[:300]


def at(items: object, path: str) -> list[dict[str, Any]]:
    """A list of objects at ``path`` (``None`` -> ``[]``), before each is read by its own
    model (content blocks and output items of several types).

    Raises:
        MalformedReply: not a list, or an entry that is not an object.
    """
    if items is None:
        return []
    if not isinstance(items, list):
        raise MalformedReply(f"{path}: expected a list, got {json_type(items)}")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise MalformedReply(f"{path}[{index}]: expected an object, got {json_type(item)}")
    return items


def body_object(body: object) -> Mapping[str, Any]:
    """The reply body as an object.

    Raises:
        MalformedReply: the body is another JSON value.
    """
    if not isinstance(body, Mapping):
        raise MalformedReply(f"the reply: expected an object, got {json_type(body)}")
    return body
