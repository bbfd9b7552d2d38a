"""`/commitments list` and `/reminders list` with buttons, paginated, and a
fired reminder's Snooze buttons: through the real CommandTree and dynamic
items, with the interaction answers captured."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import discord
from discord.ext.test import backend

from channels.discord.views import buttons_view
from core.commands.buttons import pack, unpack
from core.messages import ItemAction, ReminderSnooze, Target
from core.reminders import Schedule
from core.reminders.model import Reminder
from tests.support.discord_dpytest import (
    Responses,
    Rig,
    click,
    record_payloads,
    sent_messages,
    slash,
)

EPHEMERAL = 64
UPDATE = 7  # the interaction's message is edited in place


def buttons(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, custom_id) of every button, row by row."""
    return [
        (c["label"], c["custom_id"])
        for row in data.get("components", [])
        for c in row["components"]
    ]


class Shown:
    """The ephemeral list message as its asker sees it, for clicking."""

    def __init__(self, rig: Rig, channel: Any, data: dict[str, Any]) -> None:
        self.rig, self.channel, self.data = rig, channel, data

    @property
    def content(self) -> str:
        return str(self.data["content"])

    async def press(self, label: str, user: Any, answers: Responses) -> tuple[int, dict[str, Any]]:
        custom_id = dict(buttons(self.data))[label]
        message = backend.make_message(self.content, self.rig.bot.user, self.channel)
        await click(
            self.rig.bot,
            message=message,
            components=self.data["components"],
            custom_id=custom_id,
            user=user,
        )
        kind, data = answers.calls[-1]
        if kind == UPDATE:
            self.data = data
        return kind, data


async def show(rig: Rig, answers: Responses, command: str, channel: Any, user: Any) -> Shown:
    await slash(rig.bot, command, channel=channel, user=user)
    kind, data = answers.calls[-1]
    assert kind == 4 and data["flags"] & EPHEMERAL
    return Shown(rig, channel, data)


async def seed_many(rig: Rig, channel: Any, user: Any, n: int) -> list[str]:
    ids = []
    for i in range(n):
        ids.append((await rig.seed(channel, user, f"Follow-up number {i:02d}?")).id)
        await rig.clock.advance(1)  # a stable order: soonest first
    return ids


async def test_a_list_of_twelve_shows_ten_with_buttons_and_pages_in_place(
    rig: Rig, answers: Responses
) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    ids = await seed_many(rig, channel, alice, 12)
    shown = await show(rig, answers, "commitments list", channel, alice)

    assert shown.content.startswith("Your open follow-ups in this chat (page 1 of 2):")
    assert all(i in shown.content for i in ids[:10]) and ids[10] not in shown.content
    labels = [label for label, _ in buttons(shown.data)]
    assert labels[:2] == ["1 · Dismiss", "1 · Snooze"] and labels[18:] == [
        "10 · Dismiss",
        "10 · Snooze",
        "Next ▶",
    ]
    assert len(shown.data["components"]) == 5  # Discord's most: four of items, one of pages
    assert all(len(row["components"]) <= 5 for row in shown.data["components"])
    assert all(len(custom_id) <= 100 for _, custom_id in buttons(shown.data))
    first = dict(buttons(shown.data))["1 · Dismiss"]
    assert unpack(first) == ItemAction("dismiss", ids[0], 0, str(alice.id))

    kind, _ = await shown.press("Next ▶", alice, answers)
    assert kind == UPDATE
    assert shown.content.startswith("Your open follow-ups in this chat (page 2 of 2):")
    assert ids[10] in shown.content and ids[0] not in shown.content
    assert [label for label, _ in buttons(shown.data)] == [
        "11 · Dismiss",
        "11 · Snooze",
        "12 · Dismiss",
        "12 · Snooze",
        "◀ Prev",
    ]
    await shown.press("◀ Prev", alice, answers)
    assert shown.content.startswith("Your open follow-ups in this chat (page 1 of 2):")
    assert rig.model.requests == []


async def test_dismiss_and_snooze_change_the_stored_row_and_the_shown_list(
    rig: Rig, answers: Responses
) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    first, second = await seed_many(rig, channel, alice, 2)
    shown = await show(rig, answers, "commitments list", channel, alice)

    kind, _ = await shown.press("1 · Dismiss", alice, answers)
    assert kind == UPDATE and await rig.status(first) == "dismissed"
    assert first not in shown.content.split("\n\n")[0] and second in shown.content
    assert shown.content.endswith(f"-# Dismissed `{first}`: I won't follow up on it.")
    assert [label for label, _ in buttons(shown.data)] == ["1 · Dismiss", "1 · Snooze"]

    await shown.press("1 · Snooze", alice, answers)
    assert await rig.status(second) == "snoozed"
    assert "(snoozed)" in shown.content

    await shown.press("1 · Dismiss", alice, answers)
    assert shown.content.startswith("You have no open follow-ups in this chat.")
    assert buttons(shown.data) == []


