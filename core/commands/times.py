"""Times as a chat user reads and types them. Results carry datetimes; the
renderers that show a local time (Telegram's replies, Discord's button
notes) use this, and every surface reads a snooze's duration here."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from core.config.model import KeptConfig, parse_duration


def local_time(moment: datetime, timezone: str) -> str:
    """`Tue 01 Dec 18:00 (Europe/Paris)`; an unknown zone reads as UTC."""
    try:
        zone = ZoneInfo(timezone)
    except (ValueError, KeyError):
        zone, timezone = ZoneInfo("UTC"), "UTC"
    return f"{moment.astimezone(zone):%a %d %b %H:%M} ({timezone})"


def agent_timezone(config: KeptConfig, agent_id: str) -> str:
    """The agent's time zone; UTC for an agent the config no longer has."""
    return config.agent_or_default(agent_id).timezone


def snooze_duration(text: str) -> timedelta:
    """How long a typed or CLI snooze postpones by ("30m", "2h", "3d").

    A bare number is refused: read as seconds it would make the follow-up
    due at once, which is never what "/snooze ID 2" meant."""
    shown = text.strip()
    if not any(ch.isalpha() for ch in shown):
        raise ValueError(f"{shown!r} has no unit: say 2h, 30m or 3d")
    try:
        seconds = parse_duration(shown)
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise ValueError(f"not a duration to snooze by: {shown!r} (say 2h, 30m or 3d)")
    return timedelta(seconds=seconds)
