"""`kept pairing approve` tells the approved user, in their DM with the bot,
that they can write now: otherwise they would not know when to try again.

One request per platform call, never repeated (a second "you're in" is worse
than none), with the token of the configured channel; the approval is
already stored, so whatever happens here the bot answers their next message.
The token never appears in a line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from bot.doctor_platforms import DISCORD_ROOT, TELEGRAM_ROOT, TIMEOUT_SECONDS, error_text
from core.config.file import secret_from_env
from core.config.model import KeptConfig
from core.pairing import PairedUser

APPROVED_TEXT = "You're approved: write to me any time and I'll answer."


class NotTold(Exception):
    """Why the approved user was not told; the message is for the operator."""


async def tell_approved(config: KeptConfig, env: Mapping[str, str], user: PairedUser) -> None:
    """Send the approved user APPROVED_TEXT in their DM; NotTold says why not."""
    if user.platform == "telegram":
        await _telegram(config, env, user.user_id)
    elif user.platform == "discord":
        await _discord(config, env, user.user_id)
    else:
        raise NotTold(f"kept cannot write to {user.platform} users")


async def _telegram(config: KeptConfig, env: Mapping[str, str], user_id: str) -> None:
    settings = config.channels.telegram
    token = _token(settings.enabled, settings.token_env, env, "telegram")
    root = (settings.base_url or TELEGRAM_ROOT).rstrip("/")
    # In Telegram a user's private chat with the bot has the user's id.
    body = {"chat_id": int(user_id), "text": APPROVED_TEXT}
    await _post(f"{root}/bot{token}/sendMessage", body, {}, token)


async def _discord(config: KeptConfig, env: Mapping[str, str], user_id: str) -> None:
    settings = config.channels.discord
    token = _token(settings.enabled, settings.token_env, env, "discord")
    root = (settings.api_base_url or DISCORD_ROOT).rstrip("/") + "/api/v10"
    auth = {"Authorization": f"Bot {token}"}
    dm = await _post(f"{root}/users/@me/channels", {"recipient_id": user_id}, auth, token)
    channel = dm.get("id") if isinstance(dm, dict) else None
    if not isinstance(channel, str):
        raise NotTold("Discord did not open a DM with them")
    await _post(f"{root}/channels/{channel}/messages", {"content": APPROVED_TEXT}, auth, token)


def _token(enabled: bool, variable: str, env: Mapping[str, str], platform: str) -> str:
    if not enabled:
        raise NotTold(f"channels.{platform} is not enabled in this config")
    token = secret_from_env(variable, env)
    if token is None:
        raise NotTold(f"${variable} is empty here")
    return token


async def _post(url: str, body: dict[str, Any], headers: dict[str, str], token: str) -> Any:
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
            response = await client.post(url, json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise NotTold(f"the platform could not be reached ({error_text(exc, token)})") from None
    if response.status_code >= 300:
        raise NotTold(f"the platform refused (HTTP {response.status_code})")
    try:
        return response.json()
    except ValueError:
        return None