async def schedule(rig: Rig, channel: Any, user: Any, text: str, minutes: int = 20) -> Reminder:
    key = f"agent:main:discord:channel:{channel.id}"
    await rig.store.ensure_session(
        key, agent_id="main", platform="discord", chat_id=str(channel.id),
        chat_kind="channel", thread_id=None, now=rig.clock.now(),
    )  # fmt: skip
    return await rig.services.reminders.schedule(
        agent_id="main",
        session_key=key,
        target=Target("discord", str(channel.id)),
        created_by=str(user.id),
        text=text,
        schedule=Schedule("after", rig.clock.now() + timedelta(minutes=minutes), None, "UTC"),
    )


async def test_cancel_on_a_reminders_row_cancels_it_in_place(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    water = await schedule(rig, channel, alice, "Water the plants", 20)
    call = await schedule(rig, channel, alice, "Call Sam", 30)
    shown = await show(rig, answers, "reminders list", channel, alice)
    assert [label for label, _ in buttons(shown.data)] == ["1 · Cancel", "2 · Cancel"]

    await shown.press("1 · Cancel", alice, answers)
    stored = await rig.services.reminders.store.get(water.id)
    assert stored is not None and stored.status == "cancelled"
    assert shown.content.endswith(f"-# Cancelled `{water.id}`.")
    assert call.id in shown.content and [label for label, _ in buttons(shown.data)] == [
        "1 · Cancel"
    ]


async def test_a_member_cannot_act_on_another_members_item(rig: Rig, answers: Responses) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    [alices] = await seed_many(rig, channel, alice, 1)
    shown = await show(rig, answers, "commitments list", channel, alice)

    # Alice's list, pressed by Bob (a stale or shared message): refused.
    kind, data = await shown.press("1 · Dismiss", bob, answers)
    assert kind == 4 and data["flags"] & EPHEMERAL
    assert data["content"] == "This list is someone else's: send /commitments list for yours."
    assert await rig.status(alices) == "pending"

    # A button naming Alice's item on a list of Bob's own (forged): not found.
    action = ItemAction("dismiss", alices, 0, str(bob.id))
    forged, view = pack(action), buttons_view([action])
    assert forged is not None and view is not None
    message = backend.make_message("list", rig.bot.user, channel)
    components = view.to_components()
    await click(rig.bot, message=message, components=components, custom_id=forged, user=bob)
    kind, data = answers.calls[-1]
    assert kind == UPDATE and f"`{alices}`: not found in this chat." in data["content"]
    assert await rig.status(alices) == "pending"


async def test_a_fired_reminders_snooze_brings_it_back_once_ten_minutes_later(
    rig: Rig, answers: Responses
) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    r = await schedule(rig, channel, alice, "Take the cake out")
    payloads = record_payloads(rig.bot)
    await rig.clock.advance(20 * 60)
    assert await rig.services.reminder_source.fire_due() == 1
    [message] = sent_messages()
    [payload] = payloads
    assert [label for label, _ in buttons(payload)] == ["Snooze 10 min", "Snooze 1 h"]
    ten = dict(buttons(payload))["Snooze 10 min"]
    assert unpack(ten) == ReminderSnooze(r.id, 1, 10)

    # Only its owner (or a moderator) may snooze it.
    await click(rig.bot, message=message, components=payload["components"], custom_id=ten, user=bob)
    assert answers.calls[-1][1]["content"] == f"`{r.id}`: not found in this chat."

    await click(
        rig.bot, message=message, components=payload["components"], custom_id=ten, user=alice
    )
    kind, data = answers.calls[-1]
    assert kind == UPDATE and data["components"] == []
    assert data["content"].startswith("Take the cake out\n\n-# Snoozed by ")

    # A second press changes nothing.
    await click(
        rig.bot, message=message, components=payload["components"], custom_id=ten, user=alice
    )
    kind, data = answers.calls[-1]
    assert kind == 4 and data["content"] == f"`{r.id}`: nothing changed (already snoozed)."

    await rig.clock.advance(10 * 60 - 1)
    assert await rig.services.reminder_source.fire_due() == 0
    await rig.clock.advance(1)
    assert await rig.services.reminder_source.fire_due() == 1
    assert [m.content for m in sent_messages()] == ["Take the cake out"]
    await rig.clock.advance(3 * 3600)
    assert await rig.services.reminder_source.fire_due() == 0 and sent_messages() == []
    done = await rig.services.reminders.store.get(r.id)
    assert done is not None and done.status == "done"


async def test_list_buttons_are_persistent_dynamic_items(rig: Rig) -> None:
    registered = set(rig.bot._connection._view_store._dynamic_items.values())
    names = {cls.__name__ for cls in registered}
    assert {"FollowUpButton", "ListItemButton", "ListPageButton", "ReminderSnoozeButton"} <= names
    assert isinstance(rig.bot, discord.Client)


async def test_a_page_of_long_items_fits_in_one_message(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    for i in range(10):
        await rig.seed(channel, alice, f"{i} " + "a very long follow-up text " * 20)
    moderator = discord.Permissions(manage_messages=True)
    await slash(rig.bot, "commitments list", channel=channel, user=alice, permissions=moderator)
    kind, data = answers.calls[-1]
    assert kind == 4 and len(data["content"]) <= 2000
    assert len(buttons(data)) == 20 and f"for <@{alice.id}>" in data["content"]
