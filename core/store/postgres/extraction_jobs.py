"""ExtractionJobStore on PostgreSQL: the extraction queue shared by every
worker. Adopting orphans picks rows with FOR UPDATE SKIP LOCKED, so two
workers looking at once never take the same job."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from core.commitments.exchange import Exchange
from core.commitments.jobs import ExtractionJob, ExtractionJobStore, NewJob
from core.commitments.model import Scope
from core.commitments.pause import PauseResult, PauseStore
from core.store.postgres.claims import aware
from core.store.postgres.connection import PostgresConnection

_COLUMNS = (
    "id, agent_id, session_key, platform, chat_id, thread_id, sender_id, chat_kind, "
    "user_message_id, user_text, assistant_text"
)
# Nobody vouches for it: released (no lease), or its lease ran out.
_ORPHAN = "(lease_until IS NULL OR lease_until <= %s)"
_QUEUE_ORDER = "lease_until NULLS FIRST, id"


def _job(row: Sequence[Any]) -> ExtractionJob:
    scope = Scope(row[1], row[2], row[3], row[4], row[5], row[6])
    return ExtractionJob(int(row[0]), scope, row[7], Exchange(int(row[8]), row[9], row[10]))


class PostgresExtractionJobStore(ExtractionJobStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def enqueue(
        self, job: NewJob, *, worker: str, now: datetime, lease_until: datetime
    ) -> ExtractionJob:
        s, e = job.scope, job.exchange
        # Not durable: losing the last queued exchanges to a power loss costs
        # a follow-up at most, like the transcript write it comes from.
        async with self._db.transaction(durable=False) as conn:
            cursor = await conn.execute(
                "INSERT INTO extraction_jobs (agent_id, session_key, platform, chat_id, "
                "thread_id, sender_id, chat_kind, user_message_id, user_text, assistant_text, "
                "created_at, claimed_by, lease_until) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (
                    s.agent_id,
                    s.session_key,
                    s.platform,
                    s.chat_id,
                    s.thread_id,
                    s.sender_id,
                    job.chat_kind,
                    e.user_message_id,
                    e.user_text,
                    e.assistant_text,
                    aware(now),
                    worker,
                    aware(lease_until),
                ),
            )
            row = await cursor.fetchone()
        assert row is not None
        return ExtractionJob(int(row[0]), job.scope, job.chat_kind, job.exchange)

    async def claim_orphans(
        self, *, worker: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ExtractionJob]:
        rows = await self._db.write(
            "UPDATE extraction_jobs SET claimed_by = %s, lease_until = %s WHERE id IN ("
            f"SELECT id FROM extraction_jobs WHERE {_ORPHAN} "
            f"ORDER BY {_QUEUE_ORDER} LIMIT %s FOR UPDATE SKIP LOCKED) "
            f"RETURNING {_COLUMNS}",
            (worker, aware(lease_until), aware(now), limit),
        )
        return sorted((_job(r) for r in rows), key=lambda j: j.id)

    async def renew(self, ids: Sequence[int], *, worker: str, lease_until: datetime) -> None:
        if not ids:
            return
        await self._db.write(
            "UPDATE extraction_jobs SET lease_until = %s WHERE claimed_by = %s AND id = ANY(%s)",
            (aware(lease_until), worker, list(ids)),
        )

    async def complete(self, ids: Sequence[int], *, worker: str) -> None:
        if not ids:
            return
        # Not fenced on the worker: a job finished twice is done either way.
        await self._db.write("DELETE FROM extraction_jobs WHERE id = ANY(%s)", (list(ids),))

    async def release(self, *, worker: str) -> int:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE extraction_jobs SET claimed_by = NULL, lease_until = NULL "
                "WHERE claimed_by = %s",
                (worker,),
            )
            return cursor.rowcount

    async def next_orphan_at(self, now: datetime) -> datetime | None:
        rows = await self._db.fetchall(
            f"SELECT lease_until FROM extraction_jobs ORDER BY {_QUEUE_ORDER} LIMIT 1"
        )
        if not rows:
            return None
        first: datetime | None = rows[0][0]
        return aware(now) if first is None else max(aware(now), first)


class PostgresPauseStore(PauseStore):
    def __init__(self, db: PostgresConnection) -> None:
        self._db = db

    async def pause(
        self, agent_id: str, *, until: datetime, kind: str, error: str, now: datetime
    ) -> PauseResult:
        async with self._db.transaction() as conn:
            # A live pause stands; an ended one is replaced. The row lock
            # makes concurrent callers on several workers agree on one start.
            cursor = await conn.execute(
                "INSERT INTO extraction_pauses (agent_id, until, kind, error) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id) DO UPDATE SET "
                "until = EXCLUDED.until, kind = EXCLUDED.kind, error = EXCLUDED.error "
                "WHERE extraction_pauses.until <= %s RETURNING until",
                (agent_id, aware(until), kind, error, aware(now)),
            )
            if (row := await cursor.fetchone()) is not None:
                return PauseResult(True, row[0])
            cursor = await conn.execute(
                "SELECT until FROM extraction_pauses WHERE agent_id = %s", (agent_id,)
            )
            row = await cursor.fetchone()
            assert row is not None  # the conflicting row, locked by the INSERT
            return PauseResult(False, row[0])

    async def paused_until(self, agent_id: str) -> datetime | None:
        rows = await self._db.fetchall(
            "SELECT until FROM extraction_pauses WHERE agent_id = %s", (agent_id,)
        )
        return rows[0][0] if rows else None

    async def resume(self, agent_id: str) -> bool:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM extraction_pauses WHERE agent_id = %s", (agent_id,)
            )
            return cursor.rowcount > 0
