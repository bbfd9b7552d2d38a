"""The database's session lock: a chat's turn runs on one worker at a time,
another chat is never held up by it, and a worker that dies frees its chats."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from core.locks import SessionLocks
from core.store.postgres.locks import PostgresSessionGuard


@pytest.fixture
async def guards(postgres_url: str) -> AsyncIterator[list[PostgresSessionGuard]]:
    opened = [PostgresSessionGuard(postgres_url) for _ in range(2)]
    try:
        yield opened
    finally:
        for guard in opened:
            await guard.close()


@pytest.fixture
def workers(guards: list[PostgresSessionGuard]) -> tuple[SessionLocks, SessionLocks]:
    return SessionLocks(shared=guards[0]), SessionLocks(shared=guards[1])


def refused(guard: PostgresSessionGuard, times: int) -> asyncio.Event:
    """Set once the database refused `guard` a lock `times` times: it is
    waiting, retrying, rather than not asking at all."""
    ask, count, done = guard._try, 0, asyncio.Event()

    async def counted(lock_id: int) -> bool:
        nonlocal count
        got = await ask(lock_id)
        if not got:
            count += 1
            if count >= times:
                done.set()
        return got

    guard._try = counted  # type: ignore[method-assign]
    return done


async def hold_until(locks: SessionLocks, key: str, held: asyncio.Event, go: asyncio.Event) -> None:
    async with locks.hold(key):
        held.set()
        await go.wait()


async def test_one_chat_runs_on_one_worker_at_a_time(workers, guards) -> None:
    a, b = workers
    b_retried = refused(guards[1], 3)
    a_held, a_go = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(hold_until(a, "chat-1", a_held, a_go))
    await a_held.wait()
    b_held, b_go = asyncio.Event(), asyncio.Event()
    second = asyncio.create_task(hold_until(b, "chat-1", b_held, b_go))
    other_held, other_go = asyncio.Event(), asyncio.Event()
    other = asyncio.create_task(hold_until(b, "chat-2", other_held, other_go))
    await asyncio.wait_for(other_held.wait(), 5)  # another chat is not held up
    await asyncio.wait_for(b_retried.wait(), 5)  # b asked for chat-1, and asked again
    assert not b_held.is_set()
    a_go.set()
    await first
    await asyncio.wait_for(b_held.wait(), 5)
    assert b_held.is_set()
    b_go.set()
    other_go.set()
    await asyncio.gather(second, other)


async def test_a_worker_that_dies_frees_its_chats(workers, postgres_url: str) -> None:
    a, b = workers
    a_held, a_go = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(hold_until(a, "chat-1", a_held, a_go))
    await a_held.wait()
    async with b.hold_unless_elsewhere("chat-1") as held:
        assert not held  # a holds it
    # The worker's process dies: PostgreSQL ends its session.
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks "
            "WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()"
        ).fetchall()
    assert ended == [(True,)]  # a's session, the one holding the lock
    b_held, b_go = asyncio.Event(), asyncio.Event()
    second = asyncio.create_task(hold_until(b, "chat-1", b_held, b_go))
    await asyncio.wait_for(b_held.wait(), 5)
    assert b_held.is_set()
    b_go.set()
    a_go.set()
    await asyncio.gather(first, second)


async def test_work_another_worker_may_do_is_left_to_it_not_waited_for(workers) -> None:
    a, b = workers
    a_held, a_go = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(hold_until(a, "chat-1", a_held, a_go))
    await a_held.wait()
    async with b.hold_unless_elsewhere("chat-1") as held:
        assert not held
    async with b.hold_unless_elsewhere("chat-2") as held:
        assert held
    a_go.set()
    await first
    async with b.hold_unless_elsewhere("chat-1") as held:
        assert held
    # Released again: a's worker may take it now.
    async with a.hold_unless_elsewhere("chat-1") as held:
        assert held
