"""/forget, /mydata and /export on Discord, through the real CommandTree and
dynamic items on the dpytest bot, on each backend: ephemeral answers, the
Erase / Cancel buttons (only the asker's press counts, and only within 5
minutes on the clock), /mydata and /export only in the bot's DM."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import discord
import discord.ext.test as dpytest
import pytest

from channels.discord.views import buttons_view
from core.commands.buttons import unpack
from core.commands.registry import COMMANDS
from core.messages import ForgetChoice
from core.privacy.store import ErasedUser, ErasureCounts
from tests.support.discord_dpytest import (
    EPHEMERAL,
    Responses,
    Rig,
    build_rig,
    click,
    sent_messages,
    slash,
)
from tests.support.scripted_model import text


@pytest.fixture
async def rig(tmp_path: Path, storage_url: str) -> AsyncIterator[Rig]:
    rig = await build_rig(tmp_path, storage_url=storage_url)
    yield rig
    await rig.close()


async def run(rig: Rig, name: str, user: Any, channel: Any, *, files_up_to: int = 0) -> None:
    """A top-level slash command, as Discord sends it (`files_up_to`: the
    attachment size limit it names, when not the default)."""
    await slash(rig.bot, name, channel=channel, user=user, files_up_to=files_up_to)


def said(answers: Responses, back: int = 1) -> dict[str, Any]:
    kind, data = answers.calls[-back]
    assert kind in (4, 0) and data.get("flags", 0) & EPHEMERAL, (kind, data)
    return data


def button_ids(data: dict[str, Any]) -> list[str]:
    return [c["custom_id"] for row in data.get("components", []) for c in row["components"]]


async def talk(rig: Rig, user: discord.Member, words: str) -> discord.DMChannel:
    """A stored exchange in the user's DM with the bot."""
    dm = await user.create_dm()
    rig.model.steps.append(text(f"noted: {words}"))
    await dpytest.message(words, dm, user._user)  # type: ignore[attr-defined]
    await rig.settle()
    sent_messages()
    return dm


async def held(rig: Rig, user: discord.Member) -> ErasureCounts:
    return await rig.services.backend.erasure.count(ErasedUser("discord", str(user.id)))


async def shown_prompt(channel: Any) -> discord.Message:
    """A bot's message to press the prompt's buttons on (dpytest keeps no
    ephemeral answers); the bot's own message is never a turn."""
    message = await channel.send("the prompt")
    sent_messages()
    return message


async def test_forget_in_a_dm_asks_then_erase_erases_what_it_counted(
    rig: Rig, answers: Responses
) -> None:
    alice, bob = rig.member(0), rig.member(1)
    dm = await talk(rig, alice, "my zebracorn interview is tomorrow")
    await rig.seed(dm, alice, "How did the interview go?")
    await talk(rig, bob, "bob's own words")
    # Usage: the chat turn's model call and the extraction's, both charged to her.
    expected = ErasureCounts(chats=1, messages=2, follow_ups=1, usage=2)
    assert await held(rig, alice) == expected

    await run(rig, "forget", alice._user, dm)
    data = said(answers)
    assert data["content"] == (
        "This erases what I hold from you, in every chat: 1 private chat, 2 messages, "
        "1 follow-up, 2 usage records. Press Erase within 5 minutes to go on, or Cancel."
    )
    erase, cancel = button_ids(data)
    issued = int(rig.clock.now().timestamp())
    assert unpack(erase) == ForgetChoice(str(alice.id), issued, True)
    assert unpack(cancel) == ForgetChoice(str(alice.id), issued, False)
    assert await held(rig, alice) == expected  # asking erased nothing

    message = await shown_prompt(dm)
    shown = buttons_view(tuple(unpack(i) for i in (erase, cancel)))  # type: ignore[misc]
    assert shown is not None
    await rig.clock.advance(4 * 60 + 59)
    await click(
        rig.bot, message=message, components=shown.to_components(), custom_id=erase,
        user=alice._user,
    )  # fmt: skip
    kind, edited = answers.calls[-1]
    assert kind == 7 and edited["components"] == []
    assert edited["content"].endswith(
        "-# Erased what I held from you: 1 private chat, 2 messages, 1 follow-up, "
        "2 usage records. You can go on talking to me."
    )
    assert await held(rig, alice) == ErasureCounts()
    assert await held(rig, bob) == ErasureCounts(chats=1, messages=2, usage=1)

    # Pressed again: nothing left, no error.
    await click(
        rig.bot, message=message, components=shown.to_components(), custom_id=erase,
        user=alice._user,
    )  # fmt: skip
    assert answers.calls[-1][1]["content"].endswith(
        "-# Nothing is left to erase: it is already done."
    )
    # Alice still talks to the bot.
    await talk(rig, alice, "hello again")
    assert await held(rig, alice) == ErasureCounts(chats=1, messages=2, usage=1)


