"""Several `kept run` workers serving one Telegram bot's webhook, on one
PostgreSQL database, in one test process.

Each worker is composed as `kept run` composes it (bot/services.py and
bot/runtime.py's channel context): its own backend and connection pool, its
own SessionLocks on its own PostgreSQL session guard, its own router, and a
real TelegramAdapter in webhook mode with its own aiohttp server on its own
127.0.0.1 port. All of them talk to one fake Bot API, which records every
sendMessage in the order it arrived.

Two gates make the interleavings that matter happen every run instead of by
chance: `ModelGate` holds chosen messages' model calls (whichever worker
asks), and `HeldGuard` holds a worker's ask for a chosen session before it
reaches the database (a worker slow to get the chat, as after a network
hiccup), until the test lets it through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bot.runtime import services_context
from bot.services import Services, build_services, open_storage
from channels.router import AdapterRouter
from channels.telegram import TelegramAdapter
from core.clock import TestClock
from core.config.model import KeptConfig
from core.llm import Completion
from core.locks import SessionGuard
from core.store.backends import Backend
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.support.access import OPEN_ACCESS
from tests.support.scripted_model import ScriptedModel

SECRET = "webhook-secret_3"
HOOK_PATH = "/tg/hook"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ModelGate:
    """Shared by every worker's model: a chat request whose last user text
    is in `held` waits until `release()`; `asked` records who asked what."""

    held: set[str] = field(default_factory=set)
    asked: list[tuple[str, str]] = field(default_factory=list)  # (worker, last user text)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()

    def askers(self, text: str) -> list[str]:
        return [worker for worker, said in self.asked if said == text]


class GatedModel(ScriptedModel):
    """Echoes the last user text, after the gate lets a held one through."""

    def __init__(self, worker: str, gate: ModelGate) -> None:
        super().__init__()
        self._worker = worker
        self._gate = gate

    async def complete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        self._gate.asked.append((self._worker, last))
        if last in self._gate.held:
            await self._gate.released.wait()
        return await super().complete(role, messages, tools=tools, temperature=temperature)


class HeldGuard:
    """A worker's real session guard, counting its asks per session and
    holding the asks for sessions in `held` (before they reach the
    database) until `release()`."""

    def __init__(self, inner: SessionGuard) -> None:
        self._inner = inner
        self.asked: Counter[str] = Counter()
        self.held: set[str] = set()
        self._released = asyncio.Event()

    def release(self) -> None:
        self._released.set()

    @asynccontextmanager
    async def hold(self, session_key: str) -> AsyncIterator[None]:
        self.asked[session_key] += 1
        if session_key in self.held:
            await self._released.wait()
        async with self._inner.hold(session_key):
            yield

    def try_hold(self, session_key: str) -> AbstractAsyncContextManager[bool]:
        return self._inner.try_hold(session_key)

    async def try_lead(self, role: str) -> bool:
        return await self._inner.try_lead(role)

    async def resign(self, role: str) -> None:
        await self._inner.resign(role)

    async def close(self) -> None:
        await self._inner.close()


@dataclass
class WebhookWorker:
    name: str
    port: int
    guard: HeldGuard
    services: Services
    router: AdapterRouter
    adapter: TelegramAdapter

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{HOOK_PATH}"


@dataclass
class WebhookCluster:
    fake: FakeTelegram
    clock: TestClock
    gate: ModelGate
    workers: list[WebhookWorker]
    http: aiohttp.ClientSession

    async def post(self, worker: WebhookWorker, update: dict[str, Any]) -> int:
        """Deliver one update as Telegram does: the answer (200 once the
        message is stored) is the confirmation."""
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        async with self.http.post(worker.url, json=update, headers=headers) as resp:
            return resp.status

    async def stop(self) -> None:
        """Stop every worker as `kept run` does on SIGTERM: each adapter lets
        its running turns finish (within its stop grace) first."""
        for worker in self.workers:
            await worker.adapter.stop()
            worker.router.remove(worker.adapter.platform)
            await worker.services.manager.drain()


async def _start_worker(
    name: str,
    url: str,
    fake: FakeTelegram,
    clock: TestClock,
    gate: ModelGate,
    stack: AsyncExitStack,
) -> WebhookWorker:
    port = free_port()
    config = KeptConfig.model_validate(
        {
            "storage": {"url": url},
            "channels": {
                "telegram": {
                    "enabled": True,
                    "baseUrl": fake.root,
                    **OPEN_ACCESS,
                    "webhook": {
                        "url": f"http://127.0.0.1:{port}{HOOK_PATH}",
                        "listenHost": "127.0.0.1",
                        "port": port,
                    },
                }
            },
        }
    )
    opened = open_storage(config.storage.url)
    assert opened.session_guard is not None, "a PostgreSQL backend guards its sessions"
    guard = HeldGuard(opened.session_guard)
    backend: Backend = dataclasses.replace(opened, session_guard=guard)
    await backend.open()
    stack.push_async_callback(backend.close)
    router = AdapterRouter()
    services = build_services(
        backend=backend,
        llm=GatedModel(name, gate),  # type: ignore[arg-type]
        sender=router,
        config=lambda: config,
        clock=clock,
        platforms=lambda: router.platforms,
        worker=name,
    )
    environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_WEBHOOK_SECRET": SECRET}
    context = services_context(services, lambda: config, environ)
    adapter = TelegramAdapter(context, request_timeout=5, stop_grace=5)
    await adapter.start()
    stack.push_async_callback(adapter.stop)
    router.add(adapter)
    await services.manager.recover_unanswered(platforms=router.platforms)
    return WebhookWorker(name, port, guard, services, router, adapter)


@asynccontextmanager
async def webhook_workers(url: str, count: int = 3) -> AsyncIterator[WebhookCluster]:
    """`count` workers on the PostgreSQL database at `url`, each serving
    the webhook on its own port, one fake Bot API behind them all."""
    clock, gate = TestClock(), ModelGate()
    async with AsyncExitStack() as stack:
        fake = await FakeTelegram().start()
        stack.push_async_callback(fake.close)
        http = await stack.enter_async_context(aiohttp.ClientSession())
        workers = [
            await _start_worker(chr(ord("A") + i), url, fake, clock, gate, stack)
            for i in range(count)
        ]
        try:
            yield WebhookCluster(fake, clock, gate, workers, http)
        finally:
            gate.release()  # a failed test must not leave turns waiting on it
            for worker in workers:
                worker.guard.release()
