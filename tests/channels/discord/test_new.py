"""`/new` through the real CommandTree on the dpytest bot: the chat's next
turn reaches the model without the earlier messages; in a server only a
member with Manage Messages there may start the channel's conversation over."""

from __future__ import annotations

from typing import Any

import discord
import discord.ext.test as dpytest

from core.commands import wording
from tests.support.discord_dpytest import Responses, Rig, said_privately, slash


async def new(rig: Rig, user: Any, channel: Any, permissions: Any = None) -> None:
    await slash(rig.bot, "new", channel=channel, user=user, permissions=permissions)


said = said_privately


def last_context(rig: Rig) -> list[str]:
    _, messages, _ = rig.model.requests[-1]
    return [m["content"] for m in messages[1:]]


def mention(rig: Rig) -> str:
    assert rig.bot.user is not None
    return f"<@{rig.bot.user.id}>"


async def test_new_in_a_dm_starts_the_conversation_over(rig: Rig, answers: Responses) -> None:
    user = rig.member(0)
    dm = await user.create_dm()
    await dpytest.message("my code word is zebra", dm, user._user)
    await dpytest.message("remember it?", dm, user._user)
    assert "my code word is zebra" in last_context(rig)  # positive control
    requests = len(rig.model.requests)

    await new(rig, user._user, dm)
    assert said(answers) == wording.STARTED_OVER
    assert len(rig.model.requests) == requests  # the command is no turn

    await dpytest.message("what was it?", dm, user._user)
    assert last_context(rig) == ["what was it?"]


async def test_in_a_server_only_manage_messages_starts_over(rig: Rig, answers: Responses) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    await dpytest.message(f"{mention(rig)} the plan is zebra", channel, alice)

    await new(rig, bob, channel)
    assert said(answers) == wording.NEW_ADMINS_ONLY
    await dpytest.message(f"{mention(rig)} what was the plan?", channel, alice)
    assert any("the plan is zebra" in c for c in last_context(rig))  # nothing changed

    await new(rig, bob, channel, permissions=discord.Permissions(manage_messages=True))
    assert said(answers) == wording.STARTED_OVER
    await dpytest.message(f"{mention(rig)} hello", channel, alice)
    assert len(last_context(rig)) == 1 and last_context(rig)[0].endswith("hello")


async def test_new_is_in_the_command_tree(rig: Rig) -> None:
    command = rig.bot.tree.get_command("new")
    assert command is not None and command.description == "Start our conversation in this chat over"