async def test_only_the_asker_may_press_and_not_after_five_minutes(
    rig: Rig, answers: Responses
) -> None:
    alice, bob, channel = rig.member(0), rig.member(1), rig.channel(0)
    await talk(rig, alice, "words to erase")
    before = await held(rig, alice)
    assert before.messages == 2

    # In a server channel: the prompt is ephemeral, only Alice sees it.
    await run(rig, "forget", alice, channel)
    erase, cancel = button_ids(said(answers))
    message = await shown_prompt(channel)
    shown = buttons_view(tuple(unpack(i) for i in (erase, cancel)))  # type: ignore[misc]
    assert shown is not None
    components = shown.to_components()

    for pressed in (erase, cancel):
        await click(rig.bot, message=message, components=components, custom_id=pressed, user=bob)
        assert said(answers)["content"] == (
            "Only the person who asked can answer this; nothing was erased."
        )
    assert await held(rig, alice) == before

    await rig.clock.advance(5 * 60 + 1)
    await click(rig.bot, message=message, components=components, custom_id=erase, user=alice)
    assert (
        "-# This question lapsed after 5 minutes: nothing was erased."
        in (answers.calls[-1][1]["content"])
    )
    assert await held(rig, alice) == before

    await click(rig.bot, message=message, components=components, custom_id=cancel, user=alice)
    assert answers.calls[-1][1]["content"].endswith("-# Cancelled: nothing was erased.")
    assert await held(rig, alice) == before


async def test_mydata_in_the_dm_shows_it_and_in_a_server_points_to_the_dm(
    rig: Rig, answers: Responses
) -> None:
    alice = rig.member(0)
    dm = await talk(rig, alice, "my zebracorn interview is tomorrow")
    await rig.seed(dm, alice, "How did the interview go?")

    await run(rig, "mydata", alice._user, dm)
    summary, listing = said(answers, 2), said(answers, 1)
    assert summary["content"].splitlines()[:3] == [
        "What I hold about you:",
        "- 2 messages (yours and my replies) in 1 chat",
        "- 1 follow-up and 0 reminders in every chat (this chat's open ones are listed below)",
    ]
    assert "- time zone: Europe/Paris (none of your own, so the default)" in summary["content"]
    assert "- messages are kept until you erase them" in summary["content"]
    assert "How did the interview go?" in listing["content"]
    assert [unpack(i).verb for i in button_ids(listing)] == ["dismiss", "snooze"]  # type: ignore[union-attr]

    calls = len(answers.calls)
    await run(rig, "mydata", alice, rig.channel(0))
    assert len(answers.calls) == calls + 1
    assert said(answers)["content"] == "/mydata works in a private chat with me: send it there."


async def test_export_in_the_dm_attaches_the_document(rig: Rig, answers: Responses) -> None:
    alice = rig.member(0)
    dm = await talk(rig, alice, "my zebracorn interview is tomorrow")
    await talk(rig, rig.member(1), "bob's own words")

    await run(rig, "export", alice._user, dm)
    assert said(answers)["content"] == (
        "Everything I hold from you, from 1 chat, as one JSON document."
    )
    [(name, data)] = answers.files
    assert name == f"kept-export-discord-{alice.id}.json"
    document = json.loads(data)
    assert document["userId"] == str(alice.id) and document["platform"] == "discord"
    assert "my zebracorn interview is tomorrow" in data.decode()
    assert "bob's own words" not in data.decode()

    await run(rig, "export", alice, rig.channel(0))
    assert said(answers)["content"] == "/export works in a private chat with me: send it there."
    assert len(answers.files) == 1


async def test_an_export_over_the_attachment_limit_is_one_line(
    rig: Rig, answers: Responses
) -> None:
    alice = rig.member(0)
    dm = await talk(rig, alice, "my zebracorn interview is tomorrow")
    await run(rig, "export", alice._user, dm, files_up_to=1000)
    content = said(answers)["content"]
    assert content.startswith("Your export is ") and "more than the 1000 bytes" in content
    assert answers.files == []


async def test_the_tree_offers_every_registered_command(rig: Rig) -> None:
    """Discord lists the synced tree itself (there is no /help there)."""
    tree = {c.name for c in rig.bot.tree.get_commands()}
    placed = {c.discord[0] for c in COMMANDS.commands if c.discord}
    assert {"forget", "mydata", "export"} <= placed
    assert placed == tree
