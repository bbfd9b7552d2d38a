"""The Discord harness: the real discord.py client (the adapter's KeptBot)
against the fake Discord in tests/fakes/discord_server.py, through
`channels.discord.apiBaseUrl`, with real core services on a temporary SQLite
store and a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.services import Services, build_services
from channels.context import ChannelContext
from channels.discord import DiscordAdapter
from channels.router import AdapterRouter
from core.clock import TestClock
from core.config.model import KeptConfig
from core.store import Store
from core.store.backends import sqlite_backend
from core.store.base import MessageRecord, NewMessage
from core.store.sqlite import SqliteStore
from core.store.sqlite.driver import sqlite3
from tests.fakes.discord_server import TOKEN, FakeDiscord
from tests.support.access import OPEN_ACCESS
from tests.support.scripted_model import ScriptedModel
from tests.support.store_helpers import open_store


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

        admit = store.admit_message

        async def admit_message(message: NewMessage, admission: Any) -> Any:
            if self.down and message.role == "user":
                self.refused += 1
                raise sqlite3.OperationalError("database is locked")
            return await admit(message, admission)

        async def sessions_with_last_platform_id(platform: str) -> Any:
            if self.listing is not None:
                await self.listing.wait()
            return await sessions(platform)

        store.add_message = add_message  # type: ignore[method-assign]
        store.admit_message = admit_message  # type: ignore[method-assign]
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
            app_state=self.services.backend.app_state,
            users=self.services.users,
            pairing=self.services.pairing,
            start_over=self.services.start_over,
            privacy=self.services.privacy,
            followup_prefs=self.services.followup_prefs,
            spend=self.services.spend,
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
        {
            "channels": {
                "discord": {"enabled": True, "apiBaseUrl": fake.root, **OPEN_ACCESS, **discord}
            }
        }
    )
    services = build_services(
        backend=sqlite_backend(store),
        llm=model,  # type: ignore[arg-type]
        sender=router,
        config=lambda: harness.config,
        clock=clock,
        platforms=lambda: router.platforms,
        admins=router,  # as the runtime composes it
        access=router,  # as the runtime: access asked again before every send
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
