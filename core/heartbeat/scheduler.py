"""The heartbeat scheduler: one task per process.

It sleeps until the earliest of the next due commitment, the next due
reminder and the earliest time a blocked scope may speak again — each found by
an indexed query — and is woken early when something new is stored. Due
commitments are grouped by exact scope; each scope gets at most one turn per
`heartbeat.every`, only inside its active hours, only while its platform has a
running adapter, and only while its rolling 24 h cap allows. While
`commitments.enabled` is false (read on every tick) no follow-up is claimed
or delivered; reminders fire either way.

Every tick (and start-up) first settles claims whose lease has expired, of
any worker: unsent ones are released, ones caught mid-send fail (see turn.py).
`stop(grace)` takes no new work and gives the running turn `grace` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from core.clock import Clock, sleep_or_until_set
from core.commitments.expiry import sweep_expired
from core.commitments.model import Commitment, Scope
from core.commitments.store import CommitmentStore
from core.config import KeptConfig
from core.heartbeat.active_hours import is_active, next_window_start
from core.heartbeat.lease import turn_lease
from core.heartbeat.store import HeartbeatStore, ReapedClaims
from core.heartbeat.turn import HeartbeatTurn, log_decision
from core.locks import SessionLocks
from core.logs import event
from core.wake import Wake

log = logging.getLogger("kept.heartbeat")

MAX_PER_TURN = 3
# Chats whose check-in turns run at once in one worker.
SCOPE_CONCURRENCY = 8
DUE_BATCH = 500
# Pages of due rows read per tick at most; what lies beyond waits for the
# next tick (a bound on one tick's reads, not a delivery limit).
MAX_DUE_PAGES = 100
MAX_SLEEP = 300.0
MIN_SLEEP = timedelta(seconds=1)
NO_ADAPTER_RETRY = timedelta(minutes=1)
# A chat another worker holds is looked at again after this.
BUSY_RETRY = timedelta(seconds=5)
SWEEP_EVERY = timedelta(minutes=10)
CAP_WINDOW = timedelta(hours=24)


class Reminders(Protocol):
    async def next_due(self) -> datetime | None: ...
    async def fire_due(self) -> int: ...
    async def recover_missed(self) -> int: ...
    async def reap_expired_claims(self) -> int: ...
    async def next_lease_expiry(self) -> datetime | None: ...
    def stop_taking_work(self) -> None: ...


class HeartbeatScheduler:
    def __init__(
        self,
        *,
        config: Callable[[], KeptConfig],
        commitments: CommitmentStore,
        store: HeartbeatStore,
        turn: HeartbeatTurn,
        clock: Clock,
        platforms: Callable[[], set[str]],
        session_locks: SessionLocks,
        reminders: Reminders | None = None,
        wake: Wake | None = None,
    ) -> None:
        self._config = config
        self._commitments = commitments
        self._store = store
        self._turn = turn
        self._clock = clock
        self._platforms = platforms
        self._session_locks = session_locks
        self._reminders = reminders
        # Set by whoever stores new timed work (reminders, extraction).
        self._wake = wake if wake is not None else Wake()
        # Scopes that are due but may not speak yet, and when to look again.
        # Only blocked due scopes live here, so it stays small.
        self._deferred: dict[Scope, datetime] = {}
        self._last_sweep: datetime | None = None
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def wake(self, *, reset: bool = False) -> None:
        """Look again now; `reset` forgets deferrals (config or adapters changed)."""
        if reset:
            self._deferred.clear()
        self._wake()

    async def start_up(self) -> None:
        """Settle what a previous process left behind, before the first tick:
        only claims whose lease has expired (a live one may be another
        worker's); later ticks reap the rest as their leases run out."""
        await self._reap(startup=True)
        if self._reminders is not None:
            await self._reminders.recover_missed()

    def start(self) -> asyncio.Task[None]:
        """Run the loop as a task that `stop` can end with grace."""
        self._task = asyncio.create_task(self.run(), name="heartbeat")
        return self._task

    async def stop(self, grace: float) -> None:
        """Take no new work, give the running turn or reminder sends `grace`
        seconds (on the injected clock) to finish, then cancel them: a claim
        that has not reached `sending` is then released, never failed."""
        self._stopping = True
        if self._reminders is not None:
            self._reminders.stop_taking_work()
        self._wake()
        task = self._task
        if task is None or task.done():
            return
        timer = asyncio.ensure_future(self._clock.sleep(grace))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        if not task.done():
            event(
                log,
                logging.WARNING,
                "heartbeat_stop_grace_exceeded",
                grace_s=grace,
                action="none: unsent claims were released, a send in flight is not repeated",
            )
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def run(self) -> None:
        await self.start_up()
        while not self._stopping:
            try:
                wake_at = await self.tick()
            except Exception as exc:  # the scheduler must outlive a bad tick
                event(
                    log,
                    logging.ERROR,
                    "heartbeat_tick_failed",
                    error=repr(exc),
                    action="check the database; the heartbeat retries on its own",
                )
                wake_at = self._clock.now() + timedelta(seconds=30)
            if self._stopping:
                break
            await self._sleep_until(wake_at)

    async def tick(self) -> datetime:
        """Do all work due now; return when to look next."""
        now = self._clock.now()
        await self._reap(startup=False)
        if self._last_sweep is None or now - self._last_sweep >= SWEEP_EVERY:
            await sweep_expired(self._commitments, now=now)
            self._last_sweep = now
        if self._reminders is not None and not self._stopping:
            await self._reminders.fire_due()
        # The tick's one snapshot of the config, passed down to every scope's
        # turn. Switched off, stored follow-ups stay as they are (not claimed,
        # not consumed) until it is switched on again.
        config = self._config()
        if config.commitments.enabled:
            await self._deliver_due(now, config)
        return await self._next_wake(self._clock.now())

    async def _reap(self, *, startup: bool) -> None:
        now = self._clock.now()
        # An indexed read first: a tick with no expired lease writes nothing.
        lease = await self._store.next_lease_expiry()
        if lease is None or lease > now:
            reaped = ReapedClaims()
        else:
            reaped = await self._store.reap_expired_claims(now=now)
        for c in reaped.released:
            log_decision(c.scope, 1, "released", commitment=c.id, reason="claim expired unsent")
        for c in reaped.failed:
            log_decision(
                c.scope,
                1,
                "failed",
                commitment=c.id,
                reason="claim expired mid-send: outcome unknown, not resent",
                startup=startup or None,
            )
        if self._reminders is not None and not startup:
            # At start-up recover_missed does this as its first step.
            await self._reminders.reap_expired_claims()

    async def _deliver_due(self, now: datetime, config: KeptConfig) -> None:
        """Every scope with due rows gets its chance this tick: due rows are
        read page by page, so rows of blocked scopes (quiet hours, cap, no
        adapter), however many, never hide deliverable ones behind them."""
        self._deferred = {s: t for s, t in self._deferred.items() if t > now}
        after: tuple[datetime, str] | None = None
        for _ in range(MAX_DUE_PAGES):
            due = await self._store.due_unclaimed(now=now, limit=DUE_BATCH, after=after)
            groups: dict[Scope, list[Commitment]] = {}
            for c in due:
                if c.scope not in self._deferred:
                    groups.setdefault(c.scope, []).append(c)
            await self._scope_turns(groups, now, config)
            if self._stopping:
                return
            if len(due) < DUE_BATCH:
                return
            after = (due[-1].due_earliest, due[-1].id)

    async def _scope_turns(
        self, groups: dict[Scope, list[Commitment]], now: datetime, config: KeptConfig
    ) -> None:
        """The scopes' turns, a few at a time: one chat's turns are one at a
        time anyway (its session lock), and a slow model call of one chat
        must not hold up every other chat's check-in."""
        slots = asyncio.Semaphore(SCOPE_CONCURRENCY)

        async def one(scope: Scope, items: list[Commitment]) -> None:
            async with slots:
                if self._stopping:
                    return
                retry_at = await self._scope_turn(scope, items, now, config)
                if retry_at is not None:
                    self._deferred[scope] = retry_at

        # Each worker walks the chats in its own order, so several workers
        # spread over them instead of all trying the same chat first.
        worker = self._turn.worker
        order = sorted(groups, key=lambda s: zlib.crc32(f"{worker}:{s.session_key}".encode()))
        # Every started turn runs to its end: one chat's failure must not
        # cancel another's turn mid-send. The first failure is raised after.
        results = await asyncio.gather(
            *(one(scope, groups[scope]) for scope in order), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _scope_turn(
        self, scope: Scope, items: list[Commitment], now: datetime, config: KeptConfig
    ) -> datetime | None:
        """Run the scope's turn if it may have one; else say when to retry."""
        # Unlike a chat turn, no follow-up is sent for an agent the config no
        # longer has: its follow-ups wait until it is added back.
        agent = config.find_agent(scope.agent_id)
        later = now + timedelta(seconds=MAX_SLEEP)
        if agent is None:
            log_decision(scope, len(items), "no-agent", action="add the agent back to the config")
            return later
        heartbeat = agent.heartbeat
        every = timedelta(seconds=heartbeat.every_seconds)
        if not every:
            log_decision(scope, len(items), "disabled")
            return later
        if heartbeat.target == "none":
            log_decision(scope, len(items), "target-none")
            return later
        if scope.platform not in self._platforms():
            log_decision(scope, len(items), "no-adapter", platform=scope.platform)
            return now + NO_ADAPTER_RETRY
        if not is_active(now, heartbeat.active_hours, agent.timezone):
            assert heartbeat.active_hours is not None
            opens = next_window_start(now, heartbeat.active_hours, agent.timezone)
            log_decision(scope, len(items), "quiet-hours", until=opens.isoformat())
            return opens
        # The interval and the cap are read under the session's lock (the
        # database's, across workers), so two workers never both find room.
        # A chat another worker holds is left to it (or to a later look):
        # waiting behind it would line every worker up on the same chats.
        async with self._session_locks.hold_unless_elsewhere(scope.session_key) as held:
            if not held:
                return now + BUSY_RETRY
            last = await self._store.last_turn_at(scope.agent_id, scope.session_key)
            if last is not None and last + every > now:
                return last + every
            cap = config.commitments.max_per_day
            sent = await self._store.sent_times_since(
                scope.agent_id, scope.session_key, now - CAP_WINDOW
            )
            room = cap - len(sent)
            if room <= 0:
                frees = sent[len(sent) - cap] + CAP_WINDOW if cap > 0 else later
                log_decision(scope, len(items), "cap", until=frees.isoformat())
                return frees
            # Read afresh under the lock: another worker may have taken some,
            # and the page that named the scope may not have held them all.
            take = min(MAX_PER_TURN, room)
            fresh = await self._store.due_in_scope(scope, now=now, limit=take + 1)
            batch = fresh[:take]
            if not batch:
                return None
            await self._store.record_turn(scope.agent_id, scope.session_key, now=now)
            result = await self._turn.run(
                scope,
                batch,
                timezone=agent.timezone,
                lease=turn_lease(config.llm),
                # The one live read: the off switch, asked again just before
                # sending, as switching off during the model call must stop it.
                may_send=lambda: self._config().commitments.enabled,
            )
        log_decision(
            scope,
            len(items),
            result.outcome,
            commitments=",".join(result.commitment_ids),
            message=result.message_id,
            error=result.error,
        )
        # Whatever this turn did not carry waits for the scope's next turn.
        return now + every if len(fresh) > len(batch) else None

    async def _next_wake(self, now: datetime) -> datetime:
        candidates = [now + timedelta(seconds=MAX_SLEEP)]
        if (nxt := await self._store.next_due_after(now)) is not None:
            candidates.append(nxt)
        if self._reminders is not None and (rem := await self._reminders.next_due()) is not None:
            candidates.append(max(rem, now))
        # A claim left by a stopped worker is settled when its lease runs out.
        if (lease := await self._store.next_lease_expiry()) is not None:
            candidates.append(lease)
        if self._reminders is not None and (lease := await self._reminders.next_lease_expiry()):
            candidates.append(lease)
        candidates.extend(self._deferred.values())
        # A floor keeps a row that is due but cannot be taken (mid-send, say)
        # from turning the loop into a busy wait.
        return max(min(candidates), now + MIN_SLEEP)

    async def _sleep_until(self, when: datetime) -> None:
        seconds = (when - self._clock.now()).total_seconds()
        if self._wake.event.is_set():
            self._wake.event.clear()
            return
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        await sleep_or_until_set(self._clock, seconds, self._wake.event)
        self._wake.event.clear()
