"""The commands and the follow-up buttons, end to end through the fake Bot
API, on real commitment and reminder services."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.commands.buttons import unpack
from core.messages import Action, Outbound, Target, followup_actions
from core.reminders import parse_schedule
from tests.fakes.telegram_server import Sent
from tests.support.store_helpers import mark_sent
from tests.support.telegram_harness import TelegramHarness, scope, telegram_harness

GROUP = -100700
ADMIN, MEMBER, OWNER = 8, 9, 7


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    agents = [{"id": "main", "timezone": "Europe/Paris"}]
    async with telegram_harness(tmp_path, agents=agents) as harness:
        harness.fake.members[(GROUP, ADMIN)] = "administrator"
        yield harness


async def command(tg: TelegramHarness, text: str, **where: object) -> str:
    """Send a command and return the bot's answer."""
    before = len(tg.fake.sent)
    update = await tg.fake.push_message(text, **where)  # type: ignore[arg-type]
    await tg.fake.wait_for(lambda: len(tg.fake.sent) > before)
    answer = tg.fake.sent[before]
    assert answer.reply_to == update["message"]["message_id"]
    return answer.text


def in_group(user: int) -> dict[str, object]:
    return {"chat_id": GROUP, "chat_type": "supergroup", "user_id": user}


async def test_start_and_help_explain_and_list_the_commands(tg: TelegramHarness) -> None:
    await tg.start()
    for name in ("/start", "/help"):
        answer = await command(tg, name, chat_id=42)
        assert "kept" in answer
        for listed in ("/commitments", "/dismiss", "/snooze", "/reminders", "/cancel"):
            assert listed in answer
    assert tg.model.requests == []  # commands never reach the model
    assert await tg.transcript("agent:main:telegram:private:42") == []


async def test_commitments_lists_this_chats_active_ones_in_the_agents_timezone(
    tg: TelegramHarness,
) -> None:
    mine = await tg.seed(scope(42), "How did the interview go?")
    await tg.seed(scope(43), "Did the move go well?")
    await tg.start()
    answer = await command(tg, "/commitments", chat_id=42)

    assert mine.id in answer and "event check in" in answer
    assert "How did the interview go?" in answer
    assert "Mon 30 Nov 10:00 (Europe/Paris)" in answer  # 09:00 UTC
    assert "move" not in answer


async def test_commitments_when_there_are_none(tg: TelegramHarness) -> None:
    await tg.start()
    assert "No open follow-ups" in await command(tg, "/commitments", chat_id=42)


async def test_dismiss_and_snooze_act_on_this_chats_commitment(tg: TelegramHarness) -> None:
    first = await tg.seed(scope(42), "one")
    second = await tg.seed(scope(42), "two")
    await tg.start()

    assert f"Dismissed {first.id}" in await command(tg, f"/dismiss {first.id}", chat_id=42)
    assert (await tg.commitment(first.id)).status == "dismissed"
    assert "already dismissed" in await command(tg, f"/dismiss {first.id}", chat_id=42)

    answer = await command(tg, f"/snooze {second.id} 2h", chat_id=42)
    assert f"Snoozed {second.id} until Mon 30 Nov 12:00 (Europe/Paris)" in answer
    snoozed = await tg.commitment(second.id)
    assert snoozed.status == "snoozed"
    assert snoozed.due_earliest == tg.clock.now() + timedelta(hours=2)


async def test_a_sent_check_ins_follow_up_is_dismissed_and_snoozed_by_id(
    tg: TelegramHarness,
) -> None:
    """As the check-in's buttons do (and as the console's check-in offers)."""
    first, second = await tg.seed(scope(42), "one"), await tg.seed(scope(42), "two")
    for c in (first, second):
        await mark_sent(tg.services.backend.heartbeat, c.id, now=tg.clock.now(), message_id="7")
    await tg.start()
    assert f"Dismissed {first.id}" in await command(tg, f"/dismiss {first.id}", chat_id=42)
    assert (await tg.commitment(first.id)).status == "dismissed"
    answer = await command(tg, f"/snooze {second.id} 1d", chat_id=42)
    assert answer.startswith(f"Snoozed {second.id} until Tue 01 Dec")
    assert (await tg.commitment(second.id)).status == "snoozed"


