"""/forget, /mydata and /export on Telegram, end to end through the fake Bot
API on each backend: the prompt's counts and its Erase / Cancel buttons (only
the asker's press counts, and only within 5 minutes on the clock), what
/mydata shows in a private chat and hides in a group, and /export's file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main as cli
from channels.telegram import commands as telegram_commands
from core.commands.buttons import unpack
from core.config.model import RetentionConfig
from core.messages import ForgetChoice
from core.privacy.store import ErasedUser, ErasureCounts
from tests.fakes.telegram_server import Sent
from tests.support.scripted_model import text
from tests.support.telegram_harness import TelegramHarness, telegram_harness
from tests.support.user_data import ANN, BEN, seed, texts

ANN_ID, BEN_ID, GROUP_ID = int(ANN), int(BEN), -500
ANONYMOUS = 1087968824  # Telegram's GroupAnonymousBot, whom every anonymous admin posts as
ALL = ErasureCounts(chats=2, messages=8, follow_ups=3, reminders=2, queued=1, settings=1)
ACCESS = {"dmPolicy": "pairing", "groupPolicy": "open"}
IN_GROUP: dict[str, Any] = {"chat_id": GROUP_ID, "chat_type": "group"}


@pytest.fixture
async def tg(tmp_path: Path, storage_url: str) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path, ACCESS, storage_url=storage_url) as harness:
        await seed(harness.services.backend)
        await harness.start()
        yield harness


async def command(tg: TelegramHarness, line: str, **where: Any) -> list[Sent]:
    """Send a command; the messages the bot answered with."""
    before = len(tg.fake.sent)
    where.setdefault("chat_id", ANN_ID)
    where.setdefault("user_id", ANN_ID)
    await tg.fake.push_message(line, **where)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    await asyncio.sleep(0.05)  # a multi-message answer's later messages
    return tg.fake.sent[before:]


def button_data(sent: Sent) -> list[str]:
    rows = (sent.reply_markup or {}).get("inline_keyboard", [])
    return [b["callback_data"] for row in rows for b in row]


def labels(sent: Sent) -> list[str]:
    rows = (sent.reply_markup or {}).get("inline_keyboard", [])
    return [b["text"] for row in rows for b in row]


async def press(tg: TelegramHarness, sent: Sent, data: str, user: int) -> tuple[str, bool]:
    """A press; the toast's text and whether it was an alert."""
    before = len(tg.fake.calls_to("answerCallbackQuery"))
    await tg.fake.push_callback(sent, data, user_id=user)
    await tg.fake.wait_for(lambda: len(tg.fake.calls_to("answerCallbackQuery")) > before)
    params = tg.fake.calls_to("answerCallbackQuery")[-1].params
    return str(params["text"]), bool(params.get("show_alert"))


async def held(tg: TelegramHarness, user: str = ANN) -> ErasureCounts:
    return await tg.services.backend.erasure.count(ErasedUser("telegram", user))


