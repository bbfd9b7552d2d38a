"""Privacy in groups: the one rule both chat platforms call (ChatAccess) and
CommitmentService.find / visible on each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from core.clock import TestClock
from core.commitments.model import Commitment
from core.commitments.service import CommitmentService
from core.commitments.store import Filter
from core.commitments.visibility import Asker, ChatAccess
from core.messages import ChatKind
from core.store import Store
from tests.core.commitments.test_store import ALICE, BOB, NOW, OTHER_CHAT, new
from tests.support.store_helpers import commitment_store_for

GROUP_KEY = ALICE.session_key


class AdminCheck:
    """An is_admin callback that counts how often it is asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.calls = 0

    async def __call__(self) -> bool:
        self.calls += 1
        return self.answer


def access(
    user: str, *, admin: bool = False, kind: ChatKind = "group", key: str = GROUP_KEY
) -> tuple[ChatAccess, AdminCheck]:
    check = AdminCheck(admin)
    return ChatAccess(Asker("main", key, kind, user), check), check


@pytest.fixture
async def service(any_store: Store) -> AsyncIterator[CommitmentService]:
    yield CommitmentService(commitment_store_for(any_store), TestClock(NOW))


async def seeded(service: CommitmentService) -> tuple[Commitment, Commitment, Commitment]:
    store = service._store
    alices = (await store.apply_extraction(ALICE, [new(ALICE, "sleep")], [], now=NOW)).created[0]
    bobs = (await store.apply_extraction(BOB, [new(BOB, "dentist")], [], now=NOW)).created[0]
    private = await store.apply_extraction(OTHER_CHAT, [new(OTHER_CHAT)], [], now=NOW)
    return alices, bobs, private.created[0]


async def test_a_member_sees_only_their_own_and_the_admin_is_asked_once() -> None:
    alice, check = access("alice")
    assert await alice.may_manage("alice") and check.calls == 0  # their own: no platform call
    assert await alice.visible() == Filter("main", GROUP_KEY, "alice")
    assert not await alice.may_manage("bob")
    assert not await alice.may_manage(None)  # nobody's is nobody's to see but an admin's
    assert check.calls == 1  # asked once, remembered


async def test_an_admin_sees_every_members() -> None:
    admin, check = access("carol", admin=True)
    assert await admin.visible() == Filter("main", GROUP_KEY)
    assert await admin.may_manage("bob") and await admin.may_manage(None)
    assert check.calls == 1


async def test_a_private_chat_is_the_users_own_and_never_asks_about_admins() -> None:
    user, check = access("5", kind="private", key=OTHER_CHAT.session_key)
    assert await user.visible() == Filter("main", OTHER_CHAT.session_key)
    assert await user.may_manage("someone") and not await user.admin()
    assert check.calls == 0


async def test_channel_chats_follow_the_group_rule() -> None:
    member, _ = access("alice", kind="channel")
    assert (await member.visible()).sender_id == "alice"


async def test_find_answers_another_members_id_like_one_that_never_existed(
    service: CommitmentService,
) -> None:
    alices, bobs, private = await seeded(service)
    alice, check = access("alice")

    found = await service.find(alice, alices.id)
    assert found is not None and found[0].id == alices.id
    # The owner acts through their own filter: the store checks the sender
    # again in the same statement as the change.
    assert found[1].sender_id == "alice" and check.calls == 0
    assert await service.find(alice, bobs.id) is None
    assert await service.find(alice, private.id) is None  # another chat: no admin check
    assert check.calls == 1

    admin, _ = access("carol", admin=True)
    found = await service.find(admin, bobs.id)
    assert found is not None and found[1] == Filter("main", GROUP_KEY)
    assert await service.find(admin, private.id) is None


async def test_the_members_filter_refuses_in_the_store_too(service: CommitmentService) -> None:
    _, bobs, _ = await seeded(service)
    alice, _ = access("alice")
    # Even if a caller skipped `find`, alice's filter cannot touch bob's.
    outcome = await service.dismiss([bobs.id], alice.own())
    assert outcome.failed == [(bobs.id, "not found")]
    assert (await service._store.get(bobs.id)).status == "pending"  # type: ignore[union-attr]


async def test_visible_lists_the_askers_own_or_everyones(service: CommitmentService) -> None:
    alices, bobs, _ = await seeded(service)
    alice, _ = access("alice")
    assert [c.id for c in await service.visible(alice)] == [alices.id]
    admin, _ = access("carol", admin=True)
    assert {c.id for c in await service.visible(admin)} == {alices.id, bobs.id}
    nobody, _ = access("dave")
    assert await service.visible(nobody) == []
    assert replace(alice.own(), sender_id=None) == alice.chat()
