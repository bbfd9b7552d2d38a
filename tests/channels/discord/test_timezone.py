"""`/timezone` with autocomplete, and the set_timezone tool's buttons, through
the real CommandTree and dynamic items on the dpytest bot."""

from __future__ import annotations

import json
from typing import Any

import discord
import discord.ext.test as dpytest

from channels.discord.views import buttons_view
from core.commands.buttons import pack, unpack
from core.llm import ToolCall
from core.messages import ZoneChoice, zone_choices
from tests.support.discord_dpytest import (
    Responses,
    Rig,
    button_ids,
    click,
    interaction_payload,
    record_payloads,
    sent_messages,
)
from tests.support.scripted_model import calls, text

EPHEMERAL = 64


async def timezone(
    rig: Rig, user: Any, channel: Any, zone: str | None = None, *, focused: bool = False
) -> None:
    options = [] if zone is None else [{"name": "zone", "type": 3, "value": zone}]
    if focused:
        options[0]["focused"] = True
    data: dict[str, Any] = {"id": "1", "name": "timezone", "type": 1, "options": options}
    if getattr(channel, "guild", None) is not None:
        data["guild_id"] = str(channel.guild.id)
    payload = interaction_payload(
        rig.bot, kind=4 if focused else 2, data=data, channel=channel, user=user
    )
    interaction = discord.Interaction(data=payload, state=rig.bot._connection)  # type: ignore[arg-type]
    await rig.bot.tree._call(interaction)


def said(answers: Responses) -> str:
    kind, data = answers.calls[-1]
    assert kind == 4 and data.get("flags", 0) & EPHEMERAL
    return str(data["content"])


async def zone_of(rig: Rig, user: Any) -> str | None:
    found = await rig.services.backend.user_zones.zone("discord", str(user.id))
    return found.timezone if found is not None else None


async def test_timezone_shows_sets_and_clears(rig: Rig, answers: Responses) -> None:
    alice, channel = rig.member(0), rig.channel(0)
    await timezone(rig, alice, channel)
    assert "no time zone of your own; I use Europe/Paris" in said(answers)
    await timezone(rig, alice, channel, "asia/tokyo")
    assert said(answers).startswith("Your time zone is now Asia/Tokyo")
    assert await zone_of(rig, alice) == "Asia/Tokyo"
    # The same user's zone in a DM: it is theirs, not the chat's.
    dm = await alice.create_dm()
    await timezone(rig, alice._user, dm)
    assert said(answers).startswith("Your time zone is Asia/Tokyo")
    await timezone(rig, alice, channel, "Nowhere/Land")
    assert said(answers).startswith("Unknown time zone 'Nowhere/Land'")
    assert await zone_of(rig, alice) == "Asia/Tokyo"
    await timezone(rig, alice, channel, "clear")
    assert "cleared" in said(answers) and await zone_of(rig, alice) is None
    assert rig.model.requests == []


async def test_timezone_autocompletes_iana_names(rig: Rig, answers: Responses) -> None:
    await timezone(rig, rig.member(0), rig.channel(0), "europe/pa", focused=True)
    kind, data = answers.calls[-1]
    assert kind == 8
    assert [c["value"] for c in data["choices"]] == ["Europe/Paris"]
    await timezone(rig, rig.member(0), rig.channel(0), "", focused=True)
    assert len(answers.calls[-1][1]["choices"]) == 25  # Discord's limit


def components(choices: tuple[ZoneChoice, ...]) -> list[dict[str, Any]]:
    view = buttons_view(choices)
    assert view is not None
    return view.to_components()


async def test_the_tools_buttons_confirm_only_for_the_user(rig: Rig, answers: Responses) -> None:
    payloads = record_payloads(rig.bot)
    alice, bob, channel = rig.member(0), rig.member(1), rig.channel(0)
    call = ToolCall("call_tz", "set_timezone", json.dumps({"timezone": "Asia/Tokyo"}))
    rig.model.steps += [calls(call), text("Shall I use Tokyo time for you?")]

    await dpytest.message(f"<@{rig.bot.user.id}> I live in Tokyo now", channel, alice)  # type: ignore[union-attr]
    await rig.settle()  # the extraction pass after the reply, so a click waits on nothing else

    [message] = sent_messages()
    assert message.content == "Shall I use Tokyo time for you?"
    ids = button_ids(payloads[-1])
    assert [unpack(i) for i in ids] == list(zone_choices(str(alice.id), "Asia/Tokyo"))
    assert await zone_of(rig, alice) is None  # the tool itself changes nothing
    yes, no = ids
    shown = components(zone_choices(str(alice.id), "Asia/Tokyo"))

    for pressed in (yes, no):
        await click(rig.bot, message=message, components=shown, custom_id=pressed, user=bob)
        assert said(answers) == "Only the person this was offered to can choose."
    assert await zone_of(rig, bob) is None and await zone_of(rig, alice) is None

    await click(rig.bot, message=message, components=shown, custom_id=yes, user=alice)
    kind, data = answers.calls[-1]
    assert kind == 7 and data["components"] == []
    assert data["content"].endswith(
        "-# Your time zone is now Asia/Tokyo (it is Mon 30 Nov 18:00 there)."
    )
    assert await zone_of(rig, alice) == "Asia/Tokyo"


async def test_an_invalid_zone_press_answers_clearly(rig: Rig, answers: Responses) -> None:
    alice = rig.member(0)
    dm = await alice.create_dm()
    rig.model.steps.append(text("ok"))
    await dpytest.message("hello", dm, alice._user)
    await rig.settle()
    [message] = sent_messages()
    stale = ZoneChoice(str(alice.id), "Mars/Olympus")
    custom_id = pack(stale)
    assert custom_id is not None
    await click(
        rig.bot,
        message=message,
        components=components((stale,)),
        custom_id=custom_id,
        user=alice._user,
    )
    assert said(answers).startswith("Unknown time zone 'Mars/Olympus'")
    assert await zone_of(rig, alice) is None
