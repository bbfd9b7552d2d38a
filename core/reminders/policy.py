"""What to do with a due reminder, given how late it is.

A reminder can be late because the process was down, the event loop was
busy, or its platform's adapter was not running. A little late, it simply
fires. Much later, sending a recurring reminder's stale occurrence would be
noise (tomorrow's "take your pills" is coming anyway), so it skips to its
next time; a one-shot reminder has no next time, so it still fires, once,
marked as late so the user is not confused by its timing.

"A little" scales with the reminder's period: 10% of the time to its next
firing (cron) or of the lead time it was set with (one-shot), at least
MIN_GRACE (a restart must not make a 20-minute timer look late) and at most
MAX_GRACE.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from core.reminders.model import Reminder
from core.reminders.schedule import cron_period, next_cron

MIN_GRACE = timedelta(minutes=5)
MAX_GRACE = timedelta(hours=1)
GRACE_SHARE = 0.1
LATE_PREFIX = "(late) "

Action = Literal["fire", "fire_late", "skip"]


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    late: timedelta  # how far past its fire time the reminder is (never negative)
    grace: timedelta
    # For a recurring reminder: its next fire time after now (skip, or after
    # this firing); None for a one-shot reminder.
    next_fire_at: datetime | None

    def text(self, reminder: Reminder) -> str:
        """What to send: the reminder's text, marked when it is late."""
        return LATE_PREFIX + reminder.text if self.action == "fire_late" else reminder.text


def grace_for(period: timedelta) -> timedelta:
    return min(MAX_GRACE, max(MIN_GRACE, period * GRACE_SHARE))


def decide(reminder: Reminder, now: datetime) -> Decision:
    """Fire, fire marked late, or skip. Raises ScheduleError for a recurring
    reminder whose stored expression or timezone cannot be used."""
    late = max(timedelta(0), now - reminder.next_fire_at)
    if reminder.recurring:
        assert reminder.cron is not None  # the table's CHECK guarantees it
        period = cron_period(reminder.cron, reminder.timezone, reminder.next_fire_at)
        grace = grace_for(period)
        following = next_cron(reminder.cron, reminder.timezone, max(now, reminder.next_fire_at))
        action: Action = "fire" if late <= grace else "skip"
        return Decision(action, late, grace, following)
    grace = grace_for(reminder.next_fire_at - reminder.created_at)
    return Decision("fire" if late <= grace else "fire_late", late, grace, None)
