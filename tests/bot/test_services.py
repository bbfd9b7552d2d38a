"""The composition root's wiring: what one service hears from another."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from bot.services import build_services, open_storage
from core.clock import TestClock
from core.config.model import KeptConfig
from core.messages import Outbound, Target, reminder_snooze_actions
from core.reminders import parse_schedule
from tests.support.heartbeat_harness import ScriptedSender
from tests.support.scripted_model import ScriptedModel

KEY = "agent:main:telegram:private:42"
CHAT = Target("telegram", "42")


async def test_a_stored_reminder_wakes_the_sleeping_heartbeat(tmp_path: Path) -> None:
    backend = open_storage(f"sqlite:///{tmp_path}/kept.sqlite")
    await backend.open()
    clock, sender = TestClock(), ScriptedSender()
    services = build_services(
        backend=backend,
        llm=ScriptedModel(),  # type: ignore[arg-type]
        sender=sender,
        config=KeptConfig,
        clock=clock,
        platforms=lambda: {"telegram"},
        worker="test-worker",
    )
    await backend.store.ensure_session(
        KEY,
        agent_id="main",
        platform="telegram",
        chat_id="42",
        chat_kind="private",
        thread_id=None,
        now=clock.now(),
    )
    task = services.scheduler.start()
    try:
        for _ in range(200):  # until the heartbeat sleeps, with nothing due
            await asyncio.sleep(0.005)
            if clock.sleepers:
                break
        r = await services.reminders.schedule(
            agent_id="main",
            session_key=KEY,
            target=CHAT,
            created_by="u42",
            text="stretch",
            schedule=parse_schedule(
                at=None, after="10s", cron=None, timezone="UTC", now=clock.now()
            ),
        )
        # Unwoken, the heartbeat would sleep its full MAX_SLEEP (300 s); the
        # reminder goes out within 20 s only because storing it woke it.
        for second in range(100):
            await asyncio.sleep(0.01)
            if sender.sent:
                break
            if second < 20:
                await clock.advance(1)
        snooze = reminder_snooze_actions(r.id, 1)
        assert sender.sent == [Outbound(target=CHAT, text="stretch", actions=snooze)]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await backend.close()
