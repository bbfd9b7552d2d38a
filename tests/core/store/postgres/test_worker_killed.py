"""A worker killed mid-run (SIGKILL: no cleanup, its connections cut) while
it holds check-in turns in both phases: the other workers deliver what it had
only claimed once its lease runs out (on the injected clock), a send it had
started is never repeated (failed: outcome unknown), and nothing goes twice."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from core.clock import TestClock
from core.commitments.store import Filter
from core.config.model import KeptConfig
from core.delivery.lease import turn_lease
from core.heartbeat.source import SCOPE_CONCURRENCY, FollowUpSource
from core.heartbeat.turn import HeartbeatTurn
from core.llm import Completion
from core.locks import SessionLocks
from core.messages import Outbound, SendResult
from core.scheduler import Scheduler
from core.store.backends import Backend, open_backend
from tests.core.store.postgres.test_workers_delivery import TAG, scheduler, seed
from tests.support.heartbeat_harness import ScriptedSender

COUNT = 120
CONFIG = KeptConfig.model_validate(
    {
        "commitments": {"enabled": True},
        "agents": [{"id": "main", "heartbeat": {"every": "30m"}}],
    }
)


class Frozen:
    """The victim's model and sender: every other turn stops in the model
    call (claimed), the rest in the send (sending); nothing ever returns."""

    def __init__(self) -> None:
        self.calls = itertools.count()
        self.in_model: list[str] = []
        self.in_send: list[str] = []
        self.stuck = asyncio.Event()
        self._never = asyncio.Event()

    def _count(self) -> None:
        if len(self.in_model) + len(self.in_send) >= SCOPE_CONCURRENCY:
            self.stuck.set()

    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        tags = TAG.findall(" ".join(str(m["content"]) for m in messages))
        if next(self.calls) % 2 == 0:
            self.in_model.extend(tags)
            self._count()
            await self._never.wait()
        return Completion(
            text="tags: " + ",".join(tags), tool_calls=[], finish_reason="stop", model="x"
        )

    async def send(self, outbound: Outbound) -> SendResult:
        self.in_send.extend(outbound.text.removeprefix("tags: ").split(","))
        self._count()
        await self._never.wait()
        raise AssertionError("unreachable")


@pytest.fixture
async def backends(postgres_url: str) -> AsyncIterator[list[Backend]]:
    sep = "&" if "?" in postgres_url else "?"
    names = ["victim", "survivor-1", "survivor-2"]
    opened: list[Backend] = []
    try:
        for name in names:
            backend = open_backend(f"{postgres_url}{sep}application_name={name}")
            await backend.open()
            opened.append(backend)
        yield opened
    finally:
        for backend in opened:
            with contextlib.suppress(psycopg.Error):  # the victim's were cut
                await backend.close()


@pytest.mark.slow
async def test_a_killed_workers_turns_are_finished_by_the_others_never_twice(
    backends, postgres_url: str
) -> None:
    victim_backend, *survivor_backends = backends
    clock = TestClock()
    await seed(victim_backend, clock, count=COUNT)
    frozen = Frozen()
    victim = Scheduler(
        [
            FollowUpSource(
                config=lambda: CONFIG,
                commitments=victim_backend.commitments,
                store=victim_backend.heartbeat,
                turn=HeartbeatTurn(
                    store=victim_backend.heartbeat,
                    transcript=victim_backend.store,
                    llm=frozen,  # type: ignore[arg-type]
                    sender=frozen,
                    clock=clock,
                    worker="victim",
                ),
                clock=clock,
                platforms=lambda: {"telegram"},
                session_locks=SessionLocks(shared=victim_backend.session_guard),
            )
        ],
        clock=clock,
    )
    victim_tick = asyncio.create_task(victim.tick())
    await asyncio.wait_for(frozen.stuck.wait(), 10)
    # SIGKILL: the process stops running, and the server drops its sessions
    # (its session locks go with them).
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'victim'"
        )
    sender = ScriptedSender()
    survivors = [
        scheduler(b, CONFIG, clock, sender, f"survivor-{i}")
        for i, b in enumerate(survivor_backends)
    ]
    await asyncio.gather(*(s.tick() for s in survivors))
    first = {t for o in sender.sent for t in o.text.removeprefix("tags: ").split(",")}
    assert not first & set(frozen.in_model + frozen.in_send)  # a live lease is not taken
    clock.set(
        clock.now() + max(turn_lease(CONFIG.llm), timedelta(minutes=31)) + timedelta(minutes=1)
    )
    await asyncio.gather(*(s.tick() for s in survivors))

    delivered = [t for o in sender.sent for t in o.text.removeprefix("tags: ").split(",")]
    assert len(delivered) == len(set(delivered))  # nothing twice
    assert set(frozen.in_model) <= set(delivered)  # claimed only: delivered by the others
    assert not set(frozen.in_send) & set(delivered)  # in doubt: never repeated
    assert len(delivered) + len(frozen.in_send) == COUNT
    failed = await survivor_backends[0].commitments.list(Filter(statuses=("failed",)))
    assert len(failed) == len(frozen.in_send)
    victim_tick.cancel()
    await asyncio.gather(victim_tick, return_exceptions=True)
