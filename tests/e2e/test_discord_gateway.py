"""The Discord adapter end to end: the real discord.py client (the adapter's
KeptBot) against the fake Discord in tests/fakes/discord_server.py, through
`channels.discord.apiBaseUrl`, with real core services on a temporary SQLite
store and a scripted model. (The harness lives in tests/support/discord_harness.py.)"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import discord
import pytest
from pydantic import ValidationError

from channels.discord import DiscordAdapter
from channels.discord.http import KeptHTTPClient
from core.config.model import KeptConfig
from tests.fakes.discord_server import TOKEN, Script
from tests.support.discord_harness import DiscordHarness, discord_harness

DEFAULT_BASE = "https://discord.com/api/v10"


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[DiscordHarness]:
    async with discord_harness(tmp_path) as h:
        yield h


# --- connecting -----------------------------------------------------------------


async def test_the_real_client_logs_in_connects_and_gets_ready(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake = harness.fake
    adapter = await harness.start()

    assert [c.route for c in fake.calls[:3]] == ["me", "application", "gateway_bot"]
    assert fake.identifies[0]["token"] == TOKEN
    assert fake.identifies[0]["intents"] == adapter.bot.intents.value
    assert fake.ops[:2] == [1, 2]  # a heartbeat (acknowledged), then IDENTIFY
    guild = await fake.wait_for(lambda: adapter.bot.get_guild(fake.guild_id))
    assert guild.get_channel(fake.general) is not None
    await fake.wait_for(lambda: fake.calls_to("commands"))
    assert "discord_connected name=kept" in caplog.text
    assert TOKEN not in caplog.text


async def test_api_base_url_is_per_client_and_validated(harness: DiscordHarness) -> None:
    adapter = await harness.start()
    assert isinstance(adapter.bot.http, KeptHTTPClient)
    # The class-wide default is untouched: other clients still talk to Discord.
    assert discord.http.Route.BASE == DEFAULT_BASE
    harness.config = KeptConfig.model_validate({"channels": {"discord": {"enabled": True}}})
    plain = DiscordAdapter(harness.context())
    # Not rerouted, but still sending a message at most once.
    assert isinstance(plain.bot.http, KeptHTTPClient) and plain.bot.http.root is None

    with pytest.raises(ValidationError, match="expected an http:// or https:// URL"):
        KeptConfig.model_validate({"channels": {"discord": {"apiBaseUrl": "nirn:8080"}}})


async def test_api_base_url_may_name_the_api_path_too(harness: DiscordHarness) -> None:
    fake = harness.fake
    harness.config.channels.discord.api_base_url = f"{fake.root}/api/v10/"
    await harness.start()

    await fake.say("hello")
    await fake.wait_for(lambda: fake.texts())
    assert [c.path for c in fake.calls[:3]] == [
        "users/@me",
        "oauth2/applications/@me",
        "gateway/bot",
    ]


async def test_a_reconnect_identifies_again_and_keeps_answering(harness: DiscordHarness) -> None:
    fake = harness.fake
    adapter = await harness.start()
    await harness.reconnect(adapter)
    assert len(fake.identifies) == 2
    assert 6 in fake.ops  # it tried to resume first

    await fake.say("still there?")
    await fake.wait_for(lambda: fake.texts())
    assert fake.texts() == ["echo: still there?"]


# --- messages -------------------------------------------------------------------


async def test_a_dm_is_answered(harness: DiscordHarness) -> None:
    fake = harness.fake
    await harness.start()

    said = await fake.say("hello there")
    await fake.wait_for(lambda: fake.texts())

    dm = fake.dm(fake.ana)
    assert fake.texts(dm) == ["echo: hello there"]
    assert fake.calls_to("typing")
    assert await harness.transcript(harness.dm_key()) == [
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
    ]
    stored = await harness.store.sessions_with_last_platform_id("discord")
    assert [(s.key, last) for s, last in stored] == [(harness.dm_key(), said["id"])]


async def test_a_mention_in_a_server_channel_is_answered_and_chatter_is_not(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    await harness.start()

    await fake.say("lunch anyone?", channel=fake.general, author=fake.ben)
    await fake.say("how do I cook rice?", channel=fake.general, mention=True)
    await fake.wait_for(lambda: fake.texts())

    assert fake.texts(fake.general) == ["echo: how do I cook rice?"]
    sent = fake.sent[0]
    # The reply quotes the question without pinging its author again.
    assert sent.reference is not None
    assert sent.allowed_mentions == {"parse": [], "replied_user": False}
    key = f"agent:main:discord:channel:{fake.general}"
    assert await harness.transcript(key) == [
        ("user", "how do I cook rice?"),
        ("assistant", "echo: how do I cook rice?"),
    ]


async def test_a_reply_to_the_bot_in_a_thread_is_answered_in_the_thread(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    await harness.start()
    thread = await fake.thread(fake.general)
    await fake.wait_for(lambda: harness.adapters[0].bot.get_channel(thread))

    await fake.say("plan my week", channel=thread, mention=True)
    await fake.wait_for(lambda: fake.texts())
    bot_message = fake.history(thread)[-1]
    await fake.say("and the weekend?", channel=thread, reply_to=bot_message)
    await fake.wait_for(lambda: len(fake.texts()) == 2)

    assert fake.texts(thread) == ["echo: plan my week", "echo: and the weekend?"]
    key = f"agent:main:discord:channel:{fake.general}:thread:{thread}"
    assert [t for _, t in await harness.transcript(key)][-1] == "echo: and the weekend?"


async def test_a_429_on_send_is_waited_out_and_sent_once(harness: DiscordHarness) -> None:
    fake = harness.fake
    await harness.start()
    fake.script("send", Script(429, retry_after=0.25))

    await fake.say("are you there?")
    await fake.wait_for(lambda: fake.texts())

    first, second = fake.calls_to("send")
    assert second.at - first.at >= 0.25
    assert fake.texts() == ["echo: are you there?"]


async def test_a_slash_command_is_answered_through_the_interaction_callback(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    await harness.start()

    data = {
        "id": "1",
        "name": "reminders",
        "type": 1,
        "options": [{"name": "list", "type": 1, "options": []}],
    }
    payload = await fake.interact(data, channel=fake.dm(fake.ana))
    await fake.wait_for(lambda: fake.callbacks)

    interaction_id, body = fake.callbacks[0]
    assert interaction_id == int(payload["id"])
    assert body["type"] in (4, 5)  # a message, or a deferral before one
