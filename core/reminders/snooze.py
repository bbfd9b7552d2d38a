"""Snoozing a reminder that has fired ("Snooze 10 min" under its message).

A one-shot reminder comes back once after the delay; a recurring one fires
once more then and keeps its schedule (its next time after the snooze is
the one it had). The button names the firing it was sent with (the
reminder's attempt count), and the store changes the row only while that
firing is still the last thing that happened to it: a second press, or a
press under an older message, changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from core.logs import event
from core.reminders.model import Reminder
from core.reminders.store import ReminderStore

log = logging.getLogger("kept.reminders")


async def snooze_fired(
    store: ReminderStore,
    r: Reminder,
    *,
    firing: int,
    until: datetime,
    now: datetime,
    wake: Callable[[Reminder], None] | None = None,
    agent_id: str | None = None,
    session_key: str | None = None,
) -> Reminder | str:
    """The snoozed reminder, or why it was not snoozed (core's words).
    `wake(snoozed)` tells a scheduler asleep until a later time to look again."""
    if r.cron is not None and r.status == "active" and until >= r.next_fire_at:
        # Moving past it would drop that occurrence: the schedule would change.
        return "its next time comes sooner"
    done = await store.snooze_fired(
        r.id, firing=firing, until=until, now=now, agent_id=agent_id, session_key=session_key
    )
    if done is not None:
        _log(logging.INFO, "reminder_snoozed", done, firing=firing, next=until.isoformat())
        if wake is not None:
            wake(done)
        return done
    if r.status == "cancelled":
        return "cancelled"
    if r.attempts == firing and r.claimed_at is None and r.updated_at != r.last_fired_at:
        return "already snoozed"
    return "this button no longer works"


def _log(level: int, name: str, r: Reminder, **fields: object) -> None:
    event(log, level, name, agent=r.agent_id, session=r.session_key, reminder=r.id, **fields)
