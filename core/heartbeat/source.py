"""The follow-up due source: which commitments get a check-in turn, and when.

Due commitments are grouped by exact scope; each scope gets at most one turn
per `heartbeat.every`, only inside its active hours, only while its platform
has a running adapter, and only while its rolling 24 h cap allows. While
`commitments.enabled` is false (read on every tick) no follow-up is claimed
or delivered. The scheduler (core/scheduler.py) decides when to look.

Every tick (and start-up) first settles claims whose lease has expired, of
any worker: unsent ones are released, ones caught mid-send fail (see turn.py).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.clock import Clock
from core.commitments.expiry import sweep_expired
from core.commitments.model import Commitment, Scope
from core.commitments.store import CommitmentStore
from core.config.model import KeptConfig
from core.delivery.lease import turn_lease
from core.heartbeat.claim import FollowUpClaim
from core.heartbeat.decisions import log_decision
from core.heartbeat.gates import blocked, interval
from core.heartbeat.store import HeartbeatStore, ReapedClaims
from core.heartbeat.turn import HeartbeatTurn
from core.locks import SessionLocks
from core.users import FollowUpPreferences, UserZones
from core.users.followup_prefs import DISMISSED_REASON

MAX_PER_TURN = 3
# Chats whose check-in turns run at once in one worker.
SCOPE_CONCURRENCY = 8
# Due rows per page: the first page of a tick, and the most a page grows to.
DUE_PAGE_FIRST = 48
DUE_PAGE_MAX = 500
# Pages of due rows read per tick at most; what lies beyond waits for the
# next tick (a bound on one tick's reads, not a delivery limit).
MAX_DUE_PAGES = 400
# A chat another worker holds is looked at again after this.
BUSY_RETRY = timedelta(seconds=5)
# A chat that is not served (member revoked, group removed) is asked again
# after this: let in again, its follow-ups go out within their window.
NOT_SERVED_RETRY = timedelta(minutes=1)
SWEEP_EVERY = timedelta(minutes=10)
CAP_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class _Claimed:
    """A scope's claim, waiting for its turn."""

    claim: FollowUpClaim
    due: int  # the scope's due rows on the page that named it


