"""Erasing a user, on each backend: their private chat goes whole, in a
group only their messages (and the bot's replies to them), follow-ups,
reminders, queued jobs and settings go; another member's rows, and the
pairing approval, stay. Counted first, erased in one transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.commitments.exchange import Exchange
from core.commitments.jobs import NewJob
from core.commitments.model import NewCommitment, Scope
from core.messages import ChatKind, Target
from core.privacy.store import ErasedUser, ErasureCounts
from core.reminders.model import NewReminder
from core.search.redact import Redactor
from core.store.backends import Backend, open_backend
from core.store.base import NewMessage, SearchScope
from core.store.sql.database import Transaction
from tests.support.followups import store_rows

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ANN, BEN = "111", "222"
PRIVATE = f"agent:main:telegram:private:{ANN}"
BEN_PRIVATE = f"agent:main:telegram:private:{BEN}"
GROUP = "agent:main:telegram:group:-500"
OTHER_AGENT = f"agent:side:telegram:private:{ANN}"


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


@dataclass
class Seeded:
    ann_group_message: int
    ben_group_message: int


async def session(b: Backend, key: str, chat_id: str, kind: ChatKind, agent: str = "main") -> None:
    await b.store.ensure_session(
        key, agent_id=agent, platform="telegram", chat_id=chat_id, chat_kind=kind,
        thread_id=None, now=NOW,
    )  # fmt: skip


async def exchange(b: Backend, key: str, sender: str, said: str, answer: str) -> int:
    asked = await b.store.add_message(NewMessage(key, "user", said, NOW, sender_id=sender))
    await b.store.add_message(NewMessage(key, "assistant", answer, NOW, in_reply_to=asked.id))
    return asked.id


def scope(key: str, chat_id: str, sender: str, kind: ChatKind, agent: str = "main") -> Scope:
    return Scope(agent, key, "telegram", chat_id, None, sender, chat_kind=kind)


async def follow_up(b: Backend, where: Scope, reason: str) -> None:
    new = NewCommitment(
        scope=where, kind="event_check_in", sensitivity="routine",
        source="inferred_user_context", reason=reason, suggested_text=f"How did {reason} go?",
        dedupe_key=reason, confidence=0.9, due_earliest=NOW + timedelta(hours=1),
        due_latest=NOW + timedelta(days=1), due_timezone="UTC", source_message_id=None,
        created_at=NOW,
    )  # fmt: skip
    await b.commitments.apply_extraction(where, [new], [], now=NOW)


async def reminder(b: Backend, key: str, chat_id: str, by: str, text: str) -> None:
    await b.reminders.add(
        NewReminder(
            agent_id=key.split(":")[1], session_key=key, target=Target("telegram", chat_id),
            created_by=by, text=text, kind="after", cron=None, timezone="UTC",
            next_fire_at=NOW + timedelta(hours=2), created_at=NOW,
        )
    )  # fmt: skip


async def seed(b: Backend) -> Seeded:
    await session(b, PRIVATE, ANN, "private")
    await session(b, BEN_PRIVATE, BEN, "private")
    await session(b, GROUP, "-500", "group")
    await session(b, OTHER_AGENT, ANN, "private", agent="side")
    await exchange(b, PRIVATE, ANN, "my zebracorn interview is tomorrow", "Good luck!")
    await exchange(b, PRIVATE, ANN, "I slept badly", "Sorry to hear")
    await exchange(b, BEN_PRIVATE, BEN, "ben's own zebracorn", "ok")
    ann_group = await exchange(b, GROUP, ANN, "zebracorn in the group", "noted")
    ben_group = await exchange(b, GROUP, BEN, "ben says zebracorn too", "noted too")
    await exchange(b, OTHER_AGENT, ANN, "told the other agent", "fine")
    await follow_up(b, scope(PRIVATE, ANN, ANN, "private"), "the interview")
    await follow_up(b, scope(GROUP, "-500", ANN, "group"), "the match")
    await follow_up(b, scope(GROUP, "-500", BEN, "group"), "ben's match")
    await follow_up(b, scope(OTHER_AGENT, ANN, ANN, "private", agent="side"), "elsewhere")
    await reminder(b, PRIVATE, ANN, ANN, "stretch")
    await reminder(b, GROUP, "-500", ANN, "ann's group reminder")
    await reminder(b, GROUP, "-500", BEN, "ben's group reminder")
    job = NewJob(scope(PRIVATE, ANN, ANN, "private"), Exchange(1, "queued words", "reply"))
    await b.extraction_jobs.enqueue(job, worker="w", now=NOW, lease_until=NOW)
    await b.user_zones.set_zone("telegram", ANN, "Europe/Paris", now=NOW)
    await b.user_zones.set_zone("telegram", BEN, "Asia/Tokyo", now=NOW)
    for user, code in ((ANN, "ANNCODE1"), (BEN, "BENCODE1")):
        await b.pairing.request(
            "telegram", user, None, code=code, now=NOW, expires_at=NOW + timedelta(hours=1),
            max_pending=10, notify_every=None,
        )  # fmt: skip
    assert await b.pairing.approve("ANNCODE1", now=NOW) is not None  # Ben's stays pending
    return Seeded(ann_group, ben_group)


async def texts(b: Backend) -> list[str]:
    return sorted(r[0] for r in await store_rows(b.store, "SELECT text FROM messages"))


async def found(b: Backend, word: str) -> set[str]:
    hits = await b.store.search(word, scope=SearchScope(), limit=50, redactor=Redactor())
    return {h.session_key for h in hits}


ANN_MAIN = ErasedUser("telegram", ANN, "main")
EXPECTED = ErasureCounts(
    chats=1, messages=6, follow_ups=2, reminders=2, queued=1, updates=0, settings=1
)


async def test_counting_changes_nothing_and_says_what_erasing_removes(backend: Backend) -> None:
    await seed(backend)
    before = await texts(backend)
    assert await backend.erasure.count(ANN_MAIN) == EXPECTED
    assert await texts(backend) == before
    assert await backend.erasure.erase(ANN_MAIN) == EXPECTED
    assert await backend.erasure.count(ANN_MAIN) == ErasureCounts(settings=0)


async def test_erasing_a_user_leaves_only_what_is_not_theirs(backend: Backend) -> None:
    seeded = await seed(backend)
    assert await found(backend, "zebracorn") == {PRIVATE, BEN_PRIVATE, GROUP}
    await backend.erasure.erase(ANN_MAIN)

    assert await texts(backend) == sorted(
        [
            "ben's own zebracorn", "ok", "ben says zebracorn too", "noted too",
            "told the other agent", "fine",  # another agent's chat: not this erasure's
        ]
    )  # fmt: skip
    # Gone from the index too; Ben's words still found.
    assert await found(backend, "zebracorn") == {BEN_PRIVATE, GROUP}
    hits = await backend.store.search(
        "group", scope=SearchScope(session_key=GROUP), limit=5, redactor=Redactor()
    )
    assert hits == []
    assert await backend.store.get_message(seeded.ann_group_message) is None
    assert await backend.store.get_message(seeded.ben_group_message) is not None
    sessions = {r[0] for r in await store_rows(backend.store, "SELECT key FROM sessions")}
    assert sessions == {BEN_PRIVATE, GROUP, OTHER_AGENT}
    reasons = {r[0] for r in await store_rows(backend.store, "SELECT reason FROM commitments")}
    assert reasons == {"ben's match", "elsewhere"}
    left = {r[0] for r in await store_rows(backend.store, "SELECT text FROM reminders")}
    assert left == {"ben's group reminder"}
    assert await store_rows(backend.store, "SELECT count(*) FROM extraction_jobs") == [(0,)]
    assert await backend.user_zones.zone("telegram", ANN) is None
    assert await backend.user_zones.zone("telegram", BEN) is not None
    # The approval stays: they go on talking.
    assert await backend.pairing.is_paired("telegram", ANN)


async def test_every_agent_when_no_agent_is_named(backend: Backend) -> None:
    await seed(backend)
    counts = await backend.erasure.erase(ErasedUser("telegram", ANN))
    assert counts.chats == 2 and counts.messages == 8 and counts.follow_ups == 3
    assert await texts(backend) == sorted(
        ["ben's own zebracorn", "ok", "ben says zebracorn too", "noted too"]
    )


class FailingAt:
    """A transaction that fails at its `at`-th deleting statement."""

    def __init__(self, tx: Transaction, at: int) -> None:
        self._tx = tx
        self._at = at
        self.deletes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    async def execute(self, sql: str, params: Any = ()) -> int:
        if sql.startswith("DELETE"):
            self.deletes += 1
            if self.deletes == self._at:
                raise RuntimeError("the disk went away")
        return await self._tx.execute(sql, params)


async def test_a_failure_part_way_erases_nothing(backend: Backend) -> None:
    await seed(backend)
    before = await texts(backend)
    db = backend.database
    transact = db.transact

    async def failing(work: Any, **kwargs: Any) -> Any:
        return await transact(lambda tx: work(FailingAt(tx, 4)), **kwargs)

    db.transact = failing  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="disk went away"):
            await backend.erasure.erase(ANN_MAIN)
    finally:
        db.transact = transact  # type: ignore[method-assign]
    assert await texts(backend) == before
    assert await backend.erasure.count(ANN_MAIN) == EXPECTED
    assert await backend.erasure.erase(ANN_MAIN) == EXPECTED
