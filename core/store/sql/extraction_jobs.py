"""ExtractionJobStore and PauseStore in SQL written once: the extraction
queue shared by every worker, and one pause row per agent. Adopting orphans
picks rows with the dialect's `skip_locked`, so two PostgreSQL workers
looking at once never take the same job (SQLite has one writer at a time)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from core.commitments.exchange import Exchange
from core.commitments.jobs import ExtractionJob, ExtractionJobStore, NewJob
from core.commitments.model import Scope
from core.commitments.pause import PauseResult, PauseStore
from core.store.dialect import Dialect, placeholders
from core.store.sql.database import Database, Row, Transaction
from core.store.sql.silenced import SILENCED_SCOPE

_COLUMNS = (
    "id, agent_id, session_key, platform, chat_id, thread_id, sender_id, chat_kind, "
    "user_message_id, user_text, assistant_text"
)


@dataclass(frozen=True, slots=True)
class _Queue:
    """The queue order as each schema's extraction_jobs_lease index holds it
    (released jobs, with no lease, first), and "nobody vouches for it" in
    terms that index answers."""

    order: str
    orphan: str  # one `?`: now


# SQLite indexes an expression (its times are milliseconds, 0 before any
# lease); PostgreSQL the column, NULLS FIRST.
_QUEUES = {
    "sqlite": _Queue("coalesce(lease_until, 0), id", "coalesce(lease_until, 0) <= ?"),
    "postgres": _Queue("lease_until NULLS FIRST, id", "(lease_until IS NULL OR lease_until <= ?)"),
}


def _job(row: Row) -> ExtractionJob:
    scope = Scope(row[1], row[2], row[3], row[4], row[5], row[6], chat_kind=row[7])
    return ExtractionJob(int(row[0]), scope, Exchange(int(row[8]), row[9], row[10]))


class SqlExtractionJobStore(ExtractionJobStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d: Dialect = db.dialect
        self._queue = _QUEUES[self._d.name]

    async def enqueue(
        self, job: NewJob, *, worker: str, now: datetime, lease_until: datetime
    ) -> ExtractionJob | None:
        s, e, d = job.scope, job.exchange, self._d
        silenced = (s.agent_id, s.platform, s.sender_id or "", s.session_key)
        params = (
            s.agent_id, s.session_key, s.platform, s.chat_id, s.thread_id, s.sender_id,
            s.chat_kind, e.user_message_id, e.user_text, e.assistant_text,
            d.time(now), worker, d.time(lease_until),
        )  # fmt: skip

        async def work(tx: Transaction) -> int | None:
            # In the writing transaction: a switch made on another worker or
            # by the CLI counts at once, and the turn pays no extra trip.
            if await tx.fetchone(SILENCED_SCOPE, silenced) is not None:
                return None
            row = await tx.fetchone(
                "INSERT INTO extraction_jobs (agent_id, session_key, platform, chat_id, "
                "thread_id, sender_id, chat_kind, user_message_id, user_text, assistant_text, "
                f"created_at, claimed_by, lease_until) VALUES ({placeholders(13)}) RETURNING id",
                params,
            )
            assert row is not None
            return int(row[0])

        # Not durable: losing the last queued exchanges to a power loss costs
        # a follow-up at most, like the transcript write it comes from.
        job_id = await self._db.transact(work, durable=False)
        return None if job_id is None else ExtractionJob(job_id, job.scope, job.exchange)

    async def claim_orphans(
        self, *, worker: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ExtractionJob]:
        q, d = self._queue, self._d
        rows = await self._db.execute(
            "UPDATE extraction_jobs SET claimed_by = ?, lease_until = ? WHERE id IN ("
            f"SELECT id FROM extraction_jobs WHERE {q.orphan} "
            f"ORDER BY {q.order} LIMIT ?{d.skip_locked}) RETURNING {_COLUMNS}",
            (worker, d.time(lease_until), d.time(now), limit),
        )
        return sorted((_job(r) for r in rows), key=lambda j: j.id)

    async def renew(self, ids: Sequence[int], *, worker: str, lease_until: datetime) -> None:
        if not ids:
            return
        await self._db.execute(
            "UPDATE extraction_jobs SET lease_until = ? "
            f"WHERE claimed_by = ? AND id IN ({placeholders(len(ids))})",
            (self._d.time(lease_until), worker, *ids),
        )

    async def existing(self, ids: Sequence[int]) -> set[int]:
        if not ids:
            return set()
        rows = await self._db.query(
            f"SELECT id FROM extraction_jobs WHERE id IN ({placeholders(len(ids))})", tuple(ids)
        )
        return {int(r[0]) for r in rows}

    async def complete(self, ids: Sequence[int], *, worker: str) -> None:
        if not ids:
            return
        # Not fenced on the worker: a job finished twice (its lease ran out
        # under a slow worker) is done either way.
        await self._db.execute(
            f"DELETE FROM extraction_jobs WHERE id IN ({placeholders(len(ids))})", tuple(ids)
        )

    async def release(self, *, worker: str) -> int:
        async def work(tx: Transaction) -> int:
            return await tx.execute(
                "UPDATE extraction_jobs SET claimed_by = NULL, lease_until = NULL "
                "WHERE claimed_by = ?",
                (worker,),
            )

        return await self._db.transact(work)

    async def next_orphan_at(self, now: datetime) -> datetime | None:
        rows = await self._db.query(
            f"SELECT lease_until FROM extraction_jobs ORDER BY {self._queue.order} LIMIT 1"
        )
        if not rows:
            return None
        first = self._d.from_maybe_time(rows[0][0])
        return now if first is None else max(now, first)


class SqlPauseStore(PauseStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d: Dialect = db.dialect

    async def pause(
        self, agent_id: str, *, until: datetime, kind: str, error: str, now: datetime
    ) -> PauseResult:
        d = self._d

        async def work(tx: Transaction) -> PauseResult:
            # A live pause stands; an ended one is replaced. The row lock
            # makes concurrent callers on several workers agree on one start.
            began = await tx.fetchone(
                "INSERT INTO extraction_pauses (agent_id, until, kind, error) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (agent_id) DO UPDATE SET "
                "until = excluded.until, kind = excluded.kind, error = excluded.error "
                "WHERE extraction_pauses.until <= ? RETURNING until",
                (agent_id, d.time(until), kind, error, d.time(now)),
            )
            if began is not None:
                return PauseResult(True, until)
            row = await tx.fetchone(
                "SELECT until FROM extraction_pauses WHERE agent_id = ?", (agent_id,)
            )
            assert row is not None  # the conflicting row, locked by the INSERT
            return PauseResult(False, d.from_time(row[0]))

        return await self._db.transact(work)

    async def paused_until(self, agent_id: str) -> datetime | None:
        rows = await self._db.query(
            "SELECT until FROM extraction_pauses WHERE agent_id = ?", (agent_id,)
        )
        return self._d.from_time(rows[0][0]) if rows else None

    async def resume(self, agent_id: str) -> bool:
        rows = await self._db.execute(
            "DELETE FROM extraction_pauses WHERE agent_id = ? RETURNING 1", (agent_id,)
        )
        return bool(rows)
