"""The PairingStore contract and the Pairing service, on every backend
(`storage_url`), with expiry on the injected clock. Flood behaviour (a
full list, the notice's pace, a waiting stranger's cost, two workers) is in
test_flood.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.clock import TestClock
from core.pairing import CODE_ALPHABET, CODE_LENGTH, Pairing
from core.store.backends import Backend, open_backend


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


@pytest.fixture
def clock() -> TestClock:
    return TestClock()


@pytest.fixture
def pairing(backend: Backend, clock: TestClock) -> Pairing:
    return Pairing(backend.pairing, clock)


async def test_an_unknown_user_gets_one_code_again_while_it_is_pending(
    pairing: Pairing, clock: TestClock
) -> None:
    first = await pairing.code_for("telegram", "42", "ann")
    assert first is not None
    assert len(first.code) == CODE_LENGTH and set(first.code) <= set(CODE_ALPHABET)
    again = await pairing.code_for("telegram", "42", "ann")
    assert again is not None and again.code == first.code
    assert again.expires_at == first.expires_at
    # The same id on another platform is another person, with another code.
    await clock.advance(1)
    other = await pairing.code_for("discord", "42")
    assert other is not None and other.code != first.code
    assert [(r.platform, r.user_id, r.username) for r in await pairing.pending()] == [
        ("telegram", "42", "ann"),
        ("discord", "42", None),
    ]


async def test_approving_a_code_stores_the_user_and_uses_the_code_up(pairing: Pairing) -> None:
    request = await pairing.code_for("telegram", "42", "ann")
    assert request is not None
    assert not await pairing.is_paired("telegram", "42")
    # Typed in lower case with a dash: still the code.
    typed = f"{request.code[:4].lower()}-{request.code[4:]}"
    approved = await pairing.approve(typed)
    assert approved is not None
    assert (approved.platform, approved.user_id, approved.username) == ("telegram", "42", "ann")
    assert await pairing.is_paired("telegram", "42")
    assert not await pairing.is_paired("discord", "42")
    assert await pairing.pending() == []
    assert await pairing.approve(request.code) is None  # one time only
    assert [(p.platform, p.user_id) for p in await pairing.paired()] == [("telegram", "42")]


async def test_an_unknown_code_approves_nobody(pairing: Pairing) -> None:
    request = await pairing.code_for("telegram", "42")
    assert await pairing.approve("ZZZZZZZZ") is None
    assert await pairing.paired() == []
    # The code that was given out, approved the same way, does.
    assert request is not None and await pairing.approve(request.code) is not None
    assert [p.user_id for p in await pairing.paired()] == ["42"]


async def test_codes_expire_and_an_expired_code_approves_nobody(
    pairing: Pairing, clock: TestClock
) -> None:
    request = await pairing.code_for("telegram", "42")
    assert request is not None
    await clock.advance(pairing.ttl.total_seconds() - 1)
    assert [r.code for r in await pairing.pending()] == [request.code]
    await clock.advance(1)
    assert await pairing.pending() == []
    assert await pairing.approve(request.code) is None
    assert not await pairing.is_paired("telegram", "42")
    # Asking again after expiry gives a new code, valid for a new hour.
    fresh = await pairing.code_for("telegram", "42")
    assert fresh is not None and fresh.code != request.code
    assert fresh.expires_at == clock.now() + pairing.ttl
    assert await pairing.approve(fresh.code) is not None


async def test_revoking_forgets_the_user_and_a_new_request_gets_a_new_code(
    pairing: Pairing,
) -> None:
    request = await pairing.code_for("telegram", "42")
    assert request is not None and await pairing.approve(request.code) is not None
    assert await pairing.revoke("telegram", "42") is True
    assert not await pairing.is_paired("telegram", "42")
    assert await pairing.revoke("telegram", "42") is False
    fresh = await pairing.code_for("telegram", "42")
    assert fresh is not None and fresh.code != request.code


async def test_the_same_user_id_and_username_rules_hold_for_a_revoked_then_blocked_user(
    pairing: Pairing,
) -> None:
    request = await pairing.code_for("telegram", "42", "Ann")
    assert request is not None and await pairing.approve(request.code) is not None
    assert await pairing.standing("telegram", "42") == "approved"
    assert await pairing.standing("telegram", "43") == "unknown"
    assert await pairing.known_as("@ann") == {("telegram", "42")}
    assert await pairing.known_as("ANN", "discord") == set()
    assert await pairing.known_as("@") == set()
