"""Exact reminders (scheduled tasks): stored per chat, delivered verbatim.

- model.py     the Reminder record, statuses, ids
- schedule.py  the at / after / cron forms and DST-correct fire times
- policy.py    what a late reminder does (fire, fire marked late, skip)
- limits.py    how many a user may have waiting, how often one may repeat
- store.py     the ReminderStore interface (SQL: core/store/sql/reminders.py)
- events.py    the reminders' log events
- service.py   ReminderService: schedule, list and cancel (what users and tools do)
- firing.py    ReminderFiring: one due reminder claimed, sent once, settled
- source.py    ReminderSource: the scheduler's due source, start-up recovery
- claim.py     one firing's claim, on the shared claim machine
- snooze.py    snoozing a reminder that has fired
- tools.py     schedule_reminder / list_reminders / cancel_reminder for the chat model
"""

from core.reminders.firing import ReminderFiring
from core.reminders.schedule import Schedule, parse_schedule
from core.reminders.service import ReminderService
from core.reminders.source import ReminderSource
from core.reminders.store import ReminderStore
from core.reminders.tools import register_reminder_tools

__all__ = [
    "ReminderFiring",
    "ReminderService",
    "ReminderSource",
    "ReminderStore",
    "Schedule",
    "parse_schedule",
    "register_reminder_tools",
]
