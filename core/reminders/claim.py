"""A reminder claim: one firing of one reminder, from claim to settle.

The claim is what makes a send happen at most once: a `sending` claim whose
lease ran out means the worker died between send and confirm, and that
firing is never sent again (one-shot: `failed` with the reason; recurring:
moved on to its next time). A claim stopped before `sending` is released and
fires as usual.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from core.clock import Clock
from core.delivery.claim import DeliveryClaim, Phase
from core.reminders.events import log, log_reminder
from core.reminders.model import Reminder
from core.reminders.schedule import ScheduleError, next_cron
from core.reminders.store import Claim, ReminderStore

UNCONFIRMED = (
    "the process stopped after this reminder was claimed and before its send was "
    "confirmed; not sent again, so the user gets at most one copy"
)


def after_unknown(r: Reminder, now: datetime) -> datetime | None:
    """After a send of unknown outcome: a recurring reminder's next time,
    None for a one-shot one (or an unusable schedule): it ends failed."""
    if r.cron is None:
        return None
    try:
        return next_cron(r.cron, r.timezone, max(now, r.next_fire_at))
    except ScheduleError:
        return None


class ReminderClaim(DeliveryClaim):
    """This worker's claim on one firing of one reminder."""

    kind = "reminder"

    def __init__(
        self,
        row: Reminder,
        *,
        store: ReminderStore,
        worker: str,
        clock: Clock,
        lease: timedelta,
    ) -> None:
        super().__init__(clock=clock, lease=lease, log=log)
        self._row = row
        self._store = store
        self._worker = worker

    @property
    def row(self) -> Reminder:
        """The reminder as the claim last saw it (its `sending` row once there)."""
        return self._row

    async def mark_fired(self, *, at: datetime, next_fire_at: datetime | None) -> bool | None:
        """A confirmed send recorded; False when the claim was no longer the
        row's (the send outlived its lease), None when already settled."""

        async def record(_now: datetime) -> bool:
            done = await self._store.mark_fired(
                self._row.id, now=at, next_fire_at=next_fire_at, claim=self._fence()
            )
            return done is not None

        return await self.settle(record)

    async def mark_failed(self, *, at: datetime, error: str, next_fire_at: datetime | None) -> None:
        """Not sent, or sent with an unknown outcome: recorded, never resent;
        `next_fire_at` None ends the reminder `failed`."""
        await self.settle(
            lambda _now: self._store.mark_failed(
                self._row.id, now=at, error=error, next_fire_at=next_fire_at, claim=self._fence()
            )
        )

    def _fence(self) -> Claim:
        return Claim(self._worker, self._row.attempts)

    async def _to_sending(self, now: datetime, lease_until: datetime) -> bool:
        sending = await self._store.begin_sending(
            self._row, worker=self._worker, now=now, lease_until=lease_until
        )
        if sending is None:
            return False  # cancelled meanwhile, or the claim is no longer ours
        self._row = sending
        return True

    async def _release(self, now: datetime, error: str) -> None:
        await self._store.release(self._row, worker=self._worker, now=now, error=error)

    async def _fail_unknown(self, now: datetime, cause: str) -> None:
        following = after_unknown(self._row, now)
        log_reminder(
            logging.WARNING, "reminder_outcome_unknown", self._row, error=cause, next=following
        )
        await self._store.mark_failed(
            self._row.id,
            now=now,
            error=f"{cause}; {UNCONFIRMED}",
            next_fire_at=following,
            claim=self._fence(),
        )

    def _abandoned(self, phase: Phase, why: str) -> None:
        pass  # the release or the unknown outcome is on record (and logged above)

    def _fields(self) -> dict[str, object]:
        r = self._row
        return {"agent": r.agent_id, "session": r.session_key, "reminder": r.id, "kind": r.kind}