async def test_usage_and_bad_durations_are_explained(tg: TelegramHarness) -> None:
    c = await tg.seed(scope(42))
    await tg.start()
    assert "Usage: /dismiss ID" in await command(tg, "/dismiss", chat_id=42)
    assert "Usage: /snooze ID 2h" in await command(tg, f"/snooze {c.id}", chat_id=42)
    assert "not a duration" in await command(tg, f"/snooze {c.id} soonish", chat_id=42)
    bare = await command(tg, f"/snooze {c.id} 2", chat_id=42)  # once: 2 s, due at once
    assert bare == "'2' has no unit: say 2h, 30m or 3d."
    assert "Unknown command /frobnicate" in await command(tg, "/frobnicate", chat_id=42)
    assert (await tg.commitment(c.id)).status == "pending"


async def test_an_id_from_another_chat_is_not_found_and_untouched(tg: TelegramHarness) -> None:
    theirs = await tg.seed(scope(43))
    await tg.start()

    assert f"{theirs.id}: not found" in await command(tg, f"/dismiss {theirs.id}", chat_id=42)
    assert f"{theirs.id}: not found" in await command(tg, f"/snooze {theirs.id} 1h", chat_id=42)
    assert (await tg.commitment(theirs.id)).status == "pending"
    # Nor from a group: existence elsewhere is never revealed, no admin check made.
    answer = await command(tg, f"/dismiss {theirs.id}", **in_group(ADMIN))
    assert answer == f"{theirs.id}: not found in this chat."
    assert tg.fake.calls_to("getChatMember") == []


async def test_in_groups_only_the_sender_or_an_admin_may_change_a_commitment(
    tg: TelegramHarness,
) -> None:
    a = await tg.seed(scope(GROUP, sender=OWNER), "a")
    b = await tg.seed(scope(GROUP, sender=OWNER), "b")
    c = await tg.seed(scope(GROUP, sender=OWNER), "c")
    await tg.start()

    # Another member's id is answered like one that never existed.
    assert (
        await command(tg, f"/dismiss {a.id}", **in_group(MEMBER))
        == f"{a.id}: not found in this chat."
    )
    assert (
        await command(tg, f"/snooze {a.id} 1h", **in_group(MEMBER))
        == f"{a.id}: not found in this chat."
    )
    assert (await tg.commitment(a.id)).status == "pending"

    assert "Dismissed" in await command(tg, f"/dismiss {a.id}", **in_group(OWNER))
    assert "Dismissed" in await command(tg, f"/dismiss {b.id}", **in_group(ADMIN))
    assert "Snoozed" in await command(tg, f"/snooze@kept_bot {c.id} 1d", **in_group(ADMIN))
    assert [(await tg.commitment(x.id)).status for x in (a, b, c)] == [
        "dismissed",
        "dismissed",
        "snoozed",
    ]


async def test_in_groups_commitments_lists_only_the_askers_own_unless_admin(
    tg: TelegramHarness,
) -> None:
    owners = await tg.seed(scope(GROUP, sender=OWNER), "Did you manage to sleep better?")
    members = await tg.seed(scope(GROUP, sender=MEMBER), "How was the dentist?")
    await tg.start()

    answer = await command(tg, "/commitments", **in_group(MEMBER))
    assert answer.startswith("Your open follow-ups in this chat:")
    assert members.id in answer and "dentist" in answer
    assert owners.id not in answer and "sleep" not in answer

    answer = await command(tg, "/commitments", **in_group(ADMIN))
    assert "everyone's" in answer
    assert members.id in answer and owners.id in answer and "sleep" in answer
    assert f"user {OWNER}" in answer and f"user {MEMBER}" in answer  # whose each one is

    await tg.services.commitments.dismiss([members.id])
    answer = await command(tg, "/commitments", **in_group(MEMBER))
    assert answer == "You have no open follow-ups in this chat."
    # Private chats are unchanged: the whole chat is the user's, no admin check.
    calls = len(tg.fake.calls_to("getChatMember"))
    mine = await tg.seed(scope(42), "How did the interview go?")
    answer = await command(tg, "/commitments", chat_id=42)
    assert answer.startswith("Open follow-ups in this chat:") and mine.id in answer
    assert len(tg.fake.calls_to("getChatMember")) == calls


