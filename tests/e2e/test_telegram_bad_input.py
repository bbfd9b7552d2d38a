"""End to end: one bad message never stalls Telegram (the real
python-telegram-bot against the fake Bot API, the real ConversationManager,
SQLite through the harness and PostgreSQL through a polling worker that
hands its updates over the queue).

A lone surrogate or a NUL is made storable and answered; a message the store
refuses for good is confirmed and its sender told once; later updates of
other chats are answered either way. An update that keeps failing alone is
parked, listed by `kept doctor`, and replayed after `kept updates retry`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.metrics import PrometheusMetrics
from channels.media import REFUSED_NOTICE
from channels.telegram.parking import PARK_AFTER
from core.metrics import install, uninstall
from core.search.redact import Redactor
from core.store.base import SearchScope
from tests.support.store_faults import DiskFull, Unstorable
from tests.support.telegram_harness import TelegramHarness, telegram_harness
from tests.support.telegram_workers import telegram_workers

BAD_CHAT = 42
BAD = f"agent:main:telegram:private:{BAD_CHAT}"
OTHERS = list(range(100, 112))  # a dozen other chats, one message each
TEXTS = {"surrogate": "tell me \ud800 about it", "nul": "tell me \x00 about it"}
CLEAN = {"surrogate": "tell me \ufffd about it", "nul": "tell me  about it"}


async def until(tg: TelegramHarness, check: Callable[[], Any], within: float = 10.0) -> None:
    """Wait until check() is truthy, moving the test clock whenever something
    sleeps on it (storage retries, the held poller's pace, replays)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; sent: {tg.fake.texts()}")
        if tg.clock.sleepers:
            await tg.clock.advance(1.0)
        await asyncio.sleep(0.01)


async def push_others(tg: Any) -> list[int]:
    ids = []
    for chat in OTHERS:
        update = await tg.fake.push_message(f"hello from {chat}", chat_id=chat)
        ids.append(update["update_id"])
    return ids


def others_answered(tg: Any) -> bool:
    return all(tg.fake.texts(chat) == [f"echo: hello from {chat}"] for chat in OTHERS)


@pytest.mark.parametrize("kind", ["surrogate", "nul"])
async def test_a_surrogate_or_nul_is_answered_and_never_stalls_the_offset(
    tmp_path: Path, kind: str
) -> None:
    async with telegram_harness(tmp_path) as tg:
        await tg.start()
        bad = await tg.fake.push_message(TEXTS[kind], chat_id=BAD_CHAT)
        later = await push_others(tg)
        await until(tg, lambda: others_answered(tg) and tg.fake.texts(BAD_CHAT))

        # The same storable text went to the transcript, the index and the model.
        assert tg.fake.texts(BAD_CHAT) == [f"echo: {CLEAN[kind]}"]
        assert (await tg.transcript(BAD))[0] == ("user", "text", CLEAN[kind])
        asked = [m for _, messages, _ in tg.model.requests for m in messages]
        told = {m["content"] for m in asked if m["role"] == "user" and "tell me" in m["content"]}
        assert told == {CLEAN[kind]}
        hits = await tg.store.search(
            "about", scope=SearchScope(session_key=BAD), limit=5, redactor=Redactor()
        )
        assert [h.snippet for h in hits if h.role == "user"] == [CLEAN[kind]]
        await until(tg, lambda: set(later) | {bad["update_id"]} <= set(tg.fake.confirmed))


async def test_a_nul_through_postgres_and_the_update_queue_is_answered(
    postgres_url: str,
) -> None:
    async with telegram_workers(postgres_url) as w:
        await w.add("only")
        await w.until(lambda: w.fake.calls_to("getUpdates"))
        await w.fake.push_message(TEXTS["nul"], chat_id=BAD_CHAT)
        later = await push_others(w)
        await w.until(lambda: others_answered(w) and w.fake.texts(BAD_CHAT), within=20)
        assert w.fake.texts(BAD_CHAT) == [f"echo: {CLEAN['nul']}"]
        await w.until(lambda: set(later) <= set(w.fake.confirmed), within=20)


def refused_once(tg: Any) -> bool:
    return tg.fake.texts(BAD_CHAT) == [REFUSED_NOTICE]


async def test_a_message_the_store_refuses_is_confirmed_and_its_sender_told_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = PrometheusMetrics()
    install(metrics)
    async with telegram_harness(tmp_path) as tg:
        refuses = Unstorable(tg.store, sessions={BAD}, poison="\ud800")
        await tg.start()
        bad = await tg.fake.push_message("a message the store refuses", chat_id=BAD_CHAT)
        later = await push_others(tg)
        await until(tg, lambda: others_answered(tg) and refused_once(tg))
        await until(tg, lambda: set(later) | {bad["update_id"]} <= set(tg.fake.confirmed))
        # Never retried: a minute later it is still one try and one line.
        for _ in range(60):
            await tg.clock.advance(1.0)
            await asyncio.sleep(0)
        assert refuses.attempts == 1
        assert refused_once(tg)
        assert await tg.transcript(BAD) == []
        logged = [
            r.getMessage() for r in caplog.records if "telegram_message_refused" in r.getMessage()
        ]
        assert len(logged) == 1 and "UnicodeEncodeError" in logged[0]
        assert not [r for r in caplog.records if "telegram_store_failed" in r.getMessage()]
    uninstall(metrics)
    assert 'kept_messages_refused_total{platform="telegram"} 1.0' in metrics.exposition().decode()


async def test_a_nul_postgres_refuses_is_confirmed_and_its_sender_told_once(
    postgres_url: str,
) -> None:
    async with telegram_workers(postgres_url) as w:
        worker = await w.add("only")
        refuses = Unstorable(worker.backend.store, sessions={BAD}, poison="\x00")
        await w.until(lambda: w.fake.calls_to("getUpdates"))
        bad = await w.fake.push_message("a message the store refuses", chat_id=BAD_CHAT)
        later = await push_others(w)
        await w.until(lambda: others_answered(w) and refused_once(w), within=20)
        await w.until(lambda: set(later) | {bad["update_id"]} <= set(w.fake.confirmed), within=20)
        rows = await w.queue_rows([bad["update_id"]])
        assert rows[bad["update_id"]][1]  # done in the queue: no worker holds it
        assert refuses.attempts == 1 and refused_once(w)


def kept(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


async def test_an_update_failing_alone_is_parked_listed_and_replayed(tmp_path: Path) -> None:
    metrics = PrometheusMetrics()
    install(metrics)
    try:
        async with telegram_harness(tmp_path) as tg:
            config = tmp_path / "kept.json"
            config.write_text(json.dumps({"storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"}}))
            full = DiskFull(tg.store, sessions={BAD})
            await tg.start()
            stuck = await tg.fake.push_message("stuck for a while", chat_id=BAD_CHAT)
            await until(tg, lambda: full.failures >= 1)
            later = await push_others(tg)
            await until(tg, lambda: others_answered(tg))
            await until(tg, lambda: stuck["update_id"] in tg.fake.confirmed, within=20)

            assert full.failures == PARK_AFTER
            assert tg.fake.texts(BAD_CHAT) == []
            assert set(later) <= set(tg.fake.confirmed)
            parked = await tg.services.backend.parked.listing()
            assert [(p.update_id, p.chat_key, p.tries) for p in parked] == [
                (stuck["update_id"], f"chat:{BAD_CHAT}", PARK_AFTER)
            ]
            assert "database or disk is full" in parked[0].error
            assert json.loads(parked[0].payload)["message"]["text"] == "stuck for a while"
            exposed = metrics.exposition().decode()
            assert 'kept_updates_parked_total{platform="telegram"} 1.0' in exposed

            code, out, _ = await asyncio.to_thread(
                kept, "doctor", "--json", "--config", str(config)
            )
            check = next(c for c in json.loads(out)["checks"] if c["name"] == "parked updates")
            assert code == 1 and not check["ok"]
            assert f"update {stuck['update_id']} (chat:{BAD_CHAT})" in check["detail"]
            assert "kept updates retry" in check["detail"]

            full.active = False  # the cause is fixed
            await asyncio.sleep(0.1)
            assert tg.fake.texts(BAD_CHAT) == []  # nothing replays before it is asked
            code, out, err = await asyncio.to_thread(
                kept, "updates", "retry", "--config", str(config)
            )
            assert (code, err) == (0, "")
            assert out.startswith("1 parked update marked for retry")
            await until(tg, lambda: tg.fake.texts(BAD_CHAT))
            assert tg.fake.texts(BAD_CHAT) == ["echo: stuck for a while"]
            await until(tg, lambda: True)
            for _ in range(50):
                if await tg.services.backend.parked.count() == 0:
                    break
                await asyncio.sleep(0.02)
            assert await tg.services.backend.parked.count() == 0
            code, out, _ = await asyncio.to_thread(kept, "updates", "list", "--config", str(config))
            assert (code, out) == (0, "no parked updates\n")
    finally:
        uninstall(metrics)


async def test_an_outage_of_every_chat_is_held_never_parked(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path) as tg:
        full = DiskFull(tg.store)  # every chat's messages fail: the store is down
        await tg.start()
        first = await tg.fake.push_message("first", chat_id=BAD_CHAT)
        await tg.fake.push_message("second", chat_id=OTHERS[0])
        await until(tg, lambda: full.failures >= 4 * PARK_AFTER, within=20)
        assert await tg.services.backend.parked.count() == 0
        assert first["update_id"] not in tg.fake.confirmed
        assert max(tg.fake.offsets()) <= first["update_id"]
        full.active = False
        await until(tg, lambda: tg.fake.texts(BAD_CHAT) and tg.fake.texts(OTHERS[0]), within=60)
        assert tg.fake.texts(BAD_CHAT) == ["echo: first"]
        assert tg.fake.texts(OTHERS[0]) == ["echo: second"]


async def test_an_update_failing_alone_on_a_postgres_worker_is_parked_and_replayed(
    postgres_url: str, tmp_path: Path
) -> None:
    async with telegram_workers(postgres_url) as w:
        worker = await w.add("only")
        full = DiskFull(worker.backend.store, sessions={BAD})
        await w.until(lambda: w.fake.calls_to("getUpdates"))
        stuck = await w.fake.push_message("stuck for a while", chat_id=BAD_CHAT)
        await w.until(lambda: full.failures >= 1, within=20)
        await push_others(w)
        await w.until(lambda: others_answered(w), within=20)
        # With a queue the poller confirmed it once it was queued; the row
        # is what a worker holds, until it is parked.
        deadline = time.monotonic() + 30
        while not (await w.queue_rows([stuck["update_id"]]))[stuck["update_id"]][1]:
            assert time.monotonic() < deadline, "never parked"
            await asyncio.sleep(0.02)
            await w.clock.advance(1.0)
        assert full.failures == PARK_AFTER and w.fake.texts(BAD_CHAT) == []
        assert [p.update_id for p in await worker.backend.parked.listing()] == [stuck["update_id"]]

        full.active = False
        config = tmp_path / "kept.json"
        config.write_text(json.dumps({"storage": {"url": postgres_url}}))
        code, out, _ = await asyncio.to_thread(kept, "updates", "retry", "--config", str(config))
        assert code == 0 and out.startswith("1 parked update marked for retry")
        await w.until(lambda: w.fake.texts(BAD_CHAT), within=20)
        assert w.fake.texts(BAD_CHAT) == ["echo: stuck for a while"]
        for _ in range(100):
            if await worker.backend.parked.count() == 0:
                break
            await asyncio.sleep(0.02)
        assert await worker.backend.parked.count() == 0