async def test_forget_asks_with_the_counts_and_erase_erases_them(tg: TelegramHarness) -> None:
    [prompt] = await command(tg, "/forget")
    assert prompt.text == (
        "This erases what I hold from you, in every chat: 2 private chats, 8 messages, "
        "3 follow-ups, 2 reminders, 1 exchange waiting for extraction, 1 setting. "
        "Press Erase within 5 minutes to go on, or Cancel."
    )
    assert labels(prompt) == ["Erase", "Cancel"]
    erase, cancel = button_data(prompt)
    issued = int(tg.clock.now().timestamp())
    assert unpack(erase) == ForgetChoice(ANN, issued, True)
    assert unpack(cancel) == ForgetChoice(ANN, issued, False)
    assert len(erase.encode()) <= 64
    assert await held(tg) == ALL  # asking erased nothing
    assert tg.model.requests == []  # a command never reaches the model

    await tg.clock.advance(4 * 60 + 59)
    toast, alert = await press(tg, prompt, erase, ANN_ID)
    confirmed = (
        "Erased what I held from you: 2 private chats, 8 messages, 3 follow-ups, "
        "2 reminders, 1 exchange waiting for extraction, 1 setting. You can go on talking to me."
    )
    assert not alert and toast == confirmed[:190]
    await tg.fake.wait_for(lambda: prompt.edits)
    assert prompt.text.endswith(f"— {confirmed}") and not button_data(prompt)
    # What was counted is what went: nothing of Ann's is left, Ben's stays.
    assert await held(tg) == ErasureCounts()
    assert await held(tg, BEN) != ErasureCounts()
    assert "ben's own zebracorn" in await texts(tg.services.backend)
    assert "my zebracorn interview is tomorrow" not in await texts(tg.services.backend)

    # Pressed again: nothing left, no error.
    toast, alert = await press(tg, prompt, erase, ANN_ID)
    assert toast == "Nothing is left to erase: it is already done."

    # The pairing approval stayed: Ann is answered, not offered a code.
    tg.model.steps.append(text("Welcome back"))
    [answer] = await command(tg, "hello again")
    assert answer.text == "Welcome back"


async def test_a_press_after_five_minutes_lapses_and_erases_nothing(tg: TelegramHarness) -> None:
    [prompt] = await command(tg, "/forget")
    erase, _ = button_data(prompt)
    await tg.clock.advance(5 * 60 + 1)
    toast, _ = await press(tg, prompt, erase, ANN_ID)
    assert toast.startswith("This question lapsed after 5 minutes: nothing was erased.")
    assert await held(tg) == ALL
    # A new /forget asks again, and its Erase works.
    [again] = await command(tg, "/forget")
    toast, _ = await press(tg, again, button_data(again)[0], ANN_ID)
    assert toast.startswith("Erased what I held from you")
    assert await held(tg) == ErasureCounts()


async def test_in_a_group_only_the_asker_may_press_and_cancel_erases_nothing(
    tg: TelegramHarness,
) -> None:
    [prompt] = await command(tg, "/forget", **IN_GROUP)
    assert prompt.chat_id == GROUP_ID
    assert "8 messages" in prompt.text and "zebracorn" not in prompt.text  # counts, no text
    erase, cancel = button_data(prompt)

    for pressed in (erase, cancel):
        toast, alert = await press(tg, prompt, pressed, BEN_ID)
        assert alert and toast == "Only the person who asked can answer this; nothing was erased."
    assert await held(tg) == ALL and button_data(prompt)

    toast, _ = await press(tg, prompt, cancel, ANN_ID)
    assert toast == "Cancelled: nothing was erased."
    assert await held(tg) == ALL
    await tg.fake.wait_for(lambda: prompt.edits)
    assert not button_data(prompt)


async def test_mydata_shows_what_is_held_in_private_and_nothing_in_a_group(
    tg: TelegramHarness,
) -> None:
    summary, followups, reminders = await command(tg, "/mydata")
    # The Markdown list as Telegram shows it (channels/telegram/format.py).
    assert summary.text.replace("⦁ ", "- ").splitlines() == [
        "What I hold about you:",
        "- 8 messages (yours and my replies) in 3 chats",
        "- 3 follow-ups and 2 reminders in every chat (this chat's open ones are listed below)",
        "- 1 exchange waiting to be read for follow-ups",
        "- time zone: Europe/Paris (your own)",
        "- follow-ups: on (/followups off stops them)",
        "- messages are kept until you erase them; ended follow-ups and reminders after 90d",
        "/export sends it all as a file; /forget erases it.",
    ]
    # This chat's lists, with their buttons, as /commitments and /reminders show them.
    assert "How did the interview go?" in followups.text
    assert [unpack(d).verb for d in button_data(followups)] == ["dismiss", "snooze"]  # type: ignore[union-attr]
    assert "stretch" in reminders.text
    assert [unpack(d).verb for d in button_data(reminders)] == ["cancel"]  # type: ignore[union-attr]

    [line] = await command(tg, "/mydata", **IN_GROUP)
    assert line.text == "/mydata works in a private chat with me: send it there."
    assert not button_data(line)

    # The operator's retention, as the config says it now.
    retention = RetentionConfig(messages="365d", closed="30d")
    storage = tg.config.storage.model_copy(update={"retention": retention})
    tg.config = tg.config.model_copy(update={"storage": storage})
    summary, *_ = await command(tg, "/mydata")
    assert (
        "- messages are erased after 365d; ended follow-ups and reminders after 30d"
        in summary.text.replace("⦁ ", "- ").splitlines()
    )


