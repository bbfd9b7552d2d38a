"""Several `kept run` workers of one Telegram bot on one PostgreSQL database:
each with its own backend and services as bot/services.py composes them, its
own adapter in polling mode, all against one fake Bot API and one TestClock.

Hooks for guarantee tests: a worker's conversation can be gated (its turns
wait before their message is stored), and its update queue wrapped (a write
held or failed on purpose). `kill` cuts a worker off the database for good,
with no cleanup, as a crash does: its connections are terminated and its
database role may no longer log in, so its claims and its polling role are
left to expire or be taken over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql

from bot.runtime import services_context
from bot.services import Services, build_services
from channels.router import AdapterRouter
from channels.telegram import TelegramAdapter
from core.clock import TestClock
from core.config.model import KeptConfig
from core.messages import Inbound
from core.store.backends import Backend, open_backend
from core.store.updates import NewUpdate, QueuedUpdate, UpdateQueue
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.support.access import OPEN_ACCESS
from tests.support.scripted_model import ScriptedModel

Gate = Callable[[Inbound], Awaitable[None]]


class GatedConversation:
    """A worker's ConversationManager whose turns first await `gate(inbound)`
    (before the message is stored, so the update is not safe meanwhile)."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self._inner = inner
        self._gate = gate

    async def handle(  # type: ignore[no-untyped-def]
        self, inbound: Inbound, *, on_stored: Callable[[], object] | None = None, **more: Any
    ):
        await self._gate(inbound)
        return await self._inner.handle(inbound, on_stored=on_stored, **more)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class WrappedQueue(UpdateQueue):
    """A worker's update queue, with test hooks before `put` and `done`."""

    def __init__(self, inner: UpdateQueue) -> None:
        self.inner = inner
        self.before_put: Callable[[Sequence[NewUpdate]], Awaitable[None]] | None = None
        self.before_done: Callable[[Sequence[int]], Awaitable[None]] | None = None
        self.chat_keys: dict[int, str] = {}  # row id -> chat key, of the rows it claimed

    async def put(self, source: str, updates: Sequence[NewUpdate], *, now: datetime) -> int:
        if self.before_put is not None:
            await self.before_put(updates)
        return await self.inner.put(source, updates, now=now)

    async def claim(
        self, source: str, *, worker: str, now: datetime, lease_until: datetime, chats: int
    ) -> list[QueuedUpdate]:
        rows = await self.inner.claim(
            source, worker=worker, now=now, lease_until=lease_until, chats=chats
        )
        self.chat_keys.update((r.id, r.chat_key) for r in rows)
        return rows

    async def renew(self, ids: Sequence[int], *, worker: str, lease_until: datetime) -> list[int]:
        return await self.inner.renew(ids, worker=worker, lease_until=lease_until)

    async def done(self, ids: Sequence[int], *, now: datetime) -> None:
        if self.before_done is not None:
            await self.before_done(ids)
        await self.inner.done(ids, now=now)

    async def release(self, *, worker: str) -> int:
        return await self.inner.release(worker=worker)

    async def listen(self, source: str, on_put: Callable[[], None]) -> None:
        await self.inner.listen(source, on_put)

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Worker:
    name: str
    backend: Backend
    services: Services
    model: ScriptedModel
    queue: WrappedQueue
    adapter: TelegramAdapter
    router: AdapterRouter
    role: str | None = None  # its own database role, when it may be killed
    killed: bool = False

    @property
    def answered(self) -> int:
        """Turns this worker's model took."""
        return len(self.model.requests)


