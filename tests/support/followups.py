"""The follow-up stores (commitments, heartbeat, reminders) on either backend,
for the tests that exercise them directly, with what those tests need
around them: session rows and raw SQL. Not a production interface.

On PostgreSQL the session rows are written with SQL (the columns of
migration m0001), so these tests do not depend on the transcript store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.commitments.store import CommitmentStore
from core.heartbeat.store import HeartbeatStore
from core.reminders.store import ReminderStore
from core.store.base import Store
from core.store.postgres import PostgresStore
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.due_claims import pick_due_per_chat
from core.store.sql.commitments import SqlCommitmentStore
from core.store.sql.heartbeat import SqlHeartbeatStore
from core.store.sql.reminders import SqlReminderStore
from core.store.sqlite import (
    SqliteStore,
)
from tests.support.store_helpers import open_store


@dataclass
class Followups:
    backend: str  # "sqlite" or "postgres"
    commitments: CommitmentStore
    heartbeat: HeartbeatStore
    reminders: ReminderStore
    sqlite: SqliteStore | None = None
    postgres: PostgresConnection | None = None

    async def ensure_session(
        self,
        key: str,
        *,
        agent_id: str = "main",
        platform: str = "telegram",
        chat_id: str | None = None,
        chat_kind: str = "private",
        thread_id: str | None = None,
        now: datetime,
    ) -> None:
        chat = chat_id if chat_id is not None else key.rsplit(":", 1)[-1]
        if self.sqlite is not None:
            await self.sqlite.ensure_session(
                key,
                agent_id=agent_id,
                platform=platform,
                chat_id=chat,
                chat_kind=chat_kind,  # type: ignore[arg-type]
                thread_id=thread_id,
                now=now,
            )
            return
        await self.execute(
            "INSERT INTO sessions (key, agent_id, platform, chat_id, chat_kind, thread_id, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
            (key, agent_id, platform, chat, chat_kind, thread_id, now, now),
        )

    async def delete_session(self, key: str) -> None:
        if self.sqlite is not None:
            await self.sqlite.delete_session(key)
        else:
            await self.execute("DELETE FROM sessions WHERE key = ?", (key,))

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of `sql` written with `?` placeholders, on either backend."""
        if self.sqlite is not None:
            return [tuple(r) for r in await self.sqlite.connection.fetchall(sql, params)]
        assert self.postgres is not None
        return [tuple(r) for r in await self.postgres.fetchall(sql.replace("?", "%s"), params)]

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        if self.sqlite is not None:
            await self.sqlite.connection.run_write(lambda conn: conn.execute(sql, params))
            return
        assert self.postgres is not None
        async with self.postgres.transaction() as conn:
            await conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]


def postgres_followups(db: PostgresConnection) -> Followups:
    return Followups(
        "postgres",
        SqlCommitmentStore(db),
        SqlHeartbeatStore(db, pick_due=pick_due_per_chat),
        SqlReminderStore(db),
        postgres=db,
    )


@asynccontextmanager
async def open_followups(url: str) -> AsyncIterator[Followups]:
    """The follow-up stores of the database at `url` (sqlite:/// or postgresql://)."""
    if url.startswith("sqlite:"):
        store = open_store(url)
        async with store:
            yield Followups(
                "sqlite",
                SqlCommitmentStore(store.connection),
                SqlHeartbeatStore(store.connection),
                SqlReminderStore(store.connection),
                sqlite=store,
            )
        return
    db = PostgresConnection(url)
    await db.open()
    try:
        yield postgres_followups(db)
    finally:
        await db.close()


async def store_rows(store: Store, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of `sql` (`?` placeholders) on a transcript store's database."""
    if isinstance(store, PostgresStore):
        rows = await store.connection.fetchall(sql.replace("?", "%s"), params)
    else:
        rows = await _sqlite_store(store).connection.fetchall(sql, params)
    return [tuple(r) for r in rows]


def _sqlite_store(store: Store) -> SqliteStore:
    assert isinstance(store, SqliteStore), f"a SQLite or PostgreSQL store, not {store!r}"
    return store


async def store_execute(store: Store, sql: str, params: Sequence[Any] = ()) -> None:
    """Run `sql` (`?` placeholders) in its own transaction on a transcript
    store's database."""
    if isinstance(store, PostgresStore):
        async with store.connection.transaction() as conn:
            await conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
    else:
        await _sqlite_store(store).connection.run_write(lambda conn: conn.execute(sql, params))
