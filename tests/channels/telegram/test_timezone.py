"""`/timezone`, times shown in the viewer's zone, and the set_timezone tool's
buttons, end to end through the fake Bot API on real services."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.commands.buttons import unpack
from core.llm import ToolCall
from core.messages import Target, ZoneChoice
from core.reminders import parse_schedule
from tests.fakes.telegram_server import Sent
from tests.support.scripted_model import calls, text
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

GROUP = -100700


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    agents = [{"id": "main", "timezone": "Europe/Paris"}]
    async with telegram_harness(tmp_path, agents=agents) as harness:
        yield harness


async def command(tg: TelegramHarness, text: str, **where: object) -> str:
    before = len(tg.fake.sent)
    await tg.fake.push_message(text, **where)  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    return tg.fake.sent[before].text


async def zone_of(tg: TelegramHarness, user: str) -> str | None:
    found = await tg.services.backend.user_zones.zone("telegram", user)
    return found.timezone if found is not None else None


async def test_timezone_shows_sets_and_clears_the_users_own_zone(tg: TelegramHarness) -> None:
    await tg.start()
    # The test clock starts on Mon 30 Nov 2026, 09:00 UTC.
    shown = await command(tg, "/timezone", chat_id=42)
    assert "no time zone of your own; I use Europe/Paris (Mon 30 Nov 10:00)" in shown
    assert await command(tg, "/timezone asia/tokyo", chat_id=42) == (
        "Your time zone is now Asia/Tokyo (it is Mon 30 Nov 18:00 there)."
    )
    assert await zone_of(tg, "42") == "Asia/Tokyo"
    assert "Your time zone is Asia/Tokyo" in await command(tg, "/timezone", chat_id=42)
    # Someone else's stays theirs.
    assert "no time zone of your own" in await command(tg, "/timezone", chat_id=43)
    assert "cleared; I use Europe/Paris" in await command(tg, "/timezone clear", chat_id=42)
    assert await zone_of(tg, "42") is None
    assert tg.model.requests == []  # a command is no turn


async def test_a_bad_zone_is_one_clear_line_and_changes_nothing(tg: TelegramHarness) -> None:
    await tg.start()
    await command(tg, "/timezone Asia/Tokyo", chat_id=42)
    answer = await command(tg, "/timezone Paris", chat_id=42)
    assert answer == "Unknown time zone 'Paris'; did you mean Europe/Paris? Nothing changed."
    assert await zone_of(tg, "42") == "Asia/Tokyo"


async def test_timezone_is_in_the_help_and_the_command_menu(tg: TelegramHarness) -> None:
    await tg.start()
    assert "/timezone" in await command(tg, "/help", chat_id=42)
    menu = tg.fake.calls_to("setMyCommands")[-1].params["commands"]
    names = [c["command"] for c in (json.loads(menu) if isinstance(menu, str) else menu)]
    assert "timezone" in names


async def test_lists_show_times_in_the_viewers_zone(tg: TelegramHarness) -> None:
    # One group, two members: each reads the same follow-up and reminder in their zone.
    admin, member = 8, 9
    tg.fake.members[(GROUP, admin)] = "administrator"
    await tg.seed(scope(GROUP, sender=member), "How did the talk go?")
    key = scope(GROUP).session_key
    schedule = parse_schedule(
        at=None, after="2h", cron=None, timezone="Europe/Paris", now=tg.clock.now()
    )
    await tg.services.reminders.schedule(
        agent_id="main", session_key=key, target=Target("telegram", str(GROUP)),
        created_by=str(member), text="call Sam", schedule=schedule,
    )  # fmt: skip
    await tg.services.users.set("telegram", str(member), "Asia/Tokyo", now=tg.clock.now())
    await tg.start()
    where = {"chat_id": GROUP, "chat_type": "supergroup"}

    mine = await command(tg, "/commitments", **where, user_id=member)
    assert "due Mon 30 Nov 18:00 (Asia/Tokyo)" in mine  # 09:00 UTC
    admins = await command(tg, "/commitments", **where, user_id=admin)
    assert "due Mon 30 Nov 10:00 (Europe/Paris)" in admins  # no zone of their own
    assert "Mon 30 Nov 20:00 (Asia/Tokyo)" in await command(
        tg, "/reminders", **where, user_id=member
    )
    assert "Mon 30 Nov 12:00 (Europe/Paris)" in await command(
        tg, "/reminders", **where, user_id=admin
    )


# --- the set_timezone tool's buttons ------------------------------------------------


def propose(zone: str) -> ToolCall:
    return ToolCall(id="call_tz", name="set_timezone", arguments=json.dumps({"timezone": zone}))


async def proposal(tg: TelegramHarness, user: int, chat: int) -> Sent:
    tg.model.steps += [calls(propose("Asia/Tokyo")), text("Shall I use Tokyo time for you?")]
    before = len(tg.fake.sent)
    kind = {"chat_type": "supergroup"} if chat < 0 else {}
    mention = "@kept_bot " if chat < 0 else ""
    await tg.fake.push_message(
        f"{mention}I just moved to Tokyo", chat_id=chat, user_id=user, **kind
    )  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    return tg.fake.sent[before]


def buttons(sent: Sent) -> list[dict[str, str]]:
    assert sent.reply_markup is not None
    return sent.reply_markup["inline_keyboard"][0]


async def press(tg: TelegramHarness, sent: Sent, data: str, user: int) -> str:
    before = len(tg.fake.calls_to("answerCallbackQuery"))
    await tg.fake.push_callback(sent, data, user_id=user)
    await tg.fake.wait_for(lambda: len(tg.fake.calls_to("answerCallbackQuery")) > before)
    return str(tg.fake.calls_to("answerCallbackQuery")[-1].params["text"])


async def test_the_tool_only_offers_and_the_users_yes_sets_the_zone(tg: TelegramHarness) -> None:
    await tg.start()
    sent = await proposal(tg, user=42, chat=42)

    assert sent.text == "Shall I use Tokyo time for you?"
    yes, no = buttons(sent)
    assert (yes["text"], no["text"]) == ("Yes, use Asia/Tokyo", "No")
    assert unpack(yes["callback_data"]) == ZoneChoice("42", "Asia/Tokyo", True)
    assert await zone_of(tg, "42") is None  # nothing changed by the tool itself

    toast = await press(tg, sent, yes["callback_data"], user=42)
    assert toast == "Your time zone is now Asia/Tokyo (it is Mon 30 Nov 18:00 there)."
    assert await zone_of(tg, "42") == "Asia/Tokyo"
    await tg.fake.wait_for(lambda: sent.edits)
    assert sent.reply_markup is None and sent.text.endswith("— " + toast)


async def test_only_the_user_it_was_offered_to_may_confirm(tg: TelegramHarness) -> None:
    await tg.start()
    sent = await proposal(tg, user=42, chat=GROUP)
    yes, no = buttons(sent)

    for data in (yes["callback_data"], no["callback_data"]):
        toast = await press(tg, sent, data, user=43)
        assert toast == "Only the person this was offered to can choose."
    assert await zone_of(tg, "43") is None and await zone_of(tg, "42") is None
    assert sent.edits == []

    assert "left your time zone as it is (Europe/Paris)" in await press(
        tg, sent, no["callback_data"], user=42
    )
    assert await zone_of(tg, "42") is None


async def test_a_stale_or_invalid_zone_press_answers_clearly(tg: TelegramHarness) -> None:
    await tg.start()
    sent = await proposal(tg, user=42, chat=42)
    # A zone the zone database no longer knows, and a payload of no known version.
    assert await press(tg, sent, "t:y:42:Mars/Olympus", user=42) == (
        "Unknown time zone 'Mars/Olympus'; e.g. Europe/Paris or Asia/Tokyo. Nothing changed."
    )
    assert await press(tg, sent, "t:maybe:42", user=42) == "This button no longer works."
    assert await zone_of(tg, "42") is None
