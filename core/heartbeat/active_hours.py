"""Quiet hours: when a heartbeat may speak, read in the zone of the member the
follow-up is about when they set one (`/timezone`), else the window's own
`timezone`, else the agent's.

`start` is inclusive, `end` exclusive, "24:00" means the end of the day, and a
window may cross midnight (22:00–07:00). No window means always active.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from core.config.model import ActiveHours


def _zone(hours: ActiveHours, agent_timezone: str, member_timezone: str | None) -> ZoneInfo:
    # The member's own zone wins: "not at night" means their night.
    return ZoneInfo(member_timezone or hours.timezone or agent_timezone)


def _inside(local: time, start: time, end: time | None) -> bool:
    if end is None:  # "24:00"
        return local >= start
    if start < end:
        return start <= local < end
    # Crosses midnight (or start == end, which validation rejects).
    return local >= start or local < end


def is_active(
    now: datetime,
    hours: ActiveHours | None,
    agent_timezone: str,
    member_timezone: str | None = None,
) -> bool:
    if hours is None:
        return True
    local = now.astimezone(_zone(hours, agent_timezone, member_timezone))
    return _inside(local.time().replace(tzinfo=None), hours.start_time(), hours.end_time())


def next_window_start(
    now: datetime, hours: ActiveHours, agent_timezone: str, member_timezone: str | None = None
) -> datetime:
    """The next moment the window opens (as an aware UTC-comparable datetime).

    Computed as local wall-clock start on today or tomorrow; on a DST day the
    zone's fold rules decide the exact instant, which is what a person expects.
    """
    zone = _zone(hours, agent_timezone, member_timezone)
    local = now.astimezone(zone)
    start = hours.start_time()
    for days in (0, 1, 2):
        day = local.date() + timedelta(days=days)
        candidate = datetime.combine(day, start, tzinfo=zone)
        if candidate > now:
            return candidate
    return now + timedelta(days=1)  # unreachable with a valid window
