"""In-memory commitment and reminder stores for the command layer's unit
tests: only the methods core/commands reaches (through CommitmentService or
directly), with the same filter rules as the SQLite stores."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from core.commitments.model import ACTIVE_STATUSES, Commitment
from core.commitments.service import CommitmentService
from core.commitments.store import CommitmentStore, Filter
from core.reminders.model import Reminder
from core.reminders.store import ReminderStore

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
GROUP = "agent:main:telegram:group:9"
PRIVATE = "agent:main:telegram:private:5"


def commitment(n: int, sender: str | None, *, key: str = GROUP, **over: Any) -> Commitment:
    values: dict[str, Any] = dict(
        id=f"cm_{n:012x}",
        agent_id="main",
        session_key=key,
        platform="telegram",
        chat_id=key.rsplit(":", 1)[-1],
        thread_id=None,
        sender_id=sender,
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        status="pending",
        reason="an interview",
        suggested_text=f"How did it go, {sender}?",
        dedupe_key=f"k{n}",
        confidence=0.9,
        due_earliest=NOW + timedelta(hours=10 + n),
        due_latest=NOW + timedelta(hours=20 + n),
        due_timezone="Europe/Paris",
        source_message_id=None,
        created_at=NOW,
        updated_at=NOW,
    )
    values.update(over)
    return Commitment(**values)


class FakeCommitments:
    def __init__(self, *rows: Commitment) -> None:
        self.rows = {c.id: c for c in rows}
        self.changes = 0

    def service(self, clock: Any) -> CommitmentService:
        return CommitmentService(cast(CommitmentStore, self), clock)

    @staticmethod
    def _matches(c: Commitment, where: Filter | None) -> bool:
        if where is None:
            return True
        return (
            where.agent_id in (None, c.agent_id)
            and where.session_key in (None, c.session_key)
            and where.sender_id in (None, c.sender_id)
            and (where.statuses is None or c.status in where.statuses)
        )

    async def get(self, commitment_id: str, where: Filter | None = None) -> Commitment | None:
        c = self.rows.get(commitment_id)
        return c if c is not None and self._matches(c, where) else None

    async def list(self, where: Filter, *, limit: int | None = None) -> list[Commitment]:
        found = sorted(
            (c for c in self.rows.values() if self._matches(c, where)),
            key=lambda c: c.due_earliest,
        )
        return found[:limit] if limit is not None else found

    def _change(
        self, commitment_id: str, where: Filter | None, statuses: Collection[str], **new: Any
    ) -> Commitment | None:
        c = self.rows.get(commitment_id)
        if c is None or not self._matches(c, where) or c.status not in statuses:
            return None
        self.changes += 1
        self.rows[c.id] = done = replace(c, **new)
        return done

    async def dismiss(
        self, commitment_id: str, *, now: datetime, where: Filter | None = None
    ) -> Commitment | None:
        return self._change(
            commitment_id, where, ACTIVE_STATUSES, status="dismissed", dismissed_at=now
        )

    async def dismiss_sent(
        self, commitment_id: str, *, now: datetime, where: Filter | None = None
    ) -> Commitment | None:
        return self._change(commitment_id, where, ("sent",), status="dismissed", dismissed_at=now)

    async def snooze(
        self,
        commitment_id: str,
        *,
        until: datetime,
        latest: datetime,
        now: datetime,
        where: Filter | None = None,
    ) -> Commitment | None:
        return self._change(
            commitment_id,
            where,
            ACTIVE_STATUSES,
            status="snoozed",
            due_earliest=until,
            due_latest=latest,
            snoozed_until=until,
        )

    async def snooze_sent(
        self,
        commitment_id: str,
        *,
        until: datetime,
        latest: datetime,
        now: datetime,
        where: Filter | None = None,
    ) -> Commitment | None:
        return self._change(
            commitment_id,
            where,
            ("sent",),
            status="snoozed",
            due_earliest=until,
            due_latest=latest,
            snoozed_until=until,
        )


def reminder(n: int, created_by: str | None, *, key: str = GROUP, **over: Any) -> Reminder:
    values: dict[str, Any] = dict(
        id=f"rm_{n:012x}",
        agent_id="main",
        session_key=key,
        platform="telegram",
        chat_id=key.rsplit(":", 1)[-1],
        thread_id=None,
        created_by=created_by,
        text=f"call Sam ({created_by})",
        kind="at",
        cron=None,
        timezone="Europe/Paris",
        next_fire_at=NOW + timedelta(hours=n),
        status="active",
        claimed_at=None,
        last_fired_at=None,
        attempts=0,
        last_error=None,
        created_at=NOW,
        updated_at=NOW,
    )
    values.update(over)
    return Reminder(**values)


class FakeReminders:
    def __init__(self, *rows: Reminder) -> None:
        self.rows = {r.id: r for r in rows}

    def store(self) -> ReminderStore:
        return cast(ReminderStore, self)

    @staticmethod
    def _in(
        r: Reminder, agent_id: str | None, session_key: str | None, created_by: str | None = None
    ) -> bool:
        return (
            agent_id in (None, r.agent_id)
            and session_key in (None, r.session_key)
            and created_by in (None, r.created_by)
        )

    async def get(
        self,
        reminder_id: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        r = self.rows.get(reminder_id)
        return r if r is not None and self._in(r, agent_id, session_key, created_by) else None

    async def list_for_session(
        self,
        agent_id: str,
        session_key: str,
        *,
        statuses: Collection[str] | None = ("active",),
        created_by: str | None = None,
    ) -> list[Reminder]:
        return [
            r
            for r in sorted(self.rows.values(), key=lambda r: r.next_fire_at)
            if self._in(r, agent_id, session_key, created_by)
            and (statuses is None or r.status in statuses)
        ]

    async def list_all(
        self, *, statuses: Collection[str] | None = None, limit: int | None = None
    ) -> list[Reminder]:
        found = [
            r
            for r in sorted(self.rows.values(), key=lambda r: r.next_fire_at)
            if statuses is None or r.status in statuses
        ]
        return found[:limit] if limit is not None else found

    async def cancel(
        self,
        reminder_id: str,
        *,
        now: datetime,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        r = await self.get(
            reminder_id, agent_id=agent_id, session_key=session_key, created_by=created_by
        )
        if r is None or r.status != "active":
            return None
        self.rows[r.id] = done = replace(r, status="cancelled", updated_at=now)
        return done
