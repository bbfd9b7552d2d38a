"""Exact reminders (scheduled tasks): stored per chat, delivered verbatim.

- model.py     the Reminder record, statuses, ids
- schedule.py  the at / after / cron forms and DST-correct fire times
- policy.py    what a late reminder does (fire, fire marked late, skip)
- store.py     the ReminderStore interface (SQLite: core/store/sqlite/reminders.py)
- service.py   ReminderService: schedule, fire due reminders, start-up recovery
- tools.py     schedule_reminder / list_reminders / cancel_reminder for the chat model
"""

from core.reminders.schedule import Schedule, parse_schedule
from core.reminders.service import ReminderService
from core.reminders.store import ReminderStore
from core.reminders.tools import register_reminder_tools

__all__ = [
    "ReminderService",
    "ReminderStore",
    "Schedule",
    "parse_schedule",
    "register_reminder_tools",
]
