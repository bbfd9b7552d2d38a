"""/commitments and /reminders with a row of buttons per item, paginated,
and a fired reminder's Snooze buttons: end to end through the fake Bot API,
on real services."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.commands.buttons import pack, unpack
from core.messages import ItemAction, ReminderSnooze, Target
from core.reminders import parse_schedule
from core.reminders.model import Reminder
from tests.fakes.telegram_server import Sent
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

NO_LONGER_WORKS = "This button no longer works."
GROUP = -100700
ALICE, BOB = 8, 9


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    agents = [{"id": "main", "timezone": "Europe/Paris"}]
    async with telegram_harness(tmp_path, agents=agents) as harness:
        yield harness


async def ask(tg: TelegramHarness, text: str, *, chat: int = 42, user: int | None = None) -> Sent:
    before = len(tg.fake.sent)
    kind = "private" if chat > 0 else "supergroup"
    await tg.fake.push_message(text, chat_id=chat, chat_type=kind, user_id=user)
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    return tg.fake.sent[before]


def rows(sent: Sent) -> list[list[tuple[str, str]]]:
    """The keyboard as (label, callback_data) rows; [] without one."""
    if not sent.reply_markup:
        return []
    return [
        [(b["text"], b["callback_data"]) for b in row]
        for row in sent.reply_markup["inline_keyboard"]
    ]


async def press(tg: TelegramHarness, sent: Sent, data: str, user: int = 42) -> dict[str, object]:
    """Press a button; returns the toast (answerCallbackQuery) it got."""
    before = len(tg.fake.calls_to("answerCallbackQuery"))
    edits = len(sent.edits)
    await tg.fake.push_callback(sent, data, user_id=user, name="Ana")
    await tg.fake.wait_for(lambda: len(tg.fake.calls_to("answerCallbackQuery")) > before)
    answer = tg.fake.calls_to("answerCallbackQuery")[-1].params
    refused = answer.get("show_alert") is True or answer.get("text") == NO_LONGER_WORKS
    if not refused:  # an answered press edits the message in place
        await tg.fake.wait_for(lambda: len(sent.edits) > edits)
    return answer


async def seed_many(
    tg: TelegramHarness, n: int, chat: int = 42, sender: int | None = None
) -> list[str]:
    ids = []
    for i in range(n):
        c = await tg.seed(scope(chat, sender=sender), f"Follow-up number {i:02d}?")
        tg.clock.set(tg.clock.now() + timedelta(seconds=1))  # a stable order: soonest first
        ids.append(c.id)
    return ids


async def test_a_list_of_twelve_shows_ten_with_buttons_and_pages_in_place(
    tg: TelegramHarness,
) -> None:
    ids = await seed_many(tg, 12)
    await tg.start()
    sent = await ask(tg, "/commitments")

    keyboard = rows(sent)
    assert sent.text.startswith("Open follow-ups in this chat (page 1 of 2):")
    assert all(i in sent.text for i in ids[:10]) and ids[10] not in sent.text
    assert len(keyboard) == 11  # a row per item, then Next
    assert [label for label, _ in keyboard[0]] == ["1. Dismiss", "1. Snooze 1 day"]
    assert [label for label, _ in keyboard[9]] == ["10. Dismiss", "10. Snooze 1 day"]
    assert [label for label, _ in keyboard[10]] == ["Next ▶"]
    assert unpack(keyboard[0][0][1]) == ItemAction("dismiss", ids[0], 0, "42")
    assert all(len(data.encode()) <= 64 for row in keyboard for _, data in row)

    await press(tg, sent, keyboard[10][0][1])
    assert sent.text.startswith("Open follow-ups in this chat (page 2 of 2):")
    assert ids[10] in sent.text and ids[11] in sent.text and ids[0] not in sent.text
    assert "11. " in sent.text
    second = rows(sent)
    assert [label for label, _ in second[0]] == ["11. Dismiss", "11. Snooze 1 day"]
    assert [label for label, _ in second[-1]] == ["◀ Prev"]
    assert len(tg.fake.sent) == 1  # edited in place, nothing new sent
    assert tg.fake.calls_to("editMessageText")[-1].params["message_id"] == sent.message_id

    await press(tg, sent, second[-1][0][1])
    assert sent.text.startswith("Open follow-ups in this chat (page 1 of 2):")
    assert tg.model.requests == []


async def test_dismiss_and_snooze_change_the_stored_row_and_the_shown_list(
    tg: TelegramHarness,
) -> None:
    first, second = await seed_many(tg, 2)
    await tg.start()
    sent = await ask(tg, "/commitments")

    toast = await press(tg, sent, rows(sent)[0][0][1])
    assert toast["text"] == f"Dismissed {first}: I won't follow up on it."
    assert (await tg.commitment(first)).status == "dismissed"
    assert first not in sent.text and second in sent.text
    assert len(rows(sent)) == 1 and rows(sent)[0][0][0] == "1. Dismiss"

    toast = await press(tg, sent, rows(sent)[0][1][1])
    assert str(toast["text"]).startswith(f"Snoozed {second} until ")
    snoozed = await tg.commitment(second)
    assert snoozed.status == "snoozed"
    assert snoozed.due_earliest == tg.clock.now() + timedelta(days=1)
    assert "snoozed" in sent.text

    toast = await press(tg, sent, rows(sent)[0][0][1])
    assert (await tg.commitment(second)).status == "dismissed"
    assert sent.text == "No open follow-ups in this chat." and rows(sent) == []


async def remind(tg: TelegramHarness, text: str, *, chat: int = 42, by: int = 42) -> Reminder:
    kind = "private" if chat > 0 else "group"
    key = f"agent:main:telegram:{kind}:{chat}"
    await tg.store.ensure_session(
        key, agent_id="main", platform="telegram", chat_id=str(chat), chat_kind=kind,
        thread_id=None, now=tg.clock.now(),
    )  # fmt: skip
    schedule = parse_schedule(
        at=None, after="20m", cron=None, timezone="Europe/Paris", now=tg.clock.now()
    )
    return await tg.services.reminders.schedule(
        agent_id="main", session_key=f"agent:main:telegram:{kind}:{chat}",
        target=Target("telegram", str(chat)), created_by=str(by), text=text, schedule=schedule,
    )  # fmt: skip


async def test_cancel_on_a_reminders_row_cancels_it_in_place(tg: TelegramHarness) -> None:
    water = await remind(tg, "water the plants")
    tg.clock.set(tg.clock.now() + timedelta(seconds=1))  # a stable order: soonest first
    call = await remind(tg, "call Sam")
    await tg.start()
    sent = await ask(tg, "/reminders")
    assert [label for row in rows(sent) for label, _ in row] == ["1. Cancel", "2. Cancel"]

    toast = await press(tg, sent, rows(sent)[0][0][1])
    assert toast["text"] == f"Cancelled {water.id}."
    stored = await tg.services.reminders.store.get(water.id)
    assert stored is not None and stored.status == "cancelled"
    assert water.id not in sent.text and call.id in sent.text
    assert [label for row in rows(sent) for label, _ in row] == ["1. Cancel"]


async def test_in_a_group_a_member_cannot_act_on_another_members_item(
    tg: TelegramHarness,
) -> None:
    [alices] = await seed_many(tg, 1, chat=GROUP, sender=ALICE)
    await tg.start()
    sent = await ask(tg, "/commitments", chat=GROUP, user=ALICE)
    assert alices in sent.text
    dismiss = rows(sent)[0][0][1]

    # Bob presses Alice's list: refused, nothing changes, the list stays hers.
    toast = await press(tg, sent, dismiss, user=BOB)
    assert toast["text"] == "This list is someone else's: send /commitments for yours."
    assert toast["show_alert"] is True
    assert (await tg.commitment(alices)).status == "pending" and sent.edits == []

    # A button naming Alice's item on a list of Bob's own (forged): not found.
    forged = pack(ItemAction("dismiss", alices, 0, str(BOB)))
    assert forged is not None
    toast = await press(tg, sent, forged, user=BOB)
    assert toast["text"].endswith(": not found in this chat.")
    assert (await tg.commitment(alices)).status == "pending"
    # Bob's own list does not show it.
    assert alices not in (await ask(tg, "/commitments", chat=GROUP, user=BOB)).text


async def test_garbage_or_stale_button_data_says_so(tg: TelegramHarness) -> None:
    [c] = await seed_many(tg, 1)
    await tg.start()
    sent = await ask(tg, "/commitments")
    for garbage in ("id:zz:0", "x", "kept:li:dismiss:" + c + ":0", "pc:0:42:"):
        toast = await press(tg, sent, garbage)
        assert toast["text"] == NO_LONGER_WORKS
    assert (await tg.commitment(c)).status == "pending" and sent.edits == []
    await press(tg, sent, rows(sent)[0][0][1])
    assert (await tg.commitment(c)).status == "dismissed"


async def fire(tg: TelegramHarness) -> int:
    return await tg.services.reminder_source.fire_due()


async def test_a_fired_reminders_snooze_brings_it_back_once_ten_minutes_later(
    tg: TelegramHarness,
) -> None:
    r = await remind(tg, "take the cake out")
    await tg.start()
    await tg.clock.advance(20 * 60)
    assert await fire(tg) == 1
    message = tg.fake.sent[-1]
    assert message.text == "take the cake out"
    [[ten, hour]] = rows(message)
    assert (ten[0], hour[0]) == ("Snooze 10 min", "Snooze 1 h")
    assert unpack(ten[1]) == ReminderSnooze(r.id, 1, 10)

    toast = await press(tg, message, ten[1])
    assert str(toast["text"]).startswith("Snoozed by Ana until ")
    assert message.text.startswith("take the cake out\n\n— Snoozed by Ana until ")
    assert rows(message) == []  # its buttons go away

    # A second press (on a copy still showing the buttons) changes nothing.
    toast = await press(tg, message, hour[1])
    assert toast["text"].endswith(": nothing changed (already snoozed).")
    assert toast["show_alert"] is True
    stored = await tg.services.reminders.store.get(r.id)
    assert stored is not None and stored.next_fire_at == tg.clock.now() + timedelta(minutes=10)

    await tg.clock.advance(10 * 60 - 1)
    assert await fire(tg) == 0
    await tg.clock.advance(1)
    assert await fire(tg) == 1
    assert len(tg.fake.sent) == 2 and tg.fake.sent[1].text == "take the cake out"
    await tg.clock.advance(3 * 3600)
    assert await fire(tg) == 0 and len(tg.fake.sent) == 2
    done = await tg.services.reminders.store.get(r.id)
    assert done is not None and done.status == "done"


async def test_only_the_reminders_owner_may_snooze_it_in_a_group(tg: TelegramHarness) -> None:
    r = await remind(tg, "stand-up", chat=GROUP, by=ALICE)
    await tg.start()
    await tg.clock.advance(20 * 60)
    assert await fire(tg) == 1
    message = tg.fake.sent[-1]
    toast = await press(tg, message, rows(message)[0][0][1], user=BOB)
    assert toast["text"].endswith(": not found in this chat.")
    stored = await tg.services.reminders.store.get(r.id)
    assert stored is not None and stored.status == "done" and message.edits == []


async def test_a_page_of_long_items_fits_in_one_message(tg: TelegramHarness) -> None:
    for i in range(10):
        await tg.seed(scope(42), f"{i} " + "a very long follow-up text " * 40)
    await tg.start()
    sent = await ask(tg, "/commitments")
    assert len(tg.fake.sent) == 1 and len(sent.text) <= 4096
    assert len(rows(sent)) == 10
