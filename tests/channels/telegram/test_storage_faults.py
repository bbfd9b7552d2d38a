"""A Telegram message that cannot be stored is never confirmed and never lost.

The store refuses (a full disk injected at the store boundary, or a real
SQLite write lock held past the busy timeout): the update stays unconfirmed,
its chat's later messages wait behind it, other chats go on, and once the
store recovers every held message is answered exactly once, in order."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.store.sqlite.driver import sqlite3
from tests.channels.telegram.test_webhook import free_port, post, webhook
from tests.support.store_faults import DiskFull
from tests.support.telegram_harness import TelegramHarness, telegram_harness

PRIVATE = "agent:main:telegram:private:42"
OTHER = "agent:main:telegram:private:43"


async def until(tg: TelegramHarness, check: Callable[[], Any], within: float = 5.0) -> None:
    """Wait until check() is truthy, moving the test clock whenever something
    sleeps on it (storage retries, the held poller's pace)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; calls: {[c.method for c in tg.fake.calls]}")
        if tg.clock.sleepers:
            await tg.clock.advance(1.0)
        await asyncio.sleep(0.01)


async def users(tg: TelegramHarness, key: str = PRIVATE) -> list[str]:
    return [t for role, _, t in await tg.transcript(key) if role == "user"]


async def test_a_message_that_cannot_be_stored_holds_its_chat_and_is_answered_once_in_order(
    tmp_path: Path,
) -> None:
    async with telegram_harness(tmp_path) as tg:
        full = DiskFull(tg.store, sessions={PRIVATE})
        stored_at_confirmation: list[list[str]] = []

        async def on_confirm(ids: list[int]) -> None:
            stored_at_confirmation.append(await users(tg))

        tg.fake.on_confirm = on_confirm
        await tg.start()
        one = await tg.fake.push_message("one", chat_id=42)
        await until(tg, lambda: full.failures >= 1)
        two = await tg.fake.push_message("two", chat_id=42)
        await tg.fake.push_message("meanwhile", chat_id=43)

        # Other chats go on while chat 42 waits.
        await until(tg, lambda: "echo: meanwhile" in tg.fake.texts())
        await until(tg, lambda: full.failures >= 3)  # retried, still refused
        assert tg.fake.texts(42) == []
        assert await users(tg) == []
        assert max(tg.fake.offsets()) <= one["update_id"]  # nothing confirmed past "one"
        assert tg.fake.confirmed == []

        full.active = False  # storage is back
        await until(tg, lambda: len(tg.fake.texts(42)) >= 2)
        await until(tg, lambda: two["update_id"] in tg.fake.confirmed)

        assert tg.fake.texts(42) == ["echo: one", "echo: two"]
        assert await users(tg) == ["one", "two"]
        assert all(stored == ["one", "two"][: len(stored)] for stored in stored_at_confirmation)
        assert ["one"] in stored_at_confirmation or ["one", "two"] in stored_at_confirmation
        assert await users(tg, OTHER) == ["meanwhile"]


async def test_a_write_lock_held_past_the_busy_timeout_holds_the_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="kept.telegram")
    async with telegram_harness(tmp_path, busy_timeout=0.05) as tg:
        await tg.start()
        # Another process holds SQLite's write lock for longer than the busy timeout.
        blocker = sqlite3.connect(tmp_path / "kept.sqlite", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            update = await tg.fake.push_message("are you there?", chat_id=42)
            await until(tg, lambda: "telegram_store_failed" in caplog.text)
            await until(tg, lambda: caplog.text.count("telegram_store_failed") >= 2)
            assert tg.fake.confirmed == []
            assert tg.fake.sent == []
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        await until(tg, lambda: tg.fake.sent)
        await until(tg, lambda: update["update_id"] in tg.fake.confirmed)

        assert tg.fake.texts() == ["echo: are you there?"]
        assert await users(tg) == ["are you there?"]
        line = next(
            r.getMessage() for r in caplog.records if "telegram_store_failed" in r.getMessage()
        )
        assert "database is locked" in line
        assert "one kept per SQLite file" in line  # what the operator should do
        assert "Traceback" not in caplog.text


@pytest.mark.slow
async def test_a_held_message_survives_a_restart_and_is_answered_once(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path) as tg:
        full = DiskFull(tg.store)
        first = await tg.start()
        update = await tg.fake.push_message("hold on to this", chat_id=42)
        await until(tg, lambda: full.failures >= 1)
        await tg.stop(first)

        assert tg.fake.confirmed == []  # Telegram still has it
        assert await users(tg) == []

        full.active = False
        await tg.start()  # a fresh process: the update comes again and is stored now
        await until(tg, lambda: tg.fake.sent)
        await until(tg, lambda: update["update_id"] in tg.fake.confirmed)
        await tg.fake.push_message("and this", chat_id=42)
        await until(tg, lambda: len(tg.fake.sent) >= 2)

        assert tg.fake.texts() == ["echo: hold on to this", "echo: and this"]
        assert await users(tg) == ["hold on to this", "and this"]


async def test_webhook_answers_503_while_a_message_cannot_be_stored(tmp_path: Path) -> None:
    port = free_port()
    async with telegram_harness(tmp_path, {"webhook": webhook(port)}) as tg:
        tg.environ["TELEGRAM_WEBHOOK_SECRET"] = "s3cret_token-1"
        full = DiskFull(tg.store)
        await tg.start()
        update = {"update_id": 77, "message": tg.fake.message("by webhook", chat_id=42)}

        assert await post(port, update) == 503  # Telegram keeps it and retries
        assert await post(port, update) == 503  # a retry joins the held one
        assert tg.fake.sent == []

        full.active = False
        await until(tg, lambda: tg.fake.sent)
        assert await post(port, update) == 200  # the next retry is confirmed, not re-run

        assert tg.fake.texts() == ["echo: by webhook"]
        assert await users(tg) == ["by webhook"]


async def test_an_edit_that_cannot_be_stored_is_held_too(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path) as tg:
        await tg.start()
        update = await tg.fake.push_message("my interview is on Tuesday", chat_id=42)
        await until(tg, lambda: tg.fake.sent)
        full = DiskFull(tg.store)
        edit = await tg.fake.push_edit(update["message"], "my interview is on Wednesday")
        await until(tg, lambda: full.failures >= 2)
        assert edit["update_id"] not in tg.fake.confirmed
        assert await users(tg) == ["my interview is on Tuesday"]

        full.active = False
        await until(tg, lambda: edit["update_id"] in tg.fake.confirmed)
        assert await users(tg) == ["my interview is on Wednesday"]
