"""HeartbeatStore on the shared SQLite connection (see commitments.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta

from core.commitments.model import Commitment, Scope
from core.heartbeat.store import Final, HeartbeatStore, ReapedClaims
from core.store.commitment_sql import scope_params
from core.store.sqlite.commitments import _COLUMNS, _SCOPE_MATCH, ACTIVE, _row
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms

_UNKNOWN_AFTER_RESTART = "delivery outcome unknown (process stopped mid-send); not resent"
_EXPIRED_BEFORE_SEND = "claim expired before sending (process stopped); released, nothing sent"
# Ends a claim: every claim column goes, so no later statement sees a leftover.
_NO_CLAIM = "claimed_at = NULL, claim_phase = NULL, claimed_by = NULL, lease_until = NULL"
# The fence: the claimant and the attempt it claimed.
_OURS = "claimed_by = ? AND attempts = ?"


class _FenceLost(Exception):
    """A claim is no longer ours (or no longer sendable): undo the transaction."""


def _marks(ids: Sequence[str]) -> str:
    return ", ".join("?" * len(ids))


class SqliteHeartbeatStore(HeartbeatStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def due_unclaimed(
        self, *, now: datetime, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Commitment]:
        # Walks the partial commitments_due index up to `now`; claimed rows are
        # the few in flight, filtered on the way.
        page, params = "", [to_ms(now), to_ms(now)]
        if after is not None:
            page = "AND (due_earliest > ? OR (due_earliest = ? AND id > ?)) "
            params += [to_ms(after[0]), to_ms(after[0]), after[1]]
        rows = await self._store.fetchall(
            f"SELECT {_COLUMNS} FROM commitments WHERE {ACTIVE} AND due_earliest <= ? "
            f"AND due_latest >= ? AND claimed_at IS NULL {page}"
            "ORDER BY due_earliest, id LIMIT ?",
            (*params, limit),
        )
        return [_row(r) for r in rows]

    async def next_due_after(self, now: datetime) -> datetime | None:
        rows = await self._store.fetchall(
            f"SELECT min(due_earliest) FROM commitments WHERE {ACTIVE} AND due_earliest > ?",
            (to_ms(now),),
        )
        value = rows[0][0] if rows else None
        return None if value is None else from_ms(value)

    async def claim(
        self, ids: Sequence[str], *, worker: str, now: datetime, lease_until: datetime
    ) -> list[Commitment]:
        if not ids:
            return []
        sql = (
            "UPDATE commitments SET claimed_at = ?, claim_phase = 'claimed', claimed_by = ?, "
            "lease_until = ?, attempts = attempts + 1, updated_at = ? "
            f"WHERE id IN ({_marks(ids)}) AND {ACTIVE} AND claimed_at IS NULL "
            f"RETURNING {_COLUMNS}"
        )
        params = (to_ms(now), worker, to_ms(lease_until), to_ms(now), *ids)

        def work(db: sqlite3.Connection) -> list[Commitment]:
            return [_row(r) for r in db.execute(sql, params).fetchall()]

        claimed = await self._store._write(work)
        order = {cid: i for i, cid in enumerate(ids)}
        return sorted(claimed, key=lambda c: order[c.id])

    async def claim_due(
        self,
        scopes: Sequence[Scope],
        *,
        per_scope: int,
        worker: str,
        now: datetime,
        lease_until: datetime,
    ) -> list[Commitment]:
        if not scopes:
            return []
        pick = (
            f"SELECT id FROM commitments WHERE {_SCOPE_MATCH} AND {ACTIVE} "
            "AND due_earliest <= ? AND due_latest >= ? AND claimed_at IS NULL "
            "ORDER BY due_earliest, id LIMIT ?"
        )
        claim = (
            "UPDATE commitments SET claimed_at = ?, claim_phase = 'claimed', claimed_by = ?, "
            "lease_until = ?, attempts = attempts + 1, updated_at = ? "
            f"WHERE id = ? RETURNING {_COLUMNS}"
        )
        at = to_ms(now)

        def work(db: sqlite3.Connection) -> list[Commitment]:
            claimed = []
            for scope in scopes:
                ids = db.execute(pick, (*scope_params(scope), at, at, per_scope)).fetchall()
                for (cid,) in ids:
                    row = db.execute(claim, (at, worker, to_ms(lease_until), at, cid)).fetchone()
                    claimed.append(_row(row))
            return claimed

        return await self._store._write(work)

    async def begin_sending(
        self,
        claimed: Sequence[Commitment],
        *,
        worker: str,
        now: datetime,
        lease_until: datetime,
    ) -> bool:
        if not claimed:
            return False
        sql = (
            "UPDATE commitments SET claim_phase = 'sending', lease_until = ?, updated_at = ? "
            f"WHERE id = ? AND {_OURS} AND claim_phase = 'claimed' AND lease_until > ? "
            f"AND {ACTIVE} AND due_earliest <= ?"
        )
        rows = [
            (to_ms(lease_until), to_ms(now), c.id, worker, c.attempts, to_ms(now), to_ms(now))
            for c in claimed
        ]

        def work(db: sqlite3.Connection) -> None:
            for params in rows:
                if db.execute(sql, params).rowcount != 1:
                    raise _FenceLost  # rolls the whole move back: all or nothing

        try:
            await self._store._write(work)
        except _FenceLost:
            return False
        return True

    async def release(
        self, claimed: Sequence[Commitment], *, worker: str, now: datetime, error: str
    ) -> None:
        if not claimed:
            return
        sql = (
            f"UPDATE commitments SET {_NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE id = ? AND {_OURS} AND claim_phase = 'claimed'"
        )
        rows = [(error, to_ms(now), c.id, worker, c.attempts) for c in claimed]
        await self._store._write(lambda db: db.executemany(sql, rows))

    async def finish(
        self,
        claimed: Sequence[Commitment],
        status: Final,
        *,
        worker: str,
        now: datetime,
        message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        if not claimed:
            return
        # A send is stamped even on a row the user dismissed meanwhile: it
        # happened, and it counts toward the daily cap.
        stamp = {
            "sent": "sent_at = ?, ",
            "dismissed": f"dismissed_at = CASE WHEN {ACTIVE} THEN ? ELSE dismissed_at END, ",
            "failed": "",
        }[status]
        sql = (
            f"UPDATE commitments SET status = CASE WHEN {ACTIVE} THEN ? ELSE status END, "
            f"{stamp}sent_message_id = coalesce(?, sent_message_id), {_NO_CLAIM}, "
            f"last_error = ?, updated_at = ? WHERE id = ? AND {_OURS} AND claim_phase IS NOT NULL"
        )
        stamped = () if status == "failed" else (to_ms(now),)
        rows = [
            (status, *stamped, message_id, error, to_ms(now), c.id, worker, c.attempts)
            for c in claimed
        ]
        await self._store._write(lambda db: db.executemany(sql, rows))

    async def reap_expired_claims(self, *, now: datetime) -> ReapedClaims:
        release = (
            f"UPDATE commitments SET {_NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE claim_phase = 'claimed' AND lease_until <= ? RETURNING {_COLUMNS}"
        )
        fail = (
            f"UPDATE commitments SET status = CASE WHEN {ACTIVE} THEN 'failed' ELSE status END, "
            f"{_NO_CLAIM}, last_error = ?, updated_at = ? "
            f"WHERE claim_phase = 'sending' AND lease_until <= ? RETURNING {_COLUMNS}"
        )

        def work(db: sqlite3.Connection) -> ReapedClaims:
            released = db.execute(release, (_EXPIRED_BEFORE_SEND, to_ms(now), to_ms(now)))
            released_rows = [_row(r) for r in released.fetchall()]
            failed = db.execute(fail, (_UNKNOWN_AFTER_RESTART, to_ms(now), to_ms(now)))
            return ReapedClaims(released_rows, [_row(r) for r in failed.fetchall()])

        return await self._store._write(work)

    async def next_lease_expiry(self) -> datetime | None:
        rows = await self._store.fetchall(
            "SELECT min(lease_until) FROM commitments WHERE claim_phase IS NOT NULL"
        )
        value = rows[0][0] if rows else None
        return None if value is None else from_ms(value)

    async def take_turn(
        self, agent_id: str, session_key: str, *, now: datetime, every: timedelta
    ) -> datetime | None:
        def work(db: sqlite3.Connection) -> datetime | None:
            row = db.execute(
                "SELECT last_turn_at FROM heartbeat_turns WHERE agent_id = ? AND session_key = ?",
                (agent_id, session_key),
            ).fetchone()
            if row is not None and from_ms(row[0]) + every > now:
                return from_ms(row[0])
            db.execute(
                "INSERT INTO heartbeat_turns(agent_id, session_key, last_turn_at) VALUES (?, ?, ?) "
                "ON CONFLICT(agent_id, session_key) DO UPDATE SET "
                "last_turn_at = excluded.last_turn_at",
                (agent_id, session_key, to_ms(now)),
            )
            return None

        return await self._store._write(work)

    async def last_turns(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], datetime]:
        if not keys:
            return {}
        pairs = ", ".join("(?, ?)" for _ in keys)
        rows = await self._store.fetchall(
            "SELECT agent_id, session_key, last_turn_at FROM heartbeat_turns "
            f"WHERE (agent_id, session_key) IN (VALUES {pairs})",
            [part for key in keys for part in key],
        )
        return {(r[0], r[1]): from_ms(r[2]) for r in rows}

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
