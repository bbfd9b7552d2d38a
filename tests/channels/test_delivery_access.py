"""The AdapterRouter's AccessCheck: before a check-in or a reminder is sent,
the target platform's adapter makes the same decision as for an inbound
message, by the settings and approvals of that moment (a revoked pairing, a
blocked user, a group removed from `groups`, `allowFrom` by `@username`).
On every backend (`storage_url`): the approvals live in the pairing store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from channels.access import Access
from channels.router import AdapterRouter
from core.clock import TestClock
from core.messages import Target
from core.pairing import Pairing
from core.store.backends import Backend, open_backend
from tests.support.adapters import QuietAdapter, ignore


class LiveAdapter(QuietAdapter):
    """An adapter whose access settings the test edits, as a config reload does."""

    platform = "telegram"

    def __init__(self, pairing: Pairing, settings: Access) -> None:
        super().__init__(handler=ignore, agent_id="main", pairing=pairing)
        self.settings = settings

    def access(self) -> Access:
        return self.settings


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


@pytest.fixture
def pairing(backend: Backend) -> Pairing:
    return Pairing(backend.pairing, TestClock())


async def approve(pairing: Pairing, user_id: str, username: str | None = None) -> None:
    offer = await pairing.offer("telegram", user_id, username)
    assert offer is not None
    assert await pairing.approve(offer.request.code) is not None


DM = Target("telegram", "42")
GROUP = Target("telegram", "-100500")


async def test_a_revoked_pairing_is_refused_and_served_again_once_reapproved(pairing: Pairing):
    router = AdapterRouter()
    router.add(LiveAdapter(pairing, Access(dm_policy="pairing")))
    assert await router.refusal(DM, "private", "42") is not None  # never approved
    await approve(pairing, "42")
    assert await router.refusal(DM, "private", "42") is None
    assert await pairing.revoke("telegram", "42")
    why = await router.refusal(DM, "private", "42")
    assert why is not None and "not approved" in why
    await approve(pairing, "42")
    assert await router.refusal(DM, "private", "42") is None


async def test_a_blocked_user_is_refused_even_when_allow_from_lists_them(pairing: Pairing):
    router = AdapterRouter()
    router.add(LiveAdapter(pairing, Access(dm_policy="pairing", allow_from=("42",))))
    assert await router.refusal(DM, "private", "42") is None
    await pairing.block("telegram", "42")
    why = await router.refusal(DM, "private", "42")
    assert why is not None and "blocked" in why


async def test_a_group_removed_from_groups_is_refused(pairing: Pairing):
    adapter = LiveAdapter(pairing, Access(group_policy="allowlist", groups=frozenset({"-100500"})))
    router = AdapterRouter()
    router.add(adapter)
    assert await router.refusal(GROUP, "group", "42") is None
    adapter.settings = Access(group_policy="allowlist", groups=frozenset())
    why = await router.refusal(GROUP, "group", "42")
    assert why is not None and "-100500" in why
    # groupPolicy open serves every group again.
    adapter.settings = Access(group_policy="open")
    assert await router.refusal(GROUP, "group", "42") is None


async def test_an_at_username_entry_matches_the_username_the_user_last_wrote_with(
    pairing: Pairing,
):
    adapter = LiveAdapter(pairing, Access(dm_policy="allowlist", allow_from=("@alice",)))
    router = AdapterRouter()
    router.add(adapter)
    # Not seen yet: the id alone cannot match `@alice`.
    assert await router.refusal(DM, "private", "42") is not None
    assert await adapter.admission("private", "42", "Alice") == "yes"  # they write
    assert await router.refusal(DM, "private", "42") is None
    # Taken out of allowFrom: refused, though kept knows the username.
    adapter.settings = Access(dm_policy="allowlist", allow_from=("@bob",))
    assert await router.refusal(DM, "private", "42") is not None


async def test_an_at_username_entry_matches_the_username_stored_at_approval(pairing: Pairing):
    await approve(pairing, "42", "alice")
    # A fresh process (no message seen): the pairing store knows the name.
    adapter = LiveAdapter(pairing, Access(dm_policy="allowlist", allow_from=("@alice",)))
    router = AdapterRouter()
    router.add(adapter)
    assert await router.refusal(DM, "private", "42") is None
    assert await router.refusal(Target("telegram", "77"), "private", "77") is not None


async def test_a_platform_without_a_running_adapter_is_left_to_wait(pairing: Pairing):
    # Nothing can be sent there now anyway; the adapter decides once it runs.
    router = AdapterRouter()
    router.add(LiveAdapter(pairing, Access(dm_policy="allowlist", allow_from=())))
    assert await router.refusal(Target("discord", "9"), "private", "9") is None
    # The running platform's adapter does decide, and refuses.
    assert await router.refusal(Target("telegram", "9"), "private", "9") is not None
