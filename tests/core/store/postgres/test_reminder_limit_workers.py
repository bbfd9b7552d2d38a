"""The active-reminder limit holds across two workers on one PostgreSQL
database: the count and the insert are one transaction serialised per user,
so of two creations racing for the last place exactly one wins.

The race is gated, not timed: worker A stops inside its transaction right
after counting; worker B then creates, and A goes on only once B has either
finished or is seen (in pg_locks) waiting for the user's lock. With the lock
B waits, A commits, B counts again and is refused. Without it (the control
below drops `serialize` from both workers' transactions) B's insert lands
inside A's window and both win: the test tells the two apart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.messages import Target
from core.reminders.limits import TooManyReminders
from core.reminders.model import NewReminder, Reminder
from core.store.backends import Backend
from core.store.dialect import Dialect
from core.store.sql.database import Database, Params, Row, Transaction, Work
from core.store.sql.reminders import REMINDERS_NAMESPACE, SqlReminderStore
from tests.support.pg_helpers import opened_backends

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
KEYS = ("agent:main:telegram:private:42", "agent:main:telegram:group:-100")
LIMIT = 2
WAIT = 10.0  # seconds: only reached when a gate is never opened (a failure)


class _Statements:
    """One transaction's statements, as the wrapped database runs them."""

    def __init__(self, tx: Transaction, db: GatedDatabase) -> None:
        self._tx = tx
        self._db = db

    @property
    def dialect(self) -> Dialect:
        return self._tx.dialect

    async def execute(self, sql: str, params: Params = ()) -> int:
        return await self._tx.execute(sql, params)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        await self._tx.executemany(sql, rows)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return await self._tx.fetchall(sql, params)

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        row = await self._tx.fetchone(sql, params)
        if sql.startswith("SELECT count(*) FROM reminders"):
            self._db.counted.set()
            await asyncio.wait_for(self._db.proceed.wait(), WAIT)
        return row

    async def serialize(self, namespace: int, key: str) -> None:
        if self._db.locking:
            await self._tx.serialize(namespace, key)


class GatedDatabase:
    """A worker's database whose transactions stop after counting until
    `proceed` is set (set at once for a worker that is not held)."""

    def __init__(self, inner: Database, *, held: bool, locking: bool = True) -> None:
        self._inner = inner
        self.locking = locking
        self.counted = asyncio.Event()
        self.proceed = asyncio.Event()
        if not held:
            self.proceed.set()

    @property
    def dialect(self) -> Dialect:
        return self._inner.dialect

    async def transact(self, work: Work[Any], *, durable: bool = True, bulk: bool = False) -> Any:
        return await self._inner.transact(
            lambda tx: work(_Statements(tx, self)), durable=durable, bulk=bulk
        )

    async def snapshot(self, work: Work[Any]) -> Any:
        return await self._inner.snapshot(work)

    async def query(self, sql: str, params: Params = ()) -> list[Row]:
        return await self._inner.query(sql, params)

    async def execute(self, sql: str, params: Params = ()) -> list[Row]:
        return await self._inner.execute(sql, params)


@pytest.fixture
async def backends(postgres_url: str) -> AsyncIterator[list[Backend]]:
    async with opened_backends(postgres_url, 2) as opened:
        for key in KEYS:
            await opened[0].store.ensure_session(
                key,
                agent_id="main",
                platform="telegram",
                chat_id=key.rsplit(":", 1)[-1],
                chat_kind="group" if ":group:" in key else "private",
                thread_id=None,
                now=NOW,
            )
        yield opened


def new(key: str, text: str) -> NewReminder:
    return NewReminder(
        agent_id="main",
        session_key=key,
        target=Target("telegram", key.rsplit(":", 1)[-1]),
        created_by="u42",
        text=text,
        kind="after",
        cron=None,
        timezone="UTC",
        next_fire_at=NOW + timedelta(hours=1),
        created_at=NOW,
    )


async def _lock_waiters(backend: Backend) -> int:
    """Transactions waiting for a user's reminders lock."""
    rows = await backend.database.query(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid::bigint = ?",
        (REMINDERS_NAMESPACE,),
    )
    return int(rows[0][0])


async def race(backends: list[Backend], *, locking: bool) -> list[Reminder | BaseException]:
    """One place left; A counts and holds, B creates, then A goes on."""
    a_db = GatedDatabase(backends[0].database, held=True, locking=locking)
    b_db = GatedDatabase(backends[1].database, held=False, locking=locking)
    a, b = SqlReminderStore(a_db), SqlReminderStore(b_db)
    await backends[0].reminders.add(new(KEYS[0], "already there"), max_active=LIMIT)

    first = asyncio.create_task(a.add(new(KEYS[0], "from A"), max_active=LIMIT))
    await asyncio.wait_for(a_db.counted.wait(), WAIT)
    second = asyncio.create_task(b.add(new(KEYS[1], "from B"), max_active=LIMIT))
    async with asyncio.timeout(WAIT):
        # A state of the database, polled: B done, or B queued on the lock.
        while await _lock_waiters(backends[0]) == 0:
            done, _ = await asyncio.wait({second}, timeout=0.01)
            if done:
                break
    a_db.proceed.set()
    return list(await asyncio.gather(first, second, return_exceptions=True))


async def active(backend: Backend) -> list[str]:
    return sorted(r.text for r in await backend.reminders.list_all(statuses=("active",)))


async def test_of_two_workers_racing_for_the_last_place_exactly_one_wins(
    backends: list[Backend],
) -> None:
    from_a, from_b = await race(backends, locking=True)
    assert isinstance(from_a, Reminder) and from_a.text == "from A"
    assert isinstance(from_b, TooManyReminders) and from_b.limit == LIMIT
    assert await active(backends[1]) == ["already there", "from A"]


async def test_without_the_lock_both_would_win(backends: list[Backend]) -> None:
    # The control: the same gated race with `serialize` dropped lets the
    # count of both be stale, which is what the lock is there to prevent.
    from_a, from_b = await race(backends, locking=False)
    assert isinstance(from_a, Reminder) and isinstance(from_b, Reminder)
    assert await active(backends[0]) == ["already there", "from A", "from B"]
