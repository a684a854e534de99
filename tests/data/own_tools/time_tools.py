"""Two time tools worded after the reference MCP time server (``mcp-server-time``): the
fixture of the regression gate's per-case rule (tests/gate/test_gate.py). Its ``timezone``
parameter carries the hint a model needs, an IANA name with examples."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"Invalid timezone: {name}") from None


def get_current_time(timezone: str) -> dict:
    """Get current time in a specific timezone.

    Use it when the user asks what time it is somewhere.

    Args:
        timezone: IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use 'UTC'
            as local timezone if no timezone provided by the user.
    """
    now = datetime.now(_zone(timezone))
    return {"timezone": timezone, "datetime": now.isoformat(timespec="seconds")}


def convert_time(source_timezone: str, time: str, target_timezone: str) -> dict:
    """Convert time between timezones.

    Use it when the user gives a time in one place and wants it in another.

    Args:
        source_timezone: Source IANA timezone name (e.g., 'America/New_York',
            'Europe/London').
        time: Time to convert in 24-hour format (HH:MM).
        target_timezone: Target IANA timezone name (e.g., 'Asia/Tokyo', 'America/San_Francisco').
    """
    hour, minute = (int(part) for part in time.split(":"))
    start = datetime.now(_zone(source_timezone)).replace(hour=hour, minute=minute)
    return {"time": start.astimezone(_zone(target_timezone)).strftime("%H:%M")}
