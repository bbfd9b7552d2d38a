"""A time as a chat user reads it. Results carry datetimes; the renderers
that show a local time (Telegram's replies, Discord's button notes) use this."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from core.config import KeptConfig


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
