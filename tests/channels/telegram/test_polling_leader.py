"""Several workers, one Telegram token: getUpdates allows one consumer, so
exactly one worker polls (the one holding the role in the database) and
another takes over when it is gone."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.telegram import TelegramAdapter
from channels.telegram.shared_updates import LEADER_CHECK
from core.store.postgres import PostgresConnection, PostgresUpdateQueue
from core.store.postgres.locks import PostgresSessionGuard
from tests.support.telegram_harness import TelegramHarness, telegram_harness


@pytest.fixture
async def queue_db(postgres_url: str) -> AsyncIterator[PostgresConnection]:
    """The update queue's database (on PostgreSQL a worker has both the
    polling role and the queue; the transcript stays in the harness)."""
    connection = PostgresConnection(postgres_url)
    await connection.open()
    try:
        yield connection
    finally:
        await connection.close()


def worker(
    tg: TelegramHarness, guard: PostgresSessionGuard, db: PostgresConnection, name: str
) -> TelegramAdapter:
    context = dataclasses.replace(
        tg.context(), leadership=guard, updates=PostgresUpdateQueue(db), worker=name
    )
    adapter = TelegramAdapter(context, poll_timeout=1, request_timeout=2, stop_grace=0.5)
    tg.adapters.append(adapter)
    return adapter


async def test_one_worker_polls_and_another_takes_over_when_it_is_gone(
    tmp_path: Path, postgres_url: str, queue_db: PostgresConnection
) -> None:
    guards = [PostgresSessionGuard(postgres_url) for _ in range(2)]
    try:
        async with telegram_harness(tmp_path) as tg:
            a, b = worker(tg, guards[0], queue_db, "a"), worker(tg, guards[1], queue_db, "b")
            await a.start()
            await tg.fake.wait_for(lambda: a.polling)
            await b.start()
            tg.router.add(b)
            await tg.fake.wait_for(lambda: b.leader_looks >= 1)
            await tg.clock.advance(LEADER_CHECK)
            await tg.fake.wait_for(lambda: b.leader_looks >= 2)  # b looked twice
            assert a.polling and not b.polling
            # a's process dies: its database connection, and the role, go with it.
            await a.stop()
            tg.adapters.remove(a)
            await guards[0].close()
            looks = b.leader_looks
            await tg.clock.advance(LEADER_CHECK)
            await tg.fake.wait_for(lambda: b.leader_looks > looks)
            assert b.polling
            await tg.fake.push_message("still there?")
            await tg.fake.wait_for(lambda: tg.fake.texts())
            assert tg.fake.texts() == ["echo: still there?"]
    finally:
        for guard in guards:
            await guard.close()


async def test_a_stopping_leader_hands_the_role_over_at_once(
    tmp_path: Path, postgres_url: str, queue_db: PostgresConnection
) -> None:
    guards = [PostgresSessionGuard(postgres_url) for _ in range(2)]
    try:
        async with telegram_harness(tmp_path) as tg:
            a, b = worker(tg, guards[0], queue_db, "a"), worker(tg, guards[1], queue_db, "b")
            await a.start()
            await tg.fake.wait_for(lambda: a.polling)
            await b.start()
            await tg.fake.wait_for(lambda: b.leader_looks >= 1)
            assert not b.polling
            await a.stop()  # resigns: the guard's connection stays open
            tg.adapters.remove(a)
            await tg.clock.advance(LEADER_CHECK)
            await tg.fake.wait_for(lambda: b.leader_looks >= 2)
            assert b.polling
    finally:
        for guard in guards:
            await guard.close()
