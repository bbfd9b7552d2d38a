"""Starting and stopping the Discord adapter: token checks against a fake
Discord REST API on loopback, one gateway connection, command sync on ready."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest
from aiohttp import web

from channels.base import ChannelStartError
from channels.context import ChannelContext
from channels.discord import DiscordAdapter
from core.config.model import KeptConfig
from tests.support.discord_dpytest import Rig

GOOD = "good-token-123"
BOT_USER = {"id": "4242", "username": "kept", "discriminator": "0", "avatar": None, "bot": True}


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[str]]:
    """A fake Discord REST API; yields the Authorization headers it saw."""
    seen: list[str] = []

    def reply(body: dict[str, Any], status: int = 200) -> web.Response:
        # discord.py parses a body only for exactly "application/json".
        headers = {"Content-Type": "application/json"}
        return web.Response(body=json.dumps(body).encode(), status=status, headers=headers)

    def authorised(request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        seen.append(auth)
        return auth == f"Bot {GOOD}"

    async def me(request: web.Request) -> web.Response:
        if not authorised(request):
            return reply({"message": "401: Unauthorized", "code": 0}, status=401)
        return reply(BOT_USER)

    async def application(request: web.Request) -> web.Response:
        return reply(
            {
                "id": "4242",
                "name": "kept",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": BOT_USER,
                "verify_key": "x",
                "flags": 0,
            }
        )

    app = web.Application()
    app.router.add_get("/api/v10/users/@me", me)
    app.router.add_get("/api/v10/oauth2/applications/@me", application)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    monkeypatch.setattr(discord.http.Route, "BASE", f"http://127.0.0.1:{port}/api/v10")
    yield seen
    await runner.cleanup()


def adapter_for(rig: Rig, environ: dict[str, str], **discord_settings: Any) -> DiscordAdapter:
    config = KeptConfig.model_validate(
        {"channels": {"discord": {"enabled": True, **discord_settings}}}
    )
    ctx = ChannelContext(
        conversation=rig.services.manager,
        store=rig.store,
        commitments=rig.services.commitments,
        reminders=rig.services.reminders,
        config=lambda: config,
        clock=rig.clock,
        environ=environ,
    )
    return DiscordAdapter(ctx)


async def test_a_missing_token_names_the_variable(rig: Rig) -> None:
    adapter = adapter_for(rig, {"DISCORD_TOKEN": "  "})
    with pytest.raises(ChannelStartError, match=r"\$DISCORD_TOKEN"):
        await adapter.start()

    custom = adapter_for(rig, {}, tokenEnv="KEPT_DISCORD")
    with pytest.raises(ChannelStartError, match=r"\$KEPT_DISCORD"):
        await custom.start()


async def test_an_invalid_token_is_one_clear_error(
    rig: Rig, api: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    adapter = adapter_for(rig, {"DISCORD_TOKEN": "wrong-secret-value"})

    with pytest.raises(ChannelStartError) as info:
        await adapter.start()

    assert "rejected the token in $DISCORD_TOKEN" in str(info.value)
    assert api == ["Bot wrong-secret-value"]
    assert "wrong-secret-value" not in str(info.value)
    assert "wrong-secret-value" not in caplog.text
    await adapter.stop()


async def test_start_connects_once_and_syncs_commands_on_ready(
    rig: Rig,
    api: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = adapter_for(rig, {"DISCORD_TOKEN": GOOD}, devGuildId="777")
    bot = adapter.bot
    connects: list[bool] = []
    synced: list[Any] = []
    closed, ready_twice = asyncio.Event(), asyncio.Event()
    real_close = bot.close

    async def connect(*, reconnect: bool = True) -> None:
        connects.append(reconnect)
        bot.dispatch("ready")
        bot.dispatch("ready")  # a full reconnect sends READY again
        await closed.wait()

    async def close() -> None:
        await real_close()
        closed.set()

    async def sync(*, guild: discord.abc.Snowflake | None = None) -> list[Any]:
        synced.append(guild.id if guild else None)
        return []

    real_on_ready = adapter.on_ready

    async def on_ready() -> None:
        await real_on_ready()
        if sum("discord_connected" in r.getMessage() for r in caplog.records) == 2:
            ready_twice.set()

    monkeypatch.setattr(bot, "connect", connect)
    monkeypatch.setattr(bot, "close", close)
    monkeypatch.setattr(adapter, "on_ready", on_ready)  # the cog's on_ready calls it
    monkeypatch.setattr(bot.tree, "sync", sync)
    caplog.set_level(logging.INFO, logger="kept.discord")

    await adapter.start()
    await adapter.start()  # never a second gateway connection
    await asyncio.wait_for(ready_twice.wait(), 1)

    assert connects == [True]
    assert synced == [777]  # to the dev guild, once
    names = [c.name for c in bot.tree.get_commands(guild=discord.Object(777))]
    assert sorted(names) == [
        "commitments", "export", "followups", "forget", "mydata", "new", "reminders", "timezone",
        "usage",
    ]  # fmt: skip
    connected = [r.getMessage() for r in caplog.records if "discord_connected" in r.getMessage()]
    assert connected[0] == "discord_connected name=kept id=4242 guilds=0"
    assert GOOD not in caplog.text

    await adapter.stop()
    assert bot.is_closed()


async def test_a_missing_privileged_intent_is_logged_with_the_fix(
    rig: Rig, api: list[str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = adapter_for(rig, {"DISCORD_TOKEN": GOOD})

    async def connect(*, reconnect: bool = True) -> None:
        raise discord.PrivilegedIntentsRequired(None)

    monkeypatch.setattr(adapter.bot, "connect", connect)
    await adapter.start()
    await adapter.stop()

    assert "enable Message Content Intent" in caplog.text


async def test_global_sync_without_a_dev_guild(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = adapter_for(rig, {})
    synced: list[Any] = []

    async def sync(*, guild: discord.abc.Snowflake | None = None) -> list[Any]:
        synced.append(guild)
        return []

    monkeypatch.setattr(adapter.bot.tree, "sync", sync)
    await adapter.on_ready()
    await adapter.on_ready()
    assert synced == [None]
