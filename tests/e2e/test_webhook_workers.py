"""A webhook burst spread over three `kept run` workers on one PostgreSQL
database (issue 13): every message is answered once, in its own chat, and
each chat's replies come in the order of its messages.

Each chat's consecutive messages reach different workers. In some chats the
interleaving that breaks a careless design is made to happen every run: the
first message's model call is held while the chat's next messages are
stored by the other workers, and one of them is kept from reaching the
database until the first worker has moved on. Without the session guard
another worker answers the held message again; without "answer what the
chat owes first" a later message is answered before an earlier one.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from tests.support.webhook_workers import WebhookCluster, WebhookWorker, webhook_workers

CHATS = 30
MESSAGES = 5
# Which worker (offset by the chat's index) receives a chat's message n:
# never the one that received message n - 1. Worker 0 gets messages 0 and 2
# of its chats, so its second turn queues behind its first inside the worker
# while messages 1 and 3 wait at the other two.
ROUTE = (0, 1, 0, 2, 1)
REPLY = re.compile(r"^echo: (?:@kept_bot )?chat (-?\d+) message (\d+)$")


@dataclass(frozen=True)
class Chat:
    index: int

    @property
    def private(self) -> bool:
        return self.index % 2 == 0

    @property
    def id(self) -> int:
        return 5000 + self.index if self.private else -700000 - self.index

    @property
    def key(self) -> str:
        kind = "private" if self.private else "group"
        return f"agent:main:telegram:{kind}:{self.id}"

    @property
    def gated(self) -> bool:
        return self.index % 3 == 0

    def text(self, n: int) -> str:
        # In a group only a mention is a turn for the bot.
        said = f"chat {self.id} message {n}"
        return said if self.private else f"@kept_bot {said}"


async def wait_until(check: Callable[[], object], what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.01)


class Burst:
    def __init__(self, cluster: WebhookCluster) -> None:
        self.cluster = cluster
        self.update_ids = iter(range(1, 1_000_000))

    def worker(self, chat: Chat, n: int) -> WebhookWorker:
        workers = self.cluster.workers
        return workers[(ROUTE[n] + chat.index) % len(workers)]

    async def say(self, chat: Chat, n: int) -> None:
        """Message n of `chat`, to its worker's webhook; Telegram moves on to
        the chat's next update once this one is answered 200 (stored)."""
        fake = self.cluster.fake
        sender = chat.id if chat.private else 9000 + chat.index
        kind = "private" if chat.private else "group"
        message = fake.message(chat.text(n), chat_id=chat.id, user_id=sender, chat_type=kind)
        update = {"update_id": next(self.update_ids), "message": message}
        assert await self.cluster.post(self.worker(chat, n), update) == 200

    def replies(self, chat: Chat) -> list[int]:
        """The message numbers of the chat's replies, in the order sent."""
        numbers = []
        for sent in self.cluster.fake.sent:
            if sent.chat_id == chat.id and (named := REPLY.match(sent.text)):
                numbers.append(int(named[2]))
        return numbers

    def asked_about(self, chat: Chat, worker: WebhookWorker) -> bool:
        texts = {chat.text(n) for n in range(MESSAGES)}
        return any(w == worker.name and t in texts for w, t in self.cluster.gate.asked)

    async def wanting(self, chat: Chat, worker: WebhookWorker) -> None:
        """Wait until `worker` waits for the chat (its ask is held) or, with
        a broken guard, has gone on to the model without it."""
        await wait_until(
            lambda: worker.guard.asked[chat.key] or self.asked_about(chat, worker),
            f"{worker.name} wants chat {chat.id}",
        )

    async def talk(self, chat: Chat) -> None:
        for n in range(MESSAGES):
            await self.say(chat, n)

    async def talk_while_held(self, chat: Chat) -> None:
        """Message 0's turn is held in the model on worker `first`; messages
        1 and 3 are stored by `second` and `third`, whose asks for the chat
        are held before the database; 2 and 4 queue behind their worker's
        own turn of the chat."""
        first, second, third = self.worker(chat, 0), self.worker(chat, 1), self.worker(chat, 3)
        second.guard.held.add(chat.key)
        third.guard.held.add(chat.key)
        await self.say(chat, 0)
        await wait_until(
            lambda: self.cluster.gate.askers(chat.text(0)), f"{first.name} answers {chat.id}"
        )
        await self.say(chat, 1)
        await self.wanting(chat, second)
        await self.say(chat, 2)
        await self.say(chat, 3)
        await self.wanting(chat, third)
        await self.say(chat, 4)


async def test_a_webhook_burst_over_three_workers_is_answered_once_in_order(
    postgres_url: str,
) -> None:
    async with webhook_workers(postgres_url, count=3) as cluster:
        burst = Burst(cluster)
        chats = [Chat(i) for i in range(CHATS)]
        held = [chat for chat in chats if chat.gated]
        cluster.gate.held.update(chat.text(0) for chat in held)

        free = asyncio.gather(*(burst.talk(chat) for chat in chats if not chat.gated))
        await asyncio.gather(*(burst.talk_while_held(chat) for chat in held))
        for chat in held:
            # One worker at a time: the others stored their messages and wait.
            assert cluster.gate.askers(chat.text(0)) == [burst.worker(chat, 0).name]
            others = [w for w in cluster.workers if w is not burst.worker(chat, 0)]
            assert not any(burst.asked_about(chat, w) for w in others)
            assert burst.replies(chat) == []

        cluster.gate.release()
        # The first worker answers 0, then takes its own message 2, and
        # answers 1 (stored by another worker, still waiting) before it.
        await wait_until(
            lambda: all(2 in burst.replies(chat) for chat in held), "message 2 is answered"
        )
        for chat in held:
            assert burst.replies(chat) == [0, 1, 2]
        for worker in cluster.workers:
            worker.guard.release()

        await free
        total = CHATS * MESSAGES
        await wait_until(lambda: len(cluster.fake.sent) >= total, f"{total} replies are sent")
        await cluster.stop()  # lets any turn still running finish

        for sent in cluster.fake.sent:
            named = REPLY.match(sent.text)
            assert named, sent.text
            assert int(named[1]) == sent.chat_id  # each reply in its own chat
        for chat in chats:
            assert burst.replies(chat) == list(range(MESSAGES)), chat
        assert len(cluster.fake.sent) == total
        store = cluster.workers[0].services.backend.store
        assert await store.unanswered(since=cluster.clock.now() - timedelta(days=1)) == []
        # Every worker took turns.
        assert {w for w, _ in cluster.gate.asked} == {w.name for w in cluster.workers}
