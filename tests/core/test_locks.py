"""SessionLocks: one turn per session at a time, in arrival order, and
nothing kept for a session with no turn."""

from __future__ import annotations

import asyncio

from core.locks import KeyedLocks, SessionLocks


async def test_a_session_lock_exists_only_while_held_or_awaited() -> None:
    locks = SessionLocks()
    assert len(locks) == 0
    async with locks.hold("a"):
        assert len(locks) == 1
    assert len(locks) == 0


async def test_turns_of_one_session_run_one_at_a_time_in_arrival_order() -> None:
    locks = SessionLocks()
    order: list[str] = []
    release = asyncio.Event()

    async def turn(name: str, *, wait: bool = False) -> None:
        async with locks.hold("a"):
            order.append(f"{name} in")
            if wait:
                await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(turn("first", wait=True))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(turn(n)) for n in ("second", "third")]
    other = asyncio.create_task(_hold_other(locks, order))
    await other  # another session is never held up
    assert order == ["first in", "other"]
    assert len(locks) == 1  # one entry for "a", however many wait for it
    release.set()
    await asyncio.gather(first, *rest)
    assert order == [
        "first in",
        "other",
        "first out",
        "second in",
        "second out",
        "third in",
        "third out",
    ]
    assert len(locks) == 0


async def _hold_other(locks: SessionLocks, order: list[str]) -> None:
    async with locks.hold("b"):
        order.append("other")


async def test_a_waiter_cancelled_before_its_turn_leaves_nothing_behind() -> None:
    locks = SessionLocks()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("a"):
            await release.wait()

    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiter.cancel()
    release.set()
    await held
    assert waiter.cancelled()
    assert len(locks) == 0


async def test_keyed_locks_keep_nothing_for_a_key_no_one_holds() -> None:
    locks: KeyedLocks[int] = KeyedLocks()
    for channel in range(1000):
        async with locks.hold(channel):
            assert len(locks) == 1
    assert len(locks) == 0
