"""Firing one due reminder: decide, claim, send once, settle, move on.

A due reminder is first decided (fire / fire marked late / skip, see
policy.py). One that fires is claimed in a transaction (attempt counted,
this worker's id, a lease), its claim moved to `sending` in its own fenced
transaction, its text sent with `deliver_once` to exactly the stored chat
and thread, and the outcome recorded; a recurring one then has its next
time. The claim (claim.py) is what makes the send happen at most once: a
`sending` claim that is interrupted or whose lease runs out is settled as a
send of unknown outcome and never repeated.

A delivered reminder is written into its session's transcript as an
assistant message of kind `reminder`: the user's answer then has its
question, and since it is never a user message, a reminder can never be read
back as a request to schedule another one (or as material for commitments:
only conversation turns feed extraction).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.clock import Clock
from core.delivery.claim import take_despite_cancel
from core.delivery.lease import SEND_LEASE
from core.delivery.mirror import mirror_sent
from core.delivery.send import (
    DEFAULT_ATTEMPTS,
    AccessCheck,
    Delivery,
    ServeAll,
    deliver_once,
)
from core.messages import (
    ChatKind,
    Outbound,
    Sender,
    SendResult,
    parse_session_key,
    reminder_snooze_actions,
)
from core.metrics import recorder
from core.reminders.claim import ReminderClaim
from core.reminders.events import log_reminder
from core.reminders.model import Reminder
from core.reminders.policy import Decision, decide
from core.reminders.schedule import ScheduleError, next_cron
from core.reminders.store import ReminderStore
from core.store.base import Store


@dataclass(slots=True)
class FiringTally:
    """What one pass over due reminders did, counted as each firing ends
    (a firing that breaks after counting is counted `failed` too)."""

    fired: int = 0
    skipped: int = 0
    failed: int = 0
    waiting: int = 0


class ReminderFiring:
    """Fires due reminders one at a time for this process (one per worker)."""

    def __init__(
        self,
        *,
        store: ReminderStore,
        transcript: Store,
        sender: Sender,
        clock: Clock,
        platforms: Callable[[], set[str]],
        worker: str,
        max_attempts: int = DEFAULT_ATTEMPTS,
        access: AccessCheck | None = None,
    ) -> None:
        self._store = store
        self._transcript = transcript
        self._sender = sender
        self._clock = clock
        self._platforms = platforms
        self._max_attempts = max_attempts
        # Who is served now: a revoked user or a removed group gets nothing.
        self._access: AccessCheck = access if access is not None else ServeAll()
        # Who claims (one id per process, see bot/services.py) and whether
        # this process still takes new reminders (not while stopping).
        self._worker = worker
        self._claiming = True
        # Ids this process is claiming or sending: a second pass of this
        # process running meanwhile leaves them alone.
        self._in_flight: set[str] = set()

    @property
    def claiming(self) -> bool:
        """False once stopping: nothing new is claimed, sends under way go on."""
        return self._claiming

    def stop_claiming(self) -> None:
        self._claiming = False

    async def fire(self, r: Reminder, now: datetime, tally: FiringTally, startup: bool) -> None:
        """Fire, skip or leave `r` (read as due at `now`), adding to `tally`.
        Never raises an ordinary error: one bad row (or a bug) must never
        stop the other reminders of the pass; it ends `failed`."""
        try:
            await self._handle(r, now, tally, startup)
        except Exception as exc:
            tally.failed += 1
            log_reminder(logging.ERROR, "reminder_error", r, error=repr(exc))
            await self._give_up(r, now, f"internal error: {exc!r}")

    async def _handle(self, r: Reminder, now: datetime, tally: FiringTally, startup: bool) -> None:
        try:
            decision = decide(r, now)
        except ScheduleError as exc:
            tally.failed += 1
            log_reminder(
                logging.ERROR,
                "reminder_broken",
                r,
                error=str(exc),
                action="the stored schedule is unusable; it was marked failed",
            )
            await self._give_up(r, now, f"unusable schedule: {exc}")
            return
        late = _seconds(decision.late)
        if decision.action == "skip":
            assert decision.next_fire_at is not None
            moved = await self._store.skip(
                r.id, now=now, expected=r.next_fire_at, next_fire_at=decision.next_fire_at
            )
            if moved is not None:
                tally.skipped += 1
                log_reminder(
                    logging.WARNING,
                    "reminder_missed_skipped",
                    r,
                    missed=r.next_fire_at,
                    late_s=late,
                    grace_s=_seconds(decision.grace),
                    next=decision.next_fire_at,
                    startup=startup or None,
                )
            return
        if r.platform not in self._platforms():
            tally.waiting += 1
            log_reminder(logging.INFO, "reminder_waiting_for_platform", r, late_s=late)
            return
        if r.id in self._in_flight or not self._claiming:
            return  # another pass of this process is sending it, or we are stopping
        self._in_flight.add(r.id)
        try:
            claims = await take_despite_cancel(self._take(r.id, now))
            if not claims:
                return  # cancelled, or claimed by a concurrent pass, since it was read
            [claim] = claims
            # Interrupted before `sending`, the claim is released; after, the
            # reminder is settled as a send of unknown outcome.
            async with claim:
                await self._send_claimed(claim, decision, tally, startup)
        finally:
            self._in_flight.discard(r.id)

    async def _take(self, reminder_id: str, now: datetime) -> list[ReminderClaim]:
        claimed = await self._store.claim(
            reminder_id, now, worker=self._worker, lease_until=self._clock.now() + SEND_LEASE
        )
        if claimed is None:
            return []
        return [
            ReminderClaim(
                claimed, store=self._store, worker=self._worker, clock=self._clock,
                lease=SEND_LEASE,
            )
        ]  # fmt: skip

    async def _send_claimed(
        self, claim: ReminderClaim, decision: Decision, tally: FiringTally, startup: bool
    ) -> None:
        """`claimed` -> `sending` (fenced, own transaction) -> send -> record."""
        if await self._not_served(claim, decision, tally):
            return
        if not await claim.begin_sending():
            return  # cancelled meanwhile (or the claim is no longer ours): released
        await self._deliver(claim, decision, tally, startup)

    async def _not_served(
        self, claim: ReminderClaim, decision: Decision, tally: FiringTally
    ) -> bool:
        """Settle a claimed firing whose chat is no longer served (its member
        revoked or blocked, its group removed): nothing is sent. A repeating
        reminder moves on to its next time; a one-shot one ends `failed` (it
        was not delivered, and no one cancelled it). False when it is served;
        an access check that cannot be made releases the claim (fires later)."""
        r = claim.row
        try:
            why = await self._access.refusal(r.target, _chat_kind(r), r.created_by)
        except Exception as exc:
            await claim.release(f"access check failed: {exc!r}")
            log_reminder(
                logging.WARNING,
                "reminder_access_check_failed",
                r,
                error=repr(exc),
                action="check the database; the reminder fires once access can be checked",
            )
            return True
        if why is None:
            return False
        now = self._clock.now()
        following = _following(r, decision, now)
        await claim.mark_failed(at=now, error=f"not sent: {why}", next_fire_at=following)
        tally.skipped += 1
        log_reminder(
            logging.WARNING,
            "reminder_skipped_not_served",
            r,
            reason=why,
            member=r.created_by,
            next=following,
            outcome="moved_on" if following is not None else "failed",
            action=(
                "approve the user again (kept pairing approve) or list the group in "
                "groups for later firings; `kept pairing revoke`/`block` and removed "
                "groups are meant to stop reminders"
            ),
        )
        return True

    async def _deliver(
        self, claim: ReminderClaim, decision: Decision, tally: FiringTally, startup: bool
    ) -> None:
        r = claim.row
        text = decision.text(r)
        # Its Snooze buttons name this firing (the attempt this claim counted).
        actions = reminder_snooze_actions(r.id, r.attempts)
        # The destination is the stored row's, whatever the text says.
        try:
            delivery = await deliver_once(
                self._sender, Outbound(target=r.target, text=text, actions=actions), self._clock,
                max_attempts=self._max_attempts,
            )  # fmt: skip
        except Exception as exc:
            # An adapter that raises may have sent already: treat it as a send
            # of unknown outcome, never to be repeated.
            failure = SendResult(error=f"the sender raised {exc!r}", unknown=True)
            delivery = Delivery("unknown", failure, 1)
        done_at = self._clock.now()
        following = _following(r, decision, done_at)
        fields: dict[str, Any] = {
            "late_s": _seconds(decision.late),
            "grace_s": _seconds(decision.grace),
            "marked_late": decision.action == "fire_late" or None,
            "startup": startup or None,
            "tries": delivery.attempts,
        }
        if delivery.outcome == "sent":
            if not await claim.mark_fired(at=done_at, next_fire_at=following):
                log_reminder(
                    logging.WARNING,
                    "reminder_claim_lost_after_send",
                    r,
                    action="none: the send outlived its lease and was settled by another worker",
                )
            tally.fired += 1
            recorder().reminder_fired()
            log_reminder(logging.INFO, "reminder_fired", r, next=following, **fields)
            await self._record(r, text, done_at, delivery)
            return
        tally.failed += 1
        error = delivery.result.error or "unknown error"
        if delivery.outcome == "unknown":
            why = f"delivery outcome unknown ({error}); not resent, to avoid a duplicate"
            log_reminder(logging.WARNING, "reminder_outcome_unknown", r, error=error, **fields)
        else:
            why = f"delivery failed: {error}"
            if not delivery.result.retryable:
                # The platform refused for good (blocked, chat gone, no
                # permission): the next time would fail the same way.
                following = None
            log_reminder(
                logging.WARNING,
                "reminder_failed",
                r,
                error=error,
                gave_up=following is None,
                action="check the bot's access to this chat",
                **fields,
            )
        await claim.mark_failed(at=done_at, error=why, next_fire_at=following)

    async def _record(self, r: Reminder, text: str, at: datetime, delivery: Delivery) -> None:
        try:
            await mirror_sent(
                self._transcript,
                session_key=r.session_key,
                kind="reminder",
                text=text,
                at=at,
                platform_message_id=delivery.message_id,
            )
        except Exception as exc:  # sent and recorded as fired; only the mirror is missing
            log_reminder(logging.ERROR, "reminder_transcript_failed", r, error=repr(exc))

    async def _give_up(self, r: Reminder, now: datetime, error: str) -> None:
        try:
            await self._store.mark_failed(r.id, now=now, error=error)
        except Exception as exc:
            log_reminder(logging.ERROR, "reminder_mark_failed_failed", r, error=repr(exc))


def _following(r: Reminder, decision: Decision, at: datetime) -> datetime | None:
    """A recurring reminder's next time after `at` (sending may have taken a
    while, e.g. waiting out a 429); None for a one-shot reminder."""
    following = decision.next_fire_at
    if following is not None and following <= at and r.cron is not None:
        following = next_cron(r.cron, r.timezone, at)
    return following


def _chat_kind(r: Reminder) -> ChatKind:
    """The chat's kind, for the access check: the session key says it; a key
    that does not parse falls back to private when the creator is the chat."""
    try:
        return parse_session_key(r.session_key).chat_kind
    except ValueError:
        return "private" if r.created_by == r.target.chat_id else "group"


def _seconds(value: timedelta) -> int:
    return int(value.total_seconds())
