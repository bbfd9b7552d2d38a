"""Snoozing a reminder that has fired: "remind me again in 10 minutes".

A fired occurrence comes back once, later; the reminder it came from is left
as it is. For a recurring reminder that matters: snoozing today's 09:00
must not move tomorrow's 09:00 (the series keeps its cron), so the snooze
is its own one-shot reminder — same chat, same text, same owner, same zone —
never a change to the recurring row.
"""

from __future__ import annotations

from datetime import timedelta

from core.reminders.model import Reminder
from core.reminders.schedule import Schedule
from core.reminders.service import ReminderService

MIN_SNOOZE = timedelta(minutes=1)
MAX_SNOOZE = timedelta(days=7)


class SnoozeRefused(ValueError):
    """Why a reminder could not be snoozed, in one line."""


async def snooze_occurrence(
    service: ReminderService,
    reminder_id: str,
    *,
    agent_id: str,
    session_key: str,
    duration: timedelta,
) -> Reminder:
    """A one-shot copy of the reminder's occurrence, due `duration` from now.
    Only a reminder of this chat (agent and session) can be snoozed here."""
    if not MIN_SNOOZE <= duration <= MAX_SNOOZE:
        raise SnoozeRefused("a snooze lasts between 1 minute and 7 days")
    fired = await service.store.get(reminder_id, agent_id=agent_id, session_key=session_key)
    if fired is None:
        raise SnoozeRefused("not found in this chat")
    if fired.last_fired_at is None:
        raise SnoozeRefused("it has not fired yet")
    now = service.clock.now()
    return await service.schedule(
        agent_id=fired.agent_id,
        session_key=fired.session_key,
        target=fired.target,
        created_by=fired.created_by,
        text=fired.text,
        schedule=Schedule("after", now + duration, None, fired.timezone),
    )
