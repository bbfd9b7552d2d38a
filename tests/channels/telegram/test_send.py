"""Sending robustly: what each Bot API failure means for a retry, start-up
errors, and a polling loop that no error stops."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.base import ChannelStartError
from channels.telegram.format import Entity, TelegramChunk
from channels.telegram.pace import Budget, Pace
from core.delivery.send import deliver_once
from core.messages import Outbound, Target
from tests.fakes.telegram_server import TOKEN, Script
from tests.support.scripted_model import text
from tests.support.telegram_harness import TelegramHarness, drive, telegram_harness

ANA = Target("telegram", "42")


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path) as harness:
        yield harness


async def test_429_retry_after_is_honoured_and_the_message_arrives_once(
    tg: TelegramHarness,
) -> None:
    adapter = await tg.start()
    tg.fake.fail("sendMessage", 429, "Too Many Requests: retry after 0.3", retry_after=0.3)
    started = time.monotonic()
    result = await asyncio.wait_for(adapter.send(Outbound(ANA, "hello")), 5)

    assert result.ok and result.message_id == str(tg.fake.sent[0].message_id)
    assert tg.fake.texts() == ["hello"]
    assert len(tg.fake.calls_to("sendMessage")) == 2
    assert time.monotonic() - started >= 0.3


async def test_a_message_refused_past_the_flood_deadline_goes_back_as_retryable(
    tg: TelegramHarness,
) -> None:
    adapter = await tg.start(pace=Pace(flood_deadline=0.5))
    tg.fake.fail("sendMessage", 429, "Too Many Requests: retry after 120", retry_after=120)
    result = await asyncio.wait_for(adapter.send(Outbound(ANA, "hello")), 2)

    assert not result.ok and result.retryable and not result.unknown
    assert result.retry_after == 120
    assert tg.fake.sent == []


async def test_under_flood_control_a_hundred_chats_get_their_reply_exactly_once(
    tg: TelegramHarness,
) -> None:
    """Telegram's flood control, scaled down tenfold in time: at most 2
    messages in any 0.1 s, then every message refused for 0.1, 0.2, 0.3 s.
    Every one of 100 chats gets its one reply: none lost, none twice."""
    await tg.start(pace=Pace(overall=Budget(limit=29, window=0.1), recover_after=6.0))
    flood = tg.fake.flood_control(2, window=0.1, unit=0.1)
    chats = range(1, 101)
    for chat in chats:
        await tg.fake.push_message(f"hello {chat}", chat_id=chat)

    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 100, within=20)
    await asyncio.sleep(0.3)  # a second copy would arrive now

    assert flood.floods >= 1  # the burst did meet flood control
    assert sorted(s.chat_id for s in tg.fake.sent) == list(chats)
    assert all(s.text == f"echo: hello {s.chat_id}" for s in tg.fake.sent)


@pytest.mark.parametrize(
    ("status", "description"),
    [
        (403, "Forbidden: bot was blocked by the user"),
        (400, "Bad Request: chat not found"),
        (400, "Bad Request: not enough rights to send text messages to the chat"),
    ],
)
async def test_permanent_errors_are_neither_retryable_nor_unknown(
    tg: TelegramHarness, status: int, description: str
) -> None:
    adapter = await tg.start()
    tg.fake.fail("sendMessage", status, description)
    result = await adapter.send(Outbound(ANA, "hello"))

    assert not result.ok and not result.retryable and not result.unknown
    assert description.split(": ", 1)[1].lower() in (result.error or "").lower()
    assert len(tg.fake.calls_to("sendMessage")) == 1


async def test_blocked_user_fails_a_heartbeat_delivery_at_once(tg: TelegramHarness) -> None:
    await tg.start()
    tg.fake.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    delivery = await deliver_once(tg.router, Outbound(ANA, "How did it go?"), tg.clock)

    assert delivery.outcome == "failed" and delivery.attempts == 1


async def test_server_errors_are_retried_with_backoff_then_reported_retryable(
    tg: TelegramHarness,
) -> None:
    adapter = await tg.start()
    tg.fake.script("sendMessage", *[Script(502, "Bad Gateway")] * 3)
    result = await drive(tg.clock, adapter.send(Outbound(ANA, "hello")))

    assert not result.ok and result.retryable and not result.unknown
    assert len(tg.fake.calls_to("sendMessage")) == 3
    tg.fake.script("sendMessage", Script(500, "Internal Server Error"))
    assert (await drive(tg.clock, adapter.send(Outbound(ANA, "again")))).ok
    assert tg.fake.texts() == ["again"]


async def test_timeout_after_sending_is_unknown_and_not_retried(tg: TelegramHarness) -> None:
    adapter = await tg.start(request_timeout=0.2)
    tg.fake.script("sendMessage", Script(delay=0.6, apply=True))
    result = await adapter.send(Outbound(ANA, "hello"))

    assert not result.ok and result.unknown and not result.retryable
    assert len(tg.fake.calls_to("sendMessage")) == 1
    assert tg.fake.texts() == ["hello"]  # Telegram did take it: a retry would double it
    delivery = await deliver_once(tg.router, Outbound(ANA, "check-in"), tg.clock)
    assert delivery.outcome in ("sent", "unknown") and delivery.attempts == 1


async def test_refused_connection_is_retryable(tg: TelegramHarness) -> None:
    adapter = await tg.start()
    await tg.fake.close()  # nothing listens on the port any more
    result = await drive(tg.clock, adapter.send(Outbound(ANA, "hello")))

    assert not result.ok and result.retryable and not result.unknown
    assert "not sent" in (result.error or "")


async def test_send_before_start_is_retryable(tg: TelegramHarness) -> None:
    result = await tg.adapter().send(Outbound(ANA, "hello"))
    assert result.retryable and not result.unknown


async def test_missing_token_is_one_clear_error_naming_the_variable(
    tg: TelegramHarness,
) -> None:
    tg.environ.clear()
    with pytest.raises(ChannelStartError, match=r"\$TELEGRAM_BOT_TOKEN"):
        await tg.adapter().start()
    assert tg.fake.calls == []

    tg.config.channels.telegram.token_env = "MY_TG_TOKEN"
    with pytest.raises(ChannelStartError, match=r"\$MY_TG_TOKEN"):
        await tg.adapter().start()


async def test_rejected_token_is_one_clear_error_without_the_token(
    tg: TelegramHarness,
) -> None:
    tg.environ["TELEGRAM_BOT_TOKEN"] = "999:wrong-token"
    with pytest.raises(ChannelStartError) as info:
        await tg.adapter().start()

    message = str(info.value)
    assert "rejected" in message and "$TELEGRAM_BOT_TOKEN" in message
    assert "wrong-token" not in message and TOKEN not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


async def test_an_unreachable_api_is_one_clear_line_and_no_start_error(
    tg: TelegramHarness, caplog: pytest.LogCaptureFixture
) -> None:
    """Retried in the background (tests/channels/telegram/test_startup.py)."""
    await tg.fake.close()
    adapter = tg.adapter()
    with caplog.at_level("WARNING", logger="kept.telegram"):
        await adapter.start()
        for _ in range(200):  # the retry loop reports before its first wait
            if any("telegram_unreachable" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.01)
    assert not adapter.connected
    [line] = [r.getMessage() for r in caplog.records if "telegram_unreachable" in r.getMessage()]
    assert "cannot reach the Telegram Bot API" in line and "retry_in_s=1.0" in line
    assert TOKEN not in line


async def test_polling_survives_errors_and_keeps_going(tg: TelegramHarness) -> None:
    tg.fake.script(
        "getUpdates",
        Script(502, "Bad Gateway"),
        Script(409, "Conflict: terminated by other getUpdates request"),
        Script(429, "Too Many Requests: retry after 5", retry_after=5),
    )
    await tg.start()
    await tg.fake.push_message("are you there?", chat_id=42)
    await drive(tg.clock, tg.fake.wait_for(lambda: tg.fake.sent))

    assert tg.fake.texts() == ["echo: are you there?"]


async def test_an_unreadable_update_is_skipped_not_retried_forever(tg: TelegramHarness) -> None:
    await tg.start()
    broken = tg.fake.message("sticker", chat_id=42)
    broken["sticker"] = {"file_id": "x"}  # required fields missing: PTB cannot parse it
    await tg.fake.push({"message": broken})
    await tg.fake.push_message("after it", chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.sent)

    assert tg.fake.texts() == ["echo: after it"]
    await tg.fake.wait_for(lambda: len(tg.fake.confirmed) >= 1)


async def test_a_token_revoked_while_running_is_logged_and_polling_goes_on(
    tg: TelegramHarness, caplog: pytest.LogCaptureFixture
) -> None:
    await tg.start()
    await tg.fake.wait_for(lambda: tg.fake.calls_to("getUpdates"))
    tg.fake.script("getUpdates", Script(401, "Unauthorized"))
    await tg.fake.push_message("first", chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.sent)
    await tg.fake.push_message("second", chat_id=42)
    await drive(tg.clock, tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2))

    assert tg.fake.texts() == ["echo: first", "echo: second"]
    assert "the token was rejected" in caplog.text
    assert TOKEN not in caplog.text


# --- formatting: entities, splitting, the plain-text fallback ------------------------

LONG_MARKDOWN = (
    "## The plan\n\nFirst **read** the *whole* thing, then run:\n\n```python\n"
    + "\n".join(f"    total += price_{i}  # running sum, item {i}" for i in range(150))
    + "\n```\n\n"
    + "\n\n".join(f"Paragraph {i}: **done** 🎉 and `checked`." for i in range(40))
)


async def test_a_long_markdown_reply_arrives_as_well_formed_messages(tg: TelegramHarness) -> None:
    tg.model.steps.append(text(LONG_MARKDOWN))
    await tg.start()
    await tg.fake.push_message("plan?", chat_id=42)
    await tg.fake.wait_for(lambda: "Paragraph 39" in " ".join(tg.fake.texts()))

    # Every message was taken at once: the fake refuses entities that do not
    # fit their text, texts over 4,096 UTF-16 units, and empty texts.
    calls = tg.fake.calls_to("sendMessage")
    assert len(calls) == len(tg.fake.sent) >= 2
    assert all("parse_mode" not in c.params for c in calls)
    pres = [e for s in tg.fake.sent for e in s.entities if e["type"] == "pre"]
    assert len(pres) >= 2 and {e.get("language") for e in pres} == {"python"}
    assert tg.fake.sent[0].text.startswith("The plan\n\nFirst read the whole thing")
    assert {"type": "bold", "offset": 0, "length": 8} in tg.fake.sent[0].entities
    code = [ln for s in tg.fake.sent for ln in s.text.splitlines() if "total +=" in ln]
    assert len(code) == 150 and code[0].startswith("    total += price_0")


async def test_refused_entities_give_exactly_one_plain_message(tg: TelegramHarness) -> None:
    adapter = await tg.start()
    tg.fake.refuse_entities = True
    result = await adapter.send(Outbound(ANA, "**Reminder:** call the *dentist*"))

    assert result.ok and result.message_id == str(tg.fake.sent[0].message_id)
    assert [(s.text, s.entities) for s in tg.fake.sent] == [("Reminder: call the dentist", [])]
    refused, plain = tg.fake.calls_to("sendMessage")
    assert refused.params["entities"] and "entities" not in plain.params


async def test_entities_telegram_cannot_fit_fall_back_to_plain_text(tg: TelegramHarness) -> None:
    adapter = await tg.start()
    broken = TelegramChunk("hi there", (Entity("bold", 3, 40),))
    result = await adapter.send_chunk(ANA, broken, None)

    assert result.ok
    assert [(s.text, s.entities) for s in tg.fake.sent] == [("hi there", [])]
    assert len(tg.fake.calls_to("sendMessage")) == 2


async def test_other_refusals_are_not_sent_again_as_plain_text(tg: TelegramHarness) -> None:
    adapter = await tg.start()
    tg.fake.fail("sendMessage", 400, "Bad Request: chat not found")
    result = await adapter.send(Outbound(ANA, "**hello**"))

    assert not result.ok and tg.fake.sent == []
    assert len(tg.fake.calls_to("sendMessage")) == 1


async def test_the_fake_refuses_empty_and_over_long_texts_as_telegram_does(
    tg: TelegramHarness,
) -> None:
    adapter = await tg.start()
    empty = await adapter.send_chunk(ANA, TelegramChunk("  "), None)
    too_long = await adapter.send_chunk(ANA, TelegramChunk("😀" * 2049), None)  # 4,098 units
    just_fits = await adapter.send_chunk(ANA, TelegramChunk("😀" * 2048), None)

    assert "message text is empty" in (empty.error or "").lower()
    assert "message is too long" in (too_long.error or "").lower()
    assert just_fits.ok and tg.fake.texts() == ["😀" * 2048]


async def test_an_emoji_heavy_reply_is_split_not_refused(tg: TelegramHarness) -> None:
    adapter = await tg.start()
    reply = " ".join(["🎉" * 7] * 300)  # 2,399 characters, 4,499 UTF-16 units
    result = await adapter.send(Outbound(ANA, reply))

    assert result.ok and len(tg.fake.sent) == 2
    assert " ".join(tg.fake.texts()).split() == reply.split()


# --- groups: a reply quotes the message it answers -------------------------------------


async def test_a_group_reply_quotes_the_message_and_a_private_one_does_not(
    tg: TelegramHarness,
) -> None:
    await tg.start()
    asked = await tg.fake.push_message(
        "@kept_bot what time is it?", chat_id=-100501, chat_type="group", user_id=7
    )
    await tg.fake.wait_for(lambda: tg.fake.sent)
    await tg.fake.push_message("and in private?", chat_id=42)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

    group, private = tg.fake.sent
    assert group.chat_id == -100501 and group.reply_to == asked["message"]["message_id"]
    reply_parameters = tg.fake.calls_to("sendMessage")[0].params["reply_parameters"]
    assert reply_parameters["message_id"] == asked["message"]["message_id"]
    assert private.chat_id == 42 and private.reply_to is None
    assert "reply_parameters" not in tg.fake.calls_to("sendMessage")[1].params
