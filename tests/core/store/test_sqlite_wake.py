"""The SQLite wake channel: another connection's commit (the CLI, a second
process) wakes the sleeper at the next poll; the bot's own commits do not."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.clock import TestClock
from core.store.sql.app_state import SqlAppStateStore
from core.store.sqlite import SqliteStore, SqliteWakeChannel
from core.store.sqlite.wake import POLL_SECONDS


async def test_only_another_connections_commit_wakes(tmp_path: Path) -> None:
    bot, cli = SqliteStore(tmp_path / "kept.sqlite"), SqliteStore(tmp_path / "kept.sqlite")
    await bot.open()
    await cli.open()
    clock = TestClock()
    channel = SqliteWakeChannel(bot.connection)
    woken: list[int] = []
    listener = asyncio.create_task(channel.listen(lambda: woken.append(1), clock))

    async def poll() -> None:
        for _ in range(100):
            if clock.sleepers:
                break
            await asyncio.sleep(0.01)
        await clock.advance(POLL_SECONDS)
        for _ in range(20):
            await asyncio.sleep(0.01)

    try:
        await poll()
        await SqlAppStateStore(bot.connection).put("k", "own write")
        await poll()
        assert woken == []  # the bot's own commit
        await SqlAppStateStore(cli.connection).put("k", "the CLI's")
        await poll()
        assert woken == [1] and channel.heard == 1
        await poll()
        assert woken == [1]  # once per change
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await cli.close()
        await bot.close()
