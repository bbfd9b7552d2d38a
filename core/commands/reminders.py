"""Listing and cancelling exact reminders: once, for every platform and the CLI.

Reminders follow the follow-ups' rule (core/commitments/visibility.py): in a
group a member sees and cancels the ones they asked for, an admin every one;
anything else is NOT_FOUND. The CLI passes no access: the operator's view.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import timedelta

from core.clock import Clock
from core.commands.results import Change, Item, Listing, Outcome
from core.commitments.visibility import ChatAccess
from core.logs import event
from core.messages import REMINDER_SNOOZE_MINUTES, ReminderSnooze
from core.reminders.model import Reminder, Status
from core.reminders.service import ReminderService
from core.reminders.snooze import snooze_fired
from core.reminders.store import ReminderStore

log = logging.getLogger("kept.reminders")


class ReminderCommands:
    def __init__(
        self,
        store: ReminderStore,
        clock: Clock,
        access: ChatAccess | None = None,
        *,
        service: ReminderService | None = None,
    ) -> None:
        """`access` None: the operator's view (the CLI), every agent and chat.
        `service`: what snoozes a fired reminder (the chats pass it)."""
        self._store = store
        self._clock = clock
        self._access = access
        self._service = service

    async def list(self, *, statuses: Collection[Status] | None = ("active",)) -> Listing:
        """Soonest first: the chat's active reminders the asker may see, or
        (operator) every chat's with these statuses (None: every status)."""
        access = self._access
        if access is None:
            found = await self._store.list_all(statuses=statuses)
            only_open = statuses is not None and set(statuses) <= {"active"}
            return Listing([Item.of_reminder(r) for r in found], only_open=only_open)
        a = access.asker
        # The member (None: everyone's, for an admin or a private chat) is
        # matched in the listing's own statement, as the model's tools do.
        owner = await access.owner()
        mine = await self._store.list_for_session(a.agent_id, a.session_key, created_by=owner)
        others_hidden = (
            not mine
            and owner is not None
            and bool(await self._store.list_for_session(a.agent_id, a.session_key))
        )
        return Listing(
            [Item.of_reminder(r) for r in mine], shared=access.shared, others_hidden=others_hidden
        )

    async def _find(self, reminder_id: str) -> tuple[Reminder | None, dict[str, str]]:
        """The reminder if the asker may manage it, and the scope to change it
        in: a member's own is read and changed with them as its owner in the
        same statement; only somebody else's id asks whether they administer
        the chat."""
        access = self._access
        if access is None:
            return await self._store.get(reminder_id), {}
        a = access.asker
        scope = {"agent_id": a.agent_id, "session_key": a.session_key}
        if access.shared:
            own = {**scope, "created_by": a.user_id}
            mine = await self._store.get(reminder_id, **own)
            if mine is not None:
                return mine, own
            if not await access.admin():
                return None, scope
        return await self._store.get(reminder_id, **scope), scope

    async def snooze_fired(self, action: ReminderSnooze) -> Change:
        """A fired reminder's "Snooze 10 min" button: that firing comes back
        once after the delay (a recurring reminder's schedule is unchanged)."""
        assert self._service is not None, "snoozing needs the reminder service"
        current, scope = await self._find(action.reminder_id)
        if current is None:
            return Change(Outcome.NOT_FOUND, action.reminder_id, reason="not found")
        if action.minutes not in REMINDER_SNOOZE_MINUTES:
            return Change(Outcome.INVALID_DURATION, current.id, reason="not a snooze we offer")
        service = self._service
        now = service.clock.now()
        snoozed = await snooze_fired(
            service.store,
            current,
            firing=action.firing,
            until=now + timedelta(minutes=action.minutes),
            now=now,
            wake=service.wake,
            agent_id=scope.get("agent_id"),
            session_key=scope.get("session_key"),
        )
        if isinstance(snoozed, str):
            return Change(Outcome.REFUSED, current.id, Item.of_reminder(current), snoozed)
        return Change(Outcome.DONE, snoozed.id, Item.of_reminder(snoozed))

    async def cancel(self, reminder_id: str) -> Change:
        wanted = reminder_id.strip()
        current, scope = await self._find(wanted)
        if current is None:
            return Change(Outcome.NOT_FOUND, wanted, reason="not found")
        done = await self._store.cancel(current.id, now=self._clock.now(), **scope)
        if done is None:  # finished before, or fired since we looked
            latest = await self._store.get(current.id, **scope) or current
            return Change(
                Outcome.ALREADY_CLOSED,
                current.id,
                Item.of_reminder(latest),
                f"already {latest.status}",
            )
        event(
            log,
            logging.INFO,
            "reminder_cancelled",
            agent=done.agent_id,
            session=done.session_key,
            reminder=done.id,
            kind=done.kind,
        )
        return Change(Outcome.DONE, done.id, Item.of_reminder(done))
