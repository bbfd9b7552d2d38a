"""The Telegram harness: real core services on a temporary SQLite store, a
scripted model, the fake Bot API, and adapters built the way the runtime
builds them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from bot.services import Services, build_services
from channels.context import ChannelContext
from channels.router import AdapterRouter
from channels.telegram import TelegramAdapter
from core.clock import TestClock
from core.commitments.model import Commitment, NewCommitment, Scope
from core.config.model import KeptConfig
from core.messages import ChatKind
from core.store import Store
from core.store.backends import open_backend, sqlite_backend
from core.store.sqlite import SqliteStore
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.support.access import OPEN_ACCESS
from tests.support.scripted_model import ScriptedModel
from tests.support.store_helpers import open_store

T = TypeVar("T")


@dataclass
class TelegramHarness:
    fake: FakeTelegram
    clock: TestClock
    store: Store
    model: ScriptedModel
    config: KeptConfig
    router: AdapterRouter
    services: Services
    environ: dict[str, str] = field(default_factory=lambda: {"TELEGRAM_BOT_TOKEN": TOKEN})
    adapters: list[TelegramAdapter] = field(default_factory=list)

    def context(self) -> ChannelContext:
        return ChannelContext(
            conversation=self.services.manager,
            store=self.store,
            commitments=self.services.commitments,
            reminders=self.services.reminders,
            config=lambda: self.config,
            clock=self.clock,
            environ=self.environ,
            users=self.services.users,
            pairing=self.services.pairing,
            parked=self.services.backend.parked,
            start_over=self.services.start_over,
            privacy=self.services.privacy,
            followup_prefs=self.services.followup_prefs,
            spend=self.services.spend,
        )

    def adapter(self, **options: Any) -> TelegramAdapter:
        options = {"poll_timeout": 1, "request_timeout": 2, "stop_grace": 0.5, **options}
        adapter = TelegramAdapter(self.context(), **options)
        self.adapters.append(adapter)
        return adapter

    async def start(self, **options: Any) -> TelegramAdapter:
        """Start an adapter as `kept run` does: start, route, recover."""
        adapter = self.adapter(**options)
        await adapter.start()
        self.router.add(adapter)
        await self.services.manager.recover_unanswered(platforms=self.router.platforms)
        return adapter

    async def stop(self, adapter: TelegramAdapter) -> None:
        await adapter.stop()
        self.router.remove(adapter.platform)
        if adapter in self.adapters:
            self.adapters.remove(adapter)

    async def transcript(self, session_key: str) -> list[tuple[str, str, str]]:
        rows = await self.store.history(session_key, before_turn_of=2**62, limit=1000)
        return [(r.role, r.kind, r.text) for r in rows]

    async def seed(self, scope: Scope, text: str = "How did the interview go?") -> Commitment:
        """A pending commitment in `scope`, due now."""
        kind = scope.session_key.split(":")[3]
        await self.store.ensure_session(
            scope.session_key,
            agent_id=scope.agent_id,
            platform=scope.platform,
            chat_id=scope.chat_id,
            chat_kind=kind,  # type: ignore[arg-type]
            thread_id=scope.thread_id,
            now=self.clock.now(),
        )
        now = self.clock.now()
        new = NewCommitment(
            scope=scope,
            kind="event_check_in",
            sensitivity="routine",
            source="inferred_user_context",
            reason="user has a job interview",
            suggested_text=text,
            dedupe_key=f"k-{text}-{now.timestamp()}",
            confidence=0.9,
            due_earliest=now,
            due_latest=now + timedelta(hours=36),
            due_timezone="UTC",
            source_message_id=None,
            created_at=now,
        )
        applied = await self.services.backend.commitments.apply_extraction(
            scope, [new], [], now=now
        )
        return applied.created[0]

    async def commitment(self, commitment_id: str) -> Commitment:
        found = await self.services.backend.commitments.get(commitment_id)
        assert found is not None
        return found


def scope(chat_id: int, *, sender: int | None = None, thread: int | None = None) -> Scope:
    kind: ChatKind = "private" if chat_id > 0 else "group"
    key = f"agent:main:telegram:{kind}:{chat_id}" + (f":thread:{thread}" if thread else "")
    sender_id = str(sender if sender is not None else chat_id)
    return Scope(
        "main", key, "telegram", str(chat_id), str(thread) if thread else None, sender_id,
        chat_kind=kind,
    )  # fmt: skip


async def drive(clock: TestClock, work: Awaitable[T], *, step: float = 1.0) -> T:
    """Run `work`, moving the test clock whenever it sleeps on it (backoffs,
    retry_after), so waits of minutes take milliseconds."""
    task = asyncio.ensure_future(work)
    for _ in range(2000):
        if task.done():
            break
        await asyncio.sleep(0.005)
        if clock.sleepers:
            await clock.advance(step)
    return await task


@asynccontextmanager
async def telegram_harness(
    tmp_path: Path,
    telegram: dict[str, Any] | None = None,
    *,
    busy_timeout: float | None = None,
    storage_url: str | None = None,
    **config: Any,
) -> AsyncIterator[TelegramHarness]:
    """`storage_url`: the backend to run on (the storage_url fixture's);
    default a SQLite file in `tmp_path`."""
    fake = await FakeTelegram().start()
    if storage_url is not None:
        backend = open_backend(storage_url)
    else:
        sqlite: SqliteStore = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
        if busy_timeout is not None:
            sqlite = SqliteStore(tmp_path / "kept.sqlite", busy_timeout=busy_timeout)
        backend = sqlite_backend(sqlite)
    await backend.open()
    store = backend.store
    clock = TestClock()
    model = ScriptedModel()
    router = AdapterRouter()
    channels = {
        "telegram": {"enabled": True, "baseUrl": fake.root, **OPEN_ACCESS, **(telegram or {})}
    }
    settings = KeptConfig.model_validate({"channels": channels, **config})
    services = build_services(
        backend=backend,
        llm=model,  # type: ignore[arg-type]
        sender=router,
        config=lambda: harness.config,  # read on every use, like the runtime's
        clock=clock,
        platforms=lambda: router.platforms,
        admins=router,  # as the runtime composes it
        access=router,  # as the runtime: access asked again before every send
    )
    harness = TelegramHarness(fake, clock, store, model, settings, router, services)
    try:
        yield harness
    finally:
        for adapter in list(harness.adapters):
            await adapter.stop()
        await services.manager.drain()
        await backend.close()
        await fake.close()
