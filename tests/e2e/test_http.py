"""The HTTP listener (`http.listen`) under the real Runtime and `serve`, with
the real Telegram client against the fake Bot API and the real model client
against the fake OpenAI server: /healthz, /readyz as the channel connects,
/metrics after a turn, and no listener at all when it is not configured."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot import runtime as runtime_module
from bot.runtime import Runtime, StartupError, channel_context, serve
from bot.services import Services
from channels.listener import GuardedListener
from channels.telegram import TelegramAdapter
from core import metrics as core_metrics
from core.clock import TestClock
from core.config.file import load_config
from tests.fakes.openai_server import FakeOpenAI, delay, error, reply
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.support.access import OPEN_ACCESS
from tests.support.telegram_harness import telegram_harness

ENVIRON = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "sk-test"}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class GatedTelegram(FakeTelegram):
    """Holds getMe (the adapter's connect) until `connect.set()`."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.connect = asyncio.Event()

    async def _api_getMe(self, params: Any) -> Any:
        self.asked.set()
        await self.connect.wait()
        return await super()._api_getMe(params)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(tmp_path: Path, llm_url: str, telegram_url: str, **extra: Any) -> Path:
    doc = {
        "storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"},
        "llm": {"baseUrl": llm_url, "maxRetries": 0},
        "channels": {"telegram": {"enabled": True, "baseUrl": telegram_url, **OPEN_ACCESS}},
        **extra,
    }
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc))
    return path


def telegram_factory(rt: Runtime) -> TelegramAdapter:
    """The runtime's own factory, with a short long-poll for the fake."""
    return TelegramAdapter(channel_context(rt), poll_timeout=1)


@pytest.fixture(autouse=True)
def _telegram(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", telegram_factory)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def get_json(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as response:
        return response.status, await response.json()


async def scrape(http: aiohttp.ClientSession, base: str) -> Samples:
    async with http.get(f"{base}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = await response.text()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def at(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def until(check: Any, within: float = 5.0) -> Any:
    """Poll an async check (over HTTP) until it returns something truthy."""
    deadline = time.monotonic() + within
    while not (found := await check()):
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)
    return found


async def stop(task: asyncio.Task[None]) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 5)


async def test_healthz_answers_at_once_and_readyz_is_503_until_telegram_connects(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with FakeOpenAI() as llm, GatedTelegram() as tg:
        path = write_config(tmp_path, llm.base_url, tg.root, http={"listen": f"127.0.0.1:{port}"})
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ=ENVIRON)
        task = asyncio.create_task(serve(runtime))
        await asyncio.wait_for(tg.asked.wait(), 5)  # connecting, held

        assert await get_json(http, f"{base}/healthz") == (200, {"status": "ok"})
        status, body = await get_json(http, f"{base}/readyz")
        assert status == 503
        assert body == {
            "ready": False,
            "checks": {"store": "ok", "telegram": "not connected", "scheduler": "not started"},
        }

        tg.connect.set()

        async def ready() -> Any:
            status, body = await get_json(http, f"{base}/readyz")
            return body if status == 200 else None

        body = await until(ready)
        assert body == {
            "ready": True,
            "checks": {"store": "ok", "telegram": "ok", "scheduler": "ok"},
        }
        await stop(task)

    # The listener closed with the runtime, and the recorder went with it.
    assert runtime.http is None
    assert core_metrics.recorder() is core_metrics.NO_METRICS
    with pytest.raises(aiohttp.ClientConnectionError):
        await get_json(http, f"{base}/healthz")


async def test_metrics_count_a_telegram_turn_and_its_latency(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        # The model takes 0.3 s: the turn cannot land in the 0.25 s bucket.
        llm.push(delay(0.3, reply("hello back")))
        path = write_config(tmp_path, llm.base_url, tg.root, http={"listen": f"127.0.0.1:{port}"})
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ=ENVIRON)
        task = asyncio.create_task(serve(runtime))
        await tg.wait_for(lambda: tg.calls_to("getUpdates"))
        before = await scrape(http, base)
        assert at(before, "kept_messages_in_total", platform="telegram") is None
        assert at(before, "kept_commitments", status="pending") == 0

        await tg.push_message("hi there", chat_id=42)

        async def turned() -> Samples | None:
            found = await scrape(http, base)
            return found if at(found, "kept_turn_seconds_count", platform="telegram") else None

        after = await until(turned)
        await stop(task)

    assert tg.texts() == ["hello back"]
    assert at(after, "kept_messages_in_total", platform="telegram") == 1
    assert at(after, "kept_messages_out_total", platform="telegram") == 1
    assert at(after, "kept_turn_seconds_count", platform="telegram") == 1
    assert at(after, "kept_turn_seconds_bucket", platform="telegram", le="0.25") == 0
    assert at(after, "kept_turn_seconds_bucket", platform="telegram", le="+Inf") == 1
    assert (at(after, "kept_turn_seconds_sum", platform="telegram") or 0) >= 0.3
    assert at(after, "kept_model_calls_total", role="chat") == 1
    assert at(after, "kept_model_errors_total", role="chat", kind="server") is None
    assert at(after, "kept_extraction_queue_depth") is not None


