"""The reminder due source: which reminders fire, and when to look again.

The scheduler (core/scheduler.py) asks when a reminder is next due and runs
a pass then. A pass reads the due reminders of the running platforms page by
page and fires them (firing.py): chats side by side, each chat's reminders
one by one, in order. Every pass (and start-up) first settles claims whose
lease has expired, of any worker: one that never reached `sending` is
released and fires as usual; one that did is resolved without sending
(one-shot: `failed` with the reason; recurring: moved on to its next time).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from core.clock import Clock
from core.reminders.claim import UNCONFIRMED, after_unknown
from core.reminders.events import log_reminder
from core.reminders.firing import FiringTally, ReminderFiring
from core.reminders.model import Reminder
from core.reminders.store import ReminderStore

# Due reminders are read in pages; a pass stops after MAX_PAGES so that rows
# which keep coming back (a store that cannot record their outcome) cannot
# keep it busy forever.
PAGE = 100
MAX_PAGES = 50
# Chats served at once; reminders of one chat go out one by one, in order.
CONCURRENCY = 8


class ReminderSource:
    """The DueSource of reminders."""

    name = "reminders"

    def __init__(
        self,
        *,
        store: ReminderStore,
        firing: ReminderFiring,
        clock: Clock,
        platforms: Callable[[], set[str]],
    ) -> None:
        self._store = store
        self._firing = firing
        self._clock = clock
        self._platforms = platforms
        self._slots = asyncio.Semaphore(CONCURRENCY)

    # --- as the scheduler's due source ----------------------------------------------

    async def start_up(self) -> None:
        await self.recover_missed()

    async def run_due(self) -> None:
        await self.reap_expired_claims()
        if self._firing.claiming:
            await self.fire_due()

    async def next_wake(self, now: datetime) -> datetime | None:
        candidates = []
        if (due := await self.next_due()) is not None:
            candidates.append(max(due, now))
        if (lease := await self.next_lease_expiry()) is not None:
            candidates.append(lease)
        return min(candidates, default=None)

    def stop_taking_work(self) -> None:
        """From now on claim nothing new; sends already claimed go on."""
        self._firing.stop_claiming()

    def forget_deferrals(self) -> None:
        pass  # nothing is deferred: every pass reads what is due

    # --- the passes -------------------------------------------------------------------

    async def next_due(self) -> datetime | None:
        """The earliest time an active reminder of a running platform is due
        (a reminder whose platform has no adapter here cannot be sent anyway)."""
        platforms = self._platforms()
        if not platforms:
            return None
        return await self._store.next_due(platforms=platforms)

    async def fire_due(self) -> int:
        """Fire every reminder due at clock.now() whose platform is running;
        returns how many were delivered."""
        platforms = self._platforms()
        if not platforms:
            return 0
        tally = await self._run_due(self._clock.now(), platforms)
        return tally.fired

    async def next_lease_expiry(self) -> datetime | None:
        return await self._store.next_lease_expiry()

    async def reap_expired_claims(self) -> int:
        """Settle claims of any worker whose lease has ended: one that never
        reached `sending` is released (it fires as usual); one that did is
        resolved without sending (one-shot: `failed` with the reason;
        recurring: moved on to its next time). Returns how many."""
        now = self._clock.now()
        # An indexed read first: a pass with no expired lease writes nothing.
        lease = await self._store.next_lease_expiry()
        if lease is None or lease > now:
            return 0
        released = await self._store.release_expired_claims(now)
        for r in released:
            log_reminder(logging.INFO, "reminder_claim_released", r, reason="lease expired unsent")
        resolved = 0
        for r in await self._store.expired_sends(now):
            following = after_unknown(r, now)
            done = await self._store.fail_expired_send(
                r, now=now, error=UNCONFIRMED, next_fire_at=following
            )
            if done is None:
                continue  # settled by someone else meanwhile
            resolved += 1
            log_reminder(
                logging.WARNING,
                "reminder_unconfirmed",
                r,
                claimed_at=r.claimed_at,
                next=following,
                outcome="moved_on" if following is not None else "failed",
            )
        return len(released) + resolved

    async def recover_missed(self) -> int:
        """The start-up policy; returns how many reminders it acted on.

        1. Claims whose lease has expired are settled (reap_expired_claims);
           a live claim may be another worker's and is left alone.
        2. Every due reminder is decided (policy.py): a little late fires once
           now, a very late recurring one skips to its next time (even when
           its platform is not running), a very late one-shot fires once
           marked late. Each decision is logged.
        """
        now = self._clock.now()
        resolved = await self.reap_expired_claims()
        tally = await self._run_due(now, None, startup=True)
        return resolved + tally.fired + tally.skipped + tally.failed

    async def _run_due(
        self, now: datetime, platforms: set[str] | None, *, startup: bool = False
    ) -> FiringTally:
        tally = FiringTally()
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            rows = await self._store.due(now, PAGE, platforms=platforms)
            fresh = [r for r in rows if r.id not in seen]
            if not fresh:
                break
            seen.update(r.id for r in fresh)
            by_chat: dict[str, list[Reminder]] = {}
            for r in fresh:
                by_chat.setdefault(r.session_key, []).append(r)
            # A TaskGroup, not gather: on a stop it waits for every chat to
            # settle its claim, where gather returns as soon as the first
            # cancelled chat ends and leaves the others' records half-written.
            async with asyncio.TaskGroup() as chats:
                for group in by_chat.values():
                    chats.create_task(self._fire_chat(group, now, tally, startup))
            if len(rows) < PAGE:
                break
        return tally

    async def _fire_chat(
        self, group: list[Reminder], now: datetime, tally: FiringTally, startup: bool
    ) -> None:
        for reminder in group:
            async with self._slots:
                await self._firing.fire(reminder, now, tally, startup)