async def test_in_groups_another_members_closed_commitment_is_not_found(
    tg: TelegramHarness,
) -> None:
    c = await tg.seed(scope(GROUP, sender=OWNER))
    await tg.services.commitments.dismiss([c.id])
    await tg.start()
    # "already dismissed" would confirm it exists.
    assert (
        await command(tg, f"/dismiss {c.id}", **in_group(MEMBER))
        == f"{c.id}: not found in this chat."
    )
    assert "already dismissed" in await command(tg, f"/dismiss {c.id}", **in_group(OWNER))
    assert "already dismissed" in await command(tg, f"/dismiss {c.id}", **in_group(ADMIN))


async def test_in_groups_reminders_follow_the_same_rule(tg: TelegramHarness) -> None:
    target = Target("telegram", str(GROUP))
    key = f"agent:main:telegram:group:{GROUP}"
    schedule = parse_schedule(
        at=None, after="2h", cron=None, timezone="Europe/Paris", now=tg.clock.now()
    )
    owners = await tg.services.reminders.schedule(
        agent_id="main", session_key=key, target=target, created_by=str(OWNER),
        text="take the pills", schedule=schedule,
    )  # fmt: skip
    await tg.start()

    assert await command(tg, "/reminders", **in_group(MEMBER)) == (
        "You have no reminders in this chat."
    )
    assert await command(tg, f"/cancel {owners.id}", **in_group(MEMBER)) == (
        f"{owners.id}: not found in this chat."
    )
    assert "take the pills" in await command(tg, "/reminders", **in_group(OWNER))
    assert "take the pills" in await command(tg, "/reminders", **in_group(ADMIN))
    assert f"Cancelled {owners.id}" in await command(tg, f"/cancel {owners.id}", **in_group(ADMIN))


async def test_group_commands_for_another_bot_are_ignored(tg: TelegramHarness) -> None:
    await tg.start()
    await tg.fake.push_message("/help@other_bot", **in_group(MEMBER))
    await tg.fake.push_message("/weather", **in_group(MEMBER))  # some other bot's command
    answer = await command(tg, "/help", **in_group(MEMBER))
    assert "/commitments" in answer
    assert len(tg.fake.sent) == 1


async def test_reminders_lists_and_cancel_cancels_this_chats_reminders(
    tg: TelegramHarness,
) -> None:
    target = Target("telegram", "42")
    key = "agent:main:telegram:private:42"
    schedule = parse_schedule(
        at=None, after="2h", cron=None, timezone="Europe/Paris", now=tg.clock.now()
    )
    mine = await tg.services.reminders.schedule(
        agent_id="main", session_key=key, target=target, created_by="42",
        text="call Sam", schedule=schedule,
    )  # fmt: skip
    theirs = await tg.services.reminders.schedule(
        agent_id="main", session_key="agent:main:telegram:private:43",
        target=Target("telegram", "43"), created_by="43", text="water plants", schedule=schedule,
    )  # fmt: skip
    await tg.start()

    answer = await command(tg, "/reminders", chat_id=42)
    assert mine.id in answer and "call Sam" in answer and "Mon 30 Nov 12:00" in answer
    assert theirs.id not in answer
    assert f"{theirs.id}: not found" in await command(tg, f"/cancel {theirs.id}", chat_id=42)
    assert f"Cancelled {mine.id}" in await command(tg, f"/cancel {mine.id}", chat_id=42)
    assert "No reminders" in await command(tg, "/reminders", chat_id=42)
    remaining = await tg.services.reminders.list_for_session("main", key)
    assert remaining == []


