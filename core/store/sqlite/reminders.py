"""ReminderStore on the shared SQLite connection (connection.py).

Like the commitment store it shares the transcript store's single aiosqlite
connection, its lock and its one-trip-per-transaction `_write`, so reminder
writes never interleave with a transcript transaction. Each state change is a
single UPDATE … RETURNING whose WHERE names the state it starts from, which
makes it its own transaction and lets exactly one of two racing callers win.

Due work is found through reminders_due (status, next_fire_at): every due
query says `status = 'active'` and bounds or orders by next_fire_at, so it
walks only the due end of the index.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from core.logs import event
from core.reminders.model import NewReminder, Reminder, Status, new_reminder_id
from core.reminders.store import Claim, ReminderStore
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms

log = logging.getLogger("kept.reminders")

# In the field order of the Reminder dataclass, which _row relies on.
_COLUMN_NAMES = (
    "id", "agent_id", "session_key", "platform", "chat_id", "thread_id", "created_by",
    "text", "kind", "cron", "timezone", "next_fire_at", "status", "claimed_at",
    "last_fired_at", "attempts", "last_error", "created_at", "updated_at",
)  # fmt: skip
_COLUMNS = ", ".join(_COLUMN_NAMES)
_TIMES = {"next_fire_at", "claimed_at", "last_fired_at", "created_at", "updated_at"}
_TIME_COLUMNS = frozenset(i for i, name in enumerate(_COLUMN_NAMES) if name in _TIMES)
_INSERT = (
    f"INSERT INTO reminders({_COLUMNS}) VALUES ({', '.join('?' * len(_COLUMN_NAMES))}) "
    f"RETURNING {_COLUMNS}"
)
# The ready-to-fire condition, written out the same way everywhere so the
# planner always sees the reminders_due prefix.
_READY = "status = 'active' AND claimed_at IS NULL"
_ERROR_CHARS = 500
# Ends a claim: every claim column goes (see migration m0007).
_NO_CLAIM = "claimed_at = NULL, claim_phase = NULL, claimed_by = NULL, lease_until = NULL"
# The fence: the claimant and the attempt it claimed.
_OURS = "claimed_by = ? AND attempts = ?"

# The outcome of a send: a one-shot reminder (no next time, the parameter
# given twice more for next_fire_at) ends as {ended}, a recurring one moves on;
# a reminder cancelled meanwhile keeps `cancelled` and its time.
_MOVE_ON = (
    "status = CASE WHEN status <> 'active' THEN status "
    "              WHEN ? IS NULL THEN '{ended}' ELSE 'active' END, "
    "next_fire_at = CASE WHEN status = 'active' AND ? IS NOT NULL THEN ? "
    "                    ELSE next_fire_at END "
)


def _row(row: Sequence[Any]) -> Reminder:
    values = [from_ms(v) if i in _TIME_COLUMNS and v is not None else v for i, v in enumerate(row)]
    return Reminder(*values)


def _in(column: str, values: Collection[str]) -> tuple[str, list[Any]]:
    """`column IN (?, …)` for a non-empty collection, `0` for an empty one."""
    items = sorted(set(values))
    if not items:
        return "0", []
    return f"{column} IN ({', '.join('?' * len(items))})", list(items)


def _claim_fence(claim: Claim | None) -> tuple[str, tuple[object, ...]]:
    """The WHERE clause (and its parameters) holding a write to `claim`."""
    if claim is None:
        return "", ()
    return f"AND {_OURS} ", (claim.worker, claim.attempts)


class SqliteReminderStore(ReminderStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return await self._store.fetchall(sql, params)

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Reminder]:
        """Rows as records; a row that cannot be read is reported and left out,
        so one damaged row never hides the others."""
        found: list[Reminder] = []
        for raw in await self._select(sql, params):
            try:
                found.append(_row(raw))
            except Exception as exc:
                event(
                    log,
                    logging.ERROR,
                    "reminder_row_unreadable",
                    reminder=raw[0],
                    error=repr(exc),
                    action="inspect or delete this row in the reminders table",
                )
        return found

    async def _update_one(self, sql: str, params: Sequence[Any]) -> Reminder | None:
        row = await self._store._write(lambda conn: conn.execute(sql, params).fetchone())
        return None if row is None else _row(row)

    # --- create / read / cancel ------------------------------------------------------

    async def add(self, new: NewReminder) -> Reminder:
        now_ms = to_ms(new.created_at)

        def work(conn: sqlite3.Connection) -> Any:
            for attempt in range(3):
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
                    to_ms(new.next_fire_at),
                    "active",
                    None,  # claimed_at
                    None,  # last_fired_at
                    0,
                    None,  # last_error
                    now_ms,
                    now_ms,
                )
                try:
                    return conn.execute(_INSERT, values).fetchone()
                except sqlite3.IntegrityError as exc:
                    # Only a (48-bit, vanishingly rare) id collision is worth a retry.
                    if "reminders.id" not in str(exc) or attempt == 2:
                        raise
            raise AssertionError("unreachable")

        return _row(await self._store._write(work))

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
            f"SELECT {_COLUMNS} FROM reminders WHERE id = ? AND {clause}", [reminder_id, *params]
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
        clause, params = _in("status", statuses) if statuses is not None else ("1", [])
        owner, owner_params = _scope(None, None, created_by)
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE session_key = ? AND agent_id = ? "
            f"AND {clause} AND {owner} ORDER BY next_fire_at, id",
            [session_key, agent_id, *params, *owner_params],
        )

    async def list_all(
        self, *, statuses: Collection[Status] | None = None, limit: int | None = None
    ) -> list[Reminder]:
        clause, params = _in("status", statuses) if statuses is not None else ("1", [])
        sql = f"SELECT {_COLUMNS} FROM reminders WHERE {clause} ORDER BY next_fire_at, id"
        if limit is not None:
            sql += " LIMIT ?"
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
            "UPDATE reminders SET status = 'cancelled', updated_at = ? "
            f"WHERE id = ? AND status = 'active' AND {clause} RETURNING {_COLUMNS}",
            [to_ms(now), reminder_id, *params],
        )

    # --- firing ------------------------------------------------------------------------

    async def next_due(self, *, platforms: Collection[str] | None = None) -> datetime | None:
        clause, params = _in("platform", platforms) if platforms is not None else ("1", [])
        rows = await self._select(
            f"SELECT next_fire_at FROM reminders WHERE {_READY} AND {clause} "
            "ORDER BY next_fire_at LIMIT 1",
            params,
        )
        return from_ms(rows[0][0]) if rows else None

    async def due(
        self, now: datetime, limit: int = 100, *, platforms: Collection[str] | None = None
    ) -> list[Reminder]:
        clause, params = _in("platform", platforms) if platforms is not None else ("1", [])
        raw = await self._select(
            f"SELECT {_COLUMNS} FROM reminders WHERE {_READY} AND next_fire_at <= ? "
            f"AND {clause} ORDER BY next_fire_at LIMIT ?",
            [to_ms(now), *params, limit],
        )
        found: list[Reminder] = []
        for row in raw:
            try:
                found.append(_row(row))
            except Exception as exc:
                # Left as it is, an unreadable due row would come back on every
                # pass and keep the scheduler awake; mark it failed instead.
                await self._quarantine(row[0], now, f"unreadable row: {exc!r}")
        return found

    async def _quarantine(self, reminder_id: Any, now: datetime, error: str) -> None:
        event(
            log,
            logging.ERROR,
            "reminder_broken",
            reminder=reminder_id,
            error=error,
            action="inspect or delete this row in the reminders table",
        )
        sql = (
            f"UPDATE reminders SET status = 'failed', {_NO_CLAIM}, last_error = ?, "
            "updated_at = ? WHERE id = ?"
        )
        params = (error[:_ERROR_CHARS], to_ms(now), reminder_id)
        await self._store._write(lambda conn: conn.execute(sql, params))

    async def claim(
        self, reminder_id: str, now: datetime, *, worker: str, lease_until: datetime
    ) -> Reminder | None:
        return await self._update_one(
            "UPDATE reminders SET claimed_at = ?, claim_phase = 'claimed', claimed_by = ?, "
            "lease_until = ?, attempts = attempts + 1, updated_at = ? "
            f"WHERE id = ? AND {_READY} AND next_fire_at <= ? RETURNING {_COLUMNS}",
            (to_ms(now), worker, to_ms(lease_until), to_ms(now), reminder_id, to_ms(now)),
        )

    async def begin_sending(
        self, claimed: Reminder, *, worker: str, now: datetime, lease_until: datetime
    ) -> Reminder | None:
        return await self._update_one(
            "UPDATE reminders SET claim_phase = 'sending', lease_until = ?, updated_at = ? "
            f"WHERE id = ? AND {_OURS} AND claim_phase = 'claimed' AND lease_until > ? "
            f"AND status = 'active' RETURNING {_COLUMNS}",
            (to_ms(lease_until), to_ms(now), claimed.id, worker, claimed.attempts, to_ms(now)),
        )

    async def release(
        self, claimed: Reminder, *, worker: str, now: datetime, error: str
    ) -> Reminder | None:
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE id = ? AND {_OURS} AND claim_phase = 'claimed' RETURNING {_COLUMNS}",
            (error[:_ERROR_CHARS], to_ms(now), claimed.id, worker, claimed.attempts),
        )

    async def release_expired_claims(self, now: datetime) -> list[Reminder]:
        return await self._write_rows(
            f"UPDATE reminders SET {_NO_CLAIM}, updated_at = ? "
            f"WHERE claim_phase = 'claimed' AND lease_until <= ? RETURNING {_COLUMNS}",
            (to_ms(now), to_ms(now)),
        )

    async def expired_sends(self, now: datetime) -> list[Reminder]:
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE claim_phase = 'sending' "
            "AND lease_until <= ? ORDER BY lease_until",
            (to_ms(now),),
        )

    async def fail_expired_send(
        self,
        expired: Reminder,
        *,
        now: datetime,
        error: str,
        next_fire_at: datetime | None = None,
    ) -> Reminder | None:
        next_ms = None if next_fire_at is None else to_ms(next_fire_at)
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_error = ?, updated_at = ?, "
            f"{_MOVE_ON.format(ended='failed')}"
            "WHERE id = ? AND attempts = ? AND claim_phase = 'sending' AND lease_until <= ? "
            f"RETURNING {_COLUMNS}",
            (error[:_ERROR_CHARS], to_ms(now), next_ms, next_ms, next_ms, expired.id,
             expired.attempts, to_ms(now)),
        )  # fmt: skip

    async def next_lease_expiry(self) -> datetime | None:
        rows = await self._select(
            "SELECT min(lease_until) FROM reminders WHERE claim_phase IS NOT NULL"
        )
        value = rows[0][0] if rows else None
        return None if value is None else from_ms(value)

    async def _write_rows(self, sql: str, params: Sequence[Any]) -> list[Reminder]:
        raw = await self._store._write(lambda conn: conn.execute(sql, params).fetchall())
        return [_row(r) for r in raw]

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
        next_ms = None if next_fire_at is None else to_ms(next_fire_at)
        fence, fenced = _claim_fence(claim)
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_fired_at = ?, last_error = NULL, "
            "updated_at = ?, "
            f"{_MOVE_ON.format(ended='done')}"
            f"WHERE id = ? {fence}RETURNING {_COLUMNS}",
            (to_ms(now), to_ms(now), next_ms, next_ms, next_ms, reminder_id, *fenced),
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
        next_ms = None if next_fire_at is None else to_ms(next_fire_at)
        fence, fenced = _claim_fence(claim)
        return await self._update_one(
            f"UPDATE reminders SET {_NO_CLAIM}, last_error = ?, updated_at = ?, "
            f"{_MOVE_ON.format(ended='failed')}"
            f"WHERE id = ? {fence}RETURNING {_COLUMNS}",
            (error[:_ERROR_CHARS], to_ms(now), next_ms, next_ms, next_ms, reminder_id, *fenced),
        )

    async def skip(
        self, reminder_id: str, *, now: datetime, expected: datetime, next_fire_at: datetime
    ) -> Reminder | None:
        return await self._update_one(
            "UPDATE reminders SET next_fire_at = ?, updated_at = ? "
            f"WHERE id = ? AND {_READY} AND next_fire_at = ? RETURNING {_COLUMNS}",
            (to_ms(next_fire_at), to_ms(now), reminder_id, to_ms(expected)),
        )

    async def claimed(self) -> list[Reminder]:
        # `+status` keeps the planner on the small partial lease index
        # instead of walking every active row through reminders_due.
        return await self._rows(
            f"SELECT {_COLUMNS} FROM reminders WHERE claim_phase IS NOT NULL "
            "AND +status = 'active' ORDER BY lease_until"
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
            "UPDATE reminders SET status = 'active', next_fire_at = ?, "
            "updated_at = MAX(?, last_fired_at + 1) "
            "WHERE id = ? AND attempts = ? AND claimed_at IS NULL "
            "AND last_fired_at IS NOT NULL AND updated_at = last_fired_at "
            "AND ((cron IS NULL AND status = 'done') "
            "OR (cron IS NOT NULL AND status = 'active' AND next_fire_at > ?)) "
            f"AND {clause} RETURNING {_COLUMNS}",
            [to_ms(until), to_ms(now), reminder_id, firing, to_ms(until), *params],
        )


def _scope(
    agent_id: str | None, session_key: str | None, created_by: str | None = None
) -> tuple[str, list[Any]]:
    clauses: list[str] = ["1"]
    params: list[Any] = []
    if agent_id is not None:
        clauses.append("agent_id = ?")
        params.append(agent_id)
    if session_key is not None:
        clauses.append("session_key = ?")
        params.append(session_key)
    if created_by is not None:
        clauses.append("created_by = ?")
        params.append(created_by)
    return " AND ".join(clauses), params
