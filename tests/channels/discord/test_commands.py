"""The slash commands through the real CommandTree, with interaction payloads
built as the gateway sends them (dpytest does not dispatch interactions)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import discord

from core.messages import Target
from core.reminders import Schedule
from tests.support.discord_dpytest import Responses, Rig, slash

EPHEMERAL = 64


def said(answers: Responses) -> str:
    kind, data = answers.calls[-1]
    assert kind == 4  # a channel message in answer to the interaction
    assert data.get("flags", 0) & EPHEMERAL, "command answers are ephemeral"
    return str(data["content"])


async def test_list_shows_only_this_chats_commitments(rig: Rig, answers: Responses) -> None:
    here, elsewhere = rig.channel(0), rig.channel(1)
    alice, bob = rig.member(0), rig.member(1)
    mine = await rig.seed(here, alice, "How did the interview go?")
    bobs = await rig.seed(here, bob, "Did the move go well?")
    other = await rig.seed(elsewhere, alice, "How was the dentist?")
    dm = await alice.create_dm()
    private = await rig.seed(dm, alice, "Did you sleep better?")

    await slash(rig.bot, "commitments list", channel=here, user=alice)
    text = said(answers)
    assert mine.id in text and "interview" in text
    assert bobs.id not in text, "a member sees their own follow-ups"
    assert other.id not in text and private.id not in text

    moderator = discord.Permissions(manage_messages=True)
    await slash(rig.bot, "commitments list", channel=here, user=bob, permissions=moderator)
    text = said(answers)
    assert mine.id in text and bobs.id in text and "move" in text
    assert other.id not in text and private.id not in text

    await slash(rig.bot, "commitments list", channel=dm, user=alice._user)
    text = said(answers)
    assert private.id in text and mine.id not in text


async def test_list_when_empty(rig: Rig, answers: Responses) -> None:
    await slash(rig.bot, "commitments list", channel=rig.channel(0), user=rig.member(0))
    assert said(answers) == "You have no open follow-ups in this chat."


async def test_dismiss_own_commitment(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)

    await slash(rig.bot, "commitments dismiss", channel=channel, user=alice, options={"id": c.id})

    assert said(answers).startswith(f"Dismissed `{c.id}`")
    assert await rig.status(c.id) == "dismissed"
    assert rig.model.requests == [], "a command is never a conversation turn"

    await slash(rig.bot, "commitments dismiss", channel=channel, user=alice, options={"id": c.id})
    assert said(answers) == f"`{c.id}`: nothing changed (already dismissed)."


async def test_another_member_is_refused_unless_they_manage_messages(
    rig: Rig, answers: Responses
) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    c = await rig.seed(channel, alice)

    # Answered like an id that never existed: nothing says it is alice's.
    not_found = f"`{c.id}`: not found in this chat."
    await slash(rig.bot, "commitments dismiss", channel=channel, user=bob, options={"id": c.id})
    assert said(answers) == not_found
    assert await rig.status(c.id) == "pending"

    await slash(
        rig.bot,
        "commitments snooze",
        channel=channel,
        user=bob,
        options={"id": c.id, "duration": "2h"},
    )
    assert said(answers) == not_found
    assert await rig.status(c.id) == "pending"

    moderator = discord.Permissions(manage_messages=True)
    await slash(
        rig.bot,
        "commitments dismiss",
        channel=channel,
        user=bob,
        options={"id": c.id},
        permissions=moderator,
    )
    assert said(answers).startswith(f"Dismissed `{c.id}`")
    assert await rig.status(c.id) == "dismissed"


async def test_moderators_see_whose_each_follow_up_is(rig: Rig, answers: Responses) -> None:
    here, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    alices = await rig.seed(here, alice, "Did you manage to sleep better?")
    bobs = await rig.seed(here, bob, "How was the dentist?")

    moderator = discord.Permissions(manage_messages=True)
    await slash(rig.bot, "commitments list", channel=here, user=bob, permissions=moderator)
    lines = said(answers).splitlines()
    assert any(alices.id in line and f"<@{alice.id}>" in line for line in lines)
    assert any(bobs.id in line and f"<@{bob.id}>" in line for line in lines)

    await slash(rig.bot, "commitments list", channel=here, user=bob)
    assert "<@" not in said(answers)  # a member's own list needs no names


async def test_another_members_closed_follow_up_is_not_found(rig: Rig, answers: Responses) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    c = await rig.seed(channel, alice)
    await rig.services.commitments.dismiss([c.id])

    await slash(rig.bot, "commitments dismiss", channel=channel, user=bob, options={"id": c.id})
    assert said(answers) == f"`{c.id}`: not found in this chat."
    await slash(rig.bot, "commitments dismiss", channel=channel, user=alice, options={"id": c.id})
    assert said(answers) == f"`{c.id}`: nothing changed (already dismissed)."


async def test_an_id_from_another_scope_is_not_found(rig: Rig, answers: Responses) -> None:
    here, elsewhere = rig.channel(0), rig.channel(1)
    alice = rig.member(0)
    other = await rig.seed(elsewhere, alice)
    dm = await alice.create_dm()
    private = await rig.seed(dm, alice)
    moderator = discord.Permissions(manage_messages=True)

    for c in (other, private):
        await slash(
            rig.bot,
            "commitments dismiss",
            channel=here,
            user=alice,
            options={"id": c.id},
            permissions=moderator,
        )
        assert said(answers) == f"`{c.id}`: not found in this chat."
        await slash(
            rig.bot,
            "commitments snooze",
            channel=here,
            user=alice,
            options={"id": c.id, "duration": "1d"},
        )
        assert "not found in this chat" in said(answers)
        assert await rig.status(c.id) == "pending"
    never = "cm_000000000000"
    await slash(rig.bot, "commitments dismiss", channel=here, user=alice, options={"id": never})
    assert said(answers) == f"`{never}`: not found in this chat."


async def test_snooze_moves_the_due_window(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)

    await slash(
        rig.bot,
        "commitments snooze",
        channel=channel,
        user=alice,
        options={"id": c.id, "duration": "2d"},
    )

    until = rig.clock.now() + timedelta(days=2)
    assert said(answers) == f"Snoozed `{c.id}` until <t:{int(until.timestamp())}:R>."
    found = await rig.services.backend.commitments.get(c.id)
    assert found is not None and found.status == "snoozed"
    assert found.due_earliest == until


async def test_snooze_rejects_a_bad_duration(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)

    for duration in ("soon", "-1h", "0h"):
        await slash(
            rig.bot,
            "commitments snooze",
            channel=channel,
            user=alice,
            options={"id": c.id, "duration": duration},
        )
        assert "not a duration" in said(answers)
    for bare in ("0", "2"):  # a bare number once meant seconds: due at once
        await slash(
            rig.bot,
            "commitments snooze",
            channel=channel,
            user=alice,
            options={"id": c.id, "duration": bare},
        )
        assert f"'{bare}' has no unit: say 2h, 30m or 3d" in said(answers)
    assert await rig.status(c.id) == "pending"


def choices(answers: Responses) -> list[dict[str, Any]]:
    kind, data = answers.calls[-1]
    assert kind == 8  # autocomplete result
    return list(data["choices"])


async def test_autocomplete_offers_this_scopes_ids(rig: Rig, answers: Responses) -> None:
    here, elsewhere = rig.channel(0), rig.channel(1)
    alice, bob = rig.member(0), rig.member(1)
    interview = await rig.seed(here, alice, "How did the interview go?")
    dentist = await rig.seed(here, alice, "How was the dentist?")
    bobs = await rig.seed(here, bob, "Did the move go well?")
    await rig.seed(elsewhere, alice, "Elsewhere")

    await slash(
        rig.bot,
        "commitments dismiss",
        channel=here,
        user=alice,
        options={"id": ""},
        focused="id",
    )
    assert {c["value"] for c in choices(answers)} == {interview.id, dentist.id}

    await slash(
        rig.bot,
        "commitments snooze",
        channel=here,
        user=alice,
        options={"id": "dent", "duration": ""},
        focused="id",
    )
    [only] = choices(answers)
    assert only["value"] == dentist.id and "dentist" in only["name"]

    moderator = discord.Permissions(manage_messages=True)
    await slash(
        rig.bot,
        "commitments dismiss",
        channel=here,
        user=bob,
        options={"id": ""},
        focused="id",
        permissions=moderator,
    )
    assert {c["value"] for c in choices(answers)} == {interview.id, dentist.id, bobs.id}


async def test_commands_refuse_users_outside_the_allow_list(rig: Rig, answers: Responses) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    c = await rig.seed(channel, alice)
    # A server not listed in `groups` is not served, whoever asks.
    rig.config.channels.discord.group_policy = "allowlist"
    rig.config.channels.discord.allow_from = [str(alice.id)]

    await slash(rig.bot, "commitments list", channel=channel, user=bob)
    assert said(answers) == "Sorry, you can't use this bot here."
    await slash(
        rig.bot,
        "commitments dismiss",
        channel=channel,
        user=bob,
        options={"id": ""},
        focused="id",
    )
    assert choices(answers) == []

    rig.config.channels.discord.allow_from = []
    rig.config.channels.discord.groups = ["123456789012345678"]
    await slash(rig.bot, "commitments list", channel=channel, user=alice)
    assert said(answers) == "Sorry, you can't use this bot here."
    assert await rig.status(c.id) == "pending"
    # Listed, the server is served for every member.
    rig.config.channels.discord.groups = [str(rig.guild.id)]
    await slash(rig.bot, "commitments list", channel=channel, user=bob)
    assert said(answers) != "Sorry, you can't use this bot here."


async def schedule(rig: Rig, channel: Any, user: Any, text: str) -> str:
    ref = rig.scope(channel, user)
    reminder = await rig.services.reminders.schedule(
        agent_id="main",
        session_key=ref.session_key,
        target=Target("discord", ref.chat_id, ref.thread_id),
        created_by=str(user.id),
        text=text,
        schedule=Schedule("after", rig.clock.now() + timedelta(hours=3), None, "UTC"),
    )
    return reminder.id


async def test_reminders_list_and_cancel(rig: Rig, answers: Responses) -> None:
    here, elsewhere = rig.channel(0), rig.channel(1)
    alice, bob = rig.member(0), rig.member(1)
    water = await schedule(rig, here, alice, "Water the plants")
    other = await schedule(rig, elsewhere, alice, "Call mum")

    await slash(rig.bot, "reminders list", channel=here, user=alice)
    text = said(answers)
    assert water in text and "Water the plants" in text and other not in text

    await slash(rig.bot, "reminders cancel", channel=here, user=alice, options={"id": other})
    assert said(answers) == f"`{other}`: not found in this chat."
    # Another member's reminder is not shown to bob, nor cancellable by him.
    await slash(rig.bot, "reminders list", channel=here, user=bob)
    assert said(answers) == "You have no reminders in this chat."
    await slash(rig.bot, "reminders cancel", channel=here, user=bob, options={"id": water})
    assert said(answers) == f"`{water}`: not found in this chat."
    moderator = discord.Permissions(manage_messages=True)
    await slash(rig.bot, "reminders list", channel=here, user=bob, permissions=moderator)
    assert water in said(answers)

    await slash(rig.bot, "reminders cancel", channel=here, user=alice, options={"id": water})
    assert said(answers) == f"Cancelled `{water}`."
    await slash(rig.bot, "reminders list", channel=here, user=alice)
    assert said(answers) == "No reminders in this chat."
