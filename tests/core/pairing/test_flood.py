"""Pairing under a flood of strangers, on every backend (`storage_url`) and
the injected clock: a full list never refuses a newcomer (the oldest request
gives way), the notice goes out once per code and again only after
`notice_every`, a waiting stranger's message costs no write, two workers on
one database send one notice between them; reject, block and unblock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.pairing import Pairing
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


def count_writes(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every write the pairing store makes from now on (a transaction or a
    one-statement write, on either backend), one entry each."""
    writes: list[str] = []
    db: Any = backend.pairing._db  # type: ignore[attr-defined]
    for name in ("transact", "execute"):
        real = getattr(db, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            writes.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(db, name, counted)
    return writes


async def test_a_full_list_drops_its_oldest_request_and_never_refuses_a_newcomer(
    backend: Backend, clock: TestClock
) -> None:
    pairing = Pairing(backend.pairing, clock, max_pending=3)
    first = await pairing.offer("telegram", "0")
    for n in range(1, 3):
        await clock.advance(1)
        await pairing.offer("telegram", str(n))
    await clock.advance(1)

    newcomer = await pairing.offer("telegram", "new")

    assert newcomer is not None and newcomer.notify
    assert [r.user_id for r in await pairing.pending()] == ["1", "2", "new"]
    assert first is not None and await pairing.approve(first.request.code) is None
    # Another platform has its own room.
    assert await pairing.offer("discord", "0") is not None
    assert len(await pairing.pending()) == 4
    # The one whose request gave way gets a new code (and its notice) when
    # they write again: nobody is locked out.
    await clock.advance(1)
    again = await pairing.offer("telegram", "0")
    assert again is not None and again.notify and again.request.code != first.request.code
    assert [r.user_id for r in await pairing.pending() if r.platform == "telegram"] == [
        "2",
        "new",
        "0",
    ]


async def test_the_default_list_holds_a_crowd(pairing: Pairing) -> None:
    assert pairing.max_pending >= 100


async def test_the_notice_goes_out_once_per_code_and_again_after_notice_every(
    backend: Backend, clock: TestClock
) -> None:
    pairing = Pairing(
        backend.pairing, clock, ttl=timedelta(hours=3), notice_every=timedelta(hours=1)
    )
    first = await pairing.offer("telegram", "42", "ann")
    assert first is not None and first.notify
    for _ in range(5):
        later = await pairing.offer("telegram", "42", "ann")
        assert later is not None and not later.notify
        assert later.request == first.request
    await clock.advance(3599)
    quiet = await pairing.offer("telegram", "42")
    assert quiet is not None and not quiet.notify
    await clock.advance(1)
    reminded = await pairing.offer("telegram", "42")
    assert reminded is not None and reminded.notify
    assert reminded.request.code == first.request.code  # the same code, told again
    after = await pairing.offer("telegram", "42")
    assert after is not None and not after.notify


async def test_a_new_code_after_expiry_is_noticed_at_once(
    pairing: Pairing, clock: TestClock
) -> None:
    first = await pairing.offer("telegram", "42")
    assert first is not None and first.notify
    await clock.advance(pairing.ttl.total_seconds())
    fresh = await pairing.offer("telegram", "42")
    assert fresh is not None and fresh.notify and fresh.request.code != first.request.code


async def test_a_slash_commands_code_is_not_the_notice(pairing: Pairing) -> None:
    shown = await pairing.code_for("discord", "7")
    offered = await pairing.offer("discord", "7")
    assert shown is not None and offered is not None
    assert offered.notify and offered.request.code == shown.code
    again = await pairing.code_for("discord", "7")
    assert again is not None and again.code == shown.code


async def test_a_waiting_strangers_messages_cost_no_write(
    backend: Backend, pairing: Pairing, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await pairing.offer("telegram", "42") is not None
    writes = count_writes(backend, monkeypatch)
    for _ in range(20):
        await clock.advance(60)
        offer = await pairing.offer("telegram", "42")
        assert offer is not None and not offer.notify
        assert await pairing.standing("telegram", "42") == "unknown"
    assert writes == []
    # A newcomer is one write.
    assert await pairing.offer("telegram", "43") is not None
    assert len(writes) == 1


async def test_two_workers_on_one_database_send_one_notice(
    storage_url: str, clock: TestClock
) -> None:
    async with open_backend(storage_url) as one, open_backend(storage_url) as two:
        workers = [Pairing(one.pairing, clock), Pairing(two.pairing, clock)]
        offers = await asyncio.gather(*(workers[n % 2].offer("telegram", "42") for n in range(12)))
        assert all(o is not None for o in offers)
        assert [o.notify for o in offers if o is not None].count(True) == 1
        assert len({o.request.code for o in offers if o is not None}) == 1
        await clock.advance(3600)
        offers = await asyncio.gather(*(workers[n % 2].offer("telegram", "42") for n in range(12)))
        assert [o.notify for o in offers if o is not None].count(True) == 1


async def test_reject_drops_a_code_and_the_user_may_ask_again(pairing: Pairing) -> None:
    offer = await pairing.offer("telegram", "42", "ann")
    assert offer is not None
    rejected = await pairing.reject(offer.request.code.lower())
    assert rejected == offer.request
    assert await pairing.pending() == []
    assert await pairing.reject(offer.request.code) is None
    assert await pairing.approve(offer.request.code) is None
    fresh = await pairing.offer("telegram", "42")
    assert fresh is not None and fresh.notify and fresh.request.code != offer.request.code


async def test_a_blocked_user_gets_no_code_and_loses_what_they_had(pairing: Pairing) -> None:
    approved = await pairing.code_for("telegram", "7", "eve")
    assert approved is not None and await pairing.approve(approved.code) is not None
    waiting = await pairing.offer("telegram", "8", "mallory")
    assert waiting is not None

    eve = await pairing.block("telegram", "7")
    mallory = await pairing.block("telegram", "8")

    assert eve.was_approved and eve.dropped_codes == () and eve.user.username == "eve"
    assert not mallory.was_approved and mallory.dropped_codes == (waiting.request.code,)
    assert mallory.user.username == "mallory"
    assert await pairing.pending() == [] and await pairing.paired() == []
    assert await pairing.standing("telegram", "7") == "blocked"
    assert await pairing.offer("telegram", "8") is None
    assert await pairing.code_for("telegram", "8") is None
    assert await pairing.approve(waiting.request.code) is None
    assert await pairing.pending() == []
    assert [(b.user_id, b.username) for b in await pairing.blocked()] == [
        ("7", "eve"),
        ("8", "mallory"),
    ]
    # The same id on another platform is another person.
    assert await pairing.offer("discord", "8") is not None
    # Blocking twice keeps the first block.
    again = await pairing.block("telegram", "8", "other")
    assert again.user == mallory.user and again.dropped_codes == ()

    lifted = await pairing.unblock("telegram", "8")
    assert lifted == mallory.user
    assert await pairing.unblock("telegram", "8") is None
    assert await pairing.standing("telegram", "8") == "unknown"
    fresh = await pairing.offer("telegram", "8")
    assert fresh is not None and fresh.notify
    assert [b.user_id for b in await pairing.blocked()] == ["7"]
