"""core/commands/rights.py on each backend: /forget's question counts what
an Erase press then erases; only the asker's press within the lapse erases,
a repeated or concurrent press finds nothing left."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from core.clock import TestClock
from core.commands.rights import FORGET_LAPSE, ForgetOutcome, RightsCommands
from core.messages import ForgetChoice
from core.privacy.store import ErasureCounts, PrivacyStores
from core.store.backends import Backend, open_backend
from tests.support.user_data import ANN, BEN, NOW, seed

ALL = ErasureCounts(chats=2, messages=8, follow_ups=3, reminders=2, queued=1, settings=1)


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        await seed(opened)
        yield opened


def rights(backend: Backend, clock: TestClock, user: str = ANN) -> RightsCommands:
    stores = PrivacyStores(backend.erasure, backend.exports, backend.chats)
    return RightsCommands(stores, clock, platform="telegram", user_id=user)


async def test_the_question_counts_what_erase_then_erases(backend: Backend) -> None:
    clock = TestClock(NOW)
    asked = await rights(backend, clock).ask_forget()
    assert asked.counts == ALL
    erase, cancel = asked.actions
    assert erase == ForgetChoice(ANN, int(NOW.timestamp()), True) and not cancel.erase

    assert (await rights(backend, clock).answer_forget(cancel)).outcome is ForgetOutcome.CANCELLED
    assert await backend.erasure.count(rights(backend, clock).user) == ALL
    # Someone else pressing either button: nothing happens to anyone's data.
    for choice in asked.actions:
        answer = await rights(backend, clock, BEN).answer_forget(choice)
        assert answer.outcome is ForgetOutcome.NOT_YOURS
    assert await backend.erasure.count(rights(backend, clock).user) == ALL

    await clock.advance(FORGET_LAPSE.total_seconds() - 1)
    answer = await rights(backend, clock).answer_forget(erase)
    assert answer.outcome is ForgetOutcome.ERASED and answer.counts == asked.counts
    again = await rights(backend, clock).answer_forget(erase)
    assert again.outcome is ForgetOutcome.NOTHING_LEFT and again.counts == ErasureCounts()


async def test_a_press_after_the_lapse_or_from_the_future_erases_nothing(
    backend: Backend,
) -> None:
    clock = TestClock(NOW)
    erase, _ = (await rights(backend, clock).ask_forget()).actions
    await clock.advance(FORGET_LAPSE.total_seconds() + 1)
    assert (await rights(backend, clock).answer_forget(erase)).outcome is ForgetOutcome.LAPSED
    future = ForgetChoice(ANN, int((NOW + timedelta(hours=1)).timestamp()), True)
    assert (await rights(backend, clock).answer_forget(future)).outcome is ForgetOutcome.LAPSED
    assert await backend.erasure.count(rights(backend, clock).user) == ALL


async def test_two_presses_at_once_erase_once(backend: Backend) -> None:
    clock = TestClock(NOW)
    erase, _ = (await rights(backend, clock).ask_forget()).actions
    answers = await asyncio.gather(
        rights(backend, clock).answer_forget(erase), rights(backend, clock).answer_forget(erase)
    )
    assert sorted(a.outcome for a in answers) == [ForgetOutcome.ERASED, ForgetOutcome.NOTHING_LEFT]
    assert sum((a.counts.total for a in answers), 0) == ALL.total


async def test_nothing_held_asks_nothing(backend: Backend) -> None:
    asked = await rights(backend, TestClock(NOW), "999").ask_forget()
    assert asked.counts == ErasureCounts() and asked.actions == ()
