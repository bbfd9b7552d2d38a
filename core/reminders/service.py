"""ReminderService: what users and the model's tools do with reminders.

Scheduling, listing and cancelling, each scoped to the chat (and member)
asking. Firing them is another concern (firing.py, driven by the scheduler
through source.py); the service only tells a sleeping scheduler when a new
reminder may be due sooner than the time it is waiting for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.clock import Clock
from core.config.model import KeptConfig
from core.logs import event
from core.messages import Target
from core.metrics import recorder
from core.reminders.events import log, log_reminder
from core.reminders.limits import (
    ReminderLimits,
    ReminderRefused,
    RepeatsTooOften,
    TooManyReminders,
)
from core.reminders.model import NewReminder, Reminder
from core.reminders.schedule import Schedule, shortest_cron_gap
from core.reminders.store import ReminderStore


class ReminderService:
    def __init__(
        self,
        store: ReminderStore,
        clock: Clock,
        *,
        on_stored: Callable[[], None] | None = None,
        limits: Callable[[], ReminderLimits] | None = None,
    ) -> None:
        """`limits`: read at each creation (the live config's, see
        bot/services.py); None: the config's defaults."""
        self._store = store
        self._clock = clock
        defaults = ReminderLimits.of(KeptConfig())
        self._limits = limits if limits is not None else (lambda: defaults)
        # Called after a reminder is stored, so a sleeping scheduler can wake
        # before the time it computed without this reminder.
        self._on_stored = on_stored

    @property
    def store(self) -> ReminderStore:
        return self._store

    @property
    def clock(self) -> Clock:
        return self._clock

    async def schedule(
        self,
        *,
        agent_id: str,
        session_key: str,
        target: Target,
        created_by: str | None,
        text: str,
        schedule: Schedule,
    ) -> Reminder:
        """Store the reminder; ReminderRefused (nothing stored) when it
        repeats more often than the minimum interval, or its creator already
        has as many active reminders as one user may."""
        limits = self._limits()
        now = self._clock.now()
        try:
            if schedule.cron is not None:
                gap = shortest_cron_gap(schedule.cron, schedule.timezone, now, limits.min_interval)
                if gap is not None:
                    raise RepeatsTooOften(limits.min_interval, gap)
            reminder = await self._store.add(
                NewReminder(
                    agent_id=agent_id,
                    session_key=session_key,
                    target=target,
                    created_by=created_by,
                    text=text,
                    kind=schedule.kind,
                    cron=schedule.cron,
                    timezone=schedule.timezone,
                    next_fire_at=schedule.next_fire_at,
                    created_at=now,
                ),
                max_active=limits.active_per_user,
            )
        except ReminderRefused as exc:
            event(
                log,
                logging.INFO,
                "reminder_refused",
                agent=agent_id,
                session=session_key,
                member=created_by,
                kind=schedule.kind,
                limit="active" if isinstance(exc, TooManyReminders) else "interval",
                reason=str(exc),
            )
            too_many = isinstance(exc, TooManyReminders)
            recorder().over_limit("user_reminders" if too_many else "reminder_interval")
            raise
        log_reminder(logging.INFO, "reminder_scheduled", reminder, next=reminder.next_fire_at)
        self.wake(reminder)
        return reminder

    def wake(self, r: Reminder) -> None:
        """Tell a scheduler asleep until a later time that `r` is due sooner."""
        if self._on_stored is None:
            return
        try:
            self._on_stored()
        except Exception as exc:  # the reminder is stored; a late wake-up is survivable
            log_reminder(logging.ERROR, "reminder_wake_failed", r, error=repr(exc))

    async def list_for_session(
        self, agent_id: str, session_key: str, *, created_by: str | None = None
    ) -> list[Reminder]:
        """One chat's active reminders (`created_by`: only that member's)."""
        return await self._store.list_for_session(agent_id, session_key, created_by=created_by)

    async def cancel(
        self,
        reminder_id: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        now = self._clock.now()
        done = await self._store.cancel(
            reminder_id,
            now=now,
            agent_id=agent_id,
            session_key=session_key,
            created_by=created_by,
        )
        if done is not None:
            log_reminder(logging.INFO, "reminder_cancelled", done)
        return done