async def test_metrics_count_model_errors_of_a_turn_by_role(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        llm.push(error(503))
        path = write_config(tmp_path, llm.base_url, tg.root, http={"listen": f"127.0.0.1:{port}"})
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ=ENVIRON)
        task = asyncio.create_task(serve(runtime))
        await tg.wait_for(lambda: tg.calls_to("getUpdates"))
        await tg.push_message("hi there", chat_id=42)

        async def turned() -> Samples | None:
            found = await scrape(http, base)
            return found if at(found, "kept_turn_seconds_count", platform="telegram") else None

        after = await until(turned)
        await stop(task)

    assert len(tg.texts()) == 1  # the apology
    assert at(after, "kept_model_calls_total", role="chat") == 1
    assert at(after, "kept_model_errors_total", role="chat", kind="server") == 1
    assert at(after, "kept_messages_out_total", platform="telegram") == 1


async def test_no_listener_is_opened_when_http_listen_is_not_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sites: list[object] = []
    real_start = GuardedListener.start

    async def recording_start(self: GuardedListener) -> None:
        sites.append((self.host, self.port))
        await real_start(self)

    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        # After the fakes opened their own ports: from here on, kept's only.
        monkeypatch.setattr(GuardedListener, "start", recording_start)
        path = write_config(tmp_path, llm.base_url, tg.root)
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ=ENVIRON)
        task = asyncio.create_task(serve(runtime))
        await tg.wait_for(lambda: tg.calls_to("getUpdates"))
        assert runtime.http is None
        assert core_metrics.recorder() is core_metrics.NO_METRICS
        await stop(task)
    assert sites == []


async def test_a_port_in_use_is_a_start_up_error_naming_http_listen(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with FakeOpenAI() as llm, FakeTelegram() as tg:
            listen = f"127.0.0.1:{port}"
            path = write_config(tmp_path, llm.base_url, tg.root, http={"listen": listen})
            runtime = Runtime(path, load_config(path), clock=TestClock(), environ=ENVIRON)
            with pytest.raises(StartupError) as caught:
                await serve(runtime)
    assert str(caught.value).startswith(f"http.listen {listen}: cannot listen there (")
    assert str(caught.value).endswith("free the port or change http.listen")
    assert tg.calls == []  # nothing else started
    assert core_metrics.recorder() is core_metrics.NO_METRICS


async def test_telegram_counts_as_connected_from_start_to_stop(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path) as harness:
        adapter = harness.adapter()
        assert not adapter.connected
        await adapter.start()
        assert adapter.connected
        await adapter.stop()
        assert not adapter.connected


async def test_readyz_names_an_unreachable_store_and_a_stopping_process(tmp_path: Path) -> None:
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        path = write_config(tmp_path, llm.base_url, tg.root)
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ=ENVIRON)
        await runtime.start_core()
        try:
            assert services_of(runtime).backend.store is runtime.store
            await runtime.store.close()  # the database goes away under a running worker
            checks = await runtime.readiness()
            assert checks["store"].startswith("unreachable: ")
            assert checks["telegram"] == "not connected"
        finally:
            await runtime.stop()
        assert await runtime.readiness() == {"process": "stopping"}


def services_of(runtime: Runtime) -> Services:
    assert runtime.services is not None
    return runtime.services


async def test_the_telegram_webhook_shares_the_listener_on_one_port(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    secret = "s3cret_token-1"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        hook = {"url": f"{base}/tg/hook", "listenHost": "127.0.0.1", "port": port}
        path = write_config(tmp_path, llm.base_url, tg.root, http={"listen": f"127.0.0.1:{port}"})
        doc = json.loads(path.read_text())
        doc["channels"]["telegram"]["webhook"] = hook
        path.write_text(json.dumps(doc))
        environ = {**ENVIRON, "TELEGRAM_WEBHOOK_SECRET": secret}
        runtime = Runtime(path, load_config(path), clock=TestClock(), environ=environ)
        task = asyncio.create_task(serve(runtime))
        await tg.wait_for(lambda: tg.calls_to("setWebhook"))

        async def ready() -> Any:
            status, _ = await get_json(http, f"{base}/readyz")
            return status == 200

        await until(ready)
        update = {"update_id": 901, "message": tg.message("hi by webhook", chat_id=42)}
        headers = {"X-Telegram-Bot-Api-Secret-Token": secret}
        async with http.post(f"{base}/tg/hook", json=update, headers=headers) as response:
            assert response.status == 200
        async with http.post(f"{base}/tg/hook", json=update) as response:
            assert response.status == 403  # the webhook's own secret check, on this port too
        async with http.post(f"{base}/elsewhere", json=update, headers=headers) as response:
            assert response.status == 404
        await tg.wait_for(lambda: tg.sent)
        assert await get_json(http, f"{base}/healthz") == (200, {"status": "ok"})
        metrics = await scrape(http, base)
        await stop(task)

    assert tg.texts() == ["echo: hi by webhook"]
    assert tg.calls_to("getUpdates") == []
    assert at(metrics, "kept_messages_in_total", platform="telegram") == 1
    with pytest.raises(aiohttp.ClientConnectionError):
        await get_json(http, f"{base}/healthz")
