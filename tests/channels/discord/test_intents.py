"""Discord without privileged intents by default, and slash commands synced
only when they changed: the real discord.py client against the fake Discord
(tests/fakes/discord_server.py), which withholds a server message's content
as Discord does when the Message Content intent is missing."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from discord import app_commands

from channels.discord import adapter as adapter_module
from channels.discord.commands import command_groups
from core.store.sqlite.driver import sqlite3
from tests.fakes.discord_server import JSON, MESSAGE_CONTENT, Script
from tests.support.discord_harness import DiscordHarness, discord_harness

WITHHELD = "discord_message_without_content"


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[DiscordHarness]:
    async with discord_harness(tmp_path) as h:
        yield h


@pytest.fixture
async def with_intent(tmp_path: Path) -> AsyncIterator[DiscordHarness]:
    async with discord_harness(tmp_path, messageContentIntent=True) as h:
        yield h


async def bot_message_in_general(h: DiscordHarness) -> JSON:
    """The bot's answer to a mention in #general: what the tests reply to."""
    fake = h.fake
    await fake.say("plan my week", channel=fake.general, mention=True)
    await fake.wait_for(lambda: fake.texts(fake.general))
    return fake.history(fake.general)[-1]


# --- intents --------------------------------------------------------------------


async def test_identify_asks_for_no_message_content_by_default(harness: DiscordHarness) -> None:
    adapter = await harness.start()
    [identify] = harness.fake.identifies
    assert not identify["intents"] & MESSAGE_CONTENT
    assert identify["intents"] == adapter.bot.intents.value
    assert adapter.bot.intents.guild_messages and adapter.bot.intents.dm_messages


async def test_identify_asks_for_message_content_when_configured(
    with_intent: DiscordHarness,
) -> None:
    await with_intent.start()
    [identify] = with_intent.fake.identifies
    assert identify["intents"] & MESSAGE_CONTENT


async def test_dms_and_mentions_are_answered_without_the_intent(harness: DiscordHarness) -> None:
    fake = harness.fake
    await harness.start()

    await fake.say("hello there")
    await fake.say("how do I cook rice?", channel=fake.general, mention=True)
    await fake.wait_for(lambda: len(fake.texts()) == 2)

    assert fake.texts(fake.dm(fake.ana)) == ["echo: hello there"]
    assert fake.texts(fake.general) == ["echo: how do I cook rice?"]


