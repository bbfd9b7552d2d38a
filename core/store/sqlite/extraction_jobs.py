"""ExtractionJobStore on the shared SQLite connection (see commitments.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from core.commitments.exchange import Exchange
from core.commitments.jobs import ExtractionJob, ExtractionJobStore, NewJob
from core.commitments.model import Scope
from core.commitments.pause import PauseResult, PauseStore
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.rows import from_ms, to_ms

_COLUMNS = (
    "id, agent_id, session_key, platform, chat_id, thread_id, sender_id, chat_kind, "
    "user_message_id, user_text, assistant_text"
)
# Nobody vouches for it: released, or its lease ran out.
_ORPHAN = "coalesce(lease_until, 0) <= ?"


def _job(row: sqlite3.Row | tuple[Any, ...]) -> ExtractionJob:
    scope = Scope(row[1], row[2], row[3], row[4], row[5], row[6])
    return ExtractionJob(int(row[0]), scope, row[7], Exchange(int(row[8]), row[9], row[10]))


def _marks(ids: Sequence[int]) -> str:
    return ", ".join("?" * len(ids))


class SqliteExtractionJobStore(ExtractionJobStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def enqueue(
        self, job: NewJob, *, worker: str, now: datetime, lease_until: datetime
    ) -> ExtractionJob:
        s, e = job.scope, job.exchange
        params = (
            s.agent_id, s.session_key, s.platform, s.chat_id, s.thread_id, s.sender_id,
            job.chat_kind, e.user_message_id, e.user_text, e.assistant_text,
            to_ms(now), worker, to_ms(lease_until),
        )  # fmt: skip

        def work(db: sqlite3.Connection) -> int:
            cursor = db.execute(
                "INSERT INTO extraction_jobs (agent_id, session_key, platform, chat_id, "
                "thread_id, sender_id, chat_kind, user_message_id, user_text, assistant_text, "
                "created_at, claimed_by, lease_until) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                params,
            )
            return int(cursor.lastrowid or 0)

        job_id = await self._store._write(work)
        return ExtractionJob(job_id, job.scope, job.chat_kind, job.exchange)

    async def claim_orphans(
        self, *, worker: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ExtractionJob]:
        def work(db: sqlite3.Connection) -> list[ExtractionJob]:
            rows = db.execute(
                f"UPDATE extraction_jobs SET claimed_by = ?, lease_until = ? WHERE id IN ("
                f"SELECT id FROM extraction_jobs WHERE {_ORPHAN} "
                "ORDER BY coalesce(lease_until, 0), id LIMIT ?) "
                f"RETURNING {_COLUMNS}",
                (worker, to_ms(lease_until), to_ms(now), limit),
            ).fetchall()
            return sorted((_job(r) for r in rows), key=lambda j: j.id)

        return await self._store._write(work)

    async def renew(self, ids: Sequence[int], *, worker: str, lease_until: datetime) -> None:
        if not ids:
            return
        sql = (
            "UPDATE extraction_jobs SET lease_until = ? "
            f"WHERE claimed_by = ? AND id IN ({_marks(ids)})"
        )
        await self._store._write(lambda db: db.execute(sql, (to_ms(lease_until), worker, *ids)))

    async def complete(self, ids: Sequence[int], *, worker: str) -> None:
        if not ids:
            return
        # Not fenced on the worker: a job finished twice (its lease ran out
        # under a slow worker) is done either way.
        sql = f"DELETE FROM extraction_jobs WHERE id IN ({_marks(ids)})"
        await self._store._write(lambda db: db.execute(sql, tuple(ids)))

    async def release(self, *, worker: str) -> int:
        def work(db: sqlite3.Connection) -> int:
            return db.execute(
                "UPDATE extraction_jobs SET claimed_by = NULL, lease_until = NULL "
                "WHERE claimed_by = ?",
                (worker,),
            ).rowcount

        return await self._store._write(work)

    async def next_orphan_at(self, now: datetime) -> datetime | None:
        rows = await self._store.fetchall(
            "SELECT min(coalesce(lease_until, 0)) FROM extraction_jobs"
        )
        if not rows or rows[0][0] is None:
            return None
        return max(now, from_ms(int(rows[0][0]))) if rows[0][0] else now


class SqlitePauseStore(PauseStore):
    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def pause(
        self, agent_id: str, *, until: datetime, kind: str, error: str, now: datetime
    ) -> PauseResult:
        def work(db: sqlite3.Connection) -> PauseResult:
            # A live pause stands; an ended one is replaced.
            began = db.execute(
                "INSERT INTO extraction_pauses (agent_id, until, kind, error) VALUES (?,?,?,?) "
                "ON CONFLICT (agent_id) DO UPDATE SET until = excluded.until, "
                "kind = excluded.kind, error = excluded.error "
                "WHERE extraction_pauses.until <= ? RETURNING until",
                (agent_id, to_ms(until), kind, error, to_ms(now)),
            ).fetchone()
            if began is not None:
                return PauseResult(True, until)
            row = db.execute(
                "SELECT until FROM extraction_pauses WHERE agent_id = ?", (agent_id,)
            ).fetchone()
            return PauseResult(False, from_ms(row[0]))

        return await self._store._write(work)

    async def paused_until(self, agent_id: str) -> datetime | None:
        rows = await self._store._fetch(
            "SELECT until FROM extraction_pauses WHERE agent_id = ?", (agent_id,)
        )
        return from_ms(rows[0][0]) if rows else None

    async def resume(self, agent_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute("DELETE FROM extraction_pauses WHERE agent_id = ?", (agent_id,))
            return cursor.rowcount > 0

        return await self._store._write(work)
