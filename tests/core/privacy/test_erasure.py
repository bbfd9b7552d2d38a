"""Erasing a user, on each backend: their private chat goes whole, in a
group only their messages (and the bot's replies to them), follow-ups,
reminders, queued jobs and settings go; another member's rows, and the
pairing approval, stay. Counted first, erased in one transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.privacy.store import ErasedUser, ErasureCounts
from core.search.redact import Redactor
from core.store.backends import Backend, open_backend
from core.store.base import SearchScope
from core.store.sql.database import Transaction
from tests.support.followups import store_rows
from tests.support.user_data import (
    ANN,
    BEN,
    BEN_PRIVATE,
    GROUP,
    OTHER_AGENT,
    PRIVATE,
    found,
    seed,
    texts,
)


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


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


async def test_a_whole_chat_goes_with_everyone_s_part_of_it(backend: Backend) -> None:
    await seed(backend)
    planned = await backend.erasure.count_session(GROUP)
    assert planned == ErasureCounts(chats=1, messages=4, follow_ups=2, reminders=2)
    assert await backend.erasure.erase_session(GROUP) == planned
    assert await found(backend, "zebracorn") == {PRIVATE, BEN_PRIVATE}
    sessions = {r[0] for r in await store_rows(backend.store, "SELECT key FROM sessions")}
    assert GROUP not in sessions and PRIVATE in sessions
    reminders = {r[0] for r in await store_rows(backend.store, "SELECT text FROM reminders")}
    assert reminders == {"stretch"}
    assert await backend.erasure.count_session(GROUP) == ErasureCounts()
    assert await backend.erasure.erase_session("agent:main:telegram:group:404") == ErasureCounts()


async def test_the_stored_chats_with_their_counts_and_a_members_own(backend: Backend) -> None:
    await seed(backend)
    every = {c.key: c for c in await backend.chats.chats()}
    assert set(every) == {PRIVATE, BEN_PRIVATE, GROUP, OTHER_AGENT}
    group = every[GROUP]
    assert (group.kind, group.members, group.messages) == ("group", 2, 4)
    assert group.first is not None and group.last is not None and group.first <= group.last
    anns = {c.key for c in await backend.chats.chats(("telegram", ANN))}
    assert anns == {PRIVATE, GROUP, OTHER_AGENT}
    assert await backend.chats.chats(("discord", ANN)) == []
    await backend.erasure.erase(ErasedUser("telegram", ANN))
    assert {c.key for c in await backend.chats.chats(("telegram", ANN))} == set()
    assert every[BEN_PRIVATE] in await backend.chats.chats(("telegram", BEN))
