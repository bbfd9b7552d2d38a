"""Listing, dismissing and snoozing follow-ups, and their buttons: once, for
every platform and the CLI.

A chat command or button press comes with a ChatAccess (its chat, its asker:
core/commitments/visibility.py holds the permission rule). Whatever the asker
may not see is NOT_FOUND, exactly like an id that never existed. The CLI
passes no access: the operator sees and changes every agent's and chat's.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from core.commands.results import Change, FollowUpButtonResult, Item, Listing, Outcome
from core.commands.times import snooze_duration
from core.commitments.model import ACTIVE_STATUSES, Commitment, Status
from core.commitments.service import CommitmentService, SnoozeError
from core.commitments.store import Filter
from core.commitments.visibility import ChatAccess
from core.messages import Action, FollowUpVerb

# What the "Snooze 1 day" button under a check-in postpones it by.
SNOOZE_BUTTON = timedelta(days=1)


class FollowUpCommands:
    def __init__(self, service: CommitmentService, access: ChatAccess | None = None) -> None:
        """`access` None: the operator's view (the CLI), every agent and chat."""
        self._service = service
        self._access = access

    async def list(
        self,
        *,
        statuses: Collection[Status] | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
    ) -> Listing:
        """Active follow-ups (or `statuses`, for the operator), soonest due
        first: in a chat the asker's own, or everyone's for its admin."""
        access = self._access
        if access is None:
            where = Filter(agent_id=agent_id, statuses=statuses)
            found = await self._service.list(where, limit=limit)
            only_open = statuses is not None and set(statuses) <= set(ACTIVE_STATUSES)
            return Listing([Item.of_commitment(c) for c in found], only_open=only_open)
        found = await self._service.visible(access, limit=limit)
        everyones = await access.admin()
        items = [Item.of_commitment(c) for c in found]
        return Listing(items, shared=access.shared, everyones=everyones)

    async def dismiss(self, ids: Sequence[str]) -> list[Change]:
        """One answer per id, in request order (the operator's once per id)."""
        if self._access is None:
            outcome = await self._service.followup_dismiss(ids)
            answers = {c.id: _done(c) for c in outcome.dismissed}
            answers |= {i: _refused(i, why) for i, why in outcome.failed}
            return [answers[i] for i in dict.fromkeys(i.strip() for i in ids)]
        return [await self._dismiss_one(commitment_id.strip()) for commitment_id in ids]

    async def _dismiss_one(self, commitment_id: str) -> Change:
        found = await self._find_offered(commitment_id)
        if isinstance(found, Change):
            return found
        current, where = found
        outcome = await self._service.followup_dismiss([current.id], where)
        if outcome.dismissed:
            return _done(outcome.dismissed[0])
        return _refused(current.id, outcome.failed[0][1])

    async def snooze(
        self,
        commitment_id: str,
        *,
        duration: str | timedelta | None = None,
        until: datetime | None = None,
    ) -> Change:
        """Postpone one follow-up by `duration` ("2h" or a timedelta) or to
        `until` (a time without offset is read in the follow-up's zone).
        Never sooner than it is due: see CommitmentService.snooze."""
        commitment_id = commitment_id.strip()
        if isinstance(duration, str):
            try:
                duration = snooze_duration(duration)
            except ValueError as exc:
                return Change(Outcome.INVALID_DURATION, commitment_id, reason=str(exc))
        where: Filter | None = None
        if self._access is not None:
            found = await self._find_offered(commitment_id)
            if isinstance(found, Change):
                return found
            where = found[1]
        if until is not None and until.tzinfo is None:
            current = await self._service.get(commitment_id, where)
            if current is None:
                return _refused(commitment_id, "not found")
            until = until.replace(tzinfo=ZoneInfo(current.due_timezone))
        try:
            done = await self._service.snooze(
                commitment_id, until=until, duration=duration, where=where
            )
        except SnoozeError as exc:
            return _refused(commitment_id, str(exc).removeprefix(f"{commitment_id}: "))
        return _done(done)

    async def press(self, action: Action) -> FollowUpButtonResult:
        """A follow-up's Dismiss or Snooze button, on a delivered (`sent`)
        check-in as on an active follow-up. Nothing changes unless the
        presser may see every follow-up the button names."""
        found = await self.pressable(action)
        if found is None:
            return FollowUpButtonResult(action.verb, Outcome.NOT_FOUND)
        return await self.apply(action.verb, found)

    async def pressable(self, action: Action) -> list[tuple[Commitment, Filter]] | None:
        """The button's follow-ups and the filters to change them through;
        None unless the presser may see every one."""
        assert self._access is not None, "a button is pressed in a chat"
        found: list[tuple[Commitment, Filter]] = []
        # Every status: by the time anyone presses, the heartbeat has marked
        # the check-in's follow-ups `sent`.
        for commitment_id in dict.fromkeys(action.commitment_ids):
            one = await self._service.find(self._access, commitment_id)
            if one is None:
                return None
            found.append(one)
        return found or None

    async def apply(
        self, verb: FollowUpVerb, found: list[tuple[Commitment, Filter]]
    ) -> FollowUpButtonResult:
        """Press the button on follow-ups from `pressable`."""
        changed: list[Item] = []
        unchanged: list[Change] = []
        for current, where in found:
            if verb == "dismiss":
                dismissed = await self._service.followup_dismiss([current.id], where)
                done, failed = dismissed.dismissed, dismissed.failed
            else:
                # The heartbeat brings the topic up again then, in a new check-in.
                snoozed = await self._service.followup_snooze(
                    [current.id], duration=SNOOZE_BUTTON, where=where
                )
                done, failed = snoozed.snoozed, snoozed.failed
            changed += [Item.of_commitment(c) for c in done]
            unchanged += [_refused(i, why) for i, why in failed]
        outcome = Outcome.DONE if changed else unchanged[0].outcome
        return FollowUpButtonResult(verb, outcome, changed, unchanged)

    async def _find_offered(self, commitment_id: str) -> tuple[Commitment, Filter] | Change:
        """The asker's follow-up and the filter to change it through, or the
        answer to give instead. Active ones and `sent` ones: a delivered
        check-in offers its ids to dismiss or snooze, as its buttons do."""
        assert self._access is not None
        found = await self._service.find(self._access, commitment_id)
        if found is None:
            return Change(Outcome.NOT_FOUND, commitment_id, reason="not found")
        current = found[0]
        if not current.active and current.status != "sent":
            item = Item.of_commitment(current)
            return Change(Outcome.ALREADY_CLOSED, current.id, item, f"already {current.status}")
        return found


def _done(c: Commitment) -> Change:
    return Change(Outcome.DONE, c.id, Item.of_commitment(c))


def _refused(commitment_id: str, reason: str) -> Change:
    """The service's reason ("not found", "already sent", a race) as an outcome."""
    if reason == "not found":
        return Change(Outcome.NOT_FOUND, commitment_id, reason=reason)
    if reason.startswith("already "):
        return Change(Outcome.ALREADY_CLOSED, commitment_id, reason=reason)
    return Change(Outcome.REFUSED, commitment_id, reason=reason)
