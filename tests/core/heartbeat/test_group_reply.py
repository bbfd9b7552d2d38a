"""A group check-in replies to the message of the member it is about
(Telegram `reply_parameters`), so it is clear whom it addresses; in a
private chat it is a plain message. Real scheduler, real Telegram adapter,
fake Bot API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.commitments.model import Commitment, Scope
from core.store.base import NewMessage
from tests.support.scripted_model import text
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

GROUP, MEMBER = -100900, 7


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path, commitments={"enabled": True}) as harness:
        yield harness


async def seed_from_message(
    tg: TelegramHarness, where: Scope, platform_message_id: str, *, session_key: str | None = None
) -> Commitment:
    """A commitment extracted from a member's message stored in `session_key`
    (default: the commitment's own session)."""
    kind = where.session_key.split(":")[3]
    await tg.store.ensure_session(
        where.session_key,
        agent_id=where.agent_id,
        platform=where.platform,
        chat_id=where.chat_id,
        chat_kind=kind,  # type: ignore[arg-type]
        thread_id=where.thread_id,
        now=tg.clock.now(),
    )
    source_key = session_key or where.session_key
    message = await tg.store.add_message(
        NewMessage(
            session_key=source_key,
            role="user",
            text="I have my driving test on Friday",
            ts=tg.clock.now(),
            sender_id=where.sender_id,
            platform_message_id=platform_message_id,
        )
    )
    await tg.store.add_message(  # answered then, so start-up does not answer it again
        NewMessage(
            session_key=source_key,
            role="assistant",
            text="Good luck!",
            ts=tg.clock.now(),
            in_reply_to=message.id,
        )
    )
    seeded = await tg.seed(where, "How did the driving test go?")
    # The harness seeds without a source; link it as extraction would have.
    sql = "UPDATE commitments SET source_message_id = ? WHERE id = ?"
    params = (message.id, seeded.id)
    await tg.store.connection.run_write(lambda db: db.execute(sql, params))  # type: ignore[attr-defined]
    return replace(seeded, source_message_id=message.id)


async def test_group_check_in_replies_to_the_members_message(tg: TelegramHarness) -> None:
    c = await seed_from_message(tg, scope(GROUP, sender=MEMBER), "321")
    await tg.start()
    tg.model.steps.append(text("How did the driving test go?"))
    await tg.services.scheduler.tick()
    [sent] = tg.fake.sent
    assert (sent.chat_id, sent.reply_to) == (GROUP, 321)
    assert sent.text == "How did the driving test go?"
    assert (await tg.commitment(c.id)).status == "sent"


async def test_private_check_in_is_not_a_reply(tg: TelegramHarness) -> None:
    await seed_from_message(tg, scope(42), "321")
    await tg.start()
    tg.model.steps.append(text("How did the driving test go?"))
    await tg.services.scheduler.tick()
    [sent] = tg.fake.sent
    assert (sent.chat_id, sent.reply_to) == (42, None)


async def test_a_source_message_of_another_chat_is_never_replied_to(tg: TelegramHarness) -> None:
    other = "agent:main:telegram:group:-100901"
    await tg.store.ensure_session(
        other,
        agent_id="main",
        platform="telegram",
        chat_id="-100901",
        chat_kind="group",
        thread_id=None,
        now=tg.clock.now(),
    )
    await seed_from_message(tg, scope(GROUP, sender=MEMBER), "321", session_key=other)
    await tg.start()
    tg.model.steps.append(text("How did the driving test go?"))
    await tg.services.scheduler.tick()
    [sent] = tg.fake.sent
    assert (sent.chat_id, sent.reply_to) == (GROUP, None)
