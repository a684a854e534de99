"""A small calendar as typed Python functions: the fixture of bench init's Python source and
of the Python execution backend (tests/importers/test_own_tools.py)."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import BaseModel, Field

EVENTS: dict[str, dict] = {
    "EV1": {"id": "EV1", "title": "Standup", "day": "2026-03-02", "room": "Blue"},
    "EV2": {"id": "EV2", "title": "Review", "day": "2026-03-03", "room": "Red"},
}


class Attendee(BaseModel):
    """Someone invited to an event."""

    email: str = Field(description="Their e-mail address.")
    optional: bool = False


def list_events(day: str, room: Literal["Blue", "Red"] | None = None) -> list[dict]:
    """List the events of one day, optionally in one room.

    Use it when the user asks what is planned on a date.

    Args:
        day: The date, YYYY-MM-DD.
        room: Only events in this room.

    Returns:
        The events, each with id, title, day and room.
    """
    return [e for e in EVENTS.values() if e["day"] == day and room in (None, e["room"])]


def create_event(title: str, day: str,
                 attendees: list[Attendee] | None = None,
                 length_min: Annotated[int, Field(ge=15, le=480)] = 30) -> dict:
    """Create an event in the calendar.

    :param title: A short title.
    :param day: The date, YYYY-MM-DD.
    :param attendees: Who is invited.
    :param length_min: Length in minutes.
    """
    if not day[:4].isdigit():
        raise ValueError(f"day must be YYYY-MM-DD, got {day}")
    return {"id": "EV9", "title": title, "day": day, "invited": len(attendees or [])}


def slow_lookup(event_id: str) -> dict:
    """Look an event up in a slow directory (it sleeps 30 s: the timeout test)."""
    time.sleep(30)
    return EVENTS[event_id]


def get_event(event_id: str) -> dict:
    """Get one event by its id (EV followed by digits)."""
    if event_id not in EVENTS:
        raise KeyError(f"no event {event_id}")
    return EVENTS[event_id]


class FindRoom(BaseModel):
    """Find a free meeting room (a schema-only tool: a pydantic model, nothing to run)."""

    seats: int = Field(ge=1, description="People to seat.")


def _private_helper() -> None:
    """Not a tool (private)."""
