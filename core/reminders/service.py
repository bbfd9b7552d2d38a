"""ReminderService: schedules reminders and fires them, each at most once per time.

Firing one reminder: decide (fire / fire marked late / skip, see policy.py),
claim it in a transaction (attempt counted, this worker's id, a lease), move
the claim to `sending` in its own fenced transaction, send its text with
`deliver_once` to exactly the stored chat and thread, then record the
outcome. The claim is what makes a send happen at most once: a `sending`
claim whose lease ran out means the worker died between send and confirm,
and that reminder is never sent again (one-shot: `failed` with the reason;
recurring: moved on to its next time). A claim stopped before `sending` is
released and fires as usual.

A delivered reminder is written into its session's transcript as an
assistant message of kind `reminder`: the user's answer then has its
question, and since it is never a user message, a reminder can never be read
back as a request to schedule another one (or as material for commitments:
only conversation turns feed extraction).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.clock import Clock
from core.delivery.lease import SEND_LEASE
from core.delivery.send import (
    DEFAULT_ATTEMPTS,
    AccessCheck,
    Delivery,
    ServeAll,
    deliver_once,
)
from core.logs import event
from core.messages import (
    ChatKind,
    Outbound,
    Sender,
    SendResult,
    Target,
    parse_session_key,
    reminder_snooze_actions,
)
from core.metrics import recorder
from core.reminders.claim import UNCONFIRMED, ReminderClaim, after_unknown
from core.reminders.model import NewReminder, Reminder
from core.reminders.policy import Decision, decide
from core.reminders.schedule import Schedule, ScheduleError, next_cron
from core.reminders.store import ReminderStore
from core.store.base import NewMessage, Store

log = logging.getLogger("kept.reminders")

# Due reminders are read in pages; a pass stops after MAX_PAGES so that rows
# which keep coming back (a store that cannot record their outcome) cannot
# keep it busy forever.
PAGE = 100
MAX_PAGES = 50
# Chats served at once; reminders of one chat go out one by one, in order.
CONCURRENCY = 8


@dataclass(slots=True)
class _Tally:
    fired: int = 0
    skipped: int = 0
    failed: int = 0
    waiting: int = 0


class ReminderService:
    def __init__(
        self,
        store: ReminderStore,
        transcript: Store,
        sender: Sender,
        clock: Clock,
        *,
        platforms: Callable[[], set[str]],
        worker: str,
        on_stored: Callable[[], None] | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        access: AccessCheck | None = None,
    ) -> None:
        self._store = store
        self._transcript = transcript
        self._sender = sender
        self._clock = clock
        self._platforms = platforms
        # Called after a reminder is stored, so a sleeping scheduler can wake
        # before the time it computed without this reminder.
        self._on_stored = on_stored
        self._max_attempts = max_attempts
        # Who is served now: a revoked user or a removed group gets nothing.
        self._access: AccessCheck = access if access is not None else ServeAll()
        # Who claims (one id per process, see bot/services.py) and whether
        # this process still takes new reminders (not while stopping).
        self._worker = worker
        self._stopping = False
        # Ids this process is claiming or sending: a second pass of this
        # process running meanwhile leaves them alone.
        self._in_flight: set[str] = set()
        self._slots = asyncio.Semaphore(CONCURRENCY)

    @property
    def store(self) -> ReminderStore:
        return self._store

    @property
    def clock(self) -> Clock:
        return self._clock

    # --- chat side (the tools) ----------------------------------------------------

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
                created_at=self._clock.now(),
            )
        )
        self._log(logging.INFO, "reminder_scheduled", reminder, next=reminder.next_fire_at)
        self.wake(reminder)
        return reminder

    def wake(self, r: Reminder) -> None:
        """Tell a scheduler asleep until a later time that `r` is due sooner."""
        if self._on_stored is None:
            return
        try:
            self._on_stored()
        except Exception as exc:  # the reminder is stored; a late wake-up is survivable
            self._log(logging.ERROR, "reminder_wake_failed", r, error=repr(exc))

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
            self._log(logging.INFO, "reminder_cancelled", done)
        return done

    # --- scheduler side ---------------------------------------------------------------

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

    def stop_taking_work(self) -> None:
        """From now on claim nothing new; sends already claimed go on."""
        self._stopping = True

    # --- as the scheduler's due source ----------------------------------------------

    name = "reminders"

    async def start_up(self) -> None:
        await self.recover_missed()

    async def run_due(self) -> None:
        await self.reap_expired_claims()
        if not self._stopping:
            await self.fire_due()

    async def next_wake(self, now: datetime) -> datetime | None:
        candidates = []
        if (due := await self.next_due()) is not None:
            candidates.append(max(due, now))
        if (lease := await self.next_lease_expiry()) is not None:
            candidates.append(lease)
        return min(candidates, default=None)

    def forget_deferrals(self) -> None:
        pass  # nothing is deferred: every pass reads what is due

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
            self._log(logging.INFO, "reminder_claim_released", r, reason="lease expired unsent")
        resolved = 0
        for r in await self._store.expired_sends(now):
            following = after_unknown(r, now)
            done = await self._store.fail_expired_send(
                r, now=now, error=UNCONFIRMED, next_fire_at=following
            )
            if done is None:
                continue  # settled by someone else meanwhile
            resolved += 1
            self._log(
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

    # --- one pass ---------------------------------------------------------------------

    async def _run_due(
        self, now: datetime, platforms: set[str] | None, *, startup: bool = False
    ) -> _Tally:
        tally = _Tally()
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
        self, group: list[Reminder], now: datetime, tally: _Tally, startup: bool
    ) -> None:
        for reminder in group:
            async with self._slots:
                try:
                    await self._handle(reminder, now, tally, startup)
                except Exception as exc:
                    # One bad row (or a bug) must never stop the others.
                    tally.failed += 1
                    self._log(logging.ERROR, "reminder_error", reminder, error=repr(exc))
                    await self._give_up(reminder, now, f"internal error: {exc!r}")

    async def _handle(self, r: Reminder, now: datetime, tally: _Tally, startup: bool) -> None:
        try:
            decision = decide(r, now)
        except ScheduleError as exc:
            tally.failed += 1
            self._log(
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
                self._log(
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
            self._log(logging.INFO, "reminder_waiting_for_platform", r, late_s=late)
            return
        if r.id in self._in_flight or self._stopping:
            return  # another pass of this process is sending it, or we are stopping
        self._in_flight.add(r.id)
        try:
            claimed = await self._store.claim(
                r.id, now, worker=self._worker, lease_until=self._clock.now() + SEND_LEASE
            )
            if claimed is None:
                return  # cancelled, or claimed by a concurrent pass, since it was read
            claim = ReminderClaim(
                claimed, store=self._store, worker=self._worker, clock=self._clock,
                lease=SEND_LEASE,
            )  # fmt: skip
            # Interrupted before `sending`, the claim is released; after, the
            # reminder is settled as a send of unknown outcome.
            async with claim:
                await self._send_claimed(claim, decision, tally, startup)
        finally:
            self._in_flight.discard(r.id)

    async def _send_claimed(
        self, claim: ReminderClaim, decision: Decision, tally: _Tally, startup: bool
    ) -> None:
        """`claimed` -> `sending` (fenced, own transaction) -> send -> record."""
        if await self._not_served(claim, decision, tally):
            return
        if not await claim.begin_sending():
            return  # cancelled meanwhile (or the claim is no longer ours): released
        await self._deliver(claim, decision, tally, startup)

    async def _not_served(self, claim: ReminderClaim, decision: Decision, tally: _Tally) -> bool:
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
            self._log(
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
        following = self._following(r, decision, now)
        await claim.mark_failed(at=now, error=f"not sent: {why}", next_fire_at=following)
        tally.skipped += 1
        self._log(
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
        self, claim: ReminderClaim, decision: Decision, tally: _Tally, startup: bool
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
        following = self._following(r, decision, done_at)
        fields: dict[str, Any] = {
            "late_s": _seconds(decision.late),
            "grace_s": _seconds(decision.grace),
            "marked_late": decision.action == "fire_late" or None,
            "startup": startup or None,
            "tries": delivery.attempts,
        }
        if delivery.outcome == "sent":
            if not await claim.mark_fired(at=done_at, next_fire_at=following):
                self._log(
                    logging.WARNING,
                    "reminder_claim_lost_after_send",
                    r,
                    action="none: the send outlived its lease and was settled by another worker",
                )
            tally.fired += 1
            recorder().reminder_fired()
            self._log(logging.INFO, "reminder_fired", r, next=following, **fields)
            await self._record(r, text, done_at, delivery)
            return
        tally.failed += 1
        error = delivery.result.error or "unknown error"
        if delivery.outcome == "unknown":
            why = f"delivery outcome unknown ({error}); not resent, to avoid a duplicate"
            self._log(logging.WARNING, "reminder_outcome_unknown", r, error=error, **fields)
        else:
            why = f"delivery failed: {error}"
            if not delivery.result.retryable:
                # The platform refused for good (blocked, chat gone, no
                # permission): the next time would fail the same way.
                following = None
            self._log(
                logging.WARNING,
                "reminder_failed",
                r,
                error=error,
                gave_up=following is None,
                action="check the bot's access to this chat",
                **fields,
            )
        await claim.mark_failed(at=done_at, error=why, next_fire_at=following)

    def _following(self, r: Reminder, decision: Decision, at: datetime) -> datetime | None:
        """A recurring reminder's next time after `at` (sending may have taken a
        while, e.g. waiting out a 429); None for a one-shot reminder."""
        following = decision.next_fire_at
        if following is not None and following <= at and r.cron is not None:
            following = next_cron(r.cron, r.timezone, at)
        return following

    async def _record(self, r: Reminder, text: str, at: datetime, delivery: Delivery) -> None:
        try:
            await self._transcript.add_message(
                NewMessage(
                    session_key=r.session_key,
                    role="assistant",
                    kind="reminder",
                    text=text,
                    ts=at,
                    platform_message_id=delivery.message_id,
                )
            )
        except Exception as exc:  # sent and recorded as fired; only the mirror is missing
            self._log(logging.ERROR, "reminder_transcript_failed", r, error=repr(exc))

    async def _give_up(self, r: Reminder, now: datetime, error: str) -> None:
        try:
            await self._store.mark_failed(r.id, now=now, error=error)
        except Exception as exc:
            self._log(logging.ERROR, "reminder_mark_failed_failed", r, error=repr(exc))

    def _log(self, level: int, name: str, r: Reminder, **fields: Any) -> None:
        times = {k: v.isoformat() for k, v in fields.items() if isinstance(v, datetime)}
        event(
            log,
            level,
            name,
            agent=r.agent_id,
            session=r.session_key,
            reminder=r.id,
            kind=r.kind,
            **{**fields, **times},
        )


def _chat_kind(r: Reminder) -> ChatKind:
    try:
        return parse_session_key(r.session_key).chat_kind
    except ValueError:
        return "private" if r.created_by == r.target.chat_id else "group"


def _seconds(value: timedelta) -> int:
    return int(value.total_seconds())