async def test_a_reply_that_pings_the_bot_is_answered_without_the_intent(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    await harness.start()
    mine = await bot_message_in_general(harness)

    await fake.say("and the weekend?", channel=fake.general, reply_to=mine)
    await fake.wait_for(lambda: len(fake.texts()) == 2)
    assert fake.texts(fake.general)[-1] == "echo: and the weekend?"


async def test_a_reply_without_ping_is_ignored_without_the_intent(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kept.discord")
    fake = harness.fake
    await harness.start()
    mine = await bot_message_in_general(harness)

    # The fake delivers it without its text, as Discord does.
    await fake.say("and the weekend?", channel=fake.general, reply_to=mine, ping=False)
    await fake.wait_for(lambda: WITHHELD in caplog.text)
    await fake.say("still there?", channel=fake.general, mention=True)
    await fake.wait_for(lambda: len(fake.texts()) == 2)

    assert fake.texts(fake.general) == ["echo: plan my week", "echo: still there?"]
    key = f"agent:main:discord:channel:{fake.general}"
    users = [t for role, t in await harness.transcript(key) if role == "user"]
    assert users == ["plan my week", "still there?"]
    assert "messageContentIntent" in caplog.text
    # The model was asked twice: never about an empty text.
    assert [role for role, *_ in harness.model.requests] == ["chat", "chat"]


async def test_a_reply_without_ping_is_answered_with_the_intent(
    with_intent: DiscordHarness,
) -> None:
    fake = with_intent.fake
    await with_intent.start()
    mine = await bot_message_in_general(with_intent)

    await fake.say("and the weekend?", channel=fake.general, reply_to=mine, ping=False)
    await fake.wait_for(lambda: len(fake.texts()) == 2)
    assert fake.texts(fake.general)[-1] == "echo: and the weekend?"


async def test_chatter_is_still_not_answered_with_the_intent(with_intent: DiscordHarness) -> None:
    fake = with_intent.fake
    await with_intent.start()

    await fake.say("lunch anyone?", channel=fake.general, author=fake.ben)
    await fake.say("how do I cook rice?", channel=fake.general, mention=True)
    await fake.wait_for(lambda: fake.texts())
    assert fake.texts() == ["echo: how do I cook rice?"]


# --- slash commands -----------------------------------------------------------------


async def test_commands_are_offered_in_servers_and_dms_to_everyone(
    harness: DiscordHarness,
) -> None:
    await harness.start()
    fake = harness.fake
    await fake.wait_for(lambda: fake.commands_synced.get("global"))
    for command in fake.commands_synced["global"]:
        assert command["contexts"] == [0, 1], command["name"]  # a server, the bot's DM
        assert command["integration_types"] == [0], command["name"]  # installed to servers
        assert command["default_member_permissions"] is None, command["name"]


async def restart(h: DiscordHarness, caplog: pytest.LogCaptureFixture, event_name: str) -> None:
    """Stop the running adapter and start a new one on the same database,
    until the new one has decided about the commands (`event_name`)."""
    for adapter in list(h.adapters):
        await h.stop(adapter)
    caplog.clear()
    await h.start()
    await h.fake.wait_for(lambda: event_name in caplog.text)


async def test_a_second_start_with_the_same_tree_does_not_sync(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake = harness.fake
    await harness.start()
    await fake.wait_for(lambda: fake.calls_to("commands"))

    await restart(harness, caplog, "discord_commands_unchanged")
    assert len(fake.calls_to("commands")) == 1
    assert len(fake.identifies) == 2


async def test_a_changed_tree_is_synced_at_the_next_start(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake = harness.fake
    await harness.start()
    await fake.wait_for(lambda: fake.calls_to("commands"))

    def changed(support: Any) -> list[app_commands.Group]:
        groups = command_groups(support)
        groups[0].description = "Follow-ups I plan to bring up (changed)"
        return groups

    monkeypatch.setattr(adapter_module, "command_groups", changed)
    await restart(harness, caplog, "discord_commands_synced")
    assert len(fake.calls_to("commands")) == 2
    [first, *_] = fake.commands_synced["global"]
    assert first["description"] == "Follow-ups I plan to bring up (changed)"

    # And that tree, once synced, is not synced again.
    await restart(harness, caplog, "discord_commands_unchanged")
    assert len(fake.calls_to("commands")) == 2


async def test_each_scope_keeps_its_own_hash(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake = harness.fake
    await harness.start()
    await fake.wait_for(lambda: fake.calls_to("commands"))

    # The same tree for a development server: not on Discord there yet.
    harness.config.channels.discord.dev_guild_id = str(fake.guild_id)
    await restart(harness, caplog, "discord_commands_synced")
    assert [c.path.count("/guilds/") for c in fake.calls_to("commands")] == [0, 1]
    assert str(fake.guild_id) in fake.commands_synced

    await restart(harness, caplog, "discord_commands_unchanged")
    assert len(fake.calls_to("commands")) == 2


async def test_a_refused_sync_keeps_the_bot_running_and_is_tried_again(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake = harness.fake
    fake.script("commands", Script(403, "Missing Access", 50001))
    await harness.start()
    await fake.wait_for(lambda: "discord_commands_not_synced" in caplog.text)
    assert "action=" in caplog.text

    await fake.say("hello there")
    await fake.wait_for(lambda: fake.texts())
    assert fake.texts() == ["echo: hello there"]

    # Nothing was stored for the refused sync: the next start syncs.
    await restart(harness, caplog, "discord_commands_synced")
    assert len(fake.calls_to("commands")) == 2


async def test_an_unreadable_hash_syncs_anyway_and_the_bot_runs(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake = harness.fake

    async def locked(key: str) -> str | None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(harness.services.backend.app_state, "get", locked)
    await harness.start()
    await fake.wait_for(lambda: fake.calls_to("commands"))
    assert "discord_commands_hash_unread" in caplog.text and "action=" in caplog.text

    await fake.say("hello there")
    await fake.wait_for(lambda: fake.texts())
    assert fake.texts() == ["echo: hello there"]
