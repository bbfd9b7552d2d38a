"""Three heartbeat workers on one PostgreSQL database: 1,000 follow-ups due at
once across 300 chats are each delivered exactly once, to their own chat, and
no chat gets more turns than its interval and cap allow."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from core.clock import TestClock
from core.commitments.model import NewCommitment, Scope
from core.config.model import KeptConfig
from core.heartbeat.source import BUSY_RETRY, FollowUpSource
from core.heartbeat.turn import HeartbeatTurn
from core.llm import Completion
from core.locks import SessionLocks
from core.scheduler import Scheduler
from core.store.backends import Backend
from core.store.postgres.locks import CLAIM_NAMESPACE, session_lock_id
from tests.support.heartbeat_harness import ScriptedSender
from tests.support.pg_helpers import opened_backends

CHATS, FOLLOW_UPS = 300, 1000
TAG = re.compile(r"tag (c\d+@\d+)")


class TagModel:
    """Answers with the tags of the follow-ups it was shown."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        self.calls += 1
        await asyncio.sleep(0)
        tags = TAG.findall(" ".join(str(m["content"]) for m in messages))
        return Completion(
            text="tags: " + ",".join(tags), tool_calls=[], finish_reason="stop", model="tags"
        )


def scope(chat: int) -> Scope:
    return Scope(
        "main", f"agent:main:telegram:private:{chat}", "telegram", str(chat), None, "u",
        chat_kind="private",
    )  # fmt: skip


@pytest.fixture
async def backends(postgres_url: str) -> AsyncIterator[list[Backend]]:
    async with opened_backends(postgres_url, 3) as opened:
        yield opened


async def seed_one(backend: Backend, clock: TestClock) -> None:
    await seed(backend, clock, count=1)


def scheduler(
    backend: Backend,
    config: KeptConfig,
    clock: TestClock,
    sender: ScriptedSender,
    worker: str,
    model: TagModel | None = None,
) -> Scheduler:
    return Scheduler(
        [
            FollowUpSource(
                config=lambda: config,
                commitments=backend.commitments,
                store=backend.heartbeat,
                turn=HeartbeatTurn(
                    store=backend.heartbeat,
                    transcript=backend.store,
                    llm=model or TagModel(),  # type: ignore[arg-type]
                    sender=sender,
                    clock=clock,
                    worker=worker,
                ),
                clock=clock,
                platforms=lambda: {"telegram"},
                session_locks=SessionLocks(shared=backend.session_guard),
            )
        ],
        clock=clock,
    )


async def seed(
    backend: Backend, clock: TestClock, count: int = FOLLOW_UPS, chats: int = CHATS
) -> None:
    now = clock.now()
    by_chat: dict[int, list[NewCommitment]] = {}
    for n in range(count):
        chat = n % chats
        by_chat.setdefault(chat, []).append(
            NewCommitment(
                scope=scope(chat),
                kind="event_check_in",
                sensitivity="routine",
                source="inferred_user_context",
                reason="a test",
                suggested_text=f"tag c{n}@{chat}",
                dedupe_key=f"k{n}",
                confidence=0.9,
                due_earliest=now - timedelta(minutes=1),
                due_latest=now + timedelta(days=1),
                due_timezone="UTC",
                source_message_id=None,
                created_at=now,
            )
        )
    for chat, items in by_chat.items():
        await backend.store.ensure_session(
            scope(chat).session_key,
            agent_id="main",
            platform="telegram",
            chat_id=str(chat),
            chat_kind="private",
            thread_id=None,
            now=now,
        )
        await backend.commitments.apply_extraction(scope(chat), items, [], now=now)


@pytest.mark.slow
async def test_three_workers_deliver_each_follow_up_once_to_its_own_chat(backends) -> None:
    clock = TestClock()
    config = KeptConfig.model_validate(
        {
            "commitments": {"enabled": True, "maxPerDay": 10},
            "agents": [{"id": "main", "heartbeat": {"every": "30m"}}],
        }
    )
    await seed(backends[0], clock)
    sender = ScriptedSender()
    workers = [scheduler(b, config, clock, sender, f"w{i}") for i, b in enumerate(backends)]
    # Every chat has 3 or 4 due: a turn carries at most 3, the rest waits 30 min.
    await asyncio.gather(*(w.tick() for w in workers))
    first_round = len(sender.sent)
    assert first_round == CHATS  # one turn per chat, however many workers looked
    clock.set(clock.now() + timedelta(minutes=31))
    await asyncio.gather(*(w.tick() for w in workers))

    delivered: dict[str, str] = {}
    for out in sender.sent:
        for tag in out.text.removeprefix("tags: ").split(","):
            assert tag not in delivered, f"{tag} delivered twice"
            delivered[tag] = out.target.chat_id
    assert len(delivered) == FOLLOW_UPS
    assert all(tag.split("@")[1] == chat for tag, chat in delivered.items())
    # At most one turn per chat per interval: two rounds, two turns at most.
    turns: dict[str, int] = {}
    for out in sender.sent:
        turns[out.target.chat_id] = turns.get(out.target.chat_id, 0) + 1
    assert max(turns.values()) <= 2


