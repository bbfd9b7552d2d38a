"""The ReminderStore interface: what the service, the tools and the CLI ask of
persistence. The SQLite implementation lives in core/store/sqlite/reminders.py.

Every method that acts on one reminder by id checks, in the same statement,
that the reminder is in a state the action applies to (and, where a scope is
given, that it belongs to that chat), so two callers racing on one reminder
cannot both win.
"""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from core.reminders.model import NewReminder, Reminder, Status


@dataclass(frozen=True, slots=True)
class Claim:
    """Who holds a reminder's claim: the worker and the attempt it counted."""

    worker: str
    attempts: int


class ReminderStore(abc.ABC):
    @abc.abstractmethod
    async def add(self, new: NewReminder, *, max_active: int | None = None) -> Reminder:
        """Store a new, active reminder. With `max_active`, only while its
        creator (`created_by` on its platform, in every chat and agent) has
        fewer active ones, decided in the insert's own transaction
        serialised per creator; TooManyReminders (nothing stored) otherwise.
        A reminder nobody is named as creator of is not counted."""

    @abc.abstractmethod
    async def get(
        self,
        reminder_id: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        """The reminder, or None when it does not exist or belongs to another
        scope than the given agent / session / asker (None: any)."""

    @abc.abstractmethod
    async def list_for_session(
        self,
        agent_id: str,
        session_key: str,
        *,
        statuses: Collection[Status] | None = ("active",),
        created_by: str | None = None,
    ) -> list[Reminder]:
        """One chat's reminders (statuses None: every status; `created_by`:
        only that member's, in the same statement), soonest first."""

    @abc.abstractmethod
    async def list_all(
        self, *, statuses: Collection[Status] | None = None, limit: int | None = None
    ) -> list[Reminder]:
        """Every chat's reminders (the admin CLI), soonest first."""

    @abc.abstractmethod
    async def cancel(
        self,
        reminder_id: str,
        *,
        now: datetime,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        """Active → `cancelled`; None when it is not active or not in the
        scope (`created_by`: asked by that member)."""

    # --- firing -------------------------------------------------------------------

    @abc.abstractmethod
    async def next_due(self, *, platforms: Collection[str] | None = None) -> datetime | None:
        """The earliest next_fire_at of an active, unclaimed reminder (of one
        of `platforms`, None: any), by an indexed query."""

    @abc.abstractmethod
    async def due(
        self, now: datetime, limit: int = 100, *, platforms: Collection[str] | None = None
    ) -> list[Reminder]:
        """Active, unclaimed reminders with next_fire_at <= now, soonest first,
        by an indexed query. Rows that cannot be read are reported, marked
        `failed` and left out."""

    @abc.abstractmethod
    async def claim(
        self, reminder_id: str, now: datetime, *, worker: str, lease_until: datetime
    ) -> Reminder | None:
        """Claim a due, active, unclaimed reminder for `worker` (phase
        `claimed`, lease until `lease_until`) and count the attempt, in one
        transaction; None when it is no longer claimable."""

    @abc.abstractmethod
    async def begin_sending(
        self, claimed: Reminder, *, worker: str, now: datetime, lease_until: datetime
    ) -> Reminder | None:
        """Move our claim (worker and attempt as claimed, live lease, still
        active) to `sending`, renewing the lease; None when the fence fails."""

    @abc.abstractmethod
    async def release(
        self, claimed: Reminder, *, worker: str, now: datetime, error: str
    ) -> Reminder | None:
        """Drop our claim while it is still `claimed` (nothing was sent); the
        reminder stays as it is and is due again."""

    @abc.abstractmethod
    async def release_expired_claims(self, now: datetime) -> list[Reminder]:
        """Release every `claimed` claim (any worker) whose lease has ended."""

    @abc.abstractmethod
    async def expired_sends(self, now: datetime) -> list[Reminder]:
        """Reminders whose `sending` claim's lease has ended: outcome unknown."""

    @abc.abstractmethod
    async def fail_expired_send(
        self,
        expired: Reminder,
        *,
        now: datetime,
        error: str,
        next_fire_at: datetime | None = None,
    ) -> Reminder | None:
        """End an expired `sending` claim without sending again, like
        `mark_failed`; fenced on the attempt, so two reapers act once."""

    @abc.abstractmethod
    async def next_lease_expiry(self) -> datetime | None:
        """When the earliest live claim's lease ends (indexed)."""

    @abc.abstractmethod
    async def mark_fired(
        self,
        reminder_id: str,
        *,
        now: datetime,
        next_fire_at: datetime | None,
        claim: Claim | None = None,
    ) -> Reminder | None:
        """A confirmed send: release the claim and record it; with
        `next_fire_at` None the reminder is `done`, else it moves on (cron).
        A reminder cancelled while in flight stays cancelled. With `claim`,
        only while that claim is still the row's (None otherwise): a send
        that outlived its lease never clears the claim of whoever took the
        row over."""

    @abc.abstractmethod
    async def mark_failed(
        self,
        reminder_id: str,
        *,
        now: datetime,
        error: str,
        next_fire_at: datetime | None = None,
        claim: Claim | None = None,
    ) -> Reminder | None:
        """A send that failed or whose outcome is unknown, or a broken row:
        release any claim and record the error; with `next_fire_at` None the
        reminder becomes `failed`, else it stays active and moves on (cron).
        With `claim`, only while that claim is still the row's."""

    @abc.abstractmethod
    async def skip(
        self, reminder_id: str, *, now: datetime, expected: datetime, next_fire_at: datetime
    ) -> Reminder | None:
        """Move an active, unclaimed reminder whose next_fire_at is still
        `expected` on to `next_fire_at` without sending (a missed cron time)."""

    @abc.abstractmethod
    async def claimed(self) -> list[Reminder]:
        """Active reminders with a claim of either phase (in flight, or left
        by a stopped worker), soonest lease end first."""

    # --- snoozing a fired one ---------------------------------------------------------

    @abc.abstractmethod
    async def snooze_fired(
        self,
        reminder_id: str,
        *,
        firing: int,
        until: datetime,
        now: datetime,
        agent_id: str | None = None,
        session_key: str | None = None,
    ) -> Reminder | None:
        """Bring back the firing counted as attempt `firing` once more at
        `until`, in one compare-and-set: only while nothing has touched the
        row since that firing was recorded (unclaimed, `updated_at` still its
        `last_fired_at`). A one-shot reminder goes from `done` back to
        `active`; a recurring one stays active with its next time moved
        earlier to `until` (which must come before it), so its schedule is
        unchanged after. None when that firing is no longer the latest, is
        already snoozed, or the row is out of the scope."""
