"""`kept commitments snooze` from another process wakes a running bot's
heartbeat, on both backends: a delivered check-in reopened by the CLI comes
up again at its snoozed time, not at the scheduler's next capped look
(MAX_SLEEP, five minutes). PostgreSQL carries the nudge by NOTIFY; on SQLite
the bot's wake channel notices the CLI's commit (core/store/sqlite/wake.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from bot.commitments_cmd import commitments_group
from core.clock import TestClock
from core.commitments.model import NewCommitment, Scope
from core.config.model import KeptConfig
from core.heartbeat.source import FollowUpSource
from core.heartbeat.turn import HeartbeatTurn
from core.llm import Completion
from core.locks import SessionLocks
from core.scheduler import MAX_SLEEP, Scheduler
from core.store.backends import Backend, open_backend
from core.store.postgres import PostgresWakeChannel
from core.wake import Wake
from tests.support.heartbeat_harness import ScriptedSender
from tests.support.store_helpers import mark_sent

KEY = "agent:main:telegram:private:7"
SCOPE = Scope("main", KEY, "telegram", "7", None, "u7", chat_kind="private")


class EchoModel:
    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        return Completion(text="checking in again", tool_calls=[], finish_reason="stop", model="e")


async def until(condition: Callable[[], bool], seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.01)


async def delivered_check_in(backend: Backend, now: datetime) -> str:
    await backend.store.ensure_session(
        KEY,
        agent_id="main",
        platform="telegram",
        chat_id="7",
        chat_kind="private",
        thread_id=None,
        now=now - timedelta(days=1),
    )
    item = NewCommitment(
        scope=SCOPE,
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        reason="interview today",
        suggested_text="How did the interview go?",
        dedupe_key="interview",
        confidence=0.9,
        due_earliest=now - timedelta(hours=2),
        due_latest=now + timedelta(days=1),
        due_timezone="UTC",
        source_message_id=None,
        created_at=now - timedelta(days=1),
    )
    applied = await backend.commitments.apply_extraction(SCOPE, [item], [], now=now)
    commitment_id = applied.created[0].id
    await mark_sent(backend.heartbeat, commitment_id, now=now - timedelta(hours=1), message_id="m1")
    return commitment_id


async def test_a_cli_snooze_wakes_the_running_heartbeat(storage_url: str, tmp_path: Path) -> None:
    cfg = tmp_path / "kept.json"
    cfg.write_text(json.dumps({"storage": {"url": storage_url}}))
    # The CLI runs on the real clock; the bot's test clock starts there too.
    clock = TestClock(datetime.now(UTC))
    # The real clock's hour: no quiet hours, or the test would pass only by day.
    always = [{"id": "main", "heartbeat": {"activeHours": None}}]
    config = KeptConfig.model_validate({"commitments": {"enabled": True}, "agents": always})
    sender = ScriptedSender()
    async with open_backend(storage_url) as bot:
        commitment_id = await delivered_check_in(bot, clock.now())
        wake = Wake(bot.wake_channel)
        heartbeat = Scheduler(
            [
                FollowUpSource(
                    config=lambda: config,
                    commitments=bot.commitments,
                    store=bot.heartbeat,
                    turn=HeartbeatTurn(
                        store=bot.heartbeat,
                        transcript=bot.store,
                        llm=EchoModel(),  # type: ignore[arg-type]
                        sender=sender,
                        clock=clock,
                        worker="bot",
                    ),
                    clock=clock,
                    platforms=lambda: {"telegram"},
                    session_locks=SessionLocks(shared=bot.session_guard),
                )
            ],
            clock=clock,
            wake=wake,
        )
        listener = asyncio.create_task(wake.listen(clock))
        loop = heartbeat.start()
        try:
            # Nothing due: the heartbeat sleeps until its capped next look.
            channel = bot.wake_channel
            if isinstance(channel, PostgresWakeChannel):
                await asyncio.wait_for(channel.listening.wait(), 3)
                sleepers = 1  # the heartbeat; the listener waits for NOTIFY
            else:
                sleepers = 2  # the heartbeat and the listener's poll
            await until(lambda: clock.sleepers >= sleepers and not wake.event.is_set())
            result = await asyncio.to_thread(
                CliRunner().invoke,
                commitments_group,
                ["snooze", commitment_id, "--for", "1m", "--json", "--config", str(cfg)],
            )
            assert result.exit_code == 0, result.output
            due = datetime.fromisoformat(json.loads(result.stdout)["snoozedUntil"])
            # The snoozed time is a minute away, far inside the capped sleep:
            # move the clock just past it, then give the turn real time.
            started = clock.now()
            while clock.now() < due + timedelta(seconds=2) and not sender.sent:
                await clock.advance(1)
                await asyncio.sleep(0.02)
            await until(lambda: bool(sender.sent), 5.0)
            assert [o.text for o in sender.sent] == ["checking in again"]
            assert clock.now() - started < timedelta(seconds=MAX_SLEEP)
        finally:
            await heartbeat.stop(0)
            listener.cancel()
            await asyncio.gather(loop, listener, return_exceptions=True)
