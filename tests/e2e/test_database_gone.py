"""A SQLite file deleted or replaced under the real `kept run` (Runtime and
`serve`, the real Telegram client against the fake Bot API, the fake
OpenAI server): /readyz fails naming the store, a message that arrives
after is neither answered nor confirmed to Telegram, and no fresh database
appears at the path."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot import runtime as runtime_module
from bot.runtime import Runtime, serve
from channels.telegram.intake import HELD_POLL_EVERY
from core.clock import TestClock
from core.config.file import load_config
from core.store.sqlite.driver import sqlite3
from tests.e2e.test_http import ENVIRON, free_port, get_json, stop, telegram_factory, until
from tests.e2e.test_http import write_config as write_http_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram


@pytest.fixture(autouse=True)
def _telegram(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", telegram_factory)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def delete(path: Path) -> None:
    path.unlink()


def replace(path: Path) -> None:
    """A restore over the running bot's file: another SQLite database."""
    other = path.with_name("restored.sqlite")
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (a)")
    conn.close()
    os.replace(other, path)


@pytest.mark.parametrize("change", [delete, replace], ids=["deleted", "replaced"])
async def test_a_database_gone_under_kept_run_is_not_ready_and_confirms_nothing(
    tmp_path: Path,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
    change: Callable[[Path], None],
) -> None:
    caplog.set_level(logging.INFO)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    db = tmp_path / "kept.sqlite"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        path = write_http_config(
            tmp_path,
            llm.base_url,
            tg.root,
            http={"listen": f"127.0.0.1:{port}"},
            # The held update gets the grace period to be stored, which it
            # never will be.
            shutdown={"graceSeconds": 0.2},
        )
        clock = TestClock()
        runtime = Runtime(path, load_config(path), clock=clock, environ=ENVIRON)
        task = asyncio.create_task(serve(runtime))

        async def readyz(status: int) -> Any:
            try:
                found, body = await get_json(http, f"{base}/readyz")
            except aiohttp.ClientConnectionError:  # not listening yet
                return None
            return body if found == status else None

        await until(lambda: readyz(200))
        await tg.push_message("before", chat_id=42)
        await tg.wait_for(lambda: tg.texts() == ["echo: before"])
        first_inode = db.stat().st_ino

        change(db)
        body = await until(lambda: readyz(503))
        assert body["ready"] is False
        assert body["checks"]["store"].startswith(f"the database file {db} was ")
        assert body["checks"]["telegram"] == "ok"

        after = await tg.push_message("after", chat_id=42)
        # kept tried to store it, and was refused...
        await tg.wait_for(
            lambda: any("telegram_store_failed" in r.getMessage() for r in caplog.records)
        )
        # ...and, as time passes, retried and polled on without confirming it.
        polls = len(tg.calls_to("getUpdates"))
        for _ in range(4):
            await clock.advance(HELD_POLL_EVERY)
        await tg.wait_for(lambda: len(tg.calls_to("getUpdates")) > polls + 1)
        retries = [r for r in caplog.records if "telegram_store_failed" in r.getMessage()]
        assert len(retries) > 1
        assert "put the database file back" in retries[0].getMessage()
        assert after["update_id"] not in tg.confirmed
        assert tg.texts() == ["echo: before"]
        assert (await get_json(http, f"{base}/readyz"))[0] == 503
        await stop(task)

    if change is delete:
        assert not db.exists()  # never a fresh database while running
    else:
        assert db.stat().st_ino != first_inode
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
        conn.close()
    gone = [r.getMessage() for r in caplog.records if "database_file_" in r.getMessage()]
    assert len(gone) == 1 and "restart kept" in gone[0]
