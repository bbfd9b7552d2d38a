from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from bot import runtime as runtime_module
from bot.doctor import run_doctor
from bot.runtime import Runtime, StartupError, serve
from channels.base import ChannelAdapter
from core.clock import TestClock
from core.config_file import load_config
from core.messages import Inbound, SendResult, Target
from tests.fakes.openai_server import FakeOpenAI, error


class FakeTelegram(ChannelAdapter):
    platform = "telegram"

    def __init__(self) -> None:
        super().__init__(agent_id="main", allow_from=(), handler=self._ignore)
        self.started = asyncio.Event()
        self.stopped = False

    async def _ignore(self, inbound: Inbound) -> None:
        return None

    async def start(self) -> None:
        self.started.set()

    async def stop(self) -> None:
        self.stopped = True

    async def send_text(self, target: Target, text: str, reply_to: str | None) -> SendResult:
        return SendResult(message_id="1")


def write_config(tmp_path: Path, **overrides: object) -> Path:
    doc: dict[str, object] = {"storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"}}
    doc.update(overrides)
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


async def test_serve_stops_cleanly_on_sigterm(tmp_path, monkeypatch):
    adapter = FakeTelegram()
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", lambda rt: adapter)
    path = write_config(tmp_path, channels={"telegram": {"enabled": True}})
    runtime = Runtime(path, load_config(path), clock=TestClock())
    task = asyncio.create_task(serve(runtime))
    await asyncio.wait_for(adapter.started.wait(), 5)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 5)
    assert adapter.stopped
    assert runtime.router.platforms == set()


async def test_enabled_channel_without_adapter_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delitem(runtime_module.ADAPTER_FACTORIES, "discord", raising=False)
    path = write_config(tmp_path, channels={"discord": {"enabled": True}})
    runtime = Runtime(path, load_config(path), clock=TestClock())
    with pytest.raises(StartupError, match=r"channels\.discord\.enabled"):
        await serve(runtime)


async def test_running_process_applies_a_changed_config_and_survives_a_bad_one(tmp_path):
    path = write_config(tmp_path)
    clock = TestClock()
    runtime = Runtime(path, load_config(path), clock=clock)
    await runtime.start_core()
    try:
        assert runtime.config.commitments.enabled is False
        doc = json.loads(path.read_text())
        doc["commitments"] = {"enabled": True}
        path.write_text(json.dumps(doc))
        for _ in range(3):
            await clock.advance(5)
        assert runtime.config.commitments.enabled is True
        path.write_text('{"commitments": {"enabled": "perhaps"}}')
        for _ in range(3):
            await clock.advance(5)
        assert runtime.config.commitments.enabled is True
    finally:
        await runtime.stop()


async def test_doctor_reports_each_check(tmp_path, capsys):
    async with FakeOpenAI() as fake:
        path = write_config(tmp_path, llm={"baseUrl": fake.base_url, "maxRetries": 0})
        code = await run_doctor(path, environ={"OPENAI_API_KEY": "sk-secret-value-123"})
        out = capsys.readouterr().out
        assert code == 0, out
        assert "config" in out and "database" in out and "schema version" in out
        assert "model" in out
        assert "sk-secret-value-123" not in out

        fake.models_responder = error(503)
        fake.set_default(lambda body: error(503))
        code = await run_doctor(path, environ={"OPENAI_API_KEY": "sk-secret-value-123"})
        out = capsys.readouterr().out
        assert code == 1
        assert "FAIL" in out and "model" in out


async def test_doctor_fails_on_missing_token_for_enabled_channel(tmp_path, capsys):
    async with FakeOpenAI() as fake:
        path = write_config(
            tmp_path,
            llm={"baseUrl": fake.base_url},
            channels={"telegram": {"enabled": True, "tokenEnv": "MY_TG_TOKEN"}},
        )
        code = await run_doctor(path, environ={})
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL" in out and "MY_TG_TOKEN" in out


async def test_doctor_reports_invalid_config(tmp_path, capsys):
    path = tmp_path / "kept.json"
    path.write_text('{"storage": {"url": 5}}')
    assert await run_doctor(path, environ={}) == 1
    assert "storage.url" in capsys.readouterr().out
