"""`kept doctor`'s calls to the platforms: is the token accepted, and by
which bot. One request each, read-only; the token never appears in a line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from core.config.file import secret_from_env
from core.config.model import DiscordConfig, TelegramConfig

TELEGRAM_ROOT = "https://api.telegram.org"
DISCORD_ROOT = "https://discord.com"
TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Check:
    ok: bool
    name: str
    detail: str


async def check_telegram(settings: TelegramConfig, env: Mapping[str, str]) -> Check:
    """Telegram's getMe with the configured token."""
    name = "telegram"
    if not settings.enabled:
        return Check(True, name, "disabled (channels.telegram.enabled)")
    token = secret_from_env(settings.token_env, env)
    if token is None:
        return Check(False, name, _no_token("telegram", settings.token_env, "@BotFather"))
    root = (settings.base_url or TELEGRAM_ROOT).rstrip("/")
    try:
        status, body = await _get(f"{root}/bot{token}/getMe", {})
    except httpx.HTTPError as exc:
        return Check(False, name, _unreachable(root, exc, token, "channels.telegram.baseUrl"))
    me = body.get("result") if isinstance(body, dict) and body.get("ok") else None
    if status in (401, 404):
        return Check(
            False,
            name,
            f"getMe: the token in ${settings.token_env} was rejected ({status}); put the bot "
            "token from @BotFather there",
        )
    if status != 200 or not isinstance(me, dict):
        return Check(False, name, f"getMe: unexpected answer (HTTP {status}) from {root}")
    groups = (
        "reads every group message"
        if me.get("can_read_all_group_messages")
        else "privacy mode on: in groups it sees commands, mentions and replies to it"
    )
    return Check(True, name, f"getMe: @{me.get('username')} (id {me.get('id')}); {groups}")


async def check_discord(settings: DiscordConfig, env: Mapping[str, str]) -> Check:
    """Discord's /users/@me with the configured token."""
    name = "discord"
    if not settings.enabled:
        return Check(True, name, "disabled (channels.discord.enabled)")
    token = secret_from_env(settings.token_env, env)
    if token is None:
        return Check(
            False, name, _no_token("discord", settings.token_env, "the Discord developer portal")
        )
    root = (settings.api_base_url or DISCORD_ROOT).rstrip("/")
    try:
        status, body = await _get(f"{root}/api/v10/users/@me", {"Authorization": f"Bot {token}"})
    except httpx.HTTPError as exc:
        return Check(False, name, _unreachable(root, exc, token, "channels.discord.apiBaseUrl"))
    if status == 401:
        return Check(
            False,
            name,
            f"/users/@me: the token in ${settings.token_env} was rejected (401); put the bot "
            "token from the developer portal (Bot > Token) there",
        )
    if status != 200 or not isinstance(body, dict) or "id" not in body:
        return Check(False, name, f"/users/@me: unexpected answer (HTTP {status}) from {root}")
    if not body.get("bot", False):
        return Check(False, name, f"${settings.token_env} is not a bot's token")
    return Check(True, name, f"/users/@me: {body.get('username')} (id {body['id']})")


async def _get(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
        response = await client.get(url, headers=headers)
    try:
        body = response.json()
    except ValueError:
        body = None
    return response.status_code, body


def _no_token(platform: str, variable: str, where: str) -> str:
    return (
        f"enabled but ${variable} is empty: export the bot token from {where} there "
        f"(channels.{platform}.tokenEnv names the variable)"
    )


def _unreachable(root: str, exc: httpx.HTTPError, token: str, key: str) -> str:
    return f"cannot reach {root}: {error_text(exc, token)}; check the network (or {key})"


def error_text(exc: httpx.HTTPError, token: str) -> str:
    """An HTTP error for a line: httpx names the URL in some errors, and
    Telegram's URL holds the token."""
    return (str(exc) or type(exc).__name__).replace(token, "***")
