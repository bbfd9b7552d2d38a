"""Webhook mode and the `channels.telegram.webhook` config block."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.base import ChannelStartError
from core.config.model import ConfigError, validate_document
from tests.support.telegram_harness import telegram_harness

SECRET = "s3cret_token-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def webhook(port: int) -> dict[str, Any]:
    return {"url": f"http://127.0.0.1:{port}/tg/hook", "listenHost": "127.0.0.1", "port": port}


async def post(port: int, update: dict[str, Any], secret: str | None = SECRET) -> int:
    headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret else {}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{port}/tg/hook", json=update, headers=headers) as resp,
    ):
        return resp.status


async def test_webhook_mode_verifies_the_secret_and_answers(tmp_path: Path) -> None:
    port = free_port()
    async with telegram_harness(tmp_path, {"webhook": webhook(port)}) as tg:
        tg.environ["TELEGRAM_WEBHOOK_SECRET"] = SECRET
        adapter = await tg.start()
        hook = tg.fake.calls_to("setWebhook")[0].params
        assert hook["url"] == f"http://127.0.0.1:{port}/tg/hook"
        assert hook["secret_token"] == SECRET
        assert set(hook["allowed_updates"]) == {"message", "edited_message", "callback_query"}

        intruder = {"update_id": 900, "message": tg.fake.message("let me in", chat_id=66)}
        assert await post(port, intruder, secret="guess") == 403
        assert await post(port, intruder, secret=None) == 403

        update = {"update_id": 901, "message": tg.fake.message("hi by webhook", chat_id=42)}
        assert await post(port, update) == 200
        assert await post(port, update) == 200  # Telegram retrying: handled once
        await tg.fake.wait_for(lambda: tg.fake.sent)

        assert tg.fake.texts() == ["echo: hi by webhook"]
        assert await tg.transcript("agent:main:telegram:private:66") == []
        assert tg.fake.calls_to("getUpdates") == []
        await tg.stop(adapter)
        with pytest.raises(aiohttp.ClientConnectionError):
            await post(port, update)


async def test_webhook_without_its_secret_is_a_clear_start_error(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path, {"webhook": webhook(free_port())}) as tg:
        with pytest.raises(ChannelStartError, match=r"\$TELEGRAM_WEBHOOK_SECRET"):
            await tg.adapter().start()


async def test_a_webhook_port_in_use_is_a_clear_start_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        async with telegram_harness(tmp_path, {"webhook": webhook(port)}) as tg:
            tg.environ["TELEGRAM_WEBHOOK_SECRET"] = SECRET
            with pytest.raises(ChannelStartError, match=rf"cannot listen on 127.0.0.1:{port}"):
                await tg.adapter().start()
            assert tg.fake.calls_to("setWebhook") == []  # never told Telegram a dead address


def test_webhook_config_defaults_and_errors() -> None:
    doc = {"channels": {"telegram": {"webhook": {"url": "https://bot.example.com/tg"}}}}
    hook = validate_document(doc, "kept.json").channels.telegram.webhook
    assert hook is not None
    assert (hook.listen_host, hook.port, hook.secret_token_env) == (
        "0.0.0.0",
        8443,
        "TELEGRAM_WEBHOOK_SECRET",
    )
    assert validate_document({}, "kept.json").channels.telegram.webhook is None

    bad = {"url": "bot.example.com", "port": 70000, "secretTokenEnv": "abc def", "secret": "x"}
    with pytest.raises(ConfigError) as info:
        validate_document({"channels": {"telegram": {"webhook": bad}}}, "kept.json")
    text = str(info.value)
    for key in ("url", "port", "secretTokenEnv", "secret"):
        assert f"channels.telegram.webhook.{key}:" in text
    assert "abc def" not in text  # env names are checked without echoing a pasted secret
