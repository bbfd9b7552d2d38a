"""A heartbeat follow-up through the real scheduler and the Telegram
adapter: it arrives in the commitment's chat and topic, and nowhere else,
with its buttons; the user's answer is stored after it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.llm import Completion
from tests.fakes.scripted_model import text
from tests.test_telegram_harness import TelegramHarness, scope, telegram_harness

GROUP, TOPIC, USER = -100800, 12, 7
TOPIC_KEY = f"agent:main:telegram:group:{GROUP}:thread:{TOPIC}"


async def check_in(messages: list[dict[str, Any]], tools: Any) -> Completion:
    """The heartbeat model: greets and asks the commitment's own question."""
    prompt = json.dumps(messages)
    question = "Did the parcel arrive?" if "parcel" in prompt else "How did the interview go?"
    return text(f"Hi! {question}")


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


async def test_heartbeat_follow_up_arrives_in_its_topic_with_buttons(tg: TelegramHarness) -> None:
    here = await tg.seed(scope(GROUP, sender=USER, thread=TOPIC), "How did the interview go?")
    await tg.seed(scope(GROUP, sender=USER, thread=99), "Did the parcel arrive?")
    await tg.start()
    tg.model.steps.extend([check_in, check_in])
    await tg.services.heartbeat.tick()

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


async def test_buttons_on_a_delivered_follow_up_say_there_is_nothing_left(
    tg: TelegramHarness,
) -> None:
    # Core makes a delivered commitment final (`sent`): neither dismiss nor
    # snooze applies any more, and the adapter says so instead of pretending.
    c = await tg.seed(scope(42))
    await tg.start()
    tg.model.steps.append(text("How did it go?"))
    await tg.services.heartbeat.tick()
    sent = tg.fake.sent[0]
    assert sent.reply_markup is not None
    snooze = sent.reply_markup["inline_keyboard"][0][1]["callback_data"]

    await tg.fake.push_callback(sent, snooze, user_id=42)
    await tg.fake.wait_for(lambda: tg.fake.calls_to("answerCallbackQuery"))
    answer = tg.fake.calls_to("answerCallbackQuery")[0].params
    assert "already delivered" in answer["text"]
    assert (await tg.commitment(c.id)).status == "sent" and sent.edits == []