# --- the follow-up buttons -------------------------------------------------------


async def follow_up(
    tg: TelegramHarness, *ids: str, chat: int = 42, thread: int | None = None
) -> Sent:
    target = Target("telegram", str(chat), str(thread) if thread else None)
    outbound = Outbound(target, "How did the interview go?", actions=followup_actions(ids))
    result = await tg.router.send(outbound)
    assert result.ok
    return tg.fake.sent[-1]


def buttons(sent: Sent) -> list[dict[str, str]]:
    assert sent.reply_markup is not None
    return sent.reply_markup["inline_keyboard"][0]


async def test_follow_up_buttons_fit_and_dismiss_edits_the_message(tg: TelegramHarness) -> None:
    c = await tg.seed(scope(42))
    await tg.start()
    sent = await follow_up(tg, c.id)

    dismiss, snooze = buttons(sent)
    assert (dismiss["text"], snooze["text"]) == ("Dismiss", "Snooze 1 day")
    assert all(len(b["callback_data"].encode()) <= 64 for b in (dismiss, snooze))
    assert unpack(dismiss["callback_data"]) == Action("dismiss", (c.id,))

    await tg.fake.push_callback(sent, dismiss["callback_data"], user_id=42, name="Ana")
    await tg.fake.wait_for(lambda: sent.edits)

    assert (await tg.commitment(c.id)).status == "dismissed"
    assert sent.text == "How did the interview go?\n\n— Dismissed by Ana."
    assert sent.reply_markup is None  # the buttons are gone
    answered = tg.fake.calls_to("answerCallbackQuery")
    assert answered and answered[0].params["text"] == "Dismissed by Ana."
    assert tg.model.requests == []


async def test_a_long_follow_up_carries_its_buttons_on_its_last_chunk(
    tg: TelegramHarness,
) -> None:
    c = await tg.seed(scope(42))
    await tg.start()
    long_text = ("Para one. " * 300).strip() + "\n\n" + ("Para two. " * 300).strip()
    outbound = Outbound(
        Target("telegram", "42"),
        long_text,
        reply_to_platform_id="7",
        actions=followup_actions([c.id]),
    )
    result = await tg.router.send(outbound)

    first, last = tg.fake.sent[-2:]
    assert result.ok and result.message_id == str(first.message_id)  # the one recorded
    assert first.reply_markup is None
    assert [b["text"] for b in buttons(last)] == ["Dismiss", "Snooze 1 day"]
    assert unpack(buttons(last)[0]["callback_data"]) == Action("dismiss", (c.id,))


async def test_snooze_button_moves_the_commitment_a_day(tg: TelegramHarness) -> None:
    c = await tg.seed(scope(42))
    await tg.start()
    sent = await follow_up(tg, c.id)
    await tg.fake.push_callback(sent, buttons(sent)[1]["callback_data"], user_id=42)
    await tg.fake.wait_for(lambda: sent.edits)

    snoozed = await tg.commitment(c.id)
    assert snoozed.status == "snoozed"
    assert snoozed.due_earliest == tg.clock.now() + timedelta(days=1)
    assert "Snoozed by Ana until Tue 01 Dec 10:00 (Europe/Paris)" in sent.text


