"""The Discord adapter end to end: the real discord.py client (the adapter's
KeptBot) against the fake Discord in tests/fakes/discord_server.py, through
`channels.discord.apiBaseUrl`, with real core services on a temporary SQLite
store and a scripted model. (The harness is shared with test_discord_catchup.)"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import discord
import pytest
from pydantic import ValidationError

from bot.services import Services, build_services
from channels.base import AdapterRouter, ChannelContext
from channels.discord import DiscordAdapter
from channels.discord.http import RootedHTTPClient
from core.clock import TestClock
from core.config import KeptConfig
from core.store import Store
from core.store.backends import sqlite_backend
from core.store.base import MessageRecord, NewMessage
from core.store.sqlite import SqliteStore
from tests.fakes.discord_server import TOKEN, FakeDiscord, Script
from tests.fakes.scripted_model import ScriptedModel
from tests.store_helpers import open_store

DEFAULT_BASE = "https://discord.com/api/v10"


class StorageSwitch:
    """The store boundary under a test's control: while `down`, storing a
    message fails as SQLite does when another writer holds the database past
    the busy timeout; `listing` can hold the catch-up's session query."""

    def __init__(self, store: Store) -> None:
        self.down = False
        self.refused = 0
        self.listing: asyncio.Event | None = None
        add, sessions = store.add_message, store.sessions_with_last_platform_id

        async def add_message(message: NewMessage) -> MessageRecord:
            if self.down and message.role == "user":
                self.refused += 1
                raise sqlite3.OperationalError("database is locked")
            return await add(message)

        async def sessions_with_last_platform_id(platform: str) -> Any:
            if self.listing is not None:
                await self.listing.wait()
            return await sessions(platform)

        store.add_message = add_message  # type: ignore[method-assign]
        store.sessions_with_last_platform_id = sessions_with_last_platform_id  # type: ignore[method-assign]


@dataclass
class DiscordHarness:
    fake: FakeDiscord
    clock: TestClock
    store: Store
    storage: StorageSwitch
    model: ScriptedModel
    config: KeptConfig
    router: AdapterRouter
    services: Services
    environ: dict[str, str] = field(default_factory=lambda: {"DISCORD_TOKEN": TOKEN})
    adapters: list[DiscordAdapter] = field(default_factory=list)
    # on_ready calls per adapter: a READY is handled once servers arrived.
    readies: dict[int, int] = field(default_factory=dict)

    def context(self) -> ChannelContext:
        return ChannelContext(
            conversation=self.services.manager,
            store=self.store,
            commitments=self.services.commitments,
            reminders=self.services.reminders,
            config=lambda: self.config,
            clock=self.clock,
            environ=self.environ,
        )

    async def start(self) -> DiscordAdapter:
        """Start an adapter as `kept run` does and wait for READY."""
        # Servers arrive right after READY here: no need to wait 2 s for more.
        adapter = DiscordAdapter(self.context(), guild_ready_timeout=0.01)
        on_ready = adapter.on_ready

        async def counted() -> None:
            await on_ready()
            self.readies[id(adapter)] = self.readies.get(id(adapter), 0) + 1

        adapter.on_ready = counted  # type: ignore[method-assign]
        self.adapters.append(adapter)
        await adapter.start()
        self.router.add(adapter)
        await self.services.manager.recover_unanswered(platforms=self.router.platforms)
        await self.fake.wait_for(lambda: self.readies.get(id(adapter)))
        return adapter

    async def reconnect(self, adapter: DiscordAdapter) -> None:
        """Drop the gateway connection; the client resumes, is refused, and
        identifies again (without discord.py's 5 s pause before a repeated
        IDENTIFY, which paces real logins)."""

        async def no_pause(shard_id: int | None, *, initial: bool = False) -> None:
            return None

        adapter.bot.before_identify_hook = no_pause  # type: ignore[method-assign]
        readies = self.readies[id(adapter)]
        await self.fake.drop()
        await self.fake.wait_for(lambda: self.readies[id(adapter)] > readies)

    async def stop(self, adapter: DiscordAdapter) -> None:
        await adapter.stop()
        self.router.remove(adapter.platform)
        self.adapters.remove(adapter)

    async def transcript(self, session_key: str) -> list[tuple[str, str]]:
        rows = await self.store.history(session_key, before_turn_of=2**62, limit=1000)
        return [(r.role, r.text) for r in rows]

    def dm_key(self, user: dict[str, Any] | None = None) -> str:
        return f"agent:main:discord:private:{self.fake.dm(user or self.fake.ana)}"


@asynccontextmanager
async def discord_harness(
    tmp_path: Path, *, busy_timeout: float | None = None, **discord: Any
) -> AsyncIterator[DiscordHarness]:
    clock = TestClock()
    fake = await FakeDiscord(now=clock.now).start()
    store: SqliteStore = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    if busy_timeout is not None:
        store = SqliteStore(tmp_path / "kept.sqlite", busy_timeout=busy_timeout)
    await store.open()
    storage = StorageSwitch(store)
    model = ScriptedModel()
    router = AdapterRouter()
    settings = KeptConfig.model_validate(
        {"channels": {"discord": {"enabled": True, "apiBaseUrl": fake.root, **discord}}}
    )
    services = build_services(
        backend=sqlite_backend(store),
        llm=model,  # type: ignore[arg-type]
        sender=router,
        config=lambda: harness.config,
        clock=clock,
        platforms=lambda: router.platforms,
    )
    harness = DiscordHarness(fake, clock, store, storage, model, settings, router, services)
    try:
        yield harness
    finally:
        for adapter in list(harness.adapters):
            await adapter.stop()
        await services.manager.drain()
        await store.close()
        await fake.close()


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
    assert isinstance(adapter.bot.http, RootedHTTPClient)
    # The class-wide default is untouched: other clients still talk to Discord.
    assert discord.http.Route.BASE == DEFAULT_BASE
    harness.config = KeptConfig.model_validate({"channels": {"discord": {"enabled": True}}})
    plain = DiscordAdapter(harness.context())
    assert type(plain.bot.http) is discord.http.HTTPClient

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
    assert sent.allowed_mentions == {"parse": [], "replied_user": True}
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
