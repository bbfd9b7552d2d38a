"""`/followups [state:on|off]` through the real CommandTree on the dpytest
bot: in a DM the user's own; in a server channel someone with Manage
Messages switches the whole channel, a member only themselves."""

from __future__ import annotations

from typing import Any

import discord

from core.commitments.model import Commitment
from core.users.followup_prefs import DISMISSED_REASON
from tests.support.discord_dpytest import Responses, Rig, said_privately, slash

MODERATOR = discord.Permissions(manage_messages=True)


async def followups(
    rig: Rig,
    user: Any,
    channel: Any,
    state: str | None = None,
    *,
    permissions: discord.Permissions | None = None,
) -> None:
    options = None if state is None else {"state": state}
    await slash(
        rig.bot, "followups", channel=channel, user=user, options=options, permissions=permissions
    )


said = said_privately


async def status(rig: Rig, commitment_id: str) -> Commitment:
    found = await rig.services.backend.commitments.get(commitment_id)
    assert found is not None
    return found


def offered_choices(rig: Rig) -> list[str]:
    command = rig.bot.tree.get_command("followups")
    assert isinstance(command, discord.app_commands.Command)
    return [c.value for c in command.parameters[0].choices]


async def test_followups_offers_on_and_off(rig: Rig) -> None:
    assert offered_choices(rig) == ["on", "off"]


async def test_in_a_dm_it_shows_and_switches_the_users_own(rig: Rig, answers: Responses) -> None:
    alice = rig.member(0)
    dm = await alice.create_dm()
    pending = await rig.seed(dm, alice, "Did you sleep better?")
    await followups(rig, alice._user, dm)
    assert said(answers).startswith("Your follow-ups are on")
    await followups(rig, alice._user, dm, "off")
    assert said(answers).startswith("Your follow-ups are now off, in every chat with me")
    state = await rig.services.followup_prefs.state("main", "discord", str(alice.id))
    assert state.own is False
    found = await status(rig, pending.id)
    assert (found.status, found.last_error) == ("dismissed", DISMISSED_REASON)
    await followups(rig, alice._user, dm, "on")
    assert said(answers).startswith("Your follow-ups are now on")
    assert rig.model.requests == []


async def test_in_a_server_a_moderator_switches_the_channel_a_member_themselves(
    rig: Rig, answers: Responses
) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    bobs = await rig.seed(channel, bob, "How was the match?")
    key = rig.scope(channel, bob).session_key
    prefs = rig.services.followup_prefs

    await followups(rig, alice, channel, "off")
    assert said(answers).startswith("Your follow-ups are now off (just yours")
    assert (await prefs.state("main", "discord", str(alice.id), key)).chat is None
    assert (await status(rig, bobs.id)).status == "pending"

    await followups(rig, bob, channel, "off", permissions=MODERATOR)
    assert said(answers).startswith(
        "Follow-ups are now off for everyone in this chat (you are an admin)"
    )
    state = await prefs.state("main", "discord", str(bob.id), key)
    assert (state.own, state.chat) == (None, False)
    assert (await status(rig, bobs.id)).status == "dismissed"
    await followups(rig, bob, channel)
    assert said(answers).startswith("Follow-ups are off in this chat")