async def test_buttons_on_a_resolved_or_expired_follow_up_say_so(tg: TelegramHarness) -> None:
    resolved, expired = await tg.seed(scope(42), "Resolved?"), await tg.seed(scope(42), "Expired?")
    store, now = tg.services.backend.commitments, tg.clock.now()
    await store.apply_extraction(scope(42), [], [resolved.id], now=now)
    await store.expire(before=now + timedelta(days=2), now=now)
    await tg.start()

    for c, status in ((resolved, "resolved"), (expired, "expired")):
        sent = await follow_up(tg, c.id)
        for data in (b["callback_data"] for b in buttons(sent)):
            before = len(tg.fake.calls_to("answerCallbackQuery"))
            await tg.fake.push_callback(sent, data, user_id=42)
            await tg.fake.wait_for(
                lambda b=before: len(tg.fake.calls_to("answerCallbackQuery")) > b
            )
            answer = tg.fake.calls_to("answerCallbackQuery")[-1].params
            assert answer["text"] == f"{c.id}: nothing changed (already {status})."
        assert (await tg.commitment(c.id)).status == status and sent.edits == []


async def test_a_group_member_who_is_not_the_sender_cannot_press_the_buttons(
    tg: TelegramHarness,
) -> None:
    c = await tg.seed(scope(GROUP, sender=OWNER, thread=3))
    await tg.start()
    sent = await follow_up(tg, c.id, chat=GROUP, thread=3)
    data = buttons(sent)[0]["callback_data"]

    await tg.fake.push_callback(sent, data, user_id=MEMBER)
    await tg.fake.wait_for(lambda: tg.fake.calls_to("answerCallbackQuery"))
    refusal = tg.fake.calls_to("answerCallbackQuery")[0].params
    assert refusal["text"] == "Not found in this chat."  # never "someone else's"
    assert refusal["show_alert"] is True
    assert (await tg.commitment(c.id)).status == "pending" and sent.edits == []

    await tg.fake.push_callback(sent, data, user_id=ADMIN, name="Admin")
    await tg.fake.wait_for(lambda: sent.edits)
    assert (await tg.commitment(c.id)).status == "dismissed"
    assert sent.text.endswith("— Dismissed by Admin.")


async def test_a_button_naming_another_chats_commitment_does_nothing(
    tg: TelegramHarness,
) -> None:
    theirs = await tg.seed(scope(43))
    await tg.start()
    sent = await follow_up(tg, theirs.id, chat=42)  # a forged or stale button in chat 42
    await tg.fake.push_callback(sent, buttons(sent)[0]["callback_data"], user_id=42)
    await tg.fake.wait_for(lambda: tg.fake.calls_to("answerCallbackQuery"))

    assert "Not found" in tg.fake.calls_to("answerCallbackQuery")[0].params["text"]
    assert (await tg.commitment(theirs.id)).status == "pending"


async def test_an_anonymous_group_admin_may_dismiss(tg: TelegramHarness) -> None:
    c = await tg.seed(scope(GROUP, sender=OWNER))
    await tg.start()
    message = tg.fake.message(f"/dismiss {c.id}", **in_group(1087968824))  # type: ignore[arg-type]
    message["from"] = {
        "id": 1087968824,
        "is_bot": True,
        "first_name": "Group",
        "username": "GroupAnonymousBot",
    }
    message["sender_chat"] = message["chat"]
    await tg.fake.push({"message": message})
    await tg.fake.wait_for(lambda: tg.fake.sent)

    assert tg.fake.texts() == [f"Dismissed {c.id}: I won't follow up on it."]
    assert (await tg.commitment(c.id)).status == "dismissed"


async def test_an_anonymous_group_admin_sees_every_members_follow_ups(tg: TelegramHarness) -> None:
    c = await tg.seed(scope(GROUP, sender=OWNER), "Did you manage to sleep better?")
    await tg.start()
    message = tg.fake.message("/commitments", **in_group(1087968824))  # type: ignore[arg-type]
    message["from"] = {"id": 1087968824, "is_bot": True, "first_name": "Group"}
    message["sender_chat"] = message["chat"]
    await tg.fake.push({"message": message})
    await tg.fake.wait_for(lambda: tg.fake.sent)

    [answer] = tg.fake.texts()
    assert c.id in answer and "sleep better" in answer and f"user {OWNER}" in answer
    assert tg.fake.calls_to("getChatMember") == []  # posting as the group already says so
