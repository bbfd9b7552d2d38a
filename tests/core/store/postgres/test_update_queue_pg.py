"""The update queue on PostgreSQL: updates put once and durably, handed out a
chat at a time, oldest first, never a chat another worker holds (also while
its claim is being made), taken over once a lease runs out, released at stop,
and never handed out again once done."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from core.store.backends import Backend, open_backend
from core.store.postgres.updates import _CLAIM
from core.store.updates import DONE_RETENTION, NewUpdate, QueuedUpdate, UpdateQueue

SOURCE = "telegram:4242"
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture
async def queue(postgres_url: str) -> AsyncIterator[UpdateQueue]:
    backend: Backend = open_backend(postgres_url)
    await backend.open()
    try:
        assert backend.update_queue is not None
        yield backend.update_queue
    finally:
        await backend.close()


def update(update_id: int, chat: int) -> NewUpdate:
    return NewUpdate(update_id, f"chat:{chat}", f'{{"update_id": {update_id}}}')


async def claim(
    queue: UpdateQueue, worker: str, *, at: datetime = NOW, chats: int = 10
) -> list[QueuedUpdate]:
    return await queue.claim(SOURCE, worker=worker, now=at, lease_until=at + LEASE, chats=chats)


def ids(rows: list[QueuedUpdate]) -> list[int]:
    return [r.update_id for r in rows]


async def test_an_update_is_put_once_and_a_repeat_is_a_no_op(queue: UpdateQueue) -> None:
    assert await queue.put(SOURCE, [update(1, 5), update(2, 5), update(3, 6)], now=NOW) == 3
    assert await queue.put(SOURCE, [update(2, 5), update(3, 6), update(4, 6)], now=NOW) == 1
    assert await queue.put("telegram:999", [update(1, 5)], now=NOW) == 1  # another bot
    rows = await claim(queue, "a")
    assert ids(rows) == [1, 2, 3, 4]
    assert rows[0].payload == '{"update_id": 1}'
    await queue.done([r.id for r in rows], now=NOW)
    # Done, and still a no-op: a poller that died before confirming puts it again.
    assert await queue.put(SOURCE, [update(1, 5)], now=NOW + timedelta(hours=1)) == 0
    assert await claim(queue, "b", at=NOW + timedelta(hours=1)) == []
    # Telegram forgets an unconfirmed update within a day; so does the queue.
    later = NOW + DONE_RETENTION + timedelta(minutes=1)
    assert await queue.put(SOURCE, [update(1, 5)], now=later) == 1


async def test_a_claim_takes_whole_chats_oldest_first(queue: UpdateQueue) -> None:
    await queue.put(SOURCE, [update(1, 7), update(2, 5), update(3, 7), update(4, 6)], now=NOW)
    first = await claim(queue, "a", chats=1)
    assert ids(first) == [1, 3]  # chat 7 has the oldest update: all of it
    second = await claim(queue, "b", chats=5)
    assert ids(second) == [2, 4]
    assert {r.chat_key for r in second} == {"chat:5", "chat:6"}


async def test_a_chat_under_a_live_claim_waits_for_it_then_is_taken_over(
    queue: UpdateQueue,
) -> None:
    await queue.put(SOURCE, [update(1, 5), update(2, 6)], now=NOW)
    held = await claim(queue, "a", chats=1)
    assert ids(held) == [1]
    await queue.put(SOURCE, [update(3, 5)], now=NOW)
    # b gets chat 6, but not chat 5's newer update while a holds the chat.
    other = await claim(queue, "b")
    assert ids(other) == [2]
    await queue.done([r.id for r in other], now=NOW)
    renewed = await queue.renew([r.id for r in held], worker="a", lease_until=NOW + 2 * LEASE)
    assert renewed == [r.id for r in held]
    assert await claim(queue, "c", at=NOW + LEASE + timedelta(seconds=1)) == []
    # a died: once its lease ran out, c takes the whole chat, in order.
    expired = NOW + 2 * LEASE + timedelta(seconds=1)
    assert ids(await claim(queue, "c", at=expired)) == [1, 3]
    assert await queue.renew([r.id for r in held], worker="a", lease_until=expired + LEASE) == []


async def test_two_claims_at_once_never_take_one_chat(
    queue: UpdateQueue, postgres_url: str
) -> None:
    await queue.put(SOURCE, [update(1, 5), update(2, 5), update(3, 6)], now=NOW)
    params = {
        "source": SOURCE,
        "worker": "a",
        "now": NOW,
        "until": NOW + LEASE,
        "chats": 1,
    }
    # a's claim of chat 5 is made and not committed yet: its rows are locked.
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(_CLAIM, params)
        assert sorted(r[1] for r in await cursor.fetchall()) == [1, 2]
        during = await asyncio.wait_for(claim(queue, "b"), 5)  # skips, never waits
        await conn.commit()
    assert ids(during) == [3]
    assert await claim(queue, "b") == []  # and once committed, a holds chat 5


async def test_done_updates_are_never_handed_out_again(
    queue: UpdateQueue, postgres_url: str
) -> None:
    await queue.put(SOURCE, [update(1, 5), update(2, 5)], now=NOW)
    rows = await claim(queue, "a")
    await queue.done([rows[0].id], now=NOW)
    later = NOW + LEASE + timedelta(seconds=1)
    assert ids(await claim(queue, "b", at=later)) == [2]  # a died after the first
    with psycopg.connect(postgres_url) as conn:
        payloads = conn.execute("SELECT payload FROM update_queue WHERE update_id = 1")
        assert payloads.fetchall() == [("",)]  # a message's text is not kept


async def test_a_stopping_worker_releases_its_chats_at_once(queue: UpdateQueue) -> None:
    await queue.put(SOURCE, [update(1, 5), update(2, 6)], now=NOW)
    rows = await claim(queue, "a")
    await queue.done([rows[0].id], now=NOW)
    assert await queue.release(worker="a") == 1
    assert ids(await claim(queue, "b")) == [2]


async def test_listeners_hear_of_their_source_s_new_updates(queue: UpdateQueue) -> None:
    heard: list[int] = []
    changed = asyncio.Event()

    def on_put() -> None:
        heard.append(1)
        changed.set()

    listener = asyncio.create_task(queue.listen(SOURCE, on_put))

    async def heard_at_least(count: int) -> None:
        while len(heard) < count:
            changed.clear()
            await changed.wait()

    try:
        await asyncio.wait_for(heard_at_least(1), 5)  # once at start: what came before
        await queue.put("telegram:999", [update(1, 5)], now=NOW)  # another bot's
        await queue.put(SOURCE, [update(1, 5)], now=NOW)
        await asyncio.wait_for(heard_at_least(2), 5)
        await queue.put(SOURCE, [update(1, 5)], now=NOW)  # nothing new
        await asyncio.sleep(0.1)
        assert len(heard) == 2
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