class FollowUpSource:
    """The DueSource of follow-ups (check-in turns)."""

    name = "followups"

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
        zones: UserZones | None = None,
        prefs: FollowUpPreferences | None = None,
    ) -> None:
        self._config = config
        # Who switched follow-ups off (themselves, or a group's admin for
        # it); None: nobody can (tests without one).
        self._prefs = prefs
        self._commitments = commitments
        self._store = store
        self._turn = turn
        self._clock = clock
        self._platforms = platforms
        self._session_locks = session_locks
        # Members' own zones: quiet hours and a check-in's times are theirs.
        self._zones = zones
        # Scopes that are due but may not speak yet, and when to look again.
        # Only blocked due scopes live here, so it stays small.
        self._deferred: dict[Scope, datetime] = {}
        self._last_sweep: datetime | None = None
        self._stopping = False

    def forget_deferrals(self) -> None:
        self._deferred.clear()

    def stop_taking_work(self) -> None:
        self._stopping = True

    async def start_up(self) -> None:
        """Settle what a previous process left behind, before the first tick:
        only claims whose lease has expired (a live one may be another
        worker's); later ticks reap the rest as their leases run out."""
        await self._reap(startup=True)

    async def run_due(self) -> None:
        """Deliver what is due now."""
        now = self._clock.now()
        await self._reap(startup=False)
        if self._last_sweep is None or now - self._last_sweep >= SWEEP_EVERY:
            await sweep_expired(self._commitments, now=now)
            self._last_sweep = now
        # The tick's one snapshot of the config, passed down to every scope's
        # turn. Switched off, stored follow-ups stay as they are (not claimed,
        # not consumed) until it is switched on again.
        config = self._config()
        if config.commitments.enabled and not self._stopping:
            await self._deliver_due(now, config)

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

    async def _deliver_due(self, now: datetime, config: KeptConfig) -> None:
        """Every scope with due rows gets its chance this tick.

        Due rows are read page by page (so rows of blocked scopes, however
        many, never hide deliverable ones behind them) as the turns need
        them. The scopes of a page that may speak are claimed in one
        statement, at most MAX_PER_TURN rows each, before their turns start:
        several workers then split the due chats between them instead of
        all walking the same ones, and a page read later leaves out what
        others took. A chat whose last turn is within its interval is passed
        over without a claim; the turn checks the interval and the cap again
        under the chat's lock, which is what guarantees them."""
        self._deferred = {s: t for s, t in self._deferred.items() if t > now}
        ready: asyncio.Queue[_Claimed | None] = asyncio.Queue(maxsize=SCOPE_CONCURRENCY)
        failures: list[BaseException] = []

        async def turns() -> None:
            while (item := await ready.get()) is not None:
                # Every started turn runs to its end: one chat's failure must
                # not cancel another's turn mid-send. The first is raised after.
                try:
                    retry_at = await self._scope_turn(item, now, config)
                except Exception as exc:
                    failures.append(exc)
                    continue
                if retry_at is not None:
                    self._deferred[item.claim.scope] = retry_at

        try:
            async with asyncio.TaskGroup() as group:
                runners = [group.create_task(turns()) for _ in range(SCOPE_CONCURRENCY)]
                try:
                    await self._feed(ready, now, config)
                except Exception as exc:  # the turns under way still finish
                    failures.append(exc)
                for _ in runners:
                    await ready.put(None)
        finally:
            # Stopped with claims still queued: they never reached the platform.
            while not ready.empty():
                if (item := ready.get_nowait()) is not None:
                    await item.claim.release("stopped before its turn")
        if failures:
            raise failures[0]

    async def _feed(
        self, ready: asyncio.Queue[_Claimed | None], now: datetime, config: KeptConfig
    ) -> None:
        after: tuple[datetime, str] | None = None
        seen: set[Scope] = set()
        platforms = self._platforms()
        lease = turn_lease(config.llm)
        page = DUE_PAGE_FIRST
        for _ in range(MAX_DUE_PAGES):
            due = await self._store.due_unclaimed(now=now, limit=page, after=after)
            groups: dict[Scope, list[Commitment]] = {}
            for c in due:
                if c.scope not in self._deferred and c.scope not in seen:
                    groups.setdefault(c.scope, []).append(c)
            seen.update(groups)
            speakers = await self._may_speak(groups, now, config, platforms)
            turned = await self._store.last_turns([(s.agent_id, s.session_key) for s in speakers])
            wanted: list[Scope] = []
            for scope in speakers:
                last = turned.get((scope.agent_id, scope.session_key))
                every = interval(config, scope.agent_id)
                if last is not None and last + every > now:
                    self._deferred[scope] = last + every
                else:
                    wanted.append(scope)
            # Claimed a few chats at a time, as the turns take them: a claim's
            # lease covers one turn, not a whole page waiting its turn.
            took = False
            order = self._in_worker_order(wanted)
            for start in range(0, len(order), SCOPE_CONCURRENCY):
                if self._stopping:
                    break
                chunk = order[start : start + SCOPE_CONCURRENCY]
                took |= await self._claim_and_queue(chunk, groups, ready, lease)
            if self._stopping or len(due) < page:
                return
            after = (due[-1].due_earliest, due[-1].id)
            if not took:
                page = min(page * 2, DUE_PAGE_MAX)

    async def _claim_and_queue(
        self,
        scopes: list[Scope],
        groups: dict[Scope, list[Commitment]],
        ready: asyncio.Queue[_Claimed | None],
        lease: timedelta,
    ) -> bool:
        """Claim the scopes' due rows in one statement and queue their turns;
        False when another worker had them all."""
        claims = await self._turn.claim(scopes, per_scope=MAX_PER_TURN, lease=lease)
        waiting = [_Claimed(c, len(groups[c.scope])) for c in claims]
        try:
            while waiting:
                await ready.put(waiting[0])
                waiting.pop(0)
        finally:
            # Stopped while these waited for a place: nothing was sent.
            for item in waiting:
                await item.claim.release("stopped before its turn")
        return bool(claims)

    async def _may_speak(
        self,
        groups: dict[Scope, list[Commitment]],
        now: datetime,
        config: KeptConfig,
        platforms: set[str],
    ) -> list[Scope]:
        """The scopes the config lets speak now; the others are deferred."""
        speakers = []
        groups = await self._drop_silenced(groups, now)
        zones: dict[tuple[str, str], str] = {}
        if self._zones is not None and groups:
            zones = await self._zones.many({(s.platform, s.sender_id or "") for s in groups})
        for scope, items in groups.items():
            zone = zones.get((scope.platform, scope.sender_id or ""))
            why = blocked(scope, config, now, platforms, zone)
            if why is not None:
                log_decision(scope, len(items), why.outcome, **why.fields)
                self._deferred[scope] = why.until
                continue
            # Before any claim: a chat that is no longer served costs neither
            # a claim nor a model call; its follow-ups stay pending.
            try:
                refused = await self._turn.refusal(scope)
            except Exception as exc:
                refused = f"access could not be checked: {exc!r}"
            if refused is None:
                speakers.append(scope)
                continue
            log_decision(
                scope,
                len(items),
                "not_served",
                reason=refused,
                action="follow-ups stay pending; let the user or group in again to deliver them",
            )
            self._deferred[scope] = now + NOT_SERVED_RETRY
        return speakers

    async def _drop_silenced(
        self, groups: dict[Scope, list[Commitment]], now: datetime
    ) -> dict[Scope, list[Commitment]]:
        """Before any claim or model call: the due follow-ups of a member or
        chat that switched them off (one created by an extraction already
        under way at the switch, say) are dismissed with the reason, the
        preference read again in the statement that dismisses them. The
        send itself checks it once more (HeartbeatStore.begin_sending)."""
        if self._prefs is None or not groups:
            return groups
        silenced = await self._prefs.silenced([s.subject for s in groups])
        if not silenced:
            return groups
        kept: dict[Scope, list[Commitment]] = {}
        for scope, items in groups.items():
            if scope.subject not in silenced:
                kept[scope] = items
                continue
            dismissed = await self._store.dismiss_silenced(
                [c.id for c in items], now=now, reason=DISMISSED_REASON
            )
            log_decision(
                scope,
                len(items),
                "followups_off",
                commitments=",".join(dismissed),
                reason=DISMISSED_REASON,
            )
        return kept

    async def _zone_of(self, scope: Scope, agent_zone: str) -> str:
        """The zone a check-in's times are shown in: its member's own, else the agent's."""
        if self._zones is None:
            return agent_zone
        return await self._zones.own(scope.platform, scope.sender_id) or agent_zone

    def _in_worker_order(self, scopes: Iterable[Scope]) -> list[Scope]:
        """Each worker walks a page's chats in its own order, so several
        workers spread over them instead of all trying the same chat first."""
        worker = self._turn.worker
        return sorted(scopes, key=lambda s: zlib.crc32(f"{worker}:{s.session_key}".encode()))

    async def _scope_turn(
        self, item: _Claimed, now: datetime, config: KeptConfig
    ) -> datetime | None:
        """Run the scope's turn with its claimed rows if the interval and the
        cap allow; else release them and say when to retry."""
        claim = item.claim
        scope = claim.scope
        if self._stopping:
            await claim.release("stopped before its turn")
            return None
        agent = config.agent_or_default(scope.agent_id)
        every = interval(config, scope.agent_id)
        # The claim settles itself on any way out: stopped or broken before
        # the turn, it goes back (nothing was sent); the turn settles the rest.
        # The interval and the cap are read under the session's lock (the
        # database's, across workers), so two workers never both find room.
        # A chat another worker holds is left to it (or to a later look):
        # waiting behind it would line every worker up on the same chats.
        async with (
            claim,
            self._session_locks.hold_unless_elsewhere(scope.session_key) as held,
        ):
            if not held:
                await claim.release("chat busy on another worker")
                return now + BUSY_RETRY
            cap = config.commitments.max_per_day
            sent = await self._store.sent_times_since(
                scope.agent_id, scope.session_key, now - CAP_WINDOW
            )
            room = cap - len(sent)
            if room <= 0:
                await claim.release("daily cap reached")
                frees = sent[len(sent) - cap] + CAP_WINDOW if cap > 0 else now + every
                log_decision(scope, item.due, "cap", until=frees.isoformat())
                return frees
            # The interval's check and the turn's record are one statement.
            last = await self._store.record_turn_unless_recent(
                scope.agent_id, scope.session_key, now=now, every=every
            )
            if last is not None:
                await claim.release("a turn was taken meanwhile")
                return last + every
            await claim.release_beyond(room, "daily cap leaves no room")
            result = await self._turn.run(
                claim,
                timezone=await self._zone_of(scope, agent.timezone),
                # The one live read: the off switch, asked again just before
                # sending, as switching off during the model call must stop it.
                may_send=lambda: self._config().commitments.enabled,
            )
        log_decision(
            scope,
            item.due,
            result.outcome,
            commitments=",".join(result.commitment_ids),
            message=result.message_id,
            error=result.error,
        )
        # Whatever this turn did not carry waits for the scope's next turn.
        return now + every

    async def next_wake(self, now: datetime) -> datetime | None:
        candidates = []
        if (nxt := await self._store.next_due_after(now)) is not None:
            candidates.append(nxt)
        # A claim left by a stopped worker is settled when its lease runs out.
        if (lease := await self._store.next_lease_expiry()) is not None:
            candidates.append(lease)
        candidates.extend(self._deferred.values())
        return min(candidates, default=None)
