"""Several workers, one polled Telegram bot, one PostgreSQL database: the
worker that polls writes every update into the shared queue before Telegram
may forget it, and every worker answers from the queue, one chat at a time
per worker, each chat in order; a worker that dies mid-run leaves its chats
to the others, and nothing is answered twice."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import psycopg

from bot.runtime import Runtime, channel_context
from core.clock import TestClock
from core.config.model import KeptConfig
from core.messages import Inbound
from core.store.updates import NewUpdate
from tests.support.telegram_workers import Worker, Workers, telegram_workers


def chat_ids(private: int, groups: int) -> list[int]:
    return [1000 + c for c in range(private)] + [-2000 - c for c in range(groups)]


def text_of(chat: int, n: int) -> str:
    # In a group the bot answers only when mentioned.
    return f"@kept_bot chat {chat} message {n}" if chat < 0 else f"chat {chat} message {n}"


async def push(workers: Workers, chat: int, n: int) -> int:
    kind = "private" if chat > 0 else "group"
    update = await workers.fake.push_message(text_of(chat, n), chat_id=chat, chat_type=kind)
    return int(update["update_id"])


def replies(workers: Workers, chat: int) -> list[str]:
    return workers.fake.texts(chat)


def expected(chat: int, count: int, first: int = 0) -> list[str]:
    return [f"echo: {text_of(chat, n)}" for n in range(first, first + count)]


async def leader_of(workers: Workers) -> Worker:
    return await workers.fake.wait_for(
        lambda: next((w for w in workers.started if w.adapter.polling), None)
    )


async def test_a_polled_burst_is_answered_by_several_workers_once_each_in_order(
    postgres_url: str,
) -> None:
    chats, per_chat = chat_ids(24, 6), 4
    answered_elsewhere, leader_has_one = asyncio.Event(), asyncio.Event()

    async def after_the_others(inbound: Inbound) -> None:
        # The poller's own turns wait until another worker has answered, so
        # the burst is shared out whatever the timing: the poller holds at
        # most `max_claimed_chats` chats, the others must take the rest.
        leader_has_one.set()
        await answered_elsewhere.wait()

    async with telegram_workers(postgres_url) as workers:
        leader = await workers.add("w0", gate=after_the_others, max_claimed_chats=4)
        await workers.fake.wait_for(lambda: leader.adapter.polling)
        for chat in chats:
            await push(workers, chat, 0)
        # The poller has taken a chat before the others start, so it answers too.
        await asyncio.wait_for(leader_has_one.wait(), 5)
        others = [await workers.add(f"w{i}") for i in (1, 2)]
        for n in range(1, per_chat):
            for chat in chats:
                await push(workers, chat, n)
        await workers.fake.wait_for(lambda: workers.fake.sent)
        assert leader.answered == 0 and sum(w.answered for w in others) >= 1
        answered_elsewhere.set()
        total = len(chats) * per_chat
        await workers.fake.wait_for(lambda: len(workers.fake.sent) >= total, within=20)
        await asyncio.sleep(0.1)  # anything sent twice would show now
        for chat in chats:
            assert replies(workers, chat) == expected(chat, per_chat)
        assert len(workers.fake.sent) == total
        assert sum(1 for w in workers.started if w.answered) >= 2
        assert leader.answered >= 1  # the poller answers too
        assert not any(w.adapter.polling for w in others)
        assert sum(w.answered for w in workers.started) == total


async def test_no_update_is_confirmed_before_its_queue_row_is_committed(
    postgres_url: str,
) -> None:
    violations: list[list[int]] = []
    confirmed: list[int] = []
    failed_once = asyncio.Event()

    async with telegram_workers(postgres_url) as workers:

        async def check(done: list[int]) -> None:
            # Telegram forgets these now: each must be a committed queue row.
            rows = await workers.queue_rows(done)
            if set(done) - set(rows):
                violations.append(sorted(set(done) - set(rows)))
            confirmed.extend(done)

        workers.fake.on_confirm = check
        leader = await workers.add("w0")
        await workers.fake.wait_for(lambda: leader.adapter.polling)

        async def fail_first_write(updates: Sequence[NewUpdate]) -> None:
            if not failed_once.is_set():
                failed_once.set()
                raise psycopg.OperationalError("the database is restarting")

        leader.queue.before_put = fail_first_write
        ids = [await push(workers, 7, n) for n in range(3)]
        await asyncio.wait_for(failed_once.wait(), 5)
        # The poller backs off on the clock, writes the batch again, and
        # only then confirms it.
        await workers.until(lambda: set(ids) <= set(confirmed))
        assert violations == []
        await workers.until(lambda: len(workers.fake.sent) >= 3)
        assert replies(workers, 7) == expected(7, 3)


async def test_a_chat_under_a_live_claim_is_left_to_its_worker(postgres_url: str) -> None:
    held = asyncio.Event()
    release = asyncio.Event()

    async def hold_first(inbound: Inbound) -> None:
        if inbound.text == text_of(5, 0):
            held.set()
            await release.wait()

    async with telegram_workers(postgres_url) as workers:
        pool = [await workers.add(f"w{i}", gate=hold_first) for i in range(3)]
        await leader_of(workers)
        await push(workers, 5, 0)
        await asyncio.wait_for(held.wait(), 5)  # some worker holds chat 5
        second = await push(workers, 5, 1)
        await push(workers, 6, 0)
        await workers.fake.wait_for(lambda: replies(workers, 6))
        # Chat 6 came after chat 5's second message and is answered; that
        # message waits, claimed by nobody, behind its chat's first.
        assert await workers.queue_rows([second]) == {second: (None, False)}
        assert replies(workers, 5) == []
        release.set()
        await workers.fake.wait_for(lambda: len(replies(workers, 5)) == 2)
        assert replies(workers, 5) == expected(5, 2)
        assert sum(w.answered for w in pool) == 3


async def test_a_killed_poller_leaves_the_rest_to_the_others_and_nothing_twice(
    postgres_url: str,
) -> None:
    stuck_in_turn = asyncio.Event()
    never = asyncio.Event()
    writing = asyncio.Event()
    finishing = asyncio.Event()
    stuck_chat, answered_chat = 11, 12

    async def stuck(inbound: Inbound) -> None:
        if inbound.text == text_of(stuck_chat, 0):
            stuck_in_turn.set()
            await never.wait()  # dies before the message is stored

    async def run_and_kill(workers: Workers) -> None:
        # (split out so the victim's frozen tasks are let go whatever happens)
        survivors_first = [await workers.add(f"s{i}", start=False) for i in (1, 2)]
        victim = await workers.add("victim", gate=stuck, killable=True)
        await workers.fake.wait_for(lambda: victim.adapter.polling)

        async def never_marked_done(ids: Sequence[int]) -> None:
            if any(victim.queue.chat_keys[i] == f"chat:{answered_chat}" for i in ids):
                finishing.set()
                await never.wait()  # dies after the update was safe, before its row was marked

        victim.queue.before_done = never_marked_done
        # Alone, the victim takes both chats: one is stuck before its message
        # is stored, the other answered but its row never marked done.
        await push(workers, stuck_chat, 0)
        await push(workers, stuck_chat, 1)
        await push(workers, answered_chat, 0)
        await asyncio.wait_for(stuck_in_turn.wait(), 5)
        await workers.fake.wait_for(lambda: replies(workers, answered_chat))
        await asyncio.wait_for(finishing.wait(), 5)
        for survivor in survivors_first:
            await workers.start(survivor)

        async def never_written(updates: Sequence[NewUpdate]) -> None:
            writing.set()
            await never.wait()  # dies before the next batch is in the queue

        victim.queue.before_put = never_written
        burst = chat_ids(10, 2)
        for n in range(2):
            for chat in burst:
                await push(workers, chat, n)
        await push(workers, stuck_chat, 2)
        await push(workers, answered_chat, 1)
        await asyncio.wait_for(writing.wait(), 5)

        workers.kill(victim)
        # Another worker takes the polling role, gets the batch Telegram
        # never forgot, and the victim's chats once its claims expire.
        total = len(burst) * 2 + 3 + 2
        await workers.until(lambda: len(workers.fake.sent) >= total, within=20)
        await asyncio.sleep(0.1)  # anything sent twice would show now
        for chat in burst:
            assert replies(workers, chat) == expected(chat, 2)
        assert replies(workers, stuck_chat) == expected(stuck_chat, 3)
        assert replies(workers, answered_chat) == expected(answered_chat, 2)
        assert len(workers.fake.sent) == total
        assert victim.answered == 1  # only the chat it answered before dying

    async with telegram_workers(postgres_url) as workers:
        try:
            await run_and_kill(workers)
        finally:
            never.set()


async def test_a_stopping_worker_gives_back_the_chat_it_had_not_stored(
    postgres_url: str,
) -> None:
    never = asyncio.Event()
    in_turn = asyncio.Event()

    async def stuck(inbound: Inbound) -> None:
        in_turn.set()
        await never.wait()  # stopped before the message is stored

    async with telegram_workers(postgres_url) as workers:
        try:
            first = await workers.add("w0", gate=stuck)
            second = await workers.add("w1", start=False)
            await workers.fake.wait_for(lambda: first.adapter.polling)
            await push(workers, 21, 0)
            await asyncio.wait_for(in_turn.wait(), 5)  # w0 alone: it holds chat 21
            await workers.start(second)
            # Its turn is cancelled past the grace: the row is not done, it
            # is released, and the other worker answers the message.
            await first.adapter.stop()
            await workers.until(lambda: replies(workers, 21))
            assert replies(workers, 21) == expected(21, 1)
            assert (first.answered, second.answered) == (0, 1)
        finally:
            never.set()


async def test_an_update_polled_again_after_it_was_handled_is_not_handled_again(
    postgres_url: str,
) -> None:
    async with telegram_workers(postgres_url) as workers:
        first = await workers.add("w0")
        await workers.fake.wait_for(lambda: first.adapter.polling)
        help_update = await workers.fake.push_message("/help", chat_id=9)
        uid = int(help_update["update_id"])
        await workers.fake.wait_for(lambda: replies(workers, 9))
        await workers.fake.wait_for(lambda: workers.fake.confirmed.count(uid) == 1)
        second = await workers.add("w1")  # has not seen it: only the queue knows
        # The poller stops; Telegram still has the update, as when a poller
        # dies between writing a batch and confirming it.
        await first.adapter.stop()
        await workers.fake.push(dict(help_update))
        await workers.until(lambda: second.adapter.polling)
        await workers.until(lambda: workers.fake.confirmed.count(uid) == 2)
        await asyncio.sleep(0.1)  # a second answer would show now
        assert len(replies(workers, 9)) == 1


async def test_kept_run_gives_telegram_the_queue_on_postgresql_only(
    tmp_path: Path, postgres_url: str
) -> None:
    for url, shared in ((f"sqlite:///{tmp_path}/kept.sqlite", False), (postgres_url, True)):
        config = KeptConfig.model_validate({"storage": {"url": url}})
        runtime = Runtime(tmp_path / "kept.json", config, clock=TestClock(), environ={})
        await runtime.start_core()
        try:
            context = channel_context(runtime)
            assert runtime.services is not None
            # SQLite: one process, updates stay in its own chat queues.
            assert (context.updates is not None) is shared
            assert context.worker == runtime.services.worker
        finally:
            await runtime.stop()
            if runtime.services is not None:
                await runtime.services.backend.close()