async def test_export_sends_the_document_as_a_file(tg: TelegramHarness) -> None:
    [sent] = await command(tg, "/export")
    assert sent.filename == f"kept-export-telegram-{ANN}.json"
    assert sent.text == "Everything I hold from you, from 3 chats, as one JSON document."
    assert sent.document is not None
    document = json.loads(sent.document)
    assert document["userId"] == ANN and len(document["chats"]) == 3
    assert "my zebracorn interview is tomorrow" in sent.document.decode()
    assert "ben's own zebracorn" not in sent.document.decode()

    [line] = await command(tg, "/export", **IN_GROUP)
    assert line.text == "/export works in a private chat with me: send it there."
    assert line.document is None


async def test_an_export_too_large_to_send_is_one_line(
    tg: TelegramHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telegram_commands, "MAX_DOCUMENT", 1000)
    [sent] = await command(tg, "/export")
    assert sent.document is None
    assert sent.text.startswith("Your export is ")
    assert sent.text.endswith(
        ", more than the 1000 bytes I can send here; ask the operator for it (kept users export)."
    )
    assert tg.fake.calls_to("sendDocument") == []


async def test_help_lists_the_data_rights_commands(tg: TelegramHarness) -> None:
    [help_] = await command(tg, "/help")
    for name in ("/mydata", "/export", "/forget"):
        assert f"\n{name} — " in help_.text
    menu = {c.command for c in telegram_commands.BOT_COMMANDS}
    assert {"mydata", "export", "forget"} <= menu


def test_export_is_the_document_kept_users_export_writes(tmp_path: Path, storage_url: str) -> None:
    async def exported() -> bytes:
        async with telegram_harness(tmp_path, ACCESS, storage_url=storage_url) as tg:
            await seed(tg.services.backend)
            await tg.start()
            [sent] = await command(tg, "/export")
            assert sent.document is not None
            return sent.document

    sent = json.loads(asyncio.run(exported()))
    config = tmp_path / "kept.json"
    config.write_text(json.dumps({"storage": {"url": storage_url}, "agents": [{"id": "main"}]}))
    arguments = ["users", "export", f"telegram:{ANN}", "--config", str(config)]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 0, result.output
    written = json.loads(result.output)
    # Everything but the moment each was made.
    assert sent.pop("exportedAt") and written.pop("exportedAt")
    assert sent == written


async def test_an_admin_posting_as_the_group_is_told_to_post_as_themselves(
    tg: TelegramHarness,
) -> None:
    message = tg.fake.message(
        "/forget", chat_id=GROUP_ID, chat_type="supergroup", user_id=ANONYMOUS
    )
    message["from"].update(is_bot=True, first_name="Group")
    message["sender_chat"] = message["chat"]
    before = len(tg.fake.sent)
    await tg.fake.push({"message": message})
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    [answer] = tg.fake.sent[before:]
    assert answer.text.startswith("You are posting as the group, so I cannot tell whose data")
    assert not button_data(answer)
    # Posting as themselves, the same admin is asked as anyone is.
    [asked] = await command(tg, "/forget", chat_id=GROUP_ID, chat_type="supergroup")
    assert labels(asked) == ["Erase", "Cancel"]
