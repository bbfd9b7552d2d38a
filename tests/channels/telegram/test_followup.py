"""A heartbeat follow-up through the real scheduler and the Telegram
adapter: it arrives in the commitment's chat and topic, and nowhere else,
with its buttons; the user's answer is stored after it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from core.llm import Completion
from tests.support.scripted_model import text
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

GROUP, TOPIC, USER = -100800, 12, 7
TOPIC_KEY = f"agent:main:telegram:group:{GROUP}:thread:{TOPIC}"


async def check_in(messages: list[dict[str, Any]], tools: Any) -> Completion:
    """The heartbeat model: greets and asks the commitment's own question."""
    prompt = json.dumps(messages)
    question = "Did the parcel arrive?" if "parcel" in prompt else "How did the interview go?"
    return text(f"Hi! {question}")


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path, commitments={"enabled": True}) as harness:
        yield harness


async def test_heartbeat_follow_up_arrives_in_its_topic_with_buttons(tg: TelegramHarness) -> None:
    here = await tg.seed(scope(GROUP, sender=USER, thread=TOPIC), "How did the interview go?")
    await tg.seed(scope(GROUP, sender=USER, thread=99), "Did the parcel arrive?")
    await tg.start()
    tg.model.steps.extend([check_in, check_in])
    await tg.services.scheduler.tick()

    by_thread = {s.thread_id: s for s in tg.fake.sent}
    assert set(by_thread) == {TOPIC, 99} and {s.chat_id for s in tg.fake.sent} == {GROUP}
    sent = by_thread[TOPIC]
    assert sent.text == "Hi! How did the interview go?"
    assert by_thread[99].text == "Hi! Did the parcel arrive?"
    assert sent.reply_markup is not None
    dismiss, snooze = sent.reply_markup["inline_keyboard"][0]
    assert here.id.removeprefix("cm_") in dismiss["callback_data"]
    assert (dismiss["text"], snooze["text"]) == ("Dismiss", "Snooze 1 day")
    assert (await tg.commitment(here.id)).status == "sent"
    assert (await tg.commitment(here.id)).sent_message_id == str(sent.message_id)

    # The answer, a reply in the topic, lands after the check-in in that session.
    await tg.fake.push_message(
        "It went great, thanks!", chat_id=GROUP, chat_type="supergroup", user_id=USER,
        thread_id=TOPIC, reply_to=tg.fake.bot_message(sent),
    )  # fmt: skip
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 3)
    assert await tg.transcript(TOPIC_KEY) == [
        ("assistant", "checkin", "Hi! How did the interview go?"),
        ("user", "text", "It went great, thanks!"),
        ("assistant", "text", "echo: It went great, thanks!"),
    ]
    assert tg.fake.sent[-1].thread_id == TOPIC


async def test_snooze_on_a_delivered_follow_up_brings_it_up_again_tomorrow(
    tg: TelegramHarness,
) -> None:
    # By the time anyone presses, the heartbeat has marked the commitment
    # `sent`; core reopens it as snoozed, and the heartbeat asks again a day
    # later, in one new check-in.
    c = await tg.seed(scope(42))
    await tg.start()
    tg.model.steps.append(text("How did it go?"))
    await tg.services.scheduler.tick()
    sent = tg.fake.sent[0]
    delivered = await tg.commitment(c.id)
    assert sent.reply_markup is not None and delivered.status == "sent"
    snooze = sent.reply_markup["inline_keyboard"][0][1]["callback_data"]

    await tg.fake.push_callback(sent, snooze, user_id=42, name="Ana")
    await tg.fake.wait_for(lambda: sent.edits)
    tomorrow = tg.clock.now() + timedelta(days=1)
    assert sent.text == "How did it go?\n\n— Snoozed by Ana until Tue 01 Dec 09:00 (UTC)."
    assert sent.reply_markup is None
    answer = tg.fake.calls_to("answerCallbackQuery")[0].params
    assert answer["text"] == "Snoozed by Ana until Tue 01 Dec 09:00 (UTC)."
    snoozed = await tg.commitment(c.id)
    assert (snoozed.status, snoozed.due_earliest) == ("snoozed", tomorrow)
    assert snoozed.sent_at == delivered.sent_at  # that delivery still counts toward the cap

    await tg.services.scheduler.tick()
    await tg.clock.advance(23 * 3600)
    await tg.services.scheduler.tick()
    assert len(tg.fake.sent) == 1, "nothing before the snooze is over"
    await tg.clock.advance(3600)
    tg.model.steps.append(text("Hi again! How did the interview go in the end?"))
    await tg.services.scheduler.tick()
    await tg.services.scheduler.tick()
    assert [s.text for s in tg.fake.sent[1:]] == ["Hi again! How did the interview go in the end?"]
    again = await tg.commitment(c.id)
    assert again.status == "sent" and again.sent_at == tomorrow


async def test_dismiss_on_a_delivered_follow_up_closes_it(tg: TelegramHarness) -> None:
    c = await tg.seed(scope(42))
    await tg.start()
    tg.model.steps.append(text("How did it go?"))
    await tg.services.scheduler.tick()
    sent = tg.fake.sent[0]
    sent_at = (await tg.commitment(c.id)).sent_at
    assert sent.reply_markup is not None
    dismiss = sent.reply_markup["inline_keyboard"][0][0]["callback_data"]

    await tg.fake.push_callback(sent, dismiss, user_id=42, name="Ana")
    await tg.fake.wait_for(lambda: sent.edits)
    assert sent.text == "How did it go?\n\n— Dismissed by Ana."
    closed = await tg.commitment(c.id)
    assert closed.status == "dismissed" and closed.dismissed_at == tg.clock.now()
    assert closed.sent_at == sent_at

    # A stale copy of the buttons (another device) is told, and changes nothing.
    await tg.fake.push_callback(sent, dismiss, user_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.calls_to("answerCallbackQuery")) == 2)
    answer = tg.fake.calls_to("answerCallbackQuery")[1].params
    assert answer["text"] == f"{c.id}: nothing changed (already dismissed)."
    assert answer["show_alert"]
    assert len(sent.edits) == 1