@dataclass
class Workers:
    fake: FakeTelegram
    clock: TestClock
    url: str
    config: KeptConfig
    started: list[Worker] = field(default_factory=list)

    async def add(
        self,
        name: str,
        *,
        gate: Gate | None = None,
        killable: bool = False,
        max_claimed_chats: int | None = None,
        start: bool = True,
    ) -> Worker:
        role = None
        url = _with(self.url, application_name=name)
        if killable:
            role = f"kept_test_{name}_{secrets.token_hex(3)}"
            password = secrets.token_hex(8)
            with psycopg.connect(self.url, autocommit=True) as admin:
                user = admin.execute("SELECT current_user").fetchone()
                assert user is not None
                admin.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                        sql.Identifier(role), sql.Literal(password), sql.Identifier(user[0])
                    )
                )
            url = _with(url, user=role, password=password)
        backend = open_backend(url)
        await backend.open()
        assert backend.update_queue is not None
        queue = WrappedQueue(backend.update_queue)
        model = ScriptedModel()
        router = AdapterRouter()
        services = build_services(
            backend=backend,
            llm=model,  # type: ignore[arg-type]
            sender=router,
            config=lambda: self.config,
            clock=self.clock,
            platforms=lambda: router.platforms,
            worker=name,
        )
        conversation: Any = services.manager
        if gate is not None:
            conversation = GatedConversation(services.manager, gate)
        context = dataclasses.replace(
            services_context(services, lambda: self.config, {"TELEGRAM_BOT_TOKEN": TOKEN}),
            conversation=conversation,
            updates=queue,
        )
        options: dict[str, Any] = {"poll_timeout": 1, "request_timeout": 2, "stop_grace": 0.5}
        if max_claimed_chats is not None:
            options["max_claimed_chats"] = max_claimed_chats
        adapter = TelegramAdapter(context, **options)
        worker = Worker(name, backend, services, model, queue, adapter, router, role)
        self.started.append(worker)
        if start:
            await self.start(worker)
        return worker

    async def start(self, worker: Worker) -> None:
        await worker.adapter.start()
        worker.router.add(worker.adapter)

    def kill(self, worker: Worker) -> None:
        """A crash: the worker's connections are cut and it can never
        connect again; nothing of it is stopped or cleaned up."""
        assert worker.role is not None, "add(..., killable=True)"
        worker.killed = True
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(worker.role)))
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (worker.role,),
            )

    async def until(self, check: Callable[[], Any], *, within: float = 10.0, step: float = 1.0):  # type: ignore[no-untyped-def]
        """Wait for check() to hold, moving the clock `step` seconds at a time
        (leader checks, leases, fallback looks all run on it)."""
        deadline = time.monotonic() + within
        while not (result := check()):
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting")
            await asyncio.sleep(0.02)
            await self.clock.advance(step)
        return result

    async def queue_rows(self, update_ids: Sequence[int]) -> dict[int, tuple[str | None, bool]]:
        """update id -> (claimed by, done) for the queue's rows, as another
        connection sees them: committed rows only."""
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT update_id, claimed_by, done_at IS NOT NULL FROM update_queue "
                "WHERE update_id = ANY(%s)",
                (list(update_ids),),
            )
            return {int(r[0]): (r[1], bool(r[2])) for r in await cursor.fetchall()}


def _with(url: str, **params: str) -> str:
    sep = "&" if "?" in url else "?"
    return url + sep + "&".join(f"{k}={v}" for k, v in params.items())


@asynccontextmanager
async def telegram_workers(postgres_url: str) -> AsyncIterator[Workers]:
    fake = await FakeTelegram().start()
    channels = {"telegram": {"enabled": True, "baseUrl": fake.root, **OPEN_ACCESS}}
    config = KeptConfig.model_validate({"channels": channels})
    workers = Workers(fake, TestClock(), postgres_url, config)
    try:
        yield workers
    finally:
        for worker in reversed(workers.started):
            if worker.killed:
                # Its stop would wait for a database it can no longer reach.
                with suppress(psycopg.Error):
                    await worker.backend.close()
            with suppress(Exception):
                await worker.adapter.stop()
            await worker.services.manager.drain()
            with suppress(psycopg.Error):
                await worker.backend.close()
        await fake.close()
        roles = [w.role for w in workers.started if w.role is not None]
        if roles:
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                for role in roles:
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                        (role,),
                    )
                    admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
