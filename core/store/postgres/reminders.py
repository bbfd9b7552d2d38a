"""ReminderStore on the shared PostgreSQL pool (connection.py).

The same behaviour as the SQLite store (core/store/sqlite/reminders.py): each
state change is a single UPDATE … RETURNING whose WHERE names the state it
starts from, so exactly one of two racing callers (or workers) wins. A claim
picks its row with FOR UPDATE SKIP LOCKED (see claims.py).

Due work is found through the partial reminders_due index (active, unclaimed,
by next_fire_at): due queries repeat its WHERE and order by next_fire_at, so
they walk only the due end of the rows that can fire.

Columns are typed, so a stored row always reads back as a Reminder; there is
no counterpart of the SQLite store's quarantine of unreadable rows.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from core.reminders.model import NewReminder, Reminder, Status, new_reminder_id
from core.reminders.store import Claim, ReminderStore
from core.store.postgres.claims import ERROR_CHARS, NO_CLAIM, OURS, aware, maybe_aware
from core.store.postgres.connection import PostgresConnection

# In the field order of the Reminder dataclass, which _row relies on.
_COLUMN_NAMES = (
    "id", "agent_id", "session_key", "platform", "chat_id", "thread_id", "created_by",
    "text", "kind", "cron", "timezone", "next_fire_at", "status", "claimed_at",
    "last_fired_at", "attempts", "last_error", "created_at", "updated_at",
)  # fmt: skip
_COLUMNS = ", ".join(_COLUMN_NAMES)
_INSERT = (
    f"INSERT INTO reminders({_COLUMNS}) VALUES ({', '.join(['%s'] * len(_COLUMN_NAMES))}) "
    f"ON CONFLICT (id) DO NOTHING RETURNING {_COLUMNS}"
)
# The ready-to-fire condition, written out as the reminders_due index's WHERE.
_READY = "status = 'active' AND claimed_at IS NULL"

# The outcome of a send: a one-shot reminder (no next time, the parameter
# given three times for next_fire_at) ends as {ended}, a recurring one moves
# on; a reminder cancelled meanwhile keeps `cancelled` and its time.
_MOVE_ON = (
    "status = CASE WHEN status <> 'active' THEN status "
    "              WHEN %s::timestamptz IS NULL THEN '{ended}' ELSE 'active' END, "
    "next_fire_at = CASE WHEN status = 'active' AND %s::timestamptz IS NOT NULL "
    "                    THEN %s::timestamptz ELSE next_fire_at END "
)


def _row(row: Sequence[Any]) -> Reminder:
    return Reminder(*row)


def _platforms(platforms: Collection[str] | None) -> tuple[str, list[Any]]:
    if platforms is None:
        return "true", []
    return "platform = ANY(%s)", [sorted(set(platforms))]


def _statuses(statuses: Collection[Status] | None) -> tuple[str, list[Any]]:
    if statuses is None:
        return "true", []
    return "status = ANY(%s)", [sorted(set(statuses))]


def _scope(
    agent_id: str | None, session_key: str | None, created_by: str | None = None
) -> tuple[str, list[Any]]:
    clauses: list[str] = ["true"]
    params: list[Any] = []
    if agent_id is not None:
        clauses.append("agent_id = %s")
        params.append(agent_id)
    if session_key is not None:
        clauses.append("session_key = %s")
        params.append(session_key)
    if created_by is not None:
        clauses.append("created_by = %s")
        params.append(created_by)
    return " AND ".join(clauses), params


def _claim_fence(claim: Claim | None) -> tuple[str, tuple[object, ...]]:
    """The WHERE clause (and its parameters) holding a write to `claim`."""
    if claim is None:
        return "", ()
    return f"AND {OURS} ", (claim.worker, claim.attempts)


class PostgresReminderStore(ReminderStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Reminder]:
        return [_row(r) for r in await self._db.fetchall(sql, params)]

    async def _write_rows(self, sql: str, params: Sequence[Any]) -> list[Reminder]:
        return [_row(r) for r in await self._db.write(sql, params)]

    async def _update_one(self, sql: str, params: Sequence[Any]) -> Reminder | None:
        rows = await self._write_rows(sql, params)
        return rows[0] if rows else None

    # --- create / read / cancel ------------------------------------------------------

    async def add(self, new: NewReminder) -> Reminder:
        now = aware(new.created_at)
        for _ in range(3):
            values = (
                new_reminder_id(),
                new.agent_id,
                new.session_key,
                new.target.platform,
                new.target.chat_id,
                new.target.thread_id,
                new.created_by,
                new.text,
                new.kind,
                new.cron,
                new.timezone,
                aware(new.next_fire_at),
                "active",
                None,  # claimed_at
                None,  # last_fired_at
                0,
                None,  # last_error
                now,
                now,
            )
            added = await self._update_one(_INSERT, values)
            # None only on a (48-bit, vanishingly rare) id collision: new id.
            if added is not None:
                return added
        raise RuntimeError("three reminder id collisions in a row")

    async def get(
        self,
        reminder_id: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        clause, params = _scope(agent_id, session_key, created_by)
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE id = %s AND {clause}", [reminder_id, *params]
        )
        return rows[0] if rows else None

    async def list_for_session(
        self,
        agent_id: str,
        session_key: str,
        *,
        statuses: Collection[Status] | None = ("active",),
        created_by: str | None = None,
    ) -> list[Reminder]:
        clause, params = _statuses(statuses)
        owner, owner_params = _scope(None, None, created_by)
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE session_key = %s AND agent_id = %s "
            f"AND {clause} AND {owner} ORDER BY next_fire_at, id",
            [session_key, agent_id, *params, *owner_params],
        )

    async def list_all(
        self, *, statuses: Collection[Status] | None = None, limit: int | None = None
    ) -> list[Reminder]:
        clause, params = _statuses(statuses)
        sql = f"SELECT {_COLUMNS} FROM reminders WHERE {clause} ORDER BY next_fire_at, id"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        return await self._rows(sql, params)

    async def cancel(
        self,
        reminder_id: str,
        *,
        now: datetime,
        agent_id: str | None = None,
        session_key: str | None = None,
        created_by: str | None = None,
    ) -> Reminder | None:
        clause, params = _scope(agent_id, session_key, created_by)
        return await self._update_one(
            "UPDATE reminders SET status = 'cancelled', updated_at = %s "
            f"WHERE id = %s AND status = 'active' AND {clause} RETURNING {_COLUMNS}",
            [aware(now), reminder_id, *params],
        )

    # --- firing ------------------------------------------------------------------------

    async def next_due(self, *, platforms: Collection[str] | None = None) -> datetime | None:
        clause, params = _platforms(platforms)
        rows = await self._db.fetchall(
            f"SELECT next_fire_at FROM reminders WHERE {_READY} AND {clause} "
            "ORDER BY next_fire_at LIMIT 1",
            params,
        )
        return rows[0][0] if rows else None

    async def due(
        self, now: datetime, limit: int = 100, *, platforms: Collection[str] | None = None
    ) -> list[Reminder]:
        clause, params = _platforms(platforms)
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE {_READY} AND next_fire_at <= %s "
            f"AND {clause} ORDER BY next_fire_at, id LIMIT %s",
            [aware(now), *params, limit],
        )

    async def claim(
        self, reminder_id: str, now: datetime, *, worker: str, lease_until: datetime
    ) -> Reminder | None:
        # SKIP LOCKED: a reminder another worker is claiming right now is
        # passed over (None), not waited on; the WHERE is re-checked on the
        # locked row, so it is never claimed twice.
        return await self._update_one(
            "UPDATE reminders SET claimed_at = %s, claim_phase = 'claimed', claimed_by = %s, "
            "lease_until = %s, attempts = attempts + 1, updated_at = %s "
            f"WHERE id = (SELECT id FROM reminders WHERE id = %s AND {_READY} "
            f"AND next_fire_at <= %s FOR UPDATE SKIP LOCKED) RETURNING {_COLUMNS}",
            (aware(now), worker, aware(lease_until), now, reminder_id, now),
        )

    async def begin_sending(
        self, claimed: Reminder, *, worker: str, now: datetime, lease_until: datetime
    ) -> Reminder | None:
        return await self._update_one(
            "UPDATE reminders SET claim_phase = 'sending', lease_until = %s, updated_at = %s "
            f"WHERE id = %s AND {OURS} AND claim_phase = 'claimed' AND lease_until > %s "
            f"AND status = 'active' RETURNING {_COLUMNS}",
            (aware(lease_until), aware(now), claimed.id, worker, claimed.attempts, now),
        )

    async def release(
        self, claimed: Reminder, *, worker: str, now: datetime, error: str
    ) -> Reminder | None:
        return await self._update_one(
            f"UPDATE reminders SET {NO_CLAIM}, last_error = %s, updated_at = %s "
            f"WHERE id = %s AND {OURS} AND claim_phase = 'claimed' RETURNING {_COLUMNS}",
            (error[:ERROR_CHARS], aware(now), claimed.id, worker, claimed.attempts),
        )

    async def release_expired_claims(self, now: datetime) -> list[Reminder]:
        return await self._write_rows(
            f"UPDATE reminders SET {NO_CLAIM}, updated_at = %s "
            "WHERE id IN (SELECT id FROM reminders WHERE claim_phase = 'claimed' "
            f"AND lease_until <= %s FOR UPDATE SKIP LOCKED) RETURNING {_COLUMNS}",
            (aware(now), now),
        )

    async def expired_sends(self, now: datetime) -> list[Reminder]:
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE claim_phase = 'sending' "
            "AND lease_until <= %s ORDER BY lease_until",
            (aware(now),),
        )

    async def fail_expired_send(
        self,
        expired: Reminder,
        *,
        now: datetime,
        error: str,
        next_fire_at: datetime | None = None,
    ) -> Reminder | None:
        nxt = maybe_aware(next_fire_at)
        return await self._update_one(
            f"UPDATE reminders SET {NO_CLAIM}, last_error = %s, updated_at = %s, "
            f"{_MOVE_ON.format(ended='failed')}"
            "WHERE id = %s AND attempts = %s AND claim_phase = 'sending' AND lease_until <= %s "
            f"RETURNING {_COLUMNS}",
            (error[:ERROR_CHARS], aware(now), nxt, nxt, nxt, expired.id, expired.attempts, now),
        )

    async def next_lease_expiry(self) -> datetime | None:
        rows = await self._db.fetchall(
            "SELECT min(lease_until) FROM reminders WHERE claim_phase IS NOT NULL"
        )
        return rows[0][0] if rows else None

    async def mark_fired(
        self,
        reminder_id: str,
        *,
        now: datetime,
        next_fire_at: datetime | None,
        claim: Claim | None = None,
    ) -> Reminder | None:
        # A reminder cancelled while its send was in flight keeps `cancelled`
        # (and is not moved on), but the send is still recorded.
        nxt = maybe_aware(next_fire_at)
        fence, fenced = _claim_fence(claim)
        return await self._update_one(
            f"UPDATE reminders SET {NO_CLAIM}, last_fired_at = %s, last_error = NULL, "
            "updated_at = %s, "
            f"{_MOVE_ON.format(ended='done')}"
            f"WHERE id = %s {fence}RETURNING {_COLUMNS}",
            (aware(now), now, nxt, nxt, nxt, reminder_id, *fenced),
        )

    async def mark_failed(
        self,
        reminder_id: str,
        *,
        now: datetime,
        error: str,
        next_fire_at: datetime | None = None,
        claim: Claim | None = None,
    ) -> Reminder | None:
        nxt = maybe_aware(next_fire_at)
        fence, fenced = _claim_fence(claim)
        return await self._update_one(
            f"UPDATE reminders SET {NO_CLAIM}, last_error = %s, updated_at = %s, "
            f"{_MOVE_ON.format(ended='failed')}"
            f"WHERE id = %s {fence}RETURNING {_COLUMNS}",
            (error[:ERROR_CHARS], aware(now), nxt, nxt, nxt, reminder_id, *fenced),
        )

    async def skip(
        self, reminder_id: str, *, now: datetime, expected: datetime, next_fire_at: datetime
    ) -> Reminder | None:
        return await self._update_one(
            "UPDATE reminders SET next_fire_at = %s, updated_at = %s "
            f"WHERE id = %s AND {_READY} AND next_fire_at = %s RETURNING {_COLUMNS}",
            (aware(next_fire_at), aware(now), reminder_id, aware(expected)),
        )

    async def claimed(self) -> list[Reminder]:
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE claim_phase IS NOT NULL "
            "AND status = 'active' ORDER BY lease_until"
        )

    async def snooze_fired(
        self,
        reminder_id: str,
        *,
        firing: int,
        until: datetime,
        now: datetime,
        agent_id: str | None = None,
        session_key: str | None = None,
    ) -> Reminder | None:
        clause, params = _scope(agent_id, session_key)
        return await self._update_one(
            # updated_at moves past last_fired_at even within the same
            # millisecond: it is what marks this firing as snoozed.
            "UPDATE reminders SET status = 'active', next_fire_at = %s, "
            "updated_at = GREATEST(%s, last_fired_at + interval '1 millisecond') "
            "WHERE id = %s AND attempts = %s AND claimed_at IS NULL "
            "AND last_fired_at IS NOT NULL AND updated_at = last_fired_at "
            "AND ((cron IS NULL AND status = 'done') "
            "OR (cron IS NOT NULL AND status = 'active' AND next_fire_at > %s)) "
            f"AND {clause} RETURNING {_COLUMNS}",
            [aware(until), aware(now), reminder_id, firing, aware(until), *params],
        )
