"""Two workers on one PostgreSQL database: a platform message delivered to
both is stored once, whichever commits first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from core.store import DuplicateMessage
from core.store.postgres import PostgresStore
from tests.core.store.test_contract import KEY, add, add_session
from tests.support.store_helpers import count_messages, open_any_store


@pytest.fixture
async def workers(postgres_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    first, second = open_any_store(postgres_url), open_any_store(postgres_url)
    assert isinstance(first, PostgresStore) and isinstance(second, PostgresStore)
    async with first, second:
        await add_session(first, KEY)
        yield first, second


async def test_the_same_update_on_two_workers_is_stored_once(
    workers: tuple[PostgresStore, PostgresStore], postgres_url: str
) -> None:
    first, second = workers
    # The first worker's insert is held open: its row exists, uncommitted.
    async with await psycopg.AsyncConnection.connect(postgres_url) as held:
        await held.execute(
            "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, "
            "platform_message_id, ts) SELECT id, platform, chat_id, 'user', 'text', 'hello', "
            "'77', now() FROM sessions WHERE key = %s",
            (KEY,),
        )
        # The second worker's copy waits on the unique index...
        racing = asyncio.create_task(add(second, "hello", platform_message_id="77"))
        await asyncio.sleep(0.2)
        assert not racing.done()
        await held.commit()
    # ...and is refused once the first commits.
    with pytest.raises(DuplicateMessage):
        await racing
    assert await count_messages(first) == 1
