"""HeartbeatStore on the SqliteStore connection (see sqlite_commitments.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from core.commitments.model import Commitment
from core.heartbeat.store import Final, HeartbeatStore
from core.store.sqlite import SqliteStore, from_ms, to_ms
from core.store.sqlite_commitments import _COLUMNS, ACTIVE, _row

_UNKNOWN_AFTER_RESTART = "delivery outcome unknown (process stopped mid-send); not resent"


def _marks(ids: Sequence[str]) -> str:
    return ", ".join("?" * len(ids))


class SqliteHeartbeatStore(HeartbeatStore):
    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    async def due_unclaimed(self, *, now: datetime, limit: int) -> list[Commitment]:
        # Walks the partial commitments_due index up to `now`; claimed rows are
        # the few in flight, filtered on the way.
        rows = await self._store.fetchall(
            f"SELECT {_COLUMNS} FROM commitments WHERE {ACTIVE} AND due_earliest <= ? "
            "AND due_latest >= ? AND claimed_at IS NULL ORDER BY due_earliest, id LIMIT ?",
            (to_ms(now), to_ms(now), limit),
        )
        return [_row(r) for r in rows]

    async def next_due_after(self, now: datetime) -> datetime | None:
        rows = await self._store.fetchall(
            f"SELECT min(due_earliest) FROM commitments WHERE {ACTIVE} AND due_earliest > ?",
            (to_ms(now),),
        )
        value = rows[0][0] if rows else None
        return None if value is None else from_ms(value)

    async def claim(self, ids: Sequence[str], *, now: datetime) -> list[Commitment]:
        if not ids:
            return []
        sql = (
            "UPDATE commitments SET claimed_at = ?, attempts = attempts + 1, updated_at = ? "
            f"WHERE id IN ({_marks(ids)}) AND {ACTIVE} AND claimed_at IS NULL "
            f"RETURNING {_COLUMNS}"
        )
        params = (to_ms(now), to_ms(now), *ids)

        def work(db: sqlite3.Connection) -> list[Commitment]:
            return [_row(r) for r in db.execute(sql, params).fetchall()]

        claimed = await self._store._write(work)
        order = {cid: i for i, cid in enumerate(ids)}
        return sorted(claimed, key=lambda c: order[c.id])

    async def release(self, ids: Sequence[str], *, now: datetime, error: str) -> None:
        if not ids:
            return
        sql = (
            "UPDATE commitments SET claimed_at = NULL, last_error = ?, updated_at = ? "
            f"WHERE id IN ({_marks(ids)})"
        )
        params = (error, to_ms(now), *ids)
        await self._store._write(lambda db: db.execute(sql, params))

    async def finish(
        self,
        ids: Sequence[str],
        status: Final,
        *,
        now: datetime,
        message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        if not ids:
            return
        stamp = {"sent": "sent_at", "dismissed": "dismissed_at", "failed": "updated_at"}[status]
        sql = (
            f"UPDATE commitments SET status = ?, {stamp} = ?, updated_at = ?, claimed_at = NULL, "
            "sent_message_id = coalesce(?, sent_message_id), last_error = ? "
            f"WHERE id IN ({_marks(ids)}) AND {ACTIVE}"
        )
        params = (status, to_ms(now), to_ms(now), message_id, error, *ids)
        await self._store._write(lambda db: db.execute(sql, params))

    async def fail_unconfirmed_claims(self, *, now: datetime) -> list[Commitment]:
        sql = (
            "UPDATE commitments SET status = 'failed', claimed_at = NULL, last_error = ?, "
            f"updated_at = ? WHERE claimed_at IS NOT NULL AND {ACTIVE} RETURNING {_COLUMNS}"
        )
        params = (_UNKNOWN_AFTER_RESTART, to_ms(now))

        def work(db: sqlite3.Connection) -> list[Commitment]:
            return [_row(r) for r in db.execute(sql, params).fetchall()]

        return await self._store._write(work)

    async def last_turn_at(self, agent_id: str, session_key: str) -> datetime | None:
        rows = await self._store.fetchall(
            "SELECT last_turn_at FROM heartbeat_turns WHERE agent_id = ? AND session_key = ?",
            (agent_id, session_key),
        )
        return from_ms(rows[0][0]) if rows else None

    async def record_turn(self, agent_id: str, session_key: str, *, now: datetime) -> None:
        sql = (
            "INSERT INTO heartbeat_turns(agent_id, session_key, last_turn_at) VALUES (?, ?, ?) "
            "ON CONFLICT(agent_id, session_key) DO UPDATE SET last_turn_at = excluded.last_turn_at"
        )
        params = (agent_id, session_key, to_ms(now))
        await self._store._write(lambda db: db.execute(sql, params))

    async def sent_times_since(
        self, agent_id: str, session_key: str, since: datetime
    ) -> list[datetime]:
        rows = await self._store.fetchall(
            "SELECT sent_at FROM commitments WHERE agent_id = ? AND session_key = ? "
            "AND sent_at >= ? ORDER BY sent_at",
            (agent_id, session_key, to_ms(since)),
        )
        return [from_ms(r[0]) for r in rows]

    async def recent_checkin_texts(self, session_key: str, since: datetime) -> list[str]:
        rows = await self._store.fetchall(
            "SELECT m.text FROM sessions s JOIN messages m ON m.session_id = s.id "
            "WHERE s.key = ? AND m.kind = 'checkin' AND m.ts >= ? AND m.active = 1",
            (session_key, to_ms(since)),
        )
        return [r[0] for r in rows]
