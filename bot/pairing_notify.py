"""`kept pairing approve` tells the approved user, in their DM with the bot,
that they can write now: otherwise they would not know when to try again.

The platform's package sends it (`send_direct`: one request per call, never
repeated), with the token of the configured channel; the approval is
already stored, so whatever happens here the bot answers their next message.
The token never appears in a line.
"""

from __future__ import annotations

from collections.abc import Mapping

from channels.discord import probe as discord_probe
from channels.probe import DirectSendFailed
from channels.telegram import probe as telegram_probe
from core.config.file import secret_from_env
from core.config.model import KeptConfig
from core.pairing import PairedUser

APPROVED_TEXT = "You're approved: write to me any time and I'll answer."


class NotTold(Exception):
    """Why the approved user was not told; the message is for the operator."""


async def tell_approved(config: KeptConfig, env: Mapping[str, str], user: PairedUser) -> None:
    """Send the approved user APPROVED_TEXT in their DM; NotTold says why not."""
    try:
        if user.platform == "telegram":
            telegram = config.channels.telegram
            token = _token(telegram.enabled, telegram.token_env, env, "telegram")
            await telegram_probe.send_direct(telegram, token, user.user_id, APPROVED_TEXT)
        elif user.platform == "discord":
            discord = config.channels.discord
            token = _token(discord.enabled, discord.token_env, env, "discord")
            await discord_probe.send_direct(discord, token, user.user_id, APPROVED_TEXT)
        else:
            raise NotTold(f"kept cannot write to {user.platform} users")
    except DirectSendFailed as exc:
        raise NotTold(str(exc)) from None


def _token(enabled: bool, variable: str, env: Mapping[str, str], platform: str) -> str:
    if not enabled:
        raise NotTold(f"channels.{platform} is not enabled in this config")
    token = secret_from_env(variable, env)
    if token is None:
        raise NotTold(f"${variable} is empty here")
    return token
