"""HeartbeatStore on the shared PostgreSQL pool: delivery claims of
commitments for several workers (see claims.py for the rules they follow)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from core.commitments.model import Commitment, Scope
from core.heartbeat.store import Final, HeartbeatStore, ReapedClaims
from core.store.commitment_sql import scope_params
from core.store.postgres.claims import NO_CLAIM, aware
from core.store.postgres.commitments import (
    ACTIVE,
    COLUMN_NAMES,
    COLUMNS,
    commitment_row,
)
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.locks import CLAIM_NAMESPACE, session_lock_id

_UNKNOWN_AFTER_RESTART = "delivery outcome unknown (process stopped mid-send); not resent"
_EXPIRED_BEFORE_SEND = "claim expired before sending (process stopped); released, nothing sent"
# The commitment columns of `c` (statements that join a second relation).
_C_COLUMNS = ", ".join(f"c.{name}" for name in COLUMN_NAMES)
# Our claims as (id, attempt) pairs, joined as `f`: each row is fenced on the
# attempt it was claimed with, the worker on the statement.
_FENCED = (
    "FROM unnest(%s::text[], %s::integer[]) AS f(id, attempts) "
    "WHERE c.id = f.id AND c.attempts = f.attempts AND c.claimed_by = %s"
)


class _FenceLost(Exception):
    """A claim is no longer ours (or no longer sendable): undo the transaction."""


def _fence(claimed: Sequence[Commitment], worker: str) -> tuple[list[str], list[int], str]:
    return [c.id for c in claimed], [c.attempts for c in claimed], worker


class PostgresHeartbeatStore(HeartbeatStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def _write_rows(self, sql: str, params: Sequence[Any]) -> list[Commitment]:
        return [commitment_row(r) for r in await self._db.write(sql, params)]

    async def due_unclaimed(
        self, *, now: datetime, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Commitment]:
        # Walks the partial commitments_due index up to `now`; claimed rows are
        # the few in flight, filtered on the way.
        page, params = "", [aware(now), now]
        if after is not None:
            page = "AND (due_earliest, id) > (%s, %s) "
            params += [aware(after[0]), after[1]]
        rows = await self._db.fetchall(
            f"SELECT {COLUMNS} FROM commitments WHERE {ACTIVE} AND due_earliest <= %s "
            f"AND due_latest >= %s AND claimed_at IS NULL {page}"
            "ORDER BY due_earliest, id LIMIT %s",
            (*params, limit),
        )
        return [commitment_row(r) for r in rows]

    async def next_due_after(self, now: datetime) -> datetime | None:
        rows = await self._db.fetchall(
            f"SELECT min(due_earliest) FROM commitments WHERE {ACTIVE} AND due_earliest > %s",
            (aware(now),),
        )
        return rows[0][0] if rows else None

    async def claim(
        self, ids: Sequence[str], *, worker: str, now: datetime, lease_until: datetime
    ) -> list[Commitment]:
        if not ids:
            return []
        # SKIP LOCKED: a row another worker is claiming (or finishing) right
        # now is passed over rather than waited on; the re-check of the WHERE
        # on the locked row means a row claimed meanwhile is never taken twice.
        claimed = await self._write_rows(
            "WITH picked AS ("
            f"  SELECT id FROM commitments WHERE id = ANY(%s) AND {ACTIVE} "
            "   AND claimed_at IS NULL ORDER BY id FOR UPDATE SKIP LOCKED) "
            "UPDATE commitments c SET claimed_at = %s, claim_phase = 'claimed', "
            "claimed_by = %s, lease_until = %s, attempts = c.attempts + 1, updated_at = %s "
            f"FROM picked WHERE c.id = picked.id RETURNING {_C_COLUMNS}",
            (list(ids), aware(now), worker, aware(lease_until), now),
        )
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
        columns = list(zip(*(scope_params(s) for s in scopes), strict=True))
        locks = [session_lock_id(s.session_key) for s in scopes]
        # Each scope's rows walk the commitments_scope index; one statement
        # for the whole page of scopes. A scope is claimed by one claimer at
        # a time: an advisory lock per session, tried for this statement
        # only (in its own namespace: a chat's turn must never find its
        # session taken by someone's claim), so two workers claiming at once
        # never split one chat's due rows (each turn would carry a part of
        # them, and the rest wait an interval).
        return await self._write_rows(
            "WITH s AS MATERIALIZED (SELECT * FROM unnest(%s::text[], %s::text[], "
            "  %s::text[], %s::text[], %s::text[], %s::text[], %s::integer[]) "
            "  AS s(agent_id, session_key, platform, chat_id, thread_id, sender_id, lock_id) "
            "  WHERE pg_try_advisory_xact_lock(%s, s.lock_id)), "
            "picked AS (SELECT p.id FROM s CROSS JOIN LATERAL ("
            "  SELECT c.id FROM commitments c WHERE c.agent_id = s.agent_id "
            "  AND c.session_key = s.session_key AND c.platform = s.platform "
            "  AND c.chat_id = s.chat_id AND c.thread_id IS NOT DISTINCT FROM s.thread_id "
            "  AND c.sender_id IS NOT DISTINCT FROM s.sender_id "
            f"  AND c.{ACTIVE} AND c.due_earliest <= %s AND c.due_latest >= %s "
            "  AND c.claimed_at IS NULL ORDER BY c.due_earliest, c.id LIMIT %s "
            "  FOR UPDATE SKIP LOCKED) p) "
            "UPDATE commitments c SET claimed_at = %s, claim_phase = 'claimed', "
            "claimed_by = %s, lease_until = %s, attempts = c.attempts + 1, updated_at = %s "
            f"FROM picked WHERE c.id = picked.id RETURNING {_C_COLUMNS}",
            (
                *(list(column) for column in columns),
                locks,
                CLAIM_NAMESPACE,
                aware(now),
                now,
                per_scope,
                aware(now),
                worker,
                aware(lease_until),
                now,
            ),
        )

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
            "UPDATE commitments c SET claim_phase = 'sending', lease_until = %s, "
            f"updated_at = %s {_FENCED} AND c.claim_phase = 'claimed' AND c.lease_until > %s "
            f"AND c.{ACTIVE} AND c.due_earliest <= %s"
        )
        params = (aware(lease_until), aware(now), *_fence(claimed, worker), now, now)
        try:
            async with self._db.transaction() as conn:
                cursor = await conn.execute(sql, params)
                if cursor.rowcount != len({c.id for c in claimed}):
                    raise _FenceLost  # rolls the whole move back: all or nothing
        except _FenceLost:
            return False
        return True

    async def release(
        self, claimed: Sequence[Commitment], *, worker: str, now: datetime, error: str
    ) -> None:
        if not claimed:
            return
        sql = (
            f"UPDATE commitments c SET {NO_CLAIM}, last_error = %s, updated_at = %s "
            f"{_FENCED} AND c.claim_phase = 'claimed'"
        )
        await self._db.write(sql, (error, aware(now), *_fence(claimed, worker)))

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
            "sent": "sent_at = %s, ",
            "dismissed": f"dismissed_at = CASE WHEN c.{ACTIVE} THEN %s ELSE c.dismissed_at END, ",
            "failed": "",
        }[status]
        sql = (
            f"UPDATE commitments c SET status = CASE WHEN c.{ACTIVE} THEN %s ELSE c.status END, "
            f"{stamp}sent_message_id = coalesce(%s, c.sent_message_id), {NO_CLAIM}, "
            f"last_error = %s, updated_at = %s {_FENCED} AND c.claim_phase IS NOT NULL"
        )
        stamped = () if status == "failed" else (aware(now),)
        params = (status, *stamped, message_id, error, aware(now), *_fence(claimed, worker))
        await self._db.write(sql, params)

    async def reap_expired_claims(self, *, now: datetime) -> ReapedClaims:
        # Rows locked right now (their owner is finishing them) are skipped:
        # a later pass sees what that owner left.
        expired = (
            "WITH expired AS (SELECT id FROM commitments WHERE claim_phase = %s "
            "AND lease_until <= %s FOR UPDATE SKIP LOCKED) "
        )
        release = (
            f"{expired}UPDATE commitments c SET {NO_CLAIM}, last_error = %s, updated_at = %s "
            f"FROM expired WHERE c.id = expired.id RETURNING {_C_COLUMNS}"
        )
        fail = (
            f"{expired}UPDATE commitments c SET "
            f"status = CASE WHEN c.{ACTIVE} THEN 'failed' ELSE c.status END, "
            f"{NO_CLAIM}, last_error = %s, updated_at = %s "
            f"FROM expired WHERE c.id = expired.id RETURNING {_C_COLUMNS}"
        )
        aware(now)
        async with self._db.transaction() as conn:
            cursor = await conn.execute(release, ("claimed", now, _EXPIRED_BEFORE_SEND, now))
            released = [commitment_row(r) for r in await cursor.fetchall()]
            cursor = await conn.execute(fail, ("sending", now, _UNKNOWN_AFTER_RESTART, now))
            failed = [commitment_row(r) for r in await cursor.fetchall()]
        return ReapedClaims(released, failed)

    async def next_lease_expiry(self) -> datetime | None:
        rows = await self._db.fetchall(
            "SELECT min(lease_until) FROM commitments WHERE claim_phase IS NOT NULL"
        )
        return rows[0][0] if rows else None

    async def take_turn(
        self, agent_id: str, session_key: str, *, now: datetime, every: timedelta
    ) -> datetime | None:
        recorded = await self._db.write(
            "INSERT INTO heartbeat_turns(agent_id, session_key, last_turn_at) "
            "VALUES (%s, %s, %s) ON CONFLICT (session_key, agent_id) "
            "DO UPDATE SET last_turn_at = excluded.last_turn_at "
            "WHERE heartbeat_turns.last_turn_at <= %s RETURNING last_turn_at",
            (agent_id, session_key, aware(now), aware(now - every)),
        )
        if recorded:
            return None
        rows = await self._db.fetchall(
            "SELECT last_turn_at FROM heartbeat_turns WHERE session_key = %s AND agent_id = %s",
            (session_key, agent_id),
        )
        # Gone meanwhile (the session was deleted): nothing to wait for.
        return rows[0][0] if rows else now

    async def last_turns(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], datetime]:
        if not keys:
            return {}
        rows = await self._db.fetchall(
            "SELECT t.agent_id, t.session_key, t.last_turn_at FROM heartbeat_turns t "
            "JOIN unnest(%s::text[], %s::text[]) AS k(agent_id, session_key) "
            "ON t.session_key = k.session_key AND t.agent_id = k.agent_id",
            ([k[0] for k in keys], [k[1] for k in keys]),
        )
        return {(r[0], r[1]): r[2] for r in rows}

    async def sent_times_since(
        self, agent_id: str, session_key: str, since: datetime
    ) -> list[datetime]:
        # One statement on the commitments_sent index (agent, session, sent_at).
        rows = await self._db.fetchall(
            "SELECT sent_at FROM commitments WHERE agent_id = %s AND session_key = %s "
            "AND sent_at >= %s ORDER BY sent_at",
            (agent_id, session_key, aware(since)),
        )
        return [r[0] for r in rows]

    async def recent_checkin_texts(self, session_key: str, since: datetime) -> list[str]:
        rows = await self._db.fetchall(
            "SELECT m.text FROM sessions s JOIN messages m ON m.session_id = s.id "
            "WHERE s.key = %s AND m.kind = 'checkin' AND m.ts >= %s AND m.active",
            (session_key, aware(since)),
        )
        return [r[0] for r in rows]
