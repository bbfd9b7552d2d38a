"""The whole story on Telegram: a user in a group mentions an interview, the
hidden extraction pass stores a commitment, the clock moves to the next
evening, the heartbeat's follow-up arrives in that chat and no other, and the
user's answer is stored after it.

Real python-telegram-bot against the fake Bot API, real services from
bot/services.py on a temp SQLite store, a model that answers per role."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from core.commitments.store import Filter
from tests.support.role_model import PARIS, RoleModel
from tests.support.telegram_harness import TelegramHarness, telegram_harness

GROUP, OTHER_CHAT, ANA, BEN = -100500, 77, 7, 8
GROUP_KEY = f"agent:main:telegram:group:{GROUP}"


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(
        tmp_path,
        commitments={"enabled": True},
        agents=[{"id": "main", "timezone": "Europe/Paris"}],
    ) as harness:
        model = RoleModel(harness.clock.now)
        harness.model.complete = model.complete  # type: ignore[method-assign]
        harness.role_model = model  # type: ignore[attr-defined]
        harness.services.extraction.start()
        yield harness
        await harness.services.extraction.stop(drain_seconds=0.5)


async def settle(tg: TelegramHarness, model: RoleModel, *, replies: int, extractions: int) -> None:
    """Wait for the replies, then for the hidden extraction passes they cause.

    The reply reaches the fake server a moment before the adapter's turn
    ends and queues the exchange, and the batch window runs on the test clock:
    so move the clock in small steps until the passes have happened."""
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= replies)
    for _ in range(500):
        await tg.services.manager.drain()
        if model.roles.count("extraction") >= extractions and tg.services.extraction.queued == 0:
            break
        await tg.clock.advance(1)
        await asyncio.sleep(0.005)
    await asyncio.wait_for(tg.services.extraction.wait_idle(), 5)


async def test_interview_mention_to_follow_up_in_that_chat_only(tg: TelegramHarness) -> None:
    await tg.start()
    bot = tg.fake.username
    await tg.fake.push_message(
        f"@{bot} I have a job interview tomorrow morning",
        chat_id=GROUP, chat_type="supergroup", user_id=ANA,
    )  # fmt: skip
    await tg.fake.push_message("any weekend plans?", chat_id=OTHER_CHAT, user_id=BEN)
    model: RoleModel = tg.role_model  # type: ignore[attr-defined]
    await settle(tg, model, replies=2, extractions=2)

    [stored] = await tg.services.backend.commitments.list(Filter())
    assert (stored.session_key, stored.chat_id, stored.sender_id) == (GROUP_KEY, str(GROUP), "7")
    evening = datetime(2026, 12, 1, 18, 0, tzinfo=PARIS)
    assert stored.due_earliest == evening

    before = len(tg.fake.sent)
    tg.clock.set(evening - timedelta(hours=2))
    await tg.services.scheduler.tick()
    assert len(tg.fake.sent) == before

    tg.clock.set(evening + timedelta(minutes=5))
    await tg.services.scheduler.tick()
    [follow_up] = tg.fake.sent[before:]
    assert (follow_up.chat_id, follow_up.text) == (GROUP, "How did the interview go?")
    assert follow_up.reply_markup is not None
    assert (await tg.services.backend.commitments.get(stored.id)).status == "sent"  # type: ignore[union-attr]

    # Later ticks send nothing more, anywhere.
    tg.clock.set(evening + timedelta(hours=3))
    await tg.services.scheduler.tick()
    assert len(tg.fake.sent) == before + 1

    # Ana answers by replying to the check-in: her answer follows its question.
    await tg.fake.push_message(
        "It went really well, thanks!", chat_id=GROUP, chat_type="supergroup", user_id=ANA,
        reply_to=tg.fake.bot_message(follow_up),
    )  # fmt: skip
    await settle(tg, model, replies=before + 2, extractions=3)
    rows = await tg.transcript(GROUP_KEY)
    assert rows[-3:] == [
        ("assistant", "checkin", "How did the interview go?"),
        ("user", "text", "It went really well, thanks!"),
        ("assistant", "text", "Good luck! You'll do great."),
    ]
    other = await tg.transcript(f"agent:main:telegram:private:{OTHER_CHAT}")
    assert "checkin" not in {kind for _, kind, _ in other}
