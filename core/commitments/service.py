"""List, dismiss and snooze: the operations behind core/commands (`kept
commitments`, the Discord / Telegram slash commands, and the buttons under a
follow-up).

Callers say what they may see with a Filter. The admin CLI sees everything;
a chat command or button gets its filter from a ChatAccess
(core/commitments/visibility.py: its own chat; in groups only the asker's
own follow-ups unless they are an admin), so an id from another chat or
member is reported exactly like an id that never existed: "not found".
Nothing here reveals that it exists elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from core.clock import Clock, iso_utc
from core.commitments.model import ACTIVE_STATUSES, STATUSES, Commitment, Status
from core.commitments.rules import MAX_HORIZON, MAX_WINDOW
from core.commitments.store import CommitmentStore, Filter
from core.commitments.visibility import ChatAccess
from core.errors import KeptError

# A snoozed follow-up keeps its window width, but at least this much, so a
# check-in snoozed into a quiet hour still has time to go out.
MIN_SNOOZE_WINDOW = timedelta(hours=2)


@dataclass(frozen=True, slots=True)
class DismissOutcome:
    dismissed: list[Commitment] = field(default_factory=list)
    # (id, why) for each id that could not be dismissed, in request order.
    failed: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SnoozeOutcome:
    snoozed: list[Commitment] = field(default_factory=list)
    # (id, why) for each id that could not be snoozed, in request order.
    failed: list[tuple[str, str]] = field(default_factory=list)


class SnoozeError(KeptError, ValueError):
    """Why a snooze was refused, phrased for the person who asked."""


class CommitmentService:
    def __init__(
        self,
        store: CommitmentStore,
        clock: Clock,
        *,
        on_snoozed: Callable[[], None] | None = None,
    ) -> None:
        """`on_snoozed`: wakes the heartbeat after a snooze (a reopened `sent`
        follow-up may be due before the time the scheduler sleeps until)."""
        self._store = store
        self._clock = clock
        self._on_snoozed = on_snoozed

    async def list(
        self, where: Filter | None = None, *, limit: int | None = None
    ) -> list[Commitment]:
        """Matching commitments, soonest due first; active ones unless
        `where.statuses` says otherwise."""
        where = where or Filter()
        if where.statuses is None:
            where = replace(where, statuses=ACTIVE_STATUSES)
        return await self._store.list(where, limit=limit)

    async def get(self, commitment_id: str, where: Filter | None = None) -> Commitment | None:
        """The commitment with this id within `where` (None: anywhere)."""
        return await self._store.get(commitment_id.strip(), where)

    async def visible(self, access: ChatAccess, *, limit: int | None = None) -> list[Commitment]:
        """The chat's active commitments the asker may see, soonest due first."""
        return await self.list(await access.visible(ACTIVE_STATUSES), limit=limit)

    async def find(
        self,
        access: ChatAccess,
        commitment_id: str,
        statuses: Collection[Status] = STATUSES,
    ) -> tuple[Commitment, Filter] | None:
        """The commitment with this id in the asker's chat and the filter to
        change it through; None when it does not exist there or the asker
        may not see it (the two are never told apart)."""
        current = await self._store.get(commitment_id.strip(), access.chat(statuses))
        if current is None:
            return None
        where = await access.filter_for(current)
        return None if where is None else (current, where)

    async def dismiss(self, ids: Sequence[str], where: Filter | None = None) -> DismissOutcome:
        outcome = DismissOutcome()
        for commitment_id in dict.fromkeys(i.strip() for i in ids):
            done = await self._store.dismiss(commitment_id, now=self._clock.now(), where=where)
            if done is not None:
                outcome.dismissed.append(done)
                continue
            outcome.failed.append((commitment_id, await self._why_not(commitment_id, where)))
        return outcome

    async def snooze(
        self,
        commitment_id: str,
        *,
        until: datetime | None = None,
        duration: timedelta | None = None,
        where: Filter | None = None,
    ) -> Commitment:
        """Move the due window to start at `until` (or now + `duration`) and
        mark the commitment snoozed; raises SnoozeError saying why not.

        Like the Snooze button, this also reopens a `sent` one (a delivered
        check-in offers its ids for typing). A snooze never makes anything
        due sooner: an active one already due later is refused."""
        now = self._clock.now()
        if (until is None) == (duration is None):
            raise SnoozeError("give either a duration or a time to snooze until")
        if duration is not None:
            if duration <= timedelta(0):
                raise SnoozeError("the snooze duration must be positive")
            until = now + duration
        assert until is not None
        if until.tzinfo is None:
            raise SnoozeError("the snooze time needs a time zone (e.g. 2026-12-02T09:00+01:00)")
        if until <= now:
            raise SnoozeError("the snooze time must be in the future")
        if until > now + MAX_HORIZON:
            raise SnoozeError(f"snooze at most {MAX_HORIZON.days} days ahead")
        commitment_id = commitment_id.strip()
        done, why = await self._snooze_one(commitment_id, until, where)
        if done is None:
            raise SnoozeError(f"{commitment_id}: {why}")
        return done

    # --- the follow-up buttons -----------------------------------------------
    #
    # By the time anyone presses a button under a heartbeat follow-up, the
    # heartbeat has marked its commitments `sent`. The buttons still mean
    # something then, so they (and the typed commands a check-in offers)
    # also act on `sent` ones. core/commands calls these for both platforms'
    # buttons, after its scope and permission checks (`where` is the chat's
    # filter).

    async def followup_dismiss(
        self, ids: Sequence[str], where: Filter | None = None
    ) -> DismissOutcome:
        """The Dismiss button: active commitments become `dismissed` as with
        `dismiss`; a `sent` one becomes `dismissed` too, keeping `sent_at`
        (that delivery still counts toward the rolling cap). Any other final
        status fails with "already <status>"."""
        outcome = DismissOutcome()
        for commitment_id in dict.fromkeys(i.strip() for i in ids):
            now = self._clock.now()
            # Active first: the heartbeat may mark it sent between the two.
            done = await self._store.dismiss(commitment_id, now=now, where=where)
            if done is None:
                done = await self._store.dismiss_sent(commitment_id, now=now, where=where)
            if done is not None:
                outcome.dismissed.append(done)
                continue
            outcome.failed.append((commitment_id, await self._why_not(commitment_id, where)))
        return outcome

    async def followup_snooze(
        self, ids: Sequence[str], *, duration: timedelta, where: Filter | None = None
    ) -> SnoozeOutcome:
        """The Snooze button: each commitment, active or `sent`, becomes
        `snoozed` with due window [now + duration, + its width (at least
        MIN_SNOOZE_WINDOW, at most MAX_WINDOW)], so the heartbeat brings the
        topic up again then, in a new check-in counted like any other. A
        `sent` one keeps its `sent_at`. Any other final status fails with
        "already <status>", an active one already due later with why.
        Raises SnoozeError for a duration out of range."""
        if duration <= timedelta(0):
            raise SnoozeError("the snooze duration must be positive")
        if duration > MAX_HORIZON:
            raise SnoozeError(f"snooze at most {MAX_HORIZON.days} days ahead")
        outcome = SnoozeOutcome()
        for commitment_id in dict.fromkeys(i.strip() for i in ids):
            until = self._clock.now() + duration
            done, why = await self._snooze_one(commitment_id, until, where)
            if done is not None:
                outcome.snoozed.append(done)
            else:
                outcome.failed.append((commitment_id, why))
        return outcome

    async def _snooze_one(
        self, commitment_id: str, until: datetime, where: Filter | None
    ) -> tuple[Commitment | None, str]:
        current = await self._store.get(commitment_id, where)
        if current is None:
            return None, "not found"
        if not current.active and current.status != "sent":
            return None, f"already {current.status}"
        if current.active and until < current.due_earliest:
            # Snoozing means later: moving the start earlier would bring the
            # topic up sooner than the user (or the model) asked.
            return None, f"it is due later than that, from {iso_utc(current.due_earliest)}"
        now = self._clock.now()
        width = min(max(current.due_latest - current.due_earliest, MIN_SNOOZE_WINDOW), MAX_WINDOW)
        latest = until + width
        done = None
        if current.active:
            done = await self._store.snooze(
                commitment_id, until=until, latest=latest, now=now, where=where
            )
        if done is None:  # sent, or sent by the heartbeat since we looked
            done = await self._store.snooze_sent(
                commitment_id, until=until, latest=latest, now=now, where=where
            )
        if done is not None:
            if self._on_snoozed is not None:
                self._on_snoozed()
            return done, ""
        return None, await self._why_not_reopened(commitment_id, where)

    async def _why_not_reopened(self, commitment_id: str, where: Filter | None) -> str:
        current = await self._store.get(commitment_id, where)
        if current is None or current.status != "sent":
            return await self._why_not(commitment_id, where)
        # Still `sent`: the same topic is open again in another commitment
        # (only one of a scope's commitments per dedupe key may be active).
        open_ones = await self._store.list(
            Filter(
                agent_id=current.agent_id,
                session_key=current.session_key,
                statuses=ACTIVE_STATUSES,
            )
        )
        twin = next(
            (
                c
                for c in open_ones
                if c.dedupe_key == current.dedupe_key and c.sender_id == current.sender_id
            ),
            None,
        )
        if twin is None:
            return "changed while we looked; try again"
        return f"already open again as {twin.id}"

    async def _why_not(self, commitment_id: str, where: Filter | None) -> str:
        current = await self._store.get(commitment_id, where)
        if current is None:
            return "not found"
        if current.active:
            return "changed while we looked; try again"
        return f"already {current.status}"
