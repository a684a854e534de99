"""One request through a vendor's Stainless-generated async SDK (``openai``, ``anthropic``):
:func:`send_with_sdk`, the ``send`` of the HTTP adapters built on them (see the CONTRACT in
:mod:`bench.providers.base`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Union

from bench.providers.errors import error_from_exception
from bench.providers.headers import request_id_from
from bench.providers.replies import UnreadableReply, reply_json
from bench.redact import one_line

if TYPE_CHECKING:  # the SDKs load when a provider starts
    from anthropic.resources.messages import AsyncMessages
    from openai.resources.chat.completions import AsyncCompletions
    from openai.resources.responses import AsyncResponses

#: The Stainless-generated async resources :func:`send_with_sdk` drives.
SDKResource = Union["AsyncCompletions", "AsyncResponses", "AsyncMessages"]


async def send_with_sdk(resource: SDKResource, body: dict[str, Any],
                        assemble: Callable[[Iterable[dict[str, Any]]], dict[str, Any]]
                        ) -> tuple[object, Mapping[str, str]]:
    """POST ``body`` through a Stainless-generated async SDK resource (``openai`` /
    ``anthropic``: ``client.chat.completions``, ``client.responses``, ``client.messages`` of
    ``AsyncOpenAI`` / ``AsyncAnthropic``).

    Non-streamed: ``resource.with_raw_response.create`` and the raw JSON body. Streamed
    (``body["stream"]``): the events' dicts joined by ``assemble`` into one body.

    Raises:
        UnreadableReply: a 200 body (or a streamed event) that is not JSON (transient).
        ProviderError: any other SDK or transport failure, classified.
    """
    try:
        if body.get("stream"):
            stream = await resource.create(**body)
            async with stream:
                try:
                    events = [event.to_dict() async for event in stream]
                    assembled = assemble(events)
                except (ValueError, RecursionError, TypeError, AttributeError, KeyError,
                        IndexError) as exc:
                    # The SDK decodes each event's data with json.loads (ValueError); the
                    # others: an event of unexpected shape. Like an unreadable 200 body.
                    raise UnreadableReply(
                        f"a streamed event could not be read ({type(exc).__name__}: "
                        f"{one_line(str(exc), 200)})",
                        request_id=request_id_from(stream.response.headers)) from None
            return assembled, stream.response.headers
        raw = await resource.with_raw_response.create(**body)
        return reply_json(raw.http_response.content,
                          request_id=request_id_from(raw.headers)), raw.headers
    except Exception as exc:  # noqa: BLE001 - every failure is classified, none swallowed
        raise error_from_exception(exc) from exc
