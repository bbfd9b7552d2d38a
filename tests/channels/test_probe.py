"""Each platform's probe and direct send for the CLI, against the fake
servers: one request each, and the HTTP status of a refusal comes back for
the operator's line, never the token."""

from __future__ import annotations

import pytest

from channels.discord import probe as discord_probe
from channels.probe import (
    DirectSendFailed,
    TokenRejected,
    UnexpectedAnswer,
    Unreachable,
)
from channels.telegram import probe as telegram_probe
from core.config.model import DiscordConfig, TelegramConfig
from tests.fakes.discord_server import TOKEN as DISCORD_TOKEN
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.discord_server import Script as DiscordScript
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.fakes.telegram_server import TOKEN as TELEGRAM_TOKEN


async def test_telegram_probe_names_the_bot_with_one_get_me() -> None:
    async with FakeTelegram() as fake:
        me = await telegram_probe.probe(TelegramConfig(base_url=fake.root), TELEGRAM_TOKEN)
        assert me.username == BOT_USERNAME and me.reads_all_group_messages is not None
        assert [c.method for c in fake.calls] == ["getMe"]


@pytest.mark.parametrize("status", [401, 404])
async def test_telegram_probe_keeps_the_status_of_a_rejected_token(status: int) -> None:
    async with FakeTelegram() as fake:
        fake.fail("getMe", status, "Unauthorized" if status == 401 else "Not Found")
        with pytest.raises(TokenRejected) as raised:
            await telegram_probe.probe(TelegramConfig(base_url=fake.root), TELEGRAM_TOKEN)
        assert raised.value.status == status


async def test_telegram_probe_calls_a_5xx_an_unexpected_answer_not_unreachable() -> None:
    async with FakeTelegram() as fake:
        fake.fail("getMe", 500, "Internal Server Error")
        with pytest.raises(UnexpectedAnswer) as raised:
            await telegram_probe.probe(TelegramConfig(base_url=fake.root), TELEGRAM_TOKEN)
        assert raised.value.status == 500 and raised.value.root == fake.root


async def test_telegram_probe_without_a_server_is_unreachable_and_masks_the_token() -> None:
    async with FakeTelegram() as fake:
        root = fake.root
    with pytest.raises(Unreachable) as raised:
        await telegram_probe.probe(TelegramConfig(base_url=root), TELEGRAM_TOKEN)
    assert raised.value.reason and TELEGRAM_TOKEN not in raised.value.reason


async def test_telegram_direct_send_is_one_message_into_the_users_chat() -> None:
    async with FakeTelegram() as fake:
        settings = TelegramConfig(base_url=fake.root)
        await telegram_probe.send_direct(settings, TELEGRAM_TOKEN, "42", "hello")
        assert [(m.chat_id, m.text) for m in fake.sent] == [(42, "hello")]
        assert [c.method for c in fake.calls] == ["sendMessage"]


async def test_telegram_direct_send_refused_names_the_status_once() -> None:
    async with FakeTelegram() as fake:
        fake.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
        settings = TelegramConfig(base_url=fake.root)
        with pytest.raises(DirectSendFailed, match=r"refused \(HTTP 403\)"):
            await telegram_probe.send_direct(settings, TELEGRAM_TOKEN, "42", "hello")
        assert [c.method for c in fake.calls] == ["sendMessage"] and not fake.sent


async def test_discord_probe_names_the_bot_and_rejects_a_wrong_token() -> None:
    async with FakeDiscord() as fake:
        settings = DiscordConfig(api_base_url=fake.root)
        me = await discord_probe.probe(settings, DISCORD_TOKEN)
        assert me.username == "kept" and me.id
        with pytest.raises(TokenRejected) as raised:
            await discord_probe.probe(settings, "not-the-token")
        assert raised.value.status == 401
        assert [c.route for c in fake.calls] == ["me", "me"]


async def test_discord_direct_send_opens_the_dm_then_posts_once() -> None:
    async with FakeDiscord() as fake:
        settings = DiscordConfig(api_base_url=fake.root)
        await discord_probe.send_direct(settings, DISCORD_TOKEN, fake.ana["id"], "hello")
        assert [c.route for c in fake.calls] == ["open_dm", "send"]
        assert fake.texts(fake.dm(fake.ana)) == ["hello"]


async def test_discord_direct_send_refused_is_not_sent_again() -> None:
    async with FakeDiscord() as fake:
        fake.script("send", DiscordScript(status=500, message="boom"))
        settings = DiscordConfig(api_base_url=fake.root)
        with pytest.raises(DirectSendFailed, match=r"refused \(HTTP 500\)"):
            await discord_probe.send_direct(settings, DISCORD_TOKEN, fake.ana["id"], "hello")
        assert [c.route for c in fake.calls] == ["open_dm", "send"]
        assert fake.texts(fake.dm(fake.ana)) == []