async def test_a_chat_another_worker_holds_is_looked_at_again_later(backends) -> None:
    clock = TestClock()
    config = KeptConfig.model_validate({"commitments": {"enabled": True}})
    await seed_one(backends[0], clock)
    sender = ScriptedSender()
    a_locks = SessionLocks(shared=backends[0].session_guard)
    b = scheduler(backends[1], config, clock, sender, "b")
    async with a_locks.hold(scope(0).session_key):  # a's chat turn, say
        await b.tick()
        assert sender.sent == []
    clock.set(clock.now() + BUSY_RETRY)
    await b.tick()
    assert [o.text for o in sender.sent] == ["tags: c0@0"]


class GatedTurns:
    """A worker's heartbeat store whose record_turn_unless_recent waits for a gate: the
    worker holds the chat and its claims, has found room under the cap, and
    has not yet recorded its turn."""

    def __init__(self, backend: Backend) -> None:
        self._inner = backend.heartbeat
        self.waiting, self.go = asyncio.Event(), asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def record_turn_unless_recent(self, agent_id: str, session_key: str, **kw: Any) -> Any:
        self.waiting.set()
        await self.go.wait()
        return await self._inner.record_turn_unless_recent(agent_id, session_key, **kw)


async def test_two_workers_never_both_find_room_in_a_chat(backends) -> None:
    clock = TestClock()
    config = KeptConfig.model_validate({"commitments": {"enabled": True, "maxPerDay": 1}})
    # Five due in one chat: a claims three (a turn's most), b the other two.
    await seed(backends[0], clock, count=5, chats=1)
    sender = ScriptedSender()
    gated = GatedTurns(backends[0])
    a = scheduler(backends[0], config, clock, sender, "a")
    a._sources[0]._store = gated  # type: ignore[attr-defined]  # the follow-ups' checks and record
    b_model = TagModel()
    b = scheduler(backends[1], config, clock, sender, "b", b_model)
    first = asyncio.create_task(a.tick())
    await asyncio.wait_for(gated.waiting.wait(), 5)  # a found room, has not recorded
    await b.tick()  # the chat is a's: b leaves it, and releases its claims
    gated.go.set()
    await first
    assert b_model.calls == 0  # one turn in the chat at a time, across workers
    assert len(sender.sent) == 1  # and the cap of one a day holds
    assert sender.sent[0].text.count("@0") == 1  # room for one: a's other two went back
    due = await backends[1].heartbeat.due_unclaimed(now=clock.now(), limit=10)
    assert len(due) == 4  # and b's two claims too: due again, for a later turn


async def test_a_chat_another_worker_is_claiming_is_left_whole(backends, postgres_url: str) -> None:
    """Two claims of one chat at once never split its due rows: the second
    claimer passes the chat over whole while the first one's statement holds
    it (here held by hand, as that statement would, mid-claim)."""
    clock = TestClock()
    await seed(backends[0], clock, count=3, chats=1)
    lease = clock.now() + timedelta(minutes=5)
    key = scope(0).session_key
    async with await psycopg.AsyncConnection.connect(postgres_url) as other:
        await other.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)", (CLAIM_NAMESPACE, session_lock_id(key))
        )
        while_held = await backends[1].heartbeat.claim_due(
            [scope(0)], per_scope=3, worker="b", now=clock.now(), lease_until=lease
        )
        assert while_held == []  # not one row of it: the chat is the other's
        await other.rollback()  # that claim found nothing after all
    after = await backends[1].heartbeat.claim_due(
        [scope(0)], per_scope=3, worker="b", now=clock.now(), lease_until=lease
    )
    assert len(after) == 3  # the whole chat, in one turn's claim
