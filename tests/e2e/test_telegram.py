"""End to end: the real python-telegram-bot against the fake Bot API, with
the real ConversationManager on SQLite; conversations in private chats,
groups and forum topics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.media import unreadable_notice
from core.store.base import SearchScope
from tests.support.scripted_model import text
from tests.support.telegram_harness import TelegramHarness, telegram_harness

PRIVATE = "agent:main:telegram:private:42"


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


async def test_private_message_is_stored_and_answered(tg: TelegramHarness) -> None:
    await tg.start()
    assert tg.fake.calls_to("getMe") and tg.fake.calls_to("setMyCommands")
    commands = tg.fake.calls_to("setMyCommands")[0].params["commands"]
    assert {c["command"] for c in commands} >= {"help", "commitments", "dismiss", "snooze"}

    update = await tg.fake.push_message("hello there", chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.sent)

    assert tg.fake.texts() == ["echo: hello there"]
    assert tg.fake.sent[0].chat_id == 42 and tg.fake.sent[0].thread_id is None
    assert await tg.transcript(PRIVATE) == [
        ("user", "text", "hello there"),
        ("assistant", "text", "echo: hello there"),
    ]
    # The reply's platform id is recorded once the send has returned, a
    # moment after the fake saw the message.
    for _ in range(100):
        rows = await tg.store.history(PRIVATE, before_turn_of=2**62, limit=10)
        if rows[1].platform_message_id is not None:
            break
        await asyncio.sleep(0.01)
    assert rows[0].platform_message_id == str(update["message"]["message_id"])
    assert rows[0].sender_id == "42"
    assert rows[1].platform_message_id == str(tg.fake.sent[0].message_id)
    # typing while the model worked
    assert tg.fake.calls_to("sendChatAction")[0].params["action"] == "typing"


async def test_the_same_update_twice_gets_one_reply(tg: TelegramHarness) -> None:
    await tg.start()
    update = await tg.fake.push_message("only once", chat_id=42)
    await tg.fake.push(dict(update))  # the very same update id again
    # ...and the same message under a new update id (a redelivery after a restart)
    await tg.fake.push({"message": update["message"]})
    await tg.fake.push_message("next", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    assert tg.fake.texts() == ["echo: only once", "echo: next"]
    users = [t for role, _, t in await tg.transcript(PRIVATE) if role == "user"]
    assert users == ["only once", "next"]


async def test_group_message_without_mention_is_ignored_and_not_stored(
    tg: TelegramHarness,
) -> None:
    await tg.start()
    group = dict(chat_id=-100500, chat_type="supergroup", user_id=7)
    await tg.fake.push_message("just chatting among ourselves", **group)
    await tg.fake.push_message("@kept_bot what's the capital of France?", **group)
    await tg.fake.wait_for(lambda: tg.fake.sent)

    assert tg.fake.texts() == ["echo: @kept_bot what's the capital of France?"]
    key = "agent:main:telegram:group:-100500"
    assert [t for role, _, t in await tg.transcript(key) if role == "user"] == [
        "@kept_bot what's the capital of France?"
    ]
    # Only the mention turned into a turn: nothing typed for the other one.
    assert len(tg.fake.calls_to("sendChatAction")) == 1


async def test_group_reply_to_the_bot_is_a_turn_and_other_mentions_are_not(
    tg: TelegramHarness,
) -> None:
    await tg.start()
    group = dict(chat_id=-100501, chat_type="group", user_id=7)
    await tg.fake.push_message("@someone_else have a look", **group)
    await tg.fake.push_message("/help@other_bot", **group)
    await tg.fake.push_message("hey @KEPT_BOT, hi", **group)
    await tg.fake.wait_for(lambda: tg.fake.sent)
    ours = tg.fake.bot_message(tg.fake.sent[0])
    await tg.fake.push_message("thanks!", reply_to=ours, **group)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    assert tg.fake.texts() == ["echo: hey @KEPT_BOT, hi", "echo: thanks!"]


async def test_forum_topic_reply_goes_to_the_same_topic(tg: TelegramHarness) -> None:
    await tg.start()
    await tg.fake.push_message(
        "@kept_bot summarise this topic", chat_id=-100600, chat_type="supergroup",
        user_id=7, thread_id=55,
    )  # fmt: skip
    # In a topic, a plain message "replies" to the topic's first message: not a turn.
    await tg.fake.push_message(
        "unrelated", chat_id=-100600, chat_type="supergroup", user_id=7, thread_id=55
    )
    await tg.fake.wait_for(lambda: tg.fake.sent)

    sent = tg.fake.sent
    assert [(s.chat_id, s.thread_id) for s in sent] == [(-100600, 55)]
    key = "agent:main:telegram:group:-100600:thread:55"
    assert [t for role, _, t in await tg.transcript(key) if role == "user"] == [
        "@kept_bot summarise this topic"
    ]
    assert tg.fake.calls_to("sendChatAction")[0].params["message_thread_id"] == 55


async def test_allow_from_refuses_others_silently(tg: TelegramHarness) -> None:
    tg.config.channels.telegram.dm_policy = "allowlist"
    tg.config.channels.telegram.allow_from = ["@bob", "77"]
    await tg.start()
    await tg.fake.push_message("let me in", chat_id=42, username="ana")
    await tg.fake.push_message("/help", chat_id=42, username="ana")
    await tg.fake.push_message("hi, I'm bob", chat_id=43, username="Bob")
    await tg.fake.push_message("and I'm 77", chat_id=77, username=None)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    assert sorted(tg.fake.texts()) == ["echo: and I'm 77", "echo: hi, I'm bob"]
    assert await tg.transcript(PRIVATE) == []


async def test_long_reply_is_split_on_a_paragraph_boundary(tg: TelegramHarness) -> None:
    first = "First part. " * 250  # 3,000 characters
    second = "Second part. " * 153  # ~2,000 characters
    tg.model.steps.append(text(f"{first.strip()}\n\n{second.strip()}"))
    await tg.start()
    await tg.fake.push_message("tell me everything", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    assert tg.fake.texts() == [first.strip(), second.strip()]
    assert all(len(t) <= 4096 for t in tg.fake.texts())


async def test_markdown_is_sent_as_entities_never_parse_mode(tg: TelegramHarness) -> None:
    reply = "Use snake_case and *stars* [like](this) `code` _here"
    tg.model.steps.append(text(reply))
    await tg.start()
    await tg.fake.push_message("style?", chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.sent)

    call = tg.fake.calls_to("sendMessage")[0]
    # A link Telegram cannot open ("this") keeps its word, unlinked.
    assert call.params["text"] == "Use snake_case and stars like code _here"
    assert [(e["type"], e["offset"], e["length"]) for e in call.params["entities"]] == [
        ("italic", 19, 5),
        ("code", 30, 4),
    ]
    assert "parse_mode" not in call.params


async def test_edited_message_updates_the_transcript(tg: TelegramHarness) -> None:
    await tg.start()
    update = await tg.fake.push_message("my interview is on Tuesday", chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.sent)
    await tg.fake.push_edit(update["message"], "my interview is on Wednesday")
    await tg.fake.push_message("ok", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    users = [t for role, _, t in await tg.transcript(PRIVATE) if role == "user"]
    assert users == ["my interview is on Wednesday", "ok"]
    scope = SearchScope(session_key=PRIVATE)
    answer = await tg.services.search.search("Wednesday", scope, 5)
    assert answer.results
    old = (await tg.services.search.search("Tuesday", scope, 5)).results
    assert [hit["role"] for hit in old] == ["assistant"]  # only the echo still says it


async def test_bots_are_ignored_and_a_sticker_gets_the_notice(tg: TelegramHarness) -> None:
    await tg.start()
    bot_message = tg.fake.message("I am a bot", chat_id=42)
    bot_message["from"]["is_bot"] = True
    await tg.fake.push({"message": bot_message})
    sticker = tg.fake.message("", chat_id=42)
    del sticker["text"]
    sticker["sticker"] = {
        "file_id": "x",
        "file_unique_id": "x",
        "width": 512,
        "height": 512,
        "is_animated": False,
        "is_video": False,
        "type": "regular",
    }
    await tg.fake.push({"message": sticker})
    await tg.fake.push_message("real", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    # What kept cannot read, it says (tests/channels/telegram/test_media.py).
    assert tg.fake.texts() == [unreadable_notice("sticker"), "echo: real"]
