"""The Telegram adapter under the real Runtime and `serve`, wired the way
bot/runtime.py is meant to wire it (see `telegram_factory`): a turn over
real HTTP on both sides, then SIGTERM stops everything cleanly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from bot import runtime as runtime_module
from bot.runtime import Runtime, StartupError, serve
from channels.base import ChannelStartError
from channels.context import ChannelContext
from channels.telegram import TelegramAdapter
from core.clock import TestClock
from core.config.file import load_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.support.access import OPEN_ACCESS
from tests.support.store_helpers import open_store


def telegram_factory(rt: Runtime) -> TelegramAdapter:
    """What ADAPTER_FACTORIES["telegram"] should do."""
    assert rt.services is not None
    ctx = ChannelContext(
        conversation=rt.manager,
        store=rt.store,
        commitments=rt.services.commitments,
        reminders=rt.services.reminders,
        config=lambda: rt.config,  # the live config: reloads apply
        clock=rt.clock,
        environ=rt.environ,
    )
    return TelegramAdapter(ctx, poll_timeout=1)


def write_config(tmp_path: Path, llm_url: str, telegram_url: str) -> Path:
    doc = {
        "storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"},
        "llm": {"baseUrl": llm_url, "maxRetries": 0},
        "channels": {"telegram": {"enabled": True, "baseUrl": telegram_url, **OPEN_ACCESS}},
    }
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc))
    return path


async def test_kept_run_answers_on_telegram_and_stops_cleanly_on_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", telegram_factory)
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        path = write_config(tmp_path, llm.base_url, tg.root)
        environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "sk-test"}
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ=environ)
        task = asyncio.create_task(serve(runtime))
        await tg.wait_for(lambda: tg.calls_to("getUpdates"))
        await tg.push_message("hello from telegram", chat_id=42)
        await tg.wait_for(lambda: tg.sent)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, 5)

    assert tg.texts() == ["echo: hello from telegram"]
    assert runtime.router.platforms == set()
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    async with store:
        rows = await store.history("agent:main:telegram:private:42", before_turn_of=2**62, limit=10)
    assert [(r.role, r.text) for r in rows] == [
        ("user", "hello from telegram"),
        ("assistant", "echo: hello from telegram"),
    ]
    assert rows[1].platform_message_id == str(tg.sent[0].message_id)


async def test_kept_run_reports_a_missing_token_as_a_start_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", telegram_factory)
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        path = write_config(tmp_path, llm.base_url, tg.root)
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ={})
        # The runtime may pass the adapter's ChannelStartError on as its own
        # StartupError; either way it is one line naming the variable.
        with pytest.raises((ChannelStartError, StartupError), match=r"\$TELEGRAM_BOT_TOKEN"):
            await serve(runtime)
    assert tg.calls == []


async def test_kept_run_stays_up_not_ready_while_telegram_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 30 s network outage at boot once ended `kept run` (exit 1), and
    systemd's start limits then left the unit failed."""
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", telegram_factory)
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        tg.unreachable = True
        path = write_config(tmp_path, llm.base_url, tg.root)
        environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "sk-test"}
        clock = TestClock()
        runtime = Runtime(path, load_config(path), clock=clock, environ=environ)
        task = asyncio.create_task(serve(runtime))
        try:
            await tg.wait_for(lambda: tg.calls_to("getMe"))
            await tg.wait_for(lambda: runtime.adapters)  # started, unconnected
            checks = await runtime.readiness()
            assert checks["telegram"] == "not connected" and not task.done()
            tg.unreachable = False
            for _ in range(300):  # backoff on the test clock
                await asyncio.sleep(0.01)
                await clock.advance(1)
                if (await runtime.readiness())["telegram"] == "ok":
                    break
            assert (await runtime.readiness())["telegram"] == "ok"
            await tg.push_message("hello once it is back", chat_id=42)
            await tg.wait_for(lambda: tg.sent)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(task, 5)
    assert tg.texts() == ["echo: hello once it is back"]
