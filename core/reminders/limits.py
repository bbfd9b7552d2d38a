"""How many reminders one user may have waiting, and how often one may repeat.

Both come from the live config at each creation (`limits.perUser.activeReminders`,
`reminders.minInterval`): bot/services.py passes a callable, so a reloaded
config applies to the next reminder. The interval is decided from the
schedule alone (service.py); the count in the store, in the insert's own
transaction serialised per user (core/store/sql/reminders.py), so two
workers never both see room for the last one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from core.config.model import KeptConfig
from core.errors import KeptError


@dataclass(frozen=True, slots=True)
class ReminderLimits:
    # Active reminders one platform user may have created, in every chat and
    # under every agent together; None: no limit.
    active_per_user: int | None
    # The shortest gap between two firings of a repeating reminder.
    min_interval: timedelta

    @classmethod
    def of(cls, config: KeptConfig) -> ReminderLimits:
        return cls(
            active_per_user=config.limits.per_user.active_reminders,
            min_interval=timedelta(seconds=config.reminders.min_interval_seconds),
        )


class ReminderRefused(KeptError):
    """A reminder that was not stored because of a limit (wording.py says it)."""


class TooManyReminders(ReminderRefused):
    def __init__(self, limit: int, active: int) -> None:
        super().__init__(f"{active} active reminders, and one user may have at most {limit}")
        self.limit = limit
        # More than `limit` when the limit was lowered since they were set.
        self.active = active


class RepeatsTooOften(ReminderRefused):
    def __init__(self, minimum: timedelta, gap: timedelta) -> None:
        super().__init__(f"fires {gap} apart, less than the minimum of {minimum}")
        self.minimum = minimum
        self.gap = gap
