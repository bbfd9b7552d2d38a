"""What kept cannot read, it says: a photo, voice note, video, sticker, file,
audio or location gets one fixed notice in its chat, where a text would be
answered, and nothing where a text would not be; a caption is text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.media import unreadable_notice
from tests.fakes.telegram_server import BOT_USERNAME, Sent
from tests.support.telegram_harness import TelegramHarness, telegram_harness

GROUP = -100900
PRIVATE_KEY = "agent:main:telegram:private:42"

# The fake's update kind, and what the notice calls it.
KINDS = [
    ("photo", "photo"),
    ("voice", "voice"),
    ("video", "video"),
    ("video_note", "video"),
    ("sticker", "sticker"),
    ("document", "file"),
    ("audio", "audio"),
    ("location", "location"),
]


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(
        tmp_path, {"dmPolicy": "allowlist", "allowFrom": ["42", "77"]}
    ) as harness:
        yield harness


async def confirmed(tg: TelegramHarness, update: dict[str, object]) -> None:
    """Wait until Telegram was told the update is done with (it was processed)."""
    await tg.fake.wait_for(lambda: update["update_id"] in tg.fake.confirmed)


@pytest.mark.parametrize(("kind", "said_as"), KINDS)
async def test_a_private_message_kept_cannot_read_gets_one_notice(
    tg: TelegramHarness, kind: str, said_as: str
) -> None:
    await tg.start()
    update = await tg.fake.push_media(kind, chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.sent)
    await confirmed(tg, update)
    # The next message of the chat is answered after the media one was
    # handled (one queue per chat): a second notice would be there by then.
    await tg.fake.push_message("hello", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) == 2)

    notice, answer = tg.fake.sent
    assert (notice.chat_id, notice.text) == (42, unreadable_notice(said_as))  # type: ignore[arg-type]
    assert notice.text.startswith("I can only read text")
    assert answer.text == "echo: hello"
    # Not the model's answer, and no transcript row: only the text turn is there.
    assert [m[-1]["content"] for _, m, _ in tg.model.requests] == ["hello"]
    assert await tg.transcript(PRIVATE_KEY) == [
        ("user", "text", "hello"),
        ("assistant", "text", "echo: hello"),
    ]


async def test_a_caption_is_read_as_text_and_answered(tg: TelegramHarness) -> None:
    await tg.start()
    await tg.fake.push_media("photo", chat_id=42, caption="what do you make of my garden?")
    await tg.fake.wait_for(lambda: tg.fake.sent)
    await tg.services.manager.drain()

    assert tg.fake.texts() == ["echo: what do you make of my garden?"]
    assert await tg.transcript(PRIVATE_KEY) == [
        ("user", "text", "what do you make of my garden?"),
        ("assistant", "text", "echo: what do you make of my garden?"),
    ]


async def test_in_a_group_only_media_addressed_to_the_bot_gets_the_notice(
    tg: TelegramHarness,
) -> None:
    await tg.start()
    where = {"chat_id": GROUP, "chat_type": "supergroup", "user_id": 77}
    chatter = await tg.fake.push_media("photo", **where)  # type: ignore[arg-type]
    await confirmed(tg, chatter)
    assert tg.fake.sent == []

    # A photo replying to one of the bot's messages is addressed to it.
    ours = tg.fake.bot_message(Sent(chat_id=GROUP, message_id=5, text="earlier"))
    reply = await tg.fake.push_media("photo", reply_to=ours, **where)  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: tg.fake.sent)
    # A file captioned with the bot's @name is text: answered normally.
    await tg.fake.push_media("document", caption=f"@{BOT_USERNAME} summarise this", **where)  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: len(tg.fake.sent) == 2)

    notice, answer = tg.fake.sent
    assert (notice.chat_id, notice.text) == (GROUP, unreadable_notice("photo"))
    assert notice.reply_to == reply["message"]["message_id"]  # quotes what it is about
    assert answer.text.startswith("echo: ") and "summarise this" in answer.text


async def test_media_from_someone_not_allowed_gets_nothing(tg: TelegramHarness) -> None:
    await tg.start()
    stranger = await tg.fake.push_media("voice", chat_id=99)
    await confirmed(tg, stranger)
    await tg.fake.push_message("hello", chat_id=42)  # another chat, to see the bot at work
    await tg.fake.wait_for(lambda: tg.fake.sent)

    assert [(s.chat_id, s.text) for s in tg.fake.sent] == [(42, "echo: hello")]


async def test_a_service_message_without_media_stays_unanswered(tg: TelegramHarness) -> None:
    await tg.start()
    joined = tg.fake.message("", chat_id=GROUP, chat_type="supergroup", user_id=77)
    del joined["text"]
    joined["new_chat_members"] = [{"id": 78, "is_bot": False, "first_name": "Bea"}]
    update = await tg.fake.push({"message": joined})
    await confirmed(tg, update)
    assert update["update_id"] in tg.fake.confirmed  # handled, not skipped
    assert tg.fake.sent == []
    # The bot at work in the same group: a message addressed to it is answered.
    await tg.fake.push_message(f"@{BOT_USERNAME} hi", chat_id=GROUP, chat_type="supergroup")
    await tg.fake.wait_for(lambda: tg.fake.sent)
    assert [(s.chat_id, s.text) for s in tg.fake.sent] == [(GROUP, f"echo: @{BOT_USERNAME} hi")]
